//! A goal as an MCP tool: `goal` on a node's `/mcp`, so that an MCP client
//! can hand a goal to the network and get the team's conclusion back.
//!
//! While the goal runs, each message of its conversation goes to the client
//! as a progress notification (when the request carries a progress token),
//! so a person watching the client sees the team at work. A client that
//! cancels the request, or goes away, cancels the goal and every call it
//! started. The result names the team (agent ids and nodes) and the goal's
//! id, with which `agentsite goal show` or `GET /api/goals/{id}` replays
//! the whole conversation and every tool call in it.

use super::config::AskedLimits;
use super::{Body, GoalError, GoalEvent, GoalRecord, GoalState, Goals, Member, NewGoal};
use crate::agent::tool::{Content, StructuredContent, ToolOutput};
use crate::capabilities::caller::{Caller, Progress};
use crate::requester::Requester;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::{Arc, LazyLock};
use std::time::Duration;
use tokio::sync::mpsc;

/// The tool's name. Agents' tools on `/mcp` are `<agent>.<tool>`, so it
/// cannot collide with one.
pub const TOOL_NAME: &str = "goal";

/// Longest progress message, in bytes.
const PROGRESS_LINE: usize = 300;

/// The tool's MCP descriptor.
pub fn descriptor() -> rmcp::model::Tool {
    static DESCRIPTOR: LazyLock<rmcp::model::Tool> = LazyLock::new(|| {
        serde_json::from_value(json!({
            "name": TOOL_NAME,
            "title": "Hand a goal to a team of agents",
            "description": "Give this node a goal. It finds agents that can help (on this \
                node or elsewhere on the network), calls their tools step by step with the \
                goal's own values, and returns a conclusion that states what the tools \
                returned, with the calls it rests on. Each step is sent as a progress \
                notification. A goal stopped by a limit is an error result that says which \
                limit and what was found. To continue a goal with a new message, pass its id \
                as goal_id.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "text": {
                        "type": "string",
                        "description": "The goal, or with goal_id a message that continues it.",
                        "minLength": 1,
                        "maxLength": super::MAX_TEXT,
                    },
                    "team": {
                        "type": "array",
                        "items": {"type": "string"},
                        "maxItems": super::team::MAX_NAMED,
                        "description": "Agents (names, ids or search words) to be the team; the node forms one when absent.",
                    },
                    "depth": {"type": "integer", "minimum": 0, "description": "Times the node may look for more agents when no member's tool can take what is left (0: never)."},
                    "max_turns": {"type": "integer", "minimum": 1, "description": "Requests to the model (each step's call, the conclusion) after which the goal stops with what it found."},
                    "deadline_seconds": {"type": "integer", "minimum": 1, "description": "Wall-clock time the goal may take."},
                    "model": {"type": "string", "description": "The node's model to speak for the members."},
                    "verify": {"type": "string", "enum": ["none", "sampled", "all"], "description": "Check other nodes' answers by running replayable calls again: none, sampled (each node's first answer and one in four after it) or all. The node's default when absent."},
                    "goal_id": {"type": "string", "description": "An earlier goal to continue with text as the person's message."},
                },
                "required": ["text"],
                "additionalProperties": false,
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "goal": {"type": "string"},
                    "state": {"type": "string"},
                    "conclusion": {"type": "string"},
                    "reason": {"type": "string"},
                    "team": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "agent": {"type": "string"},
                                "node": {"type": "string"},
                            },
                            "required": ["name", "agent", "node"],
                        },
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "task": {"type": "integer"},
                                "member": {"type": "string"},
                                "ok": {"type": "boolean"},
                                "text": {"type": "string"},
                            },
                        },
                    },
                    "usage": {"type": "object"},
                },
                "required": ["goal", "state", "team", "usage"],
            },
            "annotations": {
                "readOnlyHint": false,
                "destructiveHint": false,
                "openWorldHint": true,
            },
        }))
        .expect("the goal tool's descriptor is a valid MCP tool")
    });
    DESCRIPTOR.clone()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Arguments {
    text: String,
    #[serde(default)]
    team: Vec<String>,
    depth: Option<u32>,
    max_turns: Option<u32>,
    deadline_seconds: Option<u64>,
    model: Option<String>,
    verify: Option<super::Verify>,
    goal_id: Option<String>,
}

/// A member as the result names it.
#[derive(Debug, Serialize)]
struct Named {
    name: String,
    agent: String,
    node: String,
}

#[derive(Debug, Serialize)]
struct Outcome<'a> {
    goal: &'a str,
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    conclusion: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    team: Vec<Named>,
    /// The main team's task results, on which the conclusion rests.
    results: &'a [TaskResult],
    usage: super::message::GoalUsage,
}

/// A task's end, as the result lists it.
#[derive(Debug, Serialize)]
struct TaskResult {
    task: u32,
    member: String,
    ok: bool,
    text: String,
}

/// Cancels the goal when the request ends before it does (the client
/// cancelled, or went away and rmcp dropped the request).
struct CancelOnDrop<'a> {
    goals: &'a Goals,
    id: Option<String>,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(id) = &self.id {
            tracing::info!(goal = %id, "the MCP request of a goal ended before it; cancelling it");
            let _ = self.goals.cancel(id);
        }
    }
}

/// Runs a `goal` call: starts (or continues) the goal, reports its
/// messages to `caller` as progress, and answers with its end.
pub async fn call(
    goals: &Arc<Goals>,
    arguments: Option<&serde_json::Map<String, Value>>,
    requester: &Requester,
    caller: &dyn Caller,
) -> ToolOutput {
    let arguments = Value::Object(arguments.cloned().unwrap_or_default());
    let arguments: Arguments = match serde_json::from_value(arguments) {
        Ok(arguments) => arguments,
        Err(e) => return ToolOutput::failure(format!("invalid arguments: {e}")),
    };
    match run(goals, arguments, requester, caller).await {
        Ok(output) => output,
        Err(error) => ToolOutput::failure(error.to_string()),
    }
}

async fn run(
    goals: &Arc<Goals>,
    arguments: Arguments,
    requester: &Requester,
    caller: &dyn Caller,
) -> Result<ToolOutput, GoalError> {
    // A continued goal's team was formed in an earlier round: it is read
    // with the messages that are already known and not reported again.
    let (id, after, mut team) = match arguments.goal_id {
        None => {
            let new = NewGoal {
                text: arguments.text,
                team: arguments.team,
                limits: AskedLimits {
                    deadline: arguments.deadline_seconds.map(Duration::from_secs),
                    turns: arguments.max_turns,
                    depth: arguments.depth,
                    ..AskedLimits::default()
                },
                model: arguments.model,
                verify: arguments.verify,
            };
            (goals.start(new, requester).await?.id, 0, Vec::new())
        }
        Some(id) => {
            if !arguments.team.is_empty() || arguments.model.is_some() || arguments.verify.is_some()
            {
                return Err(GoalError::Invalid(
                    "a goal continues with its own team, model and checks; pass only text with goal_id"
                        .into(),
                ));
            }
            let earlier = goals.messages(&id, 0, super::run::MAX_MESSAGES).await?;
            let seen = earlier.last().map_or(0, |m| m.seq);
            let team = earlier
                .into_iter()
                .rev()
                .find_map(|m| match (m.team, m.body) {
                    (None, Body::Team { members, .. }) => Some(members),
                    _ => None,
                })
                .unwrap_or_default();
            goals.say(&id, arguments.text).await?;
            (id, seen, team)
        }
    };
    let mut cancel = CancelOnDrop {
        goals,
        id: Some(id.clone()),
    };
    let (sender, mut events) = mpsc::channel(64);
    tokio::spawn(goals.clone().follow(id.clone(), after, sender));
    let mut results: Vec<TaskResult> = Vec::new();
    let mut end: Option<GoalRecord> = None;
    while let Some(event) = events.recv().await {
        match event {
            GoalEvent::Message { message, .. } => {
                match (message.team, &message.body) {
                    (None, Body::Team { members, .. }) => team = members.clone(),
                    (None, Body::Result { task, ok, text }) => results.push(TaskResult {
                        task: *task,
                        member: message.speaker.name().to_owned(),
                        ok: *ok,
                        text: crate::text::excerpt(text, 600).into_owned(),
                    }),
                    _ => {}
                }
                caller.progress(Progress {
                    progress: message.seq as f64,
                    total: None,
                    message: Some(message.summary(PROGRESS_LINE)),
                });
            }
            GoalEvent::State { record, .. } if !record.state.is_active() => {
                end = Some(*record);
            }
            GoalEvent::State { .. } => {}
        }
    }
    cancel.id = None;
    // The stream ends at the goal's end; if the store failed under it, the
    // record says where the goal is.
    let record = match end {
        Some(record) => record,
        None => goals.record(&id).await?,
    };
    Ok(output(&record, &team, &results))
}

fn output(record: &GoalRecord, team: &[Member], results: &[TaskResult]) -> ToolOutput {
    let outcome = Outcome {
        goal: &record.id,
        state: record.state.as_str(),
        conclusion: record.conclusion.as_deref(),
        reason: record.reason.as_deref(),
        team: team
            .iter()
            .map(|m| Named {
                name: m.name.clone(),
                agent: m.agent.to_string(),
                node: m.node.clone(),
            })
            .collect(),
        results,
        usage: record.usage,
    };
    let names: Vec<&str> = team.iter().map(|m| m.name.as_str()).collect();
    let usage = &record.usage;
    let footer = format!(
        "goal {} {} with team {} ({} turns, {} tasks, {} tool calls, {} tokens); \
         `agentsite goal show {}` shows the whole conversation",
        record.id,
        record.state.as_str(),
        if names.is_empty() {
            "(none)".to_owned()
        } else {
            names.join(", ")
        },
        usage.turns,
        usage.tasks,
        usage.tool_calls,
        usage.tokens,
        record.id,
    );
    let mut text = String::new();
    if let Some(said) = record.conclusion.as_ref().or(record.reason.as_ref()) {
        text.push_str(said);
        text.push_str("\n\n");
    }
    if !results.is_empty() {
        text.push_str("Task results:\n");
        for result in results {
            let failed = if result.ok { "" } else { " (failed)" };
            let line = crate::text::one_line(&result.text, 300);
            text.push_str(&format!(
                "- #{} {}{failed}: {line}\n",
                result.task, result.member
            ));
        }
        text.push('\n');
    }
    text.push_str(&footer);
    ToolOutput {
        content: vec![Content::Text { text }],
        structured_content: serde_json::to_value(&outcome)
            .ok()
            .and_then(|value| StructuredContent::from_value(&value).ok()),
        is_error: record.state != GoalState::Concluded,
    }
}
