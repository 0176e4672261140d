//! A2A 0.3's JSON-RPC binding, which many agents and clients still speak:
//! its method names (`message/send`, `tasks/get`, ...), and its messages,
//! tasks and events as JSON (a `kind` on each, lower-case roles and
//! states, results not wrapped), converted to and from the 1.0 data model
//! ([`wire`]) that both of the node's sides work in.
//!
//! A 0.3 client sends no `A2A-Version` header (1.0 says to read its
//! absence as 0.3) or `0.3`; the method names tell the two apart as well.
//! What 0.3 has and 1.0 lacks, or the other way round, is said where it is
//! dropped: file parts carry their bytes base64'd in 0.3, raw in 1.0; a
//! 0.3 data part is a JSON object, so other JSON is wrapped as
//! `{"value": ...}`.

use crate::a2a::wire::{self, PartContent};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// The protocol version this binding is.
pub const VERSION: &str = "0.3.0";

/// A2A 0.3's JSON-RPC method names.
pub mod methods {
    pub const SEND: &str = "message/send";
    pub const STREAM: &str = "message/stream";
    pub const GET: &str = "tasks/get";
    pub const CANCEL: &str = "tasks/cancel";
    pub const RESUBSCRIBE: &str = "tasks/resubscribe";
    pub const SET_PUSH_CONFIG: &str = "tasks/pushNotificationConfig/set";
    pub const GET_PUSH_CONFIG: &str = "tasks/pushNotificationConfig/get";
    pub const LIST_PUSH_CONFIGS: &str = "tasks/pushNotificationConfig/list";
    pub const DELETE_PUSH_CONFIG: &str = "tasks/pushNotificationConfig/delete";
    pub const EXTENDED_CARD: &str = "agent/getAuthenticatedExtendedCard";
}

/// Whether `method` is one of A2A 0.3's.
pub fn is_method(method: &str) -> bool {
    use methods::*;
    [
        SEND,
        STREAM,
        GET,
        CANCEL,
        RESUBSCRIBE,
        SET_PUSH_CONFIG,
        GET_PUSH_CONFIG,
        LIST_PUSH_CONFIGS,
        DELETE_PUSH_CONFIG,
        EXTENDED_CARD,
    ]
    .contains(&method)
}

/// Whether the `A2A-Version` header `version` (absent: `None`) asks for
/// 0.3: absent, or 0.x.
pub fn is_version(version: Option<&str>) -> bool {
    match version.map(str::trim) {
        None | Some("") => true,
        Some(version) => version.split('.').next() == Some("0"),
    }
}

/// The `kind` a 0.3 object carries, checked when read.
macro_rules! kind {
    ($name:ident = $value:literal) => {
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub enum $name {
            #[default]
            #[serde(rename = $value)]
            Is,
        }
    };
}
kind!(MessageKind = "message");
kind!(TaskKind = "task");
kind!(StatusUpdateKind = "status-update");
kind!(ArtifactUpdateKind = "artifact-update");

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Agent,
}

/// A message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub kind: MessageKind,
    pub message_id: String,
    pub role: Role,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_task_ids: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<String>>,
}

/// A part of a message or artifact, told apart by its `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Part {
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<Map<String, Value>>,
    },
    Data {
        data: Map<String, Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<Map<String, Value>>,
    },
    File {
        file: File,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<Map<String, Value>>,
    },
}

/// A file part's file: its bytes (base64) or where it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct File {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}

/// A task's state, in 0.3's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Canceled,
    Failed,
    Rejected,
    AuthRequired,
    Unknown,
}

/// Where a task is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// A task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub kind: TaskKind,
    pub id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<Artifact>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Message>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// What a task made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub artifact_id: String,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<String>>,
}

/// A task's status changed; `final` on the last event of a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusUpdate {
    pub kind: StatusUpdateKind,
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(rename = "final")]
    pub is_final: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A task made (part of) an artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactUpdate {
    pub kind: ArtifactUpdateKind,
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_chunk: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// The result of `message/send`, or one event of `message/stream`: a 0.3
/// result is the object itself, told apart by its `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Event {
    Task(Task),
    Message(Message),
    StatusUpdate(StatusUpdate),
    ArtifactUpdate(ArtifactUpdate),
}

/// `message/send`'s and `message/stream`'s parameters.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendParams {
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// How a client wants `message/send` answered.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_output_modes: Option<Vec<String>>,
    /// False: answer at once with the task started (1.0's
    /// `returnImmediately`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
}

/// `tasks/get`'s parameters.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryParams {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
}

/// `tasks/cancel`'s and `tasks/resubscribe`'s parameters.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdParams {
    pub id: String,
}

/// Adds to `card`, a 1.0 Agent Card as JSON, the fields a 0.3 client
/// reads it by, from its first 0.3 interface (none: nothing is added):
/// `protocolVersion`, `url`, `preferredTransport`, the other 0.3
/// interfaces as `additionalInterfaces`, and `security` (1.0's
/// `securityRequirements`, which has 0.3's shape). A field the card has
/// already is left as it is.
pub fn add_card_fields(card: &mut Value) {
    let Some(object) = card.as_object_mut() else {
        return;
    };
    let legacy: Vec<Value> = object
        .get("supportedInterfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|i| {
            let version = i.get("protocolVersion").and_then(Value::as_str);
            is_version(version)
        })
        .cloned()
        .collect();
    let Some((primary, others)) = legacy.split_first() else {
        return;
    };
    let field = |name: &str| primary.get(name).cloned().unwrap_or(Value::Null);
    let mut added = vec![
        ("protocolVersion", Value::from(VERSION)),
        ("url", field("url")),
        ("preferredTransport", field("protocolBinding")),
    ];
    if !others.is_empty() {
        let others = others
            .iter()
            .map(|i| {
                serde_json::json!({
                    "url": i.get("url").cloned().unwrap_or(Value::Null),
                    "transport": i.get("protocolBinding").cloned().unwrap_or(Value::Null),
                })
            })
            .collect();
        added.push(("additionalInterfaces", Value::Array(others)));
    }
    if let Some(requirements) = object.get("securityRequirements").cloned() {
        added.push(("security", requirements));
    }
    for (name, value) in added {
        object.entry(name).or_insert(value);
    }
}

/// The fields of a 0.3 Agent Card the node reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Card {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    version: String,
    url: String,
    #[serde(default)]
    preferred_transport: Option<String>,
    #[serde(default)]
    additional_interfaces: Vec<Interface>,
    #[serde(default)]
    capabilities: Capabilities,
    #[serde(default)]
    default_input_modes: Vec<String>,
    #[serde(default)]
    default_output_modes: Vec<String>,
    #[serde(default)]
    skills: Vec<Skill>,
    #[serde(default)]
    documentation_url: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Interface {
    url: String,
    transport: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Capabilities {
    #[serde(default)]
    streaming: Option<bool>,
    #[serde(default)]
    push_notifications: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Skill {
    id: String,
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    examples: Option<Vec<String>>,
}

/// A 0.3 Agent Card, `raw`, as the 1.0 card the node reads cards as, and
/// its JSON-RPC endpoint (the card's `url` when its preferred transport is
/// JSON-RPC, the default, else an additional interface that is); `None`
/// when it is not a 0.3 card or offers no JSON-RPC endpoint.
pub fn read_card(raw: &Value) -> Option<(wire::AgentCard, String)> {
    let card = Card::deserialize(raw).ok()?;
    let jsonrpc = |transport: &str| transport.eq_ignore_ascii_case(wire::JSONRPC);
    let endpoint = if card.preferred_transport.as_deref().is_none_or(jsonrpc) {
        card.url.clone()
    } else {
        card.additional_interfaces
            .iter()
            .find(|i| jsonrpc(&i.transport))?
            .url
            .clone()
    };
    let mut interface = wire::AgentInterface::new(endpoint.clone(), wire::JSONRPC);
    interface.protocol_version = VERSION.to_owned();
    let core = wire::AgentCard {
        name: card.name,
        description: card.description,
        version: card.version,
        supported_interfaces: vec![interface],
        capabilities: wire::AgentCapabilities {
            streaming: card.capabilities.streaming,
            push_notifications: card.capabilities.push_notifications,
            extensions: None,
            extended_agent_card: None,
        },
        default_input_modes: card.default_input_modes,
        default_output_modes: card.default_output_modes,
        skills: card
            .skills
            .into_iter()
            .map(|skill| wire::AgentSkill {
                id: skill.id,
                name: skill.name,
                description: skill.description,
                tags: skill.tags,
                examples: skill.examples,
                input_modes: None,
                output_modes: None,
                security_requirements: None,
            })
            .collect(),
        provider: None,
        documentation_url: card.documentation_url,
        icon_url: None,
        security_schemes: None,
        security_requirements: None,
        signatures: None,
    };
    Some((core, endpoint))
}

// ---- 0.3 to 1.0 ----

impl From<Role> for wire::Role {
    fn from(role: Role) -> Self {
        match role {
            Role::User => wire::Role::User,
            Role::Agent => wire::Role::Agent,
        }
    }
}

impl From<Part> for wire::Part {
    fn from(part: Part) -> Self {
        let (content, filename, media_type, metadata) = match part {
            Part::Text { text, metadata } => (PartContent::Text(text), None, None, metadata),
            Part::Data { data, metadata } => (
                PartContent::Data(Value::Object(data)),
                None,
                Some("application/json".to_owned()),
                metadata,
            ),
            Part::File { file, metadata } => {
                let content = match (file.bytes, file.uri) {
                    // Bytes that are not base64 are kept as they came:
                    // whoever reads the part sees what was sent.
                    (Some(bytes), _) => match B64.decode(&bytes) {
                        Ok(raw) => PartContent::Raw(raw),
                        Err(_) => PartContent::Raw(bytes.into_bytes()),
                    },
                    (None, Some(uri)) => PartContent::Url(uri),
                    (None, None) => PartContent::Raw(Vec::new()),
                };
                (content, file.name, file.mime_type, metadata)
            }
        };
        wire::Part {
            content,
            filename,
            media_type,
            metadata: metadata.map(into_map),
        }
    }
}

impl From<Message> for wire::Message {
    fn from(message: Message) -> Self {
        wire::Message {
            message_id: message.message_id,
            context_id: message.context_id,
            task_id: message.task_id,
            role: message.role.into(),
            parts: message.parts.into_iter().map(Into::into).collect(),
            metadata: message.metadata.map(into_map),
            extensions: message.extensions,
            reference_task_ids: message.reference_task_ids,
        }
    }
}

impl From<TaskState> for wire::TaskState {
    fn from(state: TaskState) -> Self {
        match state {
            TaskState::Submitted => wire::TaskState::Submitted,
            TaskState::Working => wire::TaskState::Working,
            TaskState::InputRequired => wire::TaskState::InputRequired,
            TaskState::Completed => wire::TaskState::Completed,
            TaskState::Canceled => wire::TaskState::Canceled,
            TaskState::Failed => wire::TaskState::Failed,
            TaskState::Rejected => wire::TaskState::Rejected,
            TaskState::AuthRequired => wire::TaskState::AuthRequired,
            TaskState::Unknown => wire::TaskState::Unspecified,
        }
    }
}

impl From<TaskStatus> for wire::TaskStatus {
    fn from(status: TaskStatus) -> Self {
        wire::TaskStatus {
            state: status.state.into(),
            message: status.message.map(Into::into),
            timestamp: status
                .timestamp
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok())
                .map(|t| t.with_timezone(&chrono::Utc)),
        }
    }
}

impl From<Artifact> for wire::Artifact {
    fn from(artifact: Artifact) -> Self {
        wire::Artifact {
            artifact_id: artifact.artifact_id,
            name: artifact.name,
            description: artifact.description,
            parts: artifact.parts.into_iter().map(Into::into).collect(),
            metadata: artifact.metadata.map(into_map),
            extensions: artifact.extensions,
        }
    }
}

impl From<Task> for wire::Task {
    fn from(task: Task) -> Self {
        wire::Task {
            id: task.id,
            context_id: task.context_id,
            status: task.status.into(),
            artifacts: each(task.artifacts),
            history: each(task.history),
            metadata: task.metadata.map(into_map),
        }
    }
}

impl From<Event> for wire::StreamResponse {
    fn from(event: Event) -> Self {
        match event {
            Event::Task(task) => wire::StreamResponse::Task(task.into()),
            Event::Message(message) => wire::StreamResponse::Message(message.into()),
            Event::StatusUpdate(update) => {
                wire::StreamResponse::StatusUpdate(wire::TaskStatusUpdateEvent {
                    task_id: update.task_id,
                    context_id: update.context_id,
                    status: update.status.into(),
                    metadata: update.metadata.map(into_map),
                })
            }
            Event::ArtifactUpdate(update) => {
                wire::StreamResponse::ArtifactUpdate(wire::TaskArtifactUpdateEvent {
                    task_id: update.task_id,
                    context_id: update.context_id,
                    artifact: update.artifact.into(),
                    append: update.append,
                    last_chunk: update.last_chunk,
                    metadata: update.metadata.map(into_map),
                })
            }
        }
    }
}

impl From<SendParams> for wire::SendMessageRequest {
    fn from(params: SendParams) -> Self {
        let configuration = params
            .configuration
            .map(|c| wire::SendMessageConfiguration {
                accepted_output_modes: c.accepted_output_modes,
                task_push_notification_config: None,
                history_length: c.history_length,
                return_immediately: c.blocking.map(|blocking| !blocking),
            });
        wire::SendMessageRequest {
            message: params.message.into(),
            configuration,
            metadata: params.metadata.map(into_map),
            tenant: None,
        }
    }
}

// ---- 1.0 to 0.3 ----

impl From<wire::Role> for Role {
    fn from(role: wire::Role) -> Self {
        match role {
            wire::Role::Agent => Role::Agent,
            wire::Role::User | wire::Role::Unspecified => Role::User,
        }
    }
}

impl From<wire::Part> for Part {
    fn from(part: wire::Part) -> Self {
        let metadata = part.metadata.map(from_map);
        match part.content {
            PartContent::Text(text) => Part::Text { text, metadata },
            PartContent::Data(Value::Object(data)) => Part::Data { data, metadata },
            PartContent::Data(other) => Part::Data {
                data: Map::from_iter([("value".to_owned(), other)]),
                metadata,
            },
            PartContent::Raw(bytes) => Part::File {
                file: File {
                    name: part.filename,
                    mime_type: part.media_type,
                    bytes: Some(B64.encode(bytes)),
                    uri: None,
                },
                metadata,
            },
            PartContent::Url(uri) => Part::File {
                file: File {
                    name: part.filename,
                    mime_type: part.media_type,
                    bytes: None,
                    uri: Some(uri),
                },
                metadata,
            },
        }
    }
}

impl From<wire::Message> for Message {
    fn from(message: wire::Message) -> Self {
        Message {
            kind: MessageKind::Is,
            message_id: message.message_id,
            role: message.role.into(),
            parts: message.parts.into_iter().map(Into::into).collect(),
            context_id: message.context_id,
            task_id: message.task_id,
            reference_task_ids: message.reference_task_ids,
            metadata: message.metadata.map(from_map),
            extensions: message.extensions,
        }
    }
}

impl From<wire::TaskState> for TaskState {
    fn from(state: wire::TaskState) -> Self {
        match state {
            wire::TaskState::Submitted => TaskState::Submitted,
            wire::TaskState::Working => TaskState::Working,
            wire::TaskState::InputRequired => TaskState::InputRequired,
            wire::TaskState::Completed => TaskState::Completed,
            wire::TaskState::Canceled => TaskState::Canceled,
            wire::TaskState::Failed => TaskState::Failed,
            wire::TaskState::Rejected => TaskState::Rejected,
            wire::TaskState::AuthRequired => TaskState::AuthRequired,
            wire::TaskState::Unspecified => TaskState::Unknown,
        }
    }
}

impl From<wire::TaskStatus> for TaskStatus {
    fn from(status: wire::TaskStatus) -> Self {
        TaskStatus {
            state: status.state.into(),
            message: status.message.map(Into::into),
            timestamp: status.timestamp.map(|t| t.to_rfc3339()),
        }
    }
}

impl From<wire::Artifact> for Artifact {
    fn from(artifact: wire::Artifact) -> Self {
        Artifact {
            artifact_id: artifact.artifact_id,
            parts: artifact.parts.into_iter().map(Into::into).collect(),
            name: artifact.name,
            description: artifact.description,
            metadata: artifact.metadata.map(from_map),
            extensions: artifact.extensions,
        }
    }
}

impl From<wire::Task> for Task {
    fn from(task: wire::Task) -> Self {
        Task {
            kind: TaskKind::Is,
            id: task.id,
            context_id: task.context_id,
            status: task.status.into(),
            artifacts: each(task.artifacts),
            history: each(task.history),
            metadata: task.metadata.map(from_map),
        }
    }
}

impl From<wire::SendMessageResponse> for Event {
    fn from(response: wire::SendMessageResponse) -> Self {
        match response {
            wire::SendMessageResponse::Task(task) => Event::Task(task.into()),
            wire::SendMessageResponse::Message(message) => Event::Message(message.into()),
        }
    }
}

impl From<wire::StreamResponse> for Event {
    /// One event of a stream; a status update is `final` when its state
    /// is settled (where a 1.0 stream ends too).
    fn from(event: wire::StreamResponse) -> Self {
        match event {
            wire::StreamResponse::Task(task) => Event::Task(task.into()),
            wire::StreamResponse::Message(message) => Event::Message(message.into()),
            wire::StreamResponse::StatusUpdate(update) => Event::StatusUpdate(StatusUpdate {
                kind: StatusUpdateKind::Is,
                is_final: wire::is_settled(&update.status.state),
                task_id: update.task_id,
                context_id: update.context_id,
                status: update.status.into(),
                metadata: update.metadata.map(from_map),
            }),
            wire::StreamResponse::ArtifactUpdate(update) => Event::ArtifactUpdate(ArtifactUpdate {
                kind: ArtifactUpdateKind::Is,
                task_id: update.task_id,
                context_id: update.context_id,
                artifact: update.artifact.into(),
                append: update.append,
                last_chunk: update.last_chunk,
                metadata: update.metadata.map(from_map),
            }),
        }
    }
}

impl From<wire::SendMessageRequest> for SendParams {
    fn from(request: wire::SendMessageRequest) -> Self {
        SendParams {
            message: request.message.into(),
            configuration: request.configuration.map(|c| SendConfiguration {
                accepted_output_modes: c.accepted_output_modes,
                blocking: c.return_immediately.map(|now| !now),
                history_length: c.history_length,
            }),
            metadata: request.metadata.map(from_map),
        }
    }
}

/// Every item of a list that may be absent, in the other version's type.
fn each<A: Into<B>, B>(items: Option<Vec<A>>) -> Option<Vec<B>> {
    items.map(|items| items.into_iter().map(Into::into).collect())
}

fn into_map(map: Map<String, Value>) -> HashMap<String, Value> {
    map.into_iter().collect()
}

fn from_map(map: HashMap<String, Value>) -> Map<String, Value> {
    map.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_0_3_message_reads_into_1_0_and_back() {
        let sent = json!({
            "kind": "message", "messageId": "m1", "role": "user", "contextId": "c1",
            "parts": [
                {"kind": "text", "text": "add 2 and 3"},
                {"kind": "data", "data": {"a": 2}},
                {"kind": "file", "file": {"name": "n.txt", "mimeType": "text/plain", "bytes": "aGk="}}
            ]
        });
        let message: Message = serde_json::from_value(sent.clone()).unwrap();
        let core: wire::Message = message.into();
        assert_eq!(core.role, wire::Role::User);
        assert_eq!(wire::text(&core), "add 2 and 3");
        assert_eq!(core.parts[2].content, PartContent::Raw(b"hi".to_vec()));
        let back: Message = core.into();
        assert_eq!(serde_json::to_value(back).unwrap(), sent);
    }

    #[test]
    fn a_1_0_task_is_written_as_0_3_writes_it() {
        let task = wire::Task {
            id: "t1".into(),
            context_id: "c1".into(),
            status: wire::TaskStatus {
                state: wire::TaskState::InputRequired,
                message: None,
                timestamp: None,
            },
            artifacts: Some(vec![wire::Artifact {
                artifact_id: "a1".into(),
                name: Some("sum".into()),
                description: None,
                parts: vec![wire::Part::text("5"), wire::data_part(json!(5))],
                metadata: None,
                extensions: None,
            }]),
            history: None,
            metadata: None,
        };
        let written =
            serde_json::to_value(Event::from(wire::SendMessageResponse::Task(task))).unwrap();
        assert_eq!(
            written,
            json!({
                "kind": "task", "id": "t1", "contextId": "c1",
                "status": {"state": "input-required"},
                "artifacts": [{"artifactId": "a1", "name": "sum", "parts": [
                    {"kind": "text", "text": "5"},
                    {"kind": "data", "data": {"value": 5}}
                ]}]
            })
        );
    }

    #[test]
    fn a_stream_ends_on_the_status_update_marked_final() {
        let update = |state| {
            Event::from(wire::StreamResponse::StatusUpdate(
                wire::TaskStatusUpdateEvent {
                    task_id: "t".into(),
                    context_id: "c".into(),
                    status: wire::TaskStatus {
                        state,
                        message: None,
                        timestamp: None,
                    },
                    metadata: None,
                },
            ))
        };
        let working = serde_json::to_value(update(wire::TaskState::Working)).unwrap();
        assert_eq!(working["kind"], "status-update");
        assert_eq!(working["final"], false);
        let done = serde_json::to_value(update(wire::TaskState::Completed)).unwrap();
        assert_eq!(done["final"], true);
        assert_eq!(done["status"]["state"], "completed");
    }

    #[test]
    fn what_a_0_3_server_answers_is_read_by_its_kind() {
        let message = json!({"kind": "message", "messageId": "m", "role": "agent",
            "parts": [{"kind": "text", "text": "hi"}]});
        assert!(matches!(
            serde_json::from_value::<Event>(message).unwrap(),
            Event::Message(_)
        ));
        let task = json!({"kind": "task", "id": "t", "contextId": "c",
            "status": {"state": "completed"}});
        assert!(matches!(
            serde_json::from_value::<Event>(task).unwrap(),
            Event::Task(_)
        ));
        // A kind of 1.0's, or none, is not a 0.3 result.
        assert!(serde_json::from_value::<Event>(json!({"task": {}})).is_err());
    }

    #[test]
    fn a_card_with_a_0_3_interface_gets_the_fields_0_3_reads() {
        let mut card = json!({
            "name": "n",
            "supportedInterfaces": [
                {"url": "http://h/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": "http://h/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3.0"}
            ],
            "securityRequirements": [{"bearer": []}]
        });
        add_card_fields(&mut card);
        assert_eq!(card["protocolVersion"], "0.3.0");
        assert_eq!(card["url"], "http://h/a2a");
        assert_eq!(card["preferredTransport"], "JSONRPC");
        assert_eq!(card["security"], json!([{"bearer": []}]));
        assert!(card.get("additionalInterfaces").is_none());

        let mut only_1_0 = json!({"supportedInterfaces": [
            {"url": "http://h/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ]});
        add_card_fields(&mut only_1_0);
        assert!(only_1_0.get("url").is_none());
    }

    #[test]
    fn a_0_3_card_is_read_with_its_json_rpc_endpoint() {
        let card = json!({
            "protocolVersion": "0.3.0", "name": "Echo", "description": "echoes",
            "version": "1.0.0", "url": "http://h/rpc", "preferredTransport": "JSONRPC",
            "capabilities": {"streaming": true},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "echo", "name": "Echo", "description": "says it back", "tags": ["echo"]}]
        });
        let (core, endpoint) = read_card(&card).unwrap();
        assert_eq!(endpoint, "http://h/rpc");
        assert_eq!(core.skills[0].id, "echo");
        assert_eq!(core.supported_interfaces[0].protocol_version, VERSION);

        let grpc_first = json!({"name": "g", "url": "http://h/grpc", "preferredTransport": "GRPC",
            "additionalInterfaces": [{"url": "http://h/rpc", "transport": "JSONRPC"}]});
        assert_eq!(read_card(&grpc_first).unwrap().1, "http://h/rpc");
        let grpc_only = json!({"name": "g", "url": "http://h/grpc", "preferredTransport": "GRPC"});
        assert!(read_card(&grpc_only).is_none());
        assert!(read_card(&json!({"name": "no url"})).is_none());
    }

    #[test]
    fn the_version_header_says_0_3_when_absent_or_0_x() {
        assert!(is_version(None));
        assert!(is_version(Some("0.3")));
        assert!(is_version(Some("0.3.0")));
        assert!(!is_version(Some("1.0")));
        assert!(is_method("message/send"));
        assert!(!is_method("SendMessage"));
    }
}
