//! A member at work: speaking its turn in the conversation and doing an
//! assigned task, each through the node's model in the member's role (its
//! card and tools).
//!
//! A turn is one structured answer (see [`Turn`]). A task is a bounded loop:
//! the model chooses one of the member's tools and its arguments from the
//! tool's schema, the call runs under the agent's grants where the agent
//! lives, the result goes back to the model, until it answers in text or the
//! loop's steps run out. A member may instead hand a task that is too large
//! to a sub-team of its own (the `form_team` tool), when the goal's depth
//! allows.

use super::ask::{AskFailure, Asker};
use super::budget::{Budget, Limit};
use super::directory::Directory;
use super::message::{Member, ToolCallRecord};
use crate::capabilities::peers::{Hop, PeerFailure};
use crate::llm::{ChatRequest, Message, Role, ToolChoice, ToolSpec};
use crate::text::{excerpt, truncated};
use serde_json::{Value, json};
use std::time::Instant;

/// Model requests of one task at most (each may hold several tool calls).
pub const MAX_TASK_STEPS: usize = 4;
/// Tool calls one step may make.
const MAX_CALLS_PER_STEP: usize = 4;
/// A tool result as the model reads it, at most.
const MAX_RESULT_FOR_MODEL: usize = 4000;
/// A tool result as the transcript keeps it, at most.
const MAX_RESULT_KEPT: usize = 2000;
/// The pseudo-tool that hands a task to a sub-team.
pub const FORM_TEAM: &str = "form_team";
/// Tokens a turn's answer may take: its text and up to four tasks fit.
const TURN_TOKENS: u32 = 700;
/// Tokens a task step's answer may take: tool calls, or the result.
const STEP_TOKENS: u32 = 400;
/// A task's result in the member's words, at most.
const MAX_TASK_ANSWER: usize = 1200;

/// The kinds of turn a member may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnKind {
    Discussion,
    AssignSync,
    AssignAsync,
    Pause,
    Conclude,
}

impl TurnKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnKind::Discussion => "discussion",
            TurnKind::AssignSync => "assign_sync",
            TurnKind::AssignAsync => "assign_async",
            TurnKind::Pause => "pause",
            TurnKind::Conclude => "conclude",
        }
    }

    pub const ALL: [TurnKind; 5] = [
        TurnKind::Discussion,
        TurnKind::AssignSync,
        TurnKind::AssignAsync,
        TurnKind::Pause,
        TurnKind::Conclude,
    ];
}

/// A member's turn, as the model wrote it and the checks accepted it.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub kind: TurnKind,
    pub text: String,
    /// With an assignment: (assignee, task).
    pub tasks: Vec<(String, String)>,
    /// With a pause: the tasks to wait for (all running ones when empty).
    pub wait_for: Vec<u32>,
    /// Who speaks next.
    pub next: Option<String>,
}

/// What the member sees of the conversation on its turn.
pub struct Floor<'a> {
    pub goal: &'a str,
    pub team: &'a [Member],
    pub transcript: &'a str,
    /// Tasks of this team: (id, assignee, text, state).
    pub tasks: &'a str,
    /// Task ids that exist, for checking a pause.
    pub known_tasks: &'a [u32],
    /// A note of the node to the speaker (a limit that forces a conclusion).
    pub note: Option<&'a str>,
}

/// The first `most` of `tools` as the model reads them: one line, each
/// description bounded.
pub(super) fn tools_line(tools: &[crate::tool::ToolSpec], most: usize) -> String {
    if tools.is_empty() {
        return "none".into();
    }
    tools
        .iter()
        .take(most)
        .map(|t| format!("{} ({})", t.name, excerpt(&t.description, 80)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The newest lines of `text` that fit in `max` bytes, saying when older
/// ones were left out.
pub(super) fn newest_lines(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    const LEFT_OUT: &str = "(earlier lines left out)\n";
    let keep = max.saturating_sub(LEFT_OUT.len());
    let mut start = crate::text::floor_char_boundary(text, text.len() - keep);
    while start < text.len() && !text[..start].ends_with('\n') {
        start += text[start..].chars().next().map_or(1, char::len_utf8);
    }
    format!("{LEFT_OUT}{}", &text[start..]).into()
}

/// The model's turn for `speaker`, of one of the `allowed` kinds.
pub async fn speak(
    asker: &Asker<'_>,
    speaker: &Member,
    floor: &Floor<'_>,
    allowed: &[TurnKind],
) -> Result<Turn, AskFailure> {
    let names: Vec<&str> = floor.team.iter().map(|m| m.name.as_str()).collect();
    let kinds: Vec<&str> = allowed.iter().map(|k| k.as_str()).collect();
    let schema = json!({
        "type": "object",
        "properties": {
            "type": {"enum": kinds},
            "text": {"type": "string", "minLength": 1, "maxLength": 500},
            "tasks": {
                "type": "array",
                "maxItems": 4,
                "items": {
                    "type": "object",
                    "properties": {
                        "assignee": {"enum": names},
                        "task": {"type": "string", "minLength": 3, "maxLength": 240}
                    },
                    "required": ["assignee", "task"],
                    "additionalProperties": false
                }
            },
            "wait_for": {"type": "array", "maxItems": 8, "items": {"type": "integer", "minimum": 1}},
            "next": {"enum": names}
        },
        "required": ["type", "text", "tasks", "next"],
        "additionalProperties": false
    });
    let team: Vec<String> = floor
        .team
        .iter()
        .map(|m| {
            format!(
                "- {}: {} Tools: {}",
                m.name,
                excerpt(&m.description, 200),
                tools_line(&m.tools, 12)
            )
        })
        .collect();
    let system = format!(
        "You are {name}, an agent in a team that works on a goal for a person. About you: {about} \
         Your tools: {tools}.\n\nThe team:\n{team}\n\nThe team talks in turns. On your turn, answer \
         with one JSON object whose \"type\" is one of:\n\
         - \"discussion\": say something useful to the team in \"text\" (a fact, a plan, a question);\n\
         - \"assign_sync\": hand \"tasks\" to members (yourself included) and wait for their results;\n\
         - \"assign_async\": hand \"tasks\" to members; the talk goes on while they work;\n\
         - \"pause\": wait for the task numbers in \"wait_for\" to finish;\n\
         - \"conclude\": write the final answer to the goal in \"text\", from the results.\n\
         A member does a task with its own tools: give each task everything it needs (numbers, \
         text). \"next\" names who speaks after you.",
        name = speaker.name,
        about = excerpt(&speaker.description, 300),
        tools = tools_line(&speaker.tools, 12),
        team = team.join("\n"),
    );
    // The transcript and the tasks get what room the model's window
    // leaves, the newest part of each.
    let fixed = system.len() + floor.goal.len() + floor.note.map_or(0, str::len) + 200;
    let room = asker.room(fixed, TURN_TOKENS);
    let tasks = newest_lines(floor.tasks, room / 3);
    let transcript = newest_lines(floor.transcript, room - tasks.len());
    let mut user = format!(
        "Goal: {}\n\nConversation so far:\n{}\n\nTasks:\n{}\n",
        floor.goal,
        if transcript.is_empty() {
            "(nothing yet)"
        } else {
            &transcript
        },
        if tasks.is_empty() {
            "(none yet)"
        } else {
            &tasks
        },
    );
    if let Some(note) = floor.note {
        user.push_str(&format!("\n{note}\n"));
    }
    user.push_str(&format!(
        "\nYour turn, {}. Allowed types: {}.",
        speaker.name,
        kinds.join(", ")
    ));
    let messages = vec![Message::system(system), Message::user(user)];
    asker
        .structured(messages, schema, TURN_TOKENS, |value| {
            check_turn(value, allowed, &names, floor.known_tasks)
        })
        .await
}

/// Checks a turn beyond what the schema says: it must be of an allowed
/// kind, name members of the team and known tasks, and say something.
fn check_turn(
    value: Value,
    allowed: &[TurnKind],
    names: &[&str],
    known_tasks: &[u32],
) -> Result<Turn, String> {
    let kind_text = value["type"].as_str().ok_or("\"type\" is missing")?;
    let kind = TurnKind::ALL
        .into_iter()
        .find(|k| k.as_str() == kind_text)
        .filter(|k| allowed.contains(k))
        .ok_or_else(|| {
            let allowed: Vec<&str> = allowed.iter().map(|k| k.as_str()).collect();
            format!(
                "\"type\" must be one of {}, not {:?}",
                allowed.join(", "),
                excerpt(kind_text, 40)
            )
        })?;
    let text = value["text"].as_str().unwrap_or("").trim().to_owned();
    if text.is_empty() {
        return Err("\"text\" must say something".into());
    }
    let mut tasks = Vec::new();
    for task in value["tasks"].as_array().into_iter().flatten().take(4) {
        let assignee = task["assignee"].as_str().unwrap_or("");
        if !names.contains(&assignee) {
            return Err(format!(
                "a task's \"assignee\" must be one of {}, not {:?}",
                names.join(", "),
                excerpt(assignee, 40)
            ));
        }
        let what = task["task"].as_str().unwrap_or("").trim();
        if what.is_empty() {
            return Err("each task must say what to do".into());
        }
        // The same task twice to the same member would do the work twice.
        let task = (assignee.to_owned(), what.to_owned());
        if !tasks.contains(&task) {
            tasks.push(task);
        }
    }
    if matches!(kind, TurnKind::AssignSync | TurnKind::AssignAsync) && tasks.is_empty() {
        return Err("an assignment needs at least one task".into());
    }
    let mut wait_for = Vec::new();
    for id in value["wait_for"].as_array().into_iter().flatten() {
        let id = id.as_u64().ok_or("\"wait_for\" holds task numbers")?;
        let id = u32::try_from(id).map_err(|_| format!("there is no task {id}"))?;
        if !known_tasks.contains(&id) {
            return Err(format!("there is no task {id}"));
        }
        wait_for.push(id);
    }
    let next = value["next"]
        .as_str()
        .filter(|n| names.contains(n))
        .map(str::to_owned);
    Ok(Turn {
        kind,
        text,
        tasks,
        wait_for,
        next,
    })
}

/// A step of a task, as the controller reports it.
#[derive(Debug, Clone)]
pub struct Step {
    pub text: String,
    pub call: Option<ToolCallRecord>,
}

/// How a task's loop ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskEnd {
    Done(String),
    Failed(String),
    /// The member wants a sub-team for this (sub-)goal.
    Delegate(String),
}

/// What a member needs to do a task.
pub struct Work<'a> {
    pub asker: &'a Asker<'a>,
    pub directory: &'a dyn Directory,
    pub budget: &'a Budget,
    pub member: &'a Member,
    pub goal: &'a str,
    pub task: &'a str,
    /// What the conversation knows that the task may need.
    pub context: &'a str,
    /// Whether the member may form a sub-team.
    pub may_delegate: bool,
}

fn tool_specs(work: &Work<'_>) -> Vec<ToolSpec> {
    let mut tools: Vec<ToolSpec> = work
        .member
        .tools
        .iter()
        .map(|t| ToolSpec {
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: t.input_schema.clone(),
        })
        .collect();
    if work.may_delegate {
        tools.push(ToolSpec {
            name: FORM_TEAM.into(),
            description: "Hand this task to a new team of other agents, when it is too large \
                          for your own tools; their conclusion becomes your result."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {"goal": {"type": "string", "description": "What the sub-team must achieve"}},
                "required": ["goal"]
            }),
        });
    }
    tools
}

/// Does `work.task` by the member's tool-call loop, reporting each step.
pub async fn do_task(work: Work<'_>, report: &(dyn Fn(Step) + Send + Sync)) -> TaskEnd {
    let member = work.member;
    let tools = tool_specs(&work);
    let system = format!(
        "You are {name}, an agent in a team working on a goal. About you: {about} Do the task \
         you are given with your tools: call them with arguments that match their schemas. \
         When you have the result, answer with it in plain text, briefly.",
        name = member.name,
        about = excerpt(&member.description, 300),
    );
    // Half the room the model's window leaves goes to what the team knows,
    // the rest to the tool results of the steps.
    let schemas: usize = tools
        .iter()
        .map(|t| t.description.len() + t.parameters.to_string().len() + t.name.len())
        .sum();
    let fixed = system.len() + schemas + work.goal.len() + work.task.len() + 100;
    let room = work.asker.room(fixed, STEP_TOKENS);
    let result_room = (room / 2 / MAX_TASK_STEPS).clamp(200, MAX_RESULT_FOR_MODEL);
    let context = excerpt(work.context, room / 2);
    let mut messages = vec![
        Message::system(system),
        Message::user(format!(
            "Goal of the team: {}\n\nWhat the team knows:\n{}\n\nYour task: {}",
            work.goal,
            if context.is_empty() {
                "(nothing yet)"
            } else {
                &context
            },
            work.task
        )),
    ];
    let mut last_result: Option<String> = None;
    // Calls made, as (tool, arguments): a call made again would only
    // repeat its answer, so the task ends with what it has.
    let mut made: Vec<(String, String)> = Vec::new();
    for step in 0..MAX_TASK_STEPS {
        let tool_choice = if tools.is_empty() {
            ToolChoice::None
        } else if step == 0 {
            // The task is done with the member's tools: the first step
            // uses one, whatever the model would rather say.
            ToolChoice::Required
        } else {
            ToolChoice::Auto
        };
        let request = ChatRequest {
            messages: messages.clone(),
            tools: if tools.is_empty() {
                Vec::new()
            } else {
                tools.clone()
            },
            tool_choice,
            temperature: Some(0.0),
            ..Default::default()
        };
        let completion = match work.asker.complete(request, STEP_TOKENS).await {
            Ok(completion) => completion,
            Err(AskFailure::Limit(limit)) => return limit_end(limit, last_result),
            Err(AskFailure::Failed(why)) => return TaskEnd::Failed(why),
        };
        if completion.tool_calls.is_empty() {
            if completion.stop_reason == crate::llm::StopReason::MaxTokens {
                // An answer cut off is no result, nor a call: the step is
                // lost, and the model is told.
                messages.push(Message::user(format!(
                    "Your answer was cut off at {STEP_TOKENS} tokens. Call a tool, or answer \
                     briefly."
                )));
                continue;
            }
            let text = excerpt(completion.content.trim(), MAX_TASK_ANSWER);
            let text = text.as_ref();
            return match (text.is_empty(), last_result) {
                // The answer keeps the tool result it rests on, so that the
                // team reads the data and not only the model's words.
                (false, Some(result)) if !text.contains(result.trim()) => TaskEnd::Done(format!(
                    "{text}\n(from the tool: {})",
                    excerpt(&result, 600)
                )),
                (false, _) => TaskEnd::Done(text.to_owned()),
                (true, Some(result)) => TaskEnd::Done(result),
                (true, None) => TaskEnd::Failed(format!("{} gave no result", member.name)),
            };
        }
        let repeats = completion.tool_calls.iter().all(|call| {
            made.iter()
                .any(|(tool, arguments)| *tool == call.name && *arguments == call.arguments)
        });
        if repeats {
            return match last_result {
                Some(result) => TaskEnd::Done(result),
                None => TaskEnd::Failed(format!(
                    "{} found no result: it repeated calls that had failed",
                    member.name
                )),
            };
        }
        made.extend(
            completion
                .tool_calls
                .iter()
                .map(|call| (call.name.clone(), call.arguments.clone())),
        );
        let mut assistant = Message::new(Role::Assistant, completion.content.clone());
        assistant.tool_calls = completion.tool_calls.clone();
        messages.push(assistant);
        for call in completion.tool_calls.iter().take(MAX_CALLS_PER_STEP) {
            if call.name == FORM_TEAM && work.may_delegate {
                let goal = serde_json::from_str::<Value>(&call.arguments)
                    .ok()
                    .and_then(|v| v["goal"].as_str().map(str::to_owned))
                    .filter(|g| !g.trim().is_empty())
                    .unwrap_or_else(|| work.task.to_owned());
                return TaskEnd::Delegate(goal);
            }
            let answer = match run_tool(&work, &call.name, &call.arguments).await {
                Ok(record) => {
                    report(Step {
                        text: format!(
                            "{} called {}: {}",
                            member.name,
                            record.tool,
                            excerpt(&record.result, 200)
                        ),
                        call: Some(record.clone()),
                    });
                    if !record.is_error {
                        last_result = Some(record.result.clone());
                    }
                    record.result
                }
                Err(ToolStop::Refused(why)) => why,
                Err(ToolStop::Limit(limit)) => return limit_end(limit, last_result),
                Err(ToolStop::Unreachable(why)) => return TaskEnd::Failed(why),
            };
            let mut tool_message = Message::new(Role::Tool, truncated(answer, result_room));
            tool_message.tool_call_id = Some(call.id.clone());
            messages.push(tool_message);
        }
        // Calls past the step's bound are answered so the model knows.
        for call in completion.tool_calls.iter().skip(MAX_CALLS_PER_STEP) {
            let mut skipped = Message::new(
                Role::Tool,
                format!("not run: at most {MAX_CALLS_PER_STEP} calls per step"),
            );
            skipped.tool_call_id = Some(call.id.clone());
            messages.push(skipped);
        }
    }
    match last_result {
        Some(result) => TaskEnd::Done(result),
        None => TaskEnd::Failed(format!(
            "{} found no result in {MAX_TASK_STEPS} steps",
            member.name
        )),
    }
}

fn limit_end(limit: Limit, last_result: Option<String>) -> TaskEnd {
    let why = format!("stopped: the goal's {} limit was hit", limit.as_str());
    match last_result {
        Some(result) => TaskEnd::Done(format!("{result} ({why})")),
        None => TaskEnd::Failed(why),
    }
}

/// Why a tool call of a task gave no result.
enum ToolStop {
    /// The call was refused for reasons the model can fix (unknown tool,
    /// bad arguments); this goes back to the model.
    Refused(String),
    /// A limit of the goal stops the task.
    Limit(Limit),
    /// The agent or its node cannot be reached: the task fails.
    Unreachable(String),
}

/// Runs one tool call of the member, under the goal's budget.
async fn run_tool(
    work: &Work<'_>,
    tool: &str,
    arguments: &str,
) -> Result<ToolCallRecord, ToolStop> {
    let member = work.member;
    if !member.tools.iter().any(|t| t.name == tool) {
        return Err(ToolStop::Refused(format!(
            "{} has no tool {:?}; its tools are {}",
            member.name,
            excerpt(tool, 60),
            member
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let parsed: Value = match serde_json::from_str(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => {
            return Err(ToolStop::Refused(
                "the arguments must be a JSON object matching the tool's schema".into(),
            ));
        }
    };
    work.budget.take_tool_call().map_err(ToolStop::Limit)?;
    let hop = Hop {
        depth: 1,
        deadline: work.budget.deadline,
    };
    let started = Instant::now();
    match work.directory.call(member, tool, arguments, hop).await {
        Ok(answered) => {
            let output = &answered.output;
            let mut text = output.text();
            if text.is_empty()
                && let Some(structured) = &output.structured_content
            {
                text = structured.to_string();
            }
            Ok(ToolCallRecord {
                tool: tool.to_owned(),
                arguments: parsed,
                result: truncated(text, MAX_RESULT_KEPT),
                is_error: output.is_error,
                node: answered.node,
                millis: started.elapsed().as_millis() as u64,
            })
        }
        Err(PeerFailure::InvalidArguments(why)) => Err(ToolStop::Refused(format!(
            "invalid arguments for {tool}: {why}"
        ))),
        Err(PeerFailure::UnknownTool(name)) => Err(ToolStop::Refused(format!(
            "{} has no tool {name:?}",
            member.name
        ))),
        Err(PeerFailure::DeadlineExceeded(_)) if Instant::now() >= work.budget.deadline => {
            Err(ToolStop::Limit(Limit::Deadline))
        }
        Err(failure) => Err(ToolStop::Unreachable(format!(
            "{}'s {tool} could not be run: {failure}",
            member.name
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_must_name_members_and_known_tasks() {
        let names = ["text", "calculator"];
        let turn = check_turn(
            json!({"type": "assign_async", "text": "split", "tasks": [{"assignee": "text", "task": "count"}], "next": "calculator"}),
            &TurnKind::ALL,
            &names,
            &[],
        )
        .unwrap();
        assert_eq!(turn.kind, TurnKind::AssignAsync);
        assert_eq!(turn.tasks, [("text".to_owned(), "count".to_owned())]);
        assert_eq!(turn.next.as_deref(), Some("calculator"));
        let bad = [
            json!({"type": "assign_sync", "text": "x", "tasks": [], "next": "text"}),
            json!({"type": "assign_sync", "text": "x", "tasks": [{"assignee": "mallory", "task": "go"}], "next": "text"}),
            json!({"type": "pause", "text": "wait", "tasks": [], "wait_for": [9], "next": "text"}),
            json!({"type": "discussion", "text": "  ", "tasks": [], "next": "text"}),
            json!({"type": "shout", "text": "x", "tasks": [], "next": "text"}),
        ];
        for value in bad {
            assert!(
                check_turn(value.clone(), &TurnKind::ALL, &names, &[1]).is_err(),
                "{value}"
            );
        }
        let only_conclude = check_turn(
            json!({"type": "discussion", "text": "x", "tasks": [], "next": "text"}),
            &[TurnKind::Conclude],
            &names,
            &[],
        );
        assert!(only_conclude.unwrap_err().contains("conclude"));
    }
}
