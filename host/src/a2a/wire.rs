//! The A2A v1.0 data model, from the protocol's own Rust types (`a2a-lf`,
//! the types crate of a2aproject/a2a-rs): messages, tasks, Agent Cards,
//! the JSON-RPC envelope, method names and error codes, written as the
//! JSON-RPC binding writes them (proto3's JSON mapping).
//!
//! What this module adds is what both of this node's sides read from
//! them: a message's text, a state in words, a card's JSON-RPC endpoint.
//! Every text and list that a peer or client hands over is bounded by
//! whoever reads it, not here.

pub use a2a_types::{
    A2AError, AgentCapabilities, AgentCard, AgentCardSignature, AgentInterface, AgentSkill,
    Artifact, CancelTaskRequest, GetTaskRequest, HttpAuthSecurityScheme, JsonRpcId, JsonRpcRequest,
    JsonRpcResponse, ListTasksRequest, ListTasksResponse, Message, Part, PartContent, Role,
    SecurityScheme, SendMessageConfiguration, SendMessageRequest, SendMessageResponse,
    StreamResponse, SubscribeToTaskRequest, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent, VERSION, error_code, methods, new_artifact_id, new_context_id,
    new_message_id, new_task_id,
};

/// The header that carries the protocol version, sent and checked.
pub const VERSION_HEADER: &str = a2a_types::SVC_PARAM_VERSION;
/// Where an agent's card is, below its base URL.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";
/// The binding this node serves and calls.
pub const JSONRPC: &str = a2a_types::TRANSPORT_PROTOCOL_JSONRPC;

/// The JSON-RPC binding a peer speaks: A2A 1.0's, or 0.3's (see
/// [`crate::a2a::v0_3`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    V1_0,
    V0_3,
}

impl Binding {
    /// The binding of the version an attachment recorded (none: 1.0).
    pub fn of_version(version: Option<&str>) -> Binding {
        match version {
            Some(version) if version.starts_with("0.") => Binding::V0_3,
            _ => Binding::V1_0,
        }
    }

    /// The version an attachment records for this binding.
    pub fn version(self) -> Option<String> {
        match self {
            Binding::V1_0 => None,
            Binding::V0_3 => Some(crate::a2a::v0_3::VERSION.to_owned()),
        }
    }
}

/// The message's text parts, one after another.
pub fn text(message: &Message) -> String {
    let texts: Vec<&str> = message.parts.iter().filter_map(Part::as_text).collect();
    texts.join("\n")
}

/// A part of structured data, said to be JSON.
pub fn data_part(data: serde_json::Value) -> Part {
    Part::data(data).with_media_type("application/json")
}

/// Whether a task in `state` has ended or waits for its client (input or
/// authorization, which it will not finish without): where a client that
/// follows it stops.
pub fn is_settled(state: &TaskState) -> bool {
    state.is_terminal() || matches!(state, TaskState::InputRequired | TaskState::AuthRequired)
}

/// A task's state in a person's words.
pub fn state_words(state: &TaskState) -> &'static str {
    match state {
        TaskState::Unspecified => "unspecified",
        TaskState::Submitted => "submitted",
        TaskState::Working => "working",
        TaskState::InputRequired => "input required",
        TaskState::AuthRequired => "authorization required",
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Canceled => "canceled",
        TaskState::Rejected => "rejected",
    }
}

/// The JSON-RPC endpoint of a 1.0 interface, if the card names one.
pub fn jsonrpc_url(card: &AgentCard) -> Option<&str> {
    card.supported_interfaces
        .iter()
        .find(|i| {
            i.protocol_binding.eq_ignore_ascii_case(JSONRPC)
                && (i.protocol_version.is_empty()
                    || i.protocol_version.split('.').next() == Some("1"))
        })
        .map(|i| i.url.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_read_and_write_as_proto_json() {
        let message: Message = serde_json::from_value(json!({
            "messageId": "m1",
            "role": "ROLE_USER",
            "parts": [{"text": "hi"}, {"data": {"tool": "add"}}],
            "someFutureField": 1
        }))
        .unwrap();
        assert_eq!(message.role, Role::User);
        assert_eq!(text(&message), "hi");
        let written = serde_json::to_value(&message).unwrap();
        assert_eq!(
            written,
            json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}, {"data": {"tool": "add"}}]})
        );
        let event: StreamResponse = serde_json::from_value(json!({"statusUpdate": {
            "taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}))
        .unwrap();
        assert!(
            matches!(event, StreamResponse::StatusUpdate(e) if e.status.state == TaskState::Working)
        );
        assert!(is_settled(&TaskState::InputRequired) && !is_settled(&TaskState::Working));
    }

    #[test]
    fn a_card_names_its_jsonrpc_endpoint() {
        let card: AgentCard = serde_json::from_value(json!({
            "name": "x", "version": "1", "capabilities": {},
            "supportedInterfaces": [
                {"url": "http://a/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
                {"url": "http://a/old", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                {"url": "http://a/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ]
        }))
        .unwrap();
        assert_eq!(jsonrpc_url(&card), Some("http://a/rpc"));
    }
}
