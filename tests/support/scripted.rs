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
