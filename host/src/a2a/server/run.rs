//! What a message does once it is a task: to an agent, the call a data
//! part names, or the calls its text asks for and the answer from their
//! results; to the node, a goal, whose progress and end become the task's.

use super::tasks::TaskEntry;
use crate::Node;
use crate::a2a::wire::{self, Artifact, Message, Part, PartContent, TaskState};
use crate::agent::tool::{Content, ResourceBody, ToolOutput};
use crate::answers::{self, NodeAsk, Offered, Runner};
use crate::goals::{Body, GoalEvent, GoalRecord, GoalState, Goals};
use crate::store::AgentRecord;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How long the node's model may take over a message's answer, in all.
const ANSWER_DEADLINE: Duration = Duration::from_secs(120);
/// Characters of a result or goal message a status message carries.
const STATUS_CHARS: usize = 2000;

/// The task's state for a goal's.
pub fn goal_state(state: GoalState) -> TaskState {
    match state {
        GoalState::Forming => TaskState::Submitted,
        GoalState::Running => TaskState::Working,
        GoalState::Concluded => TaskState::Completed,
        // Part of it was done, part not: the person may say more.
        GoalState::Partial => TaskState::InputRequired,
        // A limit stopped the goal before it was done: not completed.
        GoalState::Stopped | GoalState::Failed => TaskState::Failed,
        GoalState::Cancelled => TaskState::Canceled,
        // The node stopped while the goal ran: a message resumes it.
        GoalState::Interrupted => TaskState::InputRequired,
    }
}

/// Runs the task `entry` of `record`: the call a data part names, made
/// through the node as any client's call is made; or, for a text message,
/// the calls its request takes, chosen with the node's model and run in
/// turn, and the answer from their results (see [`crate::answers`]).
pub async fn call(node: Arc<Node>, record: AgentRecord, entry: Arc<TaskEntry>, message: Message) {
    entry.set_status(TaskState::Working, None);
    let work = async {
        match named_call(&message) {
            Some(named) => {
                let (tool, arguments) = named?;
                let runner = TaskRunner {
                    node: &node,
                    record: &record,
                    entry: &entry,
                };
                let output = runner.call(&tool, &arguments).await;
                Ok(match output.is_error {
                    false => (TaskState::Completed, summary(&output)),
                    true => (
                        TaskState::Failed,
                        format!("{tool} failed: {}", output.text()),
                    ),
                })
            }
            None => answer(&node, &record, &entry, &wire::text(&message)).await,
        }
    };
    // Cancelling drops the work, which stops the agent and the model.
    let outcome = tokio::select! {
        _ = entry.cancel.cancelled() => {
            entry.set_status(TaskState::Canceled, Some(entry.agent_message("canceled by the client")));
            return;
        }
        outcome = work => outcome,
    };
    let (state, said) = outcome.unwrap_or_else(|why| (TaskState::Failed, why));
    let said = crate::text::one_line(&said, STATUS_CHARS);
    entry.set_status(state, Some(entry.agent_message(said)));
}

/// A text message's request, answered with `record`'s tools: the task's
/// end and what it says.
async fn answer(
    node: &Arc<Node>,
    record: &AgentRecord,
    entry: &Arc<TaskEntry>,
    text: &str,
) -> Result<(TaskState, String), String> {
    if text.trim().is_empty() {
        return Err(format!(
            "the message has no text for the node's model to choose a call of {} from; say what to do, or name the call in a data part {{\"tool\": NAME, \"arguments\": {{...}}}}",
            record.card.name
        ));
    }
    let tools: Vec<Offered> = record
        .tools
        .iter()
        .map(|tool| Offered::of(&record.card.name, tool))
        .collect();
    let ask = NodeAsk {
        models: node.models().clone(),
        model: None,
        requester: REQUESTER,
        caller: format!("a2a {}", entry.context_id()),
        deadline: Instant::now() + ANSWER_DEADLINE,
    };
    let runner = TaskRunner {
        node,
        record,
        entry,
    };
    let served = answers::serve(&ask, text, &tools, &runner, None).await?;
    let outcome = served.outcome();
    let Some(answer) = served.answer else {
        return Err(format!(
            "nothing in the message is for a tool of {} to take ({}); give the values a tool needs, or name the call in a data part {{\"tool\": NAME, \"arguments\": {{...}}}}",
            record.card.name,
            record
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    // Completed only when every part of the request was answered; a part
    // not done leaves the task for the person to say more.
    Ok(match outcome {
        answers::Outcome::Answered => (TaskState::Completed, answer.text),
        answers::Outcome::Partial => (TaskState::InputRequired, answer.text),
        answers::Outcome::NotAnswered => (TaskState::Failed, answer.text),
    })
}

/// Who A2A's requests to the node's model are counted for.
const REQUESTER: &str = "a2a";

/// Runs a task's calls on the node, saying each as it starts and keeping
/// each result as an artifact.
struct TaskRunner<'a> {
    node: &'a Arc<Node>,
    record: &'a AgentRecord,
    entry: &'a Arc<TaskEntry>,
}

impl TaskRunner<'_> {
    async fn call(&self, tool: &str, arguments: &Value) -> ToolOutput {
        let said = format!(
            "calling {tool} with {}",
            crate::text::one_line(&arguments.to_string(), STATUS_CHARS)
        );
        self.entry
            .set_status(TaskState::Working, Some(self.entry.agent_message(said)));
        let output = match self.node.grants(self.record) {
            Ok(grants) => self
                .node
                .call_record(self.record, tool, &arguments.to_string(), grants, None)
                .await
                .unwrap_or_else(|e| ToolOutput::failure(e.to_string())),
            Err(e) => ToolOutput::failure(e.to_string()),
        };
        if !output.is_error {
            self.entry.add_artifact(artifact(tool, &output));
        }
        output
    }
}

#[async_trait::async_trait]
impl Runner for TaskRunner<'_> {
    async fn run(&self, tool: &Offered, arguments: &Value, _label: &str) -> ToolOutput {
        self.call(&tool.name, arguments).await
    }

    fn choosing(&self, part: &str) {
        let said = format!(
            "choosing a tool of {} for: {}",
            self.record.card.name,
            crate::text::excerpt(part, 200)
        );
        self.entry
            .set_status(TaskState::Working, Some(self.entry.agent_message(said)));
    }
}

/// The call a data part names: `{"tool": NAME, "arguments": {...}}`.
fn named_call(message: &Message) -> Option<Result<(String, Value), String>> {
    let data = message.parts.iter().find_map(|part| match &part.content {
        PartContent::Data(data) if data.get("tool").is_some() => Some(data),
        _ => None,
    })?;
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
        parts.push(wire::data_part(structured.to_value()));
    }
    Artifact {
        artifact_id: wire::new_artifact_id(),
        name: Some(format!("{tool} result")),
        description: None,
        parts,
        metadata: None,
        extensions: None,
    }
}

fn part(content: &Content) -> Part {
    match content {
        Content::Text { text } => Part::text(text.clone()),
        Content::Image { data, mime_type } | Content::Audio { data, mime_type } => {
            raw_part(data).with_media_type(mime_type.clone())
        }
        Content::Resource { resource } => {
            let mut part = match &resource.body {
                ResourceBody::Text { text } => Part::text(text.clone()),
                ResourceBody::Blob { blob } => raw_part(blob),
            };
            part.filename = Some(resource.uri.clone());
            part.media_type = resource.mime_type.clone();
            part
        }
    }
}

/// A part of the bytes that `base64` stands for: a result's image, audio
/// or blob, which the node itself wrote as base64 (`agent::tool::base64`).
fn raw_part(base64: &str) -> Part {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(base64)
        .unwrap_or_default();
    Part::raw(bytes)
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

/// An artifact of one text part.
fn text_artifact(name: &str, description: String, text: &str) -> Artifact {
    Artifact {
        artifact_id: wire::new_artifact_id(),
        name: Some(name.to_owned()),
        description: Some(description),
        parts: vec![Part::text(text.to_owned())],
        metadata: None,
        extensions: None,
    }
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
        GoalState::Concluded | GoalState::Partial => {
            let conclusion = record.conclusion.clone().unwrap_or_default();
            entry.add_artifact(text_artifact(
                "conclusion",
                format!("The conclusion of goal {}", record.id),
                &conclusion,
            ));
            entry.set_status(state, Some(entry.agent_message(conclusion)));
        }
        GoalState::Stopped => {
            // What the team found before the limit stays with the task;
            // the status says why it is not complete.
            let found = record.conclusion.clone().unwrap_or_default();
            entry.add_artifact(text_artifact(
                "results so far",
                format!("What goal {} found before it stopped", record.id),
                &found,
            ));
            let why = record
                .reason
                .clone()
                .unwrap_or_else(|| "stopped by a limit".into());
            entry.set_status(
                state,
                Some(entry.agent_message(format!("{why}\n\n{found}"))),
            );
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
