//! What a message does once it is a task: to an agent, one call of its
//! tools (the one the message names in a data part, or the one the node's
//! model chooses from its text); to the node, a goal, whose progress and
//! end become the task's.

use super::tasks::TaskEntry;
use super::wire::{Artifact, Message, Part, TaskState, new_id};
use crate::Node;
use crate::goals::{Body, GoalEvent, GoalRecord, GoalState, Goals};
use crate::llm::{ChatRequest, Message as ChatMessage, Role, ToolChoice, ToolSpec};
use crate::store::AgentRecord;
use crate::tool::{Content, ResourceBody, ToolOutput};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How long the node's model may take to choose a call.
const CHOOSE_DEADLINE: Duration = Duration::from_secs(120);
/// Characters of a result or goal message a status message carries.
const STATUS_CHARS: usize = 2000;

/// The task's state for a goal's.
pub fn goal_state(state: GoalState) -> TaskState {
    match state {
        GoalState::Forming => TaskState::Submitted,
        GoalState::Running => TaskState::Working,
        GoalState::Concluded => TaskState::Completed,
        GoalState::Failed => TaskState::Failed,
        GoalState::Cancelled => TaskState::Canceled,
        // The node stopped while the goal ran: a message resumes it.
        GoalState::Interrupted => TaskState::InputRequired,
    }
}

/// Runs the task `entry` of `record`: chooses the call `message` asks
/// for and makes it through the node, as any client's call is made.
pub async fn call(node: Arc<Node>, record: AgentRecord, entry: Arc<TaskEntry>, message: Message) {
    entry.set_status(TaskState::Working, None);
    let work = async {
        let (tool, arguments) = choose(&node, &record, &message).await?;
        let said = format!(
            "calling {tool} with {}",
            crate::text::one_line(&arguments.to_string(), STATUS_CHARS)
        );
        entry.set_status(TaskState::Working, Some(entry.agent_message(said)));
        let grants = node.grants(&record).map_err(|e| e.to_string())?;
        let output = node
            .call_record(&record, &tool, &arguments.to_string(), grants, None)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((tool, output))
    };
    // Cancelling drops the call, which stops the agent.
    let outcome = tokio::select! {
        _ = entry.cancel.cancelled() => {
            entry.set_status(TaskState::Canceled, Some(entry.agent_message("canceled by the client")));
            return;
        }
        outcome = work => outcome,
    };
    match outcome {
        Ok((tool, output)) if !output.is_error => {
            let said = crate::text::one_line(&summary(&output), STATUS_CHARS);
            entry.add_artifact(artifact(&tool, &output));
            entry.set_status(TaskState::Completed, Some(entry.agent_message(said)));
        }
        Ok((tool, output)) => {
            let said = format!("{tool} failed: {}", output.text());
            let said = crate::text::one_line(&said, STATUS_CHARS);
            entry.set_status(TaskState::Failed, Some(entry.agent_message(said)));
        }
        Err(why) => {
            let said = crate::text::one_line(&why, STATUS_CHARS);
            entry.set_status(TaskState::Failed, Some(entry.agent_message(said)));
        }
    }
}

/// The call a data part names: `{"tool": NAME, "arguments": {...}}`.
fn named_call(message: &Message) -> Option<Result<(String, Value), String>> {
    let data = message
        .parts
        .iter()
        .find_map(|part| part.data.as_ref().filter(|data| data.get("tool").is_some()))?;
    let Some(tool) = data["tool"].as_str() else {
        return Some(Err("a data part's \"tool\" is the name of a tool".into()));
    };
    let arguments = match data.get("arguments") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(arguments @ Value::Object(_)) => arguments.clone(),
        Some(_) => return Some(Err("a data part's \"arguments\" is a JSON object".into())),
    };
    Some(Ok((tool.to_owned(), arguments)))
}

/// The name a tool goes by for the model: function names may not have
/// every letter a tool name may.
fn function_name(tool: &str) -> String {
    tool.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// The tool and arguments `message` asks `record` for: named in a data
/// part, or chosen by the node's model from its text (asked again once,
/// with what was wrong, when its answer is not a call of a tool it has).
async fn choose(
    node: &Node,
    record: &AgentRecord,
    message: &Message,
) -> Result<(String, Value), String> {
    if let Some(named) = named_call(message) {
        return named;
    }
    let text = message.text();
    if text.trim().is_empty() {
        return Err(format!(
            "the message has no text for the node's model to choose a call of {} from; say what to do, or name the call in a data part {{\"tool\": NAME, \"arguments\": {{...}}}}",
            record.card.name
        ));
    }
    let tools: Vec<ToolSpec> = record
        .tools
        .iter()
        .map(|tool| ToolSpec {
            name: function_name(&tool.name),
            description: tool.description.clone(),
            parameters: tool.input_schema.clone(),
        })
        .collect();
    let mut messages = vec![
        ChatMessage::system(format!(
            "You act for the agent {}: {}. Call the one tool that does what the message asks, with arguments taken from the message.",
            record.card.name, record.card.description
        )),
        ChatMessage::user(text),
    ];
    let deadline = Instant::now() + CHOOSE_DEADLINE;
    let mut wrong = String::new();
    for _ in 0..2 {
        let request = ChatRequest {
            messages: messages.clone(),
            tools: tools.clone(),
            tool_choice: ToolChoice::Required,
            max_tokens: Some(512),
            ..Default::default()
        };
        let completion = node
            .models()
            .complete(None, request, deadline, None, "a2a")
            .await
            .map_err(|e| format!("the node's model could not choose a call: {e}"))?;
        let Some(call) = completion.tool_calls.first() else {
            wrong = "the answer called no tool".into();
            messages.push(ChatMessage::new(Role::Assistant, completion.content));
            messages.push(ChatMessage::user(format!(
                "That called no tool. Call one of the tools: {}.",
                tools
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
            continue;
        };
        let tool = record
            .tools
            .iter()
            .find(|tool| function_name(&tool.name) == call.name);
        let arguments = serde_json::from_str::<Value>(&call.arguments);
        match (tool, arguments) {
            (Some(tool), Ok(arguments @ Value::Object(_))) => {
                return Ok((tool.name.clone(), arguments));
            }
            (None, _) => wrong = format!("there is no tool {:?}", call.name),
            (_, Ok(_)) => wrong = "the arguments are not a JSON object".into(),
            (_, Err(e)) => wrong = format!("the arguments are not JSON: {e}"),
        }
        let mut assistant = ChatMessage::new(Role::Assistant, completion.content.clone());
        assistant.tool_calls = vec![call.clone()];
        messages.push(assistant);
        let mut told = ChatMessage::new(Role::Tool, format!("That call was wrong: {wrong}."));
        told.tool_call_id = Some(call.id.clone());
        messages.push(told);
    }
    Err(format!(
        "the node's model did not choose a call of {}: {wrong}",
        record.card.name
    ))
}

/// A result in a few words: its text, or its structured content.
fn summary(output: &ToolOutput) -> String {
    let text = output.text();
    match (&output.structured_content, text.is_empty()) {
        (Some(structured), true) => structured.to_string(),
        _ => text,
    }
}

/// A tool's result as the task's artifact: a part per content block, and
/// the structured content as a data part.
pub fn artifact(tool: &str, output: &ToolOutput) -> Artifact {
    let mut parts: Vec<Part> = output.content.iter().map(part).collect();
    if let Some(structured) = &output.structured_content {
        parts.push(Part::data(structured.to_value()));
    }
    Artifact {
        artifact_id: new_id(),
        name: Some(format!("{tool} result")),
        description: None,
        parts,
        metadata: None,
    }
}

fn part(content: &Content) -> Part {
    match content {
        Content::Text { text } => Part::text(text.clone()),
        Content::Image { data, mime_type } | Content::Audio { data, mime_type } => Part {
            raw: Some(data.clone()),
            media_type: Some(mime_type.clone()),
            ..Default::default()
        },
        Content::Resource { resource } => {
            let mut part = match &resource.body {
                ResourceBody::Text { text } => Part::text(text.clone()),
                ResourceBody::Blob { blob } => Part {
                    raw: Some(blob.clone()),
                    ..Default::default()
                },
            };
            part.filename = Some(resource.uri.clone());
            part.media_type = resource.mime_type.clone();
            part
        }
    }
}

/// Makes the task `entry` follow goal `goal` from the message after the
/// last one it saw, until the goal stops: each message of the team is a
/// status update, the conclusion its artifact, the goal's end the task's.
pub fn follow_goal(goals: Arc<Goals>, entry: Arc<TaskEntry>, goal: String) {
    if entry.following.swap(true, Ordering::SeqCst) {
        return;
    }
    tokio::spawn(async move {
        let (sender, mut events) = mpsc::channel(64);
        let after = entry.seen.load(Ordering::SeqCst);
        let follower = tokio::spawn(goals.clone().follow(goal, after, sender));
        while let Some(event) = events.recv().await {
            match event {
                GoalEvent::Message { message, .. } => {
                    entry.seen.store(message.seq, Ordering::SeqCst);
                    if matches!(message.body, Body::Goal { .. } | Body::Say { .. }) {
                        continue;
                    }
                    let said = format!(
                        "{}: {}",
                        message.speaker.name(),
                        message.summary(STATUS_CHARS)
                    );
                    entry.set_status(TaskState::Working, Some(entry.agent_message(said)));
                }
                GoalEvent::State { record, .. } => apply(&entry, &record),
            }
        }
        follower.abort();
        entry.following.store(false, Ordering::SeqCst);
    });
}

/// Brings the task to where the goal `record` is.
pub fn apply(entry: &TaskEntry, record: &GoalRecord) {
    let state = goal_state(record.state);
    match record.state {
        GoalState::Forming => {}
        GoalState::Running => {
            if entry.state() != TaskState::Working {
                entry.set_status(state, None);
            }
        }
        GoalState::Concluded => {
            let conclusion = record.conclusion.clone().unwrap_or_default();
            entry.add_artifact(Artifact {
                artifact_id: new_id(),
                name: Some("conclusion".into()),
                description: Some(format!("The conclusion of goal {}", record.id)),
                parts: vec![Part::text(conclusion.clone())],
                metadata: None,
            });
            entry.set_status(state, Some(entry.agent_message(conclusion)));
        }
        GoalState::Failed | GoalState::Cancelled => {
            let why = record
                .reason
                .clone()
                .unwrap_or_else(|| format!("the goal {}", record.state.as_str()));
            entry.set_status(state, Some(entry.agent_message(why)));
        }
        GoalState::Interrupted => {
            entry.set_status(
                state,
                Some(entry.agent_message(
                    "the node stopped while the goal ran; send a message with this task's id to resume it",
                )),
            );
        }
    }
}
