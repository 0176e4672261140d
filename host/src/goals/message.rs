//! What a goal is made of, as it is stored and streamed: the goal's record
//! and the typed messages of its conversation.
//!
//! Messages are numbered in the order they happened across the whole goal;
//! a message of a sub-team names the task it works on (`team`), so the
//! transcript is a tree whose root is the main team.

use super::config::GoalLimits;
use crate::AgentId;
use crate::agent::tool::ToolSpec;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A goal's id: `g` and 16 hex digits, random.
pub type GoalId = String;

/// Makes a fresh goal id.
pub fn new_goal_id() -> GoalId {
    let mut bytes = [0u8; 8];
    // The OS's randomness; a clock-derived id would do if it ever failed.
    if getrandom::fill(&mut bytes).is_err() {
        bytes = (unix_millis() ^ 0x9e37_79b9_7f4a_7c15).to_le_bytes();
    }
    format!("g{}", hex::encode(bytes))
}

/// Whether `text` has the form of a goal id.
pub fn is_goal_id(text: &str) -> bool {
    text.len() == 17
        && text.starts_with('g')
        && text[1..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

pub use crate::clock::unix_millis;

/// Where a goal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalState {
    /// The team is being formed.
    Forming,
    /// The team is talking and working.
    Running,
    /// The team did what the goal asked and wrote its conclusion.
    Concluded,
    /// The team did part of what the goal asked: the conclusion states
    /// what was found and names each part not done, with why.
    Partial,
    /// A limit (`reason` names it) stopped the work before it was done;
    /// the conclusion says what was found.
    Stopped,
    /// It ended without a conclusion (no team could be formed, the model
    /// failed turn after turn).
    Failed,
    /// A person stopped it.
    Cancelled,
    /// The node stopped while it ran; a person's message resumes it.
    Interrupted,
}

impl GoalState {
    pub fn as_str(self) -> &'static str {
        match self {
            GoalState::Forming => "forming",
            GoalState::Running => "running",
            GoalState::Concluded => "concluded",
            GoalState::Partial => "partial",
            GoalState::Stopped => "stopped",
            GoalState::Failed => "failed",
            GoalState::Cancelled => "cancelled",
            GoalState::Interrupted => "interrupted",
        }
    }

    /// Whether the goal is being worked on now.
    pub fn is_active(self) -> bool {
        matches!(self, GoalState::Forming | GoalState::Running)
    }
}

/// What a goal used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalUsage {
    pub turns: u32,
    pub tokens: u64,
    pub tool_calls: u32,
    pub tasks: u32,
}

/// A goal as `agentsite goals` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalRecord {
    pub id: GoalId,
    pub text: String,
    pub state: GoalState,
    /// Unix milliseconds.
    pub created_at: u64,
    pub updated_at: u64,
    /// Names of the main team's members.
    pub team: Vec<String>,
    /// The node's model that speaks for the members.
    pub model: String,
    pub limits: GoalLimits,
    /// All rounds together.
    pub usage: GoalUsage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<String>,
    /// Why it ended as it did, when not by a conclusion of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who gave it: its share of the goals the node keeps is counted
    /// against them (empty for goals kept before the node recorded it).
    #[serde(default)]
    pub requester: crate::requester::Requester,
    /// How its members' answers from other nodes are checked.
    #[serde(default)]
    pub verify: super::config::Verify,
}

/// A member of a team: an agent, where it lives, and why it was chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Member {
    /// The agent's name (made unique within the team).
    pub name: String,
    pub agent: AgentId,
    /// The peer id of the node it is called on, as known when the team
    /// was formed; each tool call names the node that answered it.
    pub node: String,
    /// Whether it is installed on this node.
    pub local: bool,
    pub description: String,
    pub tools: Vec<ToolSpec>,
    pub reason: String,
}

/// Who said a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Speaker {
    /// The person who gave the goal.
    Person,
    /// The node itself: the team it formed, limits, failures.
    Node,
    /// A member of a team, speaking through the node's model.
    Member {
        name: String,
        agent: AgentId,
        node: String,
    },
}

impl Speaker {
    pub fn of(member: &Member) -> Speaker {
        Speaker::Member {
            name: member.name.clone(),
            agent: member.agent,
            node: member.node.clone(),
        }
    }

    /// The speaker's name as a transcript shows it.
    pub fn name(&self) -> &str {
        match self {
            Speaker::Person => "person",
            Speaker::Node => "node",
            Speaker::Member { name, .. } => name,
        }
    }
}

/// A task as it was assigned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assigned {
    pub task: u32,
    pub assignee: String,
    pub text: String,
}

/// One tool call of a member, with where it ran and what it returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    pub tool: String,
    pub arguments: Value,
    /// The result's text (bounded), or why the call failed.
    pub result: String,
    pub is_error: bool,
    /// The peer id of the node that ran it.
    pub node: String,
    pub millis: u64,
    /// That node's signed receipt, when another node ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Box<crate::receipt::Receipt>>,
    /// What checking the answer found, when it was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Box<StepCheck>>,
}

/// What checking a step's answer from another node found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepCheck {
    pub outcome: CheckOutcome,
    /// Where the call ran again, or why it could not.
    pub detail: String,
    /// Nodes caught answering this step wrongly before this answer: each
    /// blocked, its receipt kept as evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caught: Vec<String>,
}

/// How a check of an answer came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckOutcome {
    /// Run again, the same result.
    Confirmed,
    /// Run again, another result: this answer was not used.
    Refuted,
    /// It could not be checked (see the detail).
    Unchecked,
}

/// What a message says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", from = "StoredBody")]
pub enum Body {
    /// The goal, from the person.
    Goal { text: String },
    /// A person's message during or after the goal.
    Say { text: String },
    /// The team that was formed, with the queries that found it.
    Team {
        members: Vec<Member>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        queries: Vec<String>,
    },
    /// Tasks handed to members: the part of the goal they serve.
    Assign { text: String, tasks: Vec<Assigned> },
    /// A step of a task: a tool call, or a sub-team formed for it.
    Progress {
        task: u32,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call: Option<ToolCallRecord>,
    },
    /// How a task ended.
    Result { task: u32, ok: bool, text: String },
    /// Something went wrong that the goal survives (a turn the model could
    /// not take) or that ends it.
    Failure { text: String },
    /// A note of the node: a limit hit, a cancel, a restart.
    Notice { text: String },
    /// The team's conclusion; `limit` names the limit that forced it.
    Conclusion {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<String>,
    },
}

/// A message's body as goal stores hold it: today's kinds, and those the
/// conversation of turns wrote before the steps replaced it (a member's
/// discussion, a pause for tasks), which read back as notices. An
/// assignment's `mode` of then is ignored.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StoredBody {
    Goal {
        text: String,
    },
    Say {
        text: String,
    },
    Team {
        members: Vec<Member>,
        #[serde(default)]
        queries: Vec<String>,
    },
    Discussion {
        text: String,
    },
    Assign {
        text: String,
        tasks: Vec<Assigned>,
    },
    Pause {
        text: String,
        tasks: Vec<u32>,
    },
    Progress {
        task: u32,
        text: String,
        #[serde(default)]
        call: Option<ToolCallRecord>,
    },
    Result {
        task: u32,
        ok: bool,
        text: String,
    },
    Failure {
        text: String,
    },
    Notice {
        text: String,
    },
    Conclusion {
        text: String,
        #[serde(default)]
        limit: Option<String>,
    },
}

impl From<StoredBody> for Body {
    fn from(stored: StoredBody) -> Body {
        match stored {
            StoredBody::Goal { text } => Body::Goal { text },
            StoredBody::Say { text } => Body::Say { text },
            StoredBody::Team { members, queries } => Body::Team { members, queries },
            StoredBody::Discussion { text } => Body::Notice { text },
            StoredBody::Assign { text, tasks } => Body::Assign { text, tasks },
            StoredBody::Pause { text, tasks } => {
                let tasks: Vec<String> = tasks.iter().map(|t| format!("#{t}")).collect();
                Body::Notice {
                    text: format!("waited for {}: {text}", tasks.join(", ")),
                }
            }
            StoredBody::Progress { task, text, call } => Body::Progress { task, text, call },
            StoredBody::Result { task, ok, text } => Body::Result { task, ok, text },
            StoredBody::Failure { text } => Body::Failure { text },
            StoredBody::Notice { text } => Body::Notice { text },
            StoredBody::Conclusion { text, limit } => Body::Conclusion { text, limit },
        }
    }
}

impl Body {
    /// The message type as the API names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Body::Goal { .. } => "goal",
            Body::Say { .. } => "say",
            Body::Team { .. } => "team",
            Body::Assign { .. } => "assign",
            Body::Progress { .. } => "progress",
            Body::Result { .. } => "result",
            Body::Failure { .. } => "failure",
            Body::Notice { .. } => "notice",
            Body::Conclusion { .. } => "conclusion",
        }
    }
}

/// One message of a goal's conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Its place in the goal, from 1.
    pub seq: u64,
    /// Unix milliseconds.
    pub at: u64,
    /// The task a sub-team works on; `None` for the main team.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<u32>,
    pub speaker: Speaker,
    #[serde(flatten)]
    pub body: Body,
    /// Who speaks next, when the speaker named someone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

impl Message {
    /// The message in one line of at most `max` bytes (who, what kind, what
    /// it says), for a progress notification or a log line.
    pub fn summary(&self, max: usize) -> String {
        let text = match &self.body {
            Body::Goal { text }
            | Body::Say { text }
            | Body::Failure { text }
            | Body::Notice { text }
            | Body::Conclusion { text, .. } => text.clone(),
            Body::Team { members, .. } => {
                let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
                names.join(", ")
            }
            Body::Assign { tasks, .. } => {
                let tasks: Vec<String> = tasks
                    .iter()
                    .map(|t| format!("#{} {}: {}", t.task, t.assignee, t.text))
                    .collect();
                tasks.join("; ")
            }
            Body::Progress { task, text, .. } => format!("#{task} {text}"),
            Body::Result { task, ok, text } => {
                let how = if *ok { "done" } else { "failed" };
                format!("#{task} {how}: {text}")
            }
        };
        let line = format!("{} [{}] {text}", self.speaker.name(), self.body.kind());
        crate::text::one_line(&line, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goal_ids_are_fresh_and_recognisable() {
        let (a, b) = (new_goal_id(), new_goal_id());
        assert_ne!(a, b);
        assert!(is_goal_id(&a), "{a}");
        assert!(!is_goal_id("g123"));
        assert!(!is_goal_id("calculator"));
    }

    #[test]
    fn messages_read_back_as_written() {
        let message = Message {
            seq: 3,
            at: 1,
            team: Some(2),
            speaker: Speaker::Node,
            body: Body::Assign {
                text: "split".into(),
                tasks: vec![Assigned {
                    task: 1,
                    assignee: "text".into(),
                    text: "count".into(),
                }],
            },
            next: Some("calculator".into()),
        };
        let json = serde_json::to_value(&message).unwrap();
        assert_eq!(json["type"], "assign");
        assert_eq!(json["speaker"]["kind"], "node");
        let back: Message = serde_json::from_value(json).unwrap();
        assert_eq!(back, message);
    }

    #[test]
    fn messages_of_the_conversation_of_turns_still_load() {
        let stored = [
            r#"{"seq":4,"at":1,"speaker":{"kind":"node"},"type":"assign","mode":"async","text":"split","tasks":[{"task":1,"assignee":"text","text":"count"}]}"#,
            r#"{"seq":5,"at":1,"speaker":{"kind":"node"},"type":"pause","text":"the counts","tasks":[1,2]}"#,
            r#"{"seq":6,"at":1,"speaker":{"kind":"node"},"type":"discussion","text":"I will count."}"#,
        ];
        let read: Vec<Body> = stored
            .iter()
            .map(|s| serde_json::from_str::<Message>(s).unwrap().body)
            .collect();
        assert!(matches!(&read[0], Body::Assign { text, .. } if text == "split"));
        assert_eq!(
            read[1],
            Body::Notice {
                text: "waited for #1, #2: the counts".into()
            }
        );
        assert_eq!(
            read[2],
            Body::Notice {
                text: "I will count.".into()
            }
        );
    }
}
