//! The pieces of a scripted model for goals (a test double behind the
//! node's model interface): the answers it can give, as completions, and
//! the goals of a node that ask it.

use agentsite::Node;
use agentsite::goals::Goals;
use agentsite::goals::ask::GoalModel;
use agentsite::goals::config::GoalsConfig;
use agentsite::goals::directory::NodeDirectory;
use agentsite::goals::store::GoalStore;
use agentsite::hub::Hub;
use agentsite::llm::{Completion, StopReason, ToolCall, Usage};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The goals of `node` (and of the network, through `hub`), kept in `dir`
/// and spoken for by `model`.
pub fn goals_for(
    dir: &Path,
    node: &Arc<Node>,
    hub: Option<Arc<Hub>>,
    model: Arc<dyn GoalModel>,
    config: GoalsConfig,
) -> Arc<Goals> {
    let store = GoalStore::open(&dir.join("goals.redb")).unwrap();
    let directory = NodeDirectory::new(node.clone(), hub, false);
    Goals::new(store, model, Arc::new(directory), config, None)
}

/// The tool results a request hands the model, in order.
pub fn tool_results(request: &agentsite::llm::ChatRequest) -> Vec<&str> {
    request
        .messages
        .iter()
        .filter(|m| m.role == agentsite::llm::Role::Tool)
        .map(|m| m.content.as_str())
        .collect()
}

/// What the scripted model says to one request.
pub enum Answer {
    Json(Value),
    Text(String),
    Call(&'static str, Value),
    /// Waits, then answers (the double waits; see [`completion`]).
    Later(Duration, Box<Answer>),
}

/// `answer` as the model's completion, reporting `tokens` used.
pub fn completion(answer: Answer, tokens: u32) -> Completion {
    let (content, tool_calls) = match answer {
        Answer::Json(value) => (value.to_string(), Vec::new()),
        Answer::Text(text) => (text, Vec::new()),
        Answer::Call(name, arguments) => (
            String::new(),
            vec![ToolCall {
                id: "call-1".into(),
                name: name.into(),
                arguments: arguments.to_string(),
            }],
        ),
        Answer::Later(..) => unreachable!("the double waits before answering"),
    };
    Completion {
        stop_reason: if tool_calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolCalls
        },
        content,
        tool_calls,
        model: "scripted".into(),
        usage: Usage {
            prompt_tokens: tokens / 2,
            completion_tokens: tokens - tokens / 2,
        },
        time_to_first_token: None,
    }
}

/// A turn's answer: its type, text, tasks as (assignee, task), and who
/// speaks next.
pub fn turn(kind: &str, text: &str, tasks: &[(&str, &str)], next: &str) -> Answer {
    let tasks: Vec<Value> = tasks
        .iter()
        .map(|(assignee, task)| json!({"assignee": assignee, "task": task}))
        .collect();
    Answer::Json(json!({"type": kind, "text": text, "tasks": tasks, "next": next}))
}

/// A scripted model as a language model of the node's own kind: its text
/// answers stream word by word to whoever asked for a stream, as a real
/// model's tokens do.
pub struct ScriptedChat {
    rules: Box<dyn Fn(&agentsite::llm::ChatRequest) -> Answer + Send + Sync>,
    /// The pause between streamed words, so a stream is seen arriving.
    pace: Duration,
}

#[async_trait::async_trait]
impl agentsite::llm::ChatModel for ScriptedChat {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn complete(
        &self,
        request: agentsite::llm::ChatRequest,
        deadline: std::time::Instant,
        sink: agentsite::llm::DeltaSink,
    ) -> Result<Completion, agentsite::llm::LlmFailure> {
        let mut answer = (self.rules)(&request);
        while let Answer::Later(wait, then) = answer {
            tokio::time::sleep(wait).await;
            answer = *then;
        }
        if std::time::Instant::now() > deadline {
            return Err(agentsite::llm::LlmFailure::DeadlineExceeded(
                "the scripted model's deadline passed".into(),
            ));
        }
        let streamed = matches!(answer, Answer::Text(_));
        let completion = completion(answer, 10);
        // A model that streams hands over all of its answer as deltas:
        // text word by word, tool calls whole.
        if let Some(sink) = &sink {
            use agentsite::llm::Delta;
            if streamed {
                for word in completion.content.split_inclusive(' ') {
                    let _ = sink.send(Delta::Text(word.to_owned())).await;
                    tokio::time::sleep(self.pace).await;
                }
            } else if !completion.content.is_empty() {
                let _ = sink.send(Delta::Text(completion.content.clone())).await;
            }
            for call in &completion.tool_calls {
                let _ = sink.send(Delta::ToolCall(call.clone())).await;
            }
        }
        Ok(completion)
    }

    async fn status(&self) -> agentsite::llm::ModelStatus {
        agentsite::llm::ModelStatus {
            name: "scripted".into(),
            kind: "scripted".into(),
            location: "the test".into(),
            state: "ready".into(),
            size: None,
            default: true,
        }
    }
}

/// A scripted model served over the OpenAI API on loopback (by the node's
/// own `/v1` routes), for nodes started as processes: they reach it with
/// `kind = "openai"`. Stops when dropped.
pub struct ModelServer {
    /// `http://127.0.0.1:PORT/v1`
    pub base_url: String,
    runtime: Option<tokio::runtime::Runtime>,
}

impl ModelServer {
    pub fn start(
        rules: impl Fn(&agentsite::llm::ChatRequest) -> Answer + Send + Sync + 'static,
    ) -> ModelServer {
        use agentsite::llm::models::{Gated, Models};
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let model = ScriptedChat {
            rules: Box::new(rules),
            pace: Duration::from_millis(40),
        };
        let models = Models::with_models(
            vec![Gated::new(Arc::new(model), 8, 64)],
            Arc::new(agentsite::audit::Audit::new()),
        )
        .unwrap();
        let guard = agentsite::testing::Guard::new(&["127.0.0.1".into()], &[], None);
        let router = agentsite::llm::serve::router(Arc::new(models), guard);
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        runtime.spawn(async move { axum::serve(listener, router).await });
        ModelServer {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            runtime: Some(runtime),
        }
    }

    /// A node configuration whose only model is this one.
    pub fn node_config(&self) -> String {
        format!(
            "[[llm.models]]\nname = \"scripted\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"scripted\"\n",
            self.base_url
        )
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
