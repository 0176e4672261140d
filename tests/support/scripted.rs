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
use agentsite::llm::grounding::{Grounding, Literal};
use agentsite::llm::{ChatRequest, Completion, Role, StopReason, ToolCall, ToolSpec, Usage};
use serde_json::{Map, Value, json};
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

/// Runs `new` to its end (within `limit`): the goal's record and
/// messages.
pub async fn run_goal(
    goals: &Arc<Goals>,
    new: agentsite::goals::NewGoal,
    limit: Duration,
) -> (agentsite::goals::GoalRecord, Vec<agentsite::goals::Message>) {
    let requester = agentsite::requester::Requester::new("test", None);
    let record = goals.start(new, &requester).await.unwrap();
    let record = tokio::time::timeout(limit, goals.finished(&record.id))
        .await
        .unwrap_or_else(|_| panic!("the goal did not stop within {limit:?}"))
        .unwrap();
    let messages = goals.messages(&record.id, 0, 10_000).await.unwrap();
    (record, messages)
}

/// The first tool call a goal's messages record.
pub fn first_call(
    messages: &[agentsite::goals::Message],
) -> agentsite::goals::message::ToolCallRecord {
    messages
        .iter()
        .find_map(|m| match &m.body {
            agentsite::goals::Body::Progress {
                call: Some(call), ..
            } => Some(call.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no tool call in {messages:#?}"))
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

/// What the node asks the model for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Asked {
    /// A few words on how to do something (a goal, or a step of it).
    How,
    /// The call of a step, among `tools`, held to `grounding`.
    Call,
    /// The answer a person reads, from the results.
    Answer,
    /// A reply in a conversation no tool could serve.
    Reply,
}

/// A request as the rules read it.
pub struct Request {
    pub asked: Asked,
    /// What the node asks about: the goal or step (How), the step's part
    /// (Call), the request and its results (Answer).
    pub user: String,
    pub tools: Vec<ToolSpec>,
    pub grounding: Option<Grounding>,
    /// What the node said of an earlier call of the model's, if anything.
    pub told: Option<String>,
    /// The tools a How request lists, in the order it lists them.
    pub listed: Vec<String>,
}

pub fn read(request: &ChatRequest) -> Request {
    let system = request
        .messages
        .first()
        .map(|m| m.content.clone())
        .unwrap_or_default();
    let asked = if system.starts_with("Call the one tool") {
        Asked::Call
    } else if system.starts_with("Answer the person") {
        Asked::Answer
    } else if system.starts_with("Explain briefly") {
        Asked::How
    } else {
        Asked::Reply
    };
    let listed = system
        .strip_prefix("Explain briefly how to do this, with one of: ")
        .map(|names| {
            names
                .trim_end_matches('.')
                .split(", ")
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Request {
        asked,
        listed,
        user: request
            .messages
            .get(1)
            .map(|m| m.content.clone())
            .unwrap_or_default(),
        tools: request.tools.clone(),
        grounding: request.grounding.clone(),
        told: request
            .messages
            .iter()
            .rfind(|m| m.role == Role::Tool)
            .map(|m| m.content.clone()),
    }
}

impl Request {
    /// The part of the request this call is for.
    pub fn now(&self) -> &str {
        let now = self.user.rsplit("Now: ").next().unwrap_or_default();
        now.split("\nValues: ").next().unwrap_or_default()
    }
}

/// The call a capable model makes: the tool the step's words name (else
/// the first offered), its required arguments filled in order from the
/// grounding's values, the required one first.
pub fn good_call(request: &Request) -> Answer {
    let now = request.now().to_lowercase();
    let wanted = [
        ("plus", "add"),
        ("add", "add"),
        ("times", "multiply"),
        ("double", "multiply"),
        ("multiply", "multiply"),
        ("divide", "divide"),
        ("words", "word_count"),
        ("upper", "upper"),
        ("spin", "spin"),
    ]
    .iter()
    .find(|(word, tool)| now.contains(word) && request.tools.iter().any(|t| t.name == *tool))
    .map(|(_, tool)| *tool);
    let tool = request
        .tools
        .iter()
        .find(|t| Some(t.name.as_str()) == wanted)
        .unwrap_or(&request.tools[0]);
    // Held to a grounding when it has one (a model of the node's own
    // kind); else it reads the values the prompt lists.
    let mut values: Vec<Literal> = match request.grounding.clone() {
        Some(grounding) => grounding.all_values().cloned().collect(),
        None => {
            let listed = request.user.rsplit("\nValues: ").next().unwrap_or_default();
            agentsite::llm::grounding::values_in(listed)
                .into_iter()
                .map(|(_, value)| value)
                .collect()
        }
    };
    let mut arguments = Map::new();
    let required = tool.parameters["required"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for name in required.iter().filter_map(Value::as_str) {
        let number = tool.parameters["properties"][name]["type"] == "number";
        let position = values
            .iter()
            .position(|v| matches!(v, Literal::Number(_)) == number)
            .unwrap_or_else(|| panic!("no value for {name} in {values:?}"));
        let value = match values.remove(position) {
            Literal::Number(n) => json!(n),
            Literal::Text(t) => json!(t),
            Literal::Document(d) => d,
        };
        arguments.insert(name.to_owned(), value);
    }
    Answer::Call(leak(&tool.name), Value::Object(arguments))
}

/// A tool name as the double's answers hold it.
pub fn leak(name: &str) -> &'static str {
    Box::leak(name.to_owned().into_boxed_str())
}

/// An answer that states each result line of the request: "Found: add(6,
/// 10) = 16."
pub fn good_answer(request: &Request) -> Answer {
    let results: Vec<&str> = request
        .user
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .collect();
    Answer::Text(format!("Found: {}.", results.join("; ")))
}

/// A capable model: a few words on how, then good calls and answers.
pub fn capable(request: &Request) -> Answer {
    match request.asked {
        Asked::How => Answer::Text("Use the right tool for it.".into()),
        Asked::Call => good_call(request),
        Asked::Answer => good_answer(request),
        Asked::Reply => Answer::Text("Hello! Ask me something a tool can do.".into()),
    }
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
        let open = agentsite::http::token::Gate::new(None, agentsite::http::token::Family::OpenAi);
        let router = agentsite::v1::router(Arc::new(models), open);
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
