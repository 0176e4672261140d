//! Remote tool calls: MCP `tools/call` as JSON-RPC 2.0 over a libp2p
//! request-response protocol. The framing stays in `net`: the rest of the
//! node sends a [`CallRequest`] and gets a `ToolOutput` or an [`RpcError`]
//! (see `Network::call` and `Library::call`), as fetch does with its types.
//!
//! The request names the agent by id and carries the caller's hop count and
//! remaining time in `_meta`, so that the called node can refuse chains that
//! are too deep and stop work nobody waits for. The called node applies its
//! own limits and policy; the caller cannot raise them.
//!
//! Nodes that share their language models also answer `llm/models` (the
//! names they share) and `llm/chat` (an OpenAI chat-completions request for
//! one of them, answered in the same format), under the same rules.
//!
//! Every request carries an `id` the caller chose at random. A caller that
//! stops waiting (its own caller cancelled, or its time ran out) sends
//! MCP's `notifications/cancelled` with that `requestId`, and the called
//! node drops the work, which stops the agent at its next epoch check and
//! frees its slot rather than running on until the deadline.

use crate::AgentId;
use crate::agent::tool::ToolOutput;
use crate::receipt::{Ran, Receipt, ReceiptError, Statement};
use libp2p::identity::Keypair;
use libp2p::{PeerId, StreamProtocol, request_response};
use serde::Deserialize as _;
use serde_json::{Value, json};
use std::time::Duration;

pub(super) const PROTOCOL: StreamProtocol = StreamProtocol::new("/agentsite/rpc/1.0.0");

/// The longest a remote call may take, whatever the caller asks for.
pub const MAX_REMOTE_DEADLINE: Duration = Duration::from_secs(120);

pub(super) type Behaviour = request_response::json::Behaviour<Value, Value>;

pub(super) fn behaviour() -> Behaviour {
    let config = request_response::Config::default()
        .with_request_timeout(MAX_REMOTE_DEADLINE + Duration::from_secs(5))
        .with_max_concurrent_streams(256);
    request_response::json::Behaviour::with_codec(
        request_response::json::codec::Codec::default()
            .set_request_size_maximum(4 * 1024 * 1024)
            .set_response_size_maximum(8 * 1024 * 1024),
        [(PROTOCOL, request_response::ProtocolSupport::Full)],
        config,
    )
}

/// A tool call for an agent hosted on another node.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRequest {
    pub agent: AgentId,
    pub tool: String,
    /// A JSON object.
    pub arguments: Value,
    /// How many agent-to-agent hops led here (0 for a call from a person).
    pub depth: u32,
    /// Time the caller still waits for an answer.
    pub deadline: Duration,
}

/// JSON-RPC error codes used between nodes (MCP's, plus two of ours).
pub mod code {
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL: i64 = -32603;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The agent is not hosted here.
    pub const NOT_FOUND: i64 = -32004;
    /// The chain of calls is too deep.
    pub const DEPTH_EXCEEDED: i64 = -32005;
    /// The call ran out of time.
    pub const DEADLINE_EXCEEDED: i64 = -32006;
    /// The agent has no tool of that name (the message is the name).
    pub const UNKNOWN_TOOL: i64 = -32007;
    /// The node does not share that model.
    pub const NOT_SHARED: i64 = -32008;
    /// The model is busy, or the asking peer sent too many requests.
    pub const BUSY: i64 = -32009;
    /// The caller cancelled the request.
    pub const CANCELLED: i64 = -32010;
    /// The answer came with a receipt that does not hold (never sent: the
    /// calling node's verdict on an answer).
    pub const BAD_RECEIPT: i64 = -32011;
}

/// A request another node sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    /// `tools/call`
    Call(CallRequest),
    /// `llm/chat`
    Chat(ChatRelay),
    /// `llm/models`
    Models,
    /// `notifications/cancelled`: the caller no longer waits for its
    /// request with this id.
    Cancel(u64),
}

impl Inbound {
    /// Reads a JSON-RPC message from another node.
    pub(super) fn from_json(message: &Value) -> Result<Inbound, RpcError> {
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(invalid("not a JSON-RPC 2.0 request"));
        }
        match message.get("method").and_then(Value::as_str) {
            Some("tools/call") => CallRequest::from_json(message).map(Inbound::Call),
            Some("llm/chat") => ChatRelay::from_json(message).map(Inbound::Chat),
            Some("llm/models") => Ok(Inbound::Models),
            Some("notifications/cancelled") => message
                .pointer("/params/requestId")
                .and_then(Value::as_u64)
                .filter(|&id| id != 0)
                .map(Inbound::Cancel)
                .ok_or_else(|| invalid("notifications/cancelled without a requestId")),
            _ => Err(RpcError {
                code: code::METHOD_NOT_FOUND,
                message: "only tools/call, llm/chat, llm/models and notifications/cancelled are served between nodes".into(),
            }),
        }
    }
}

/// A chat completion for a model another node shares.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRelay {
    /// The model's name on the sharing node.
    pub model: String,
    /// The request in the OpenAI chat-completions format.
    pub request: Value,
    /// Time the caller still waits for an answer.
    pub deadline: Duration,
}

impl ChatRelay {
    /// The JSON-RPC message.
    pub(super) fn to_json(&self) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "llm/chat",
            "params": {
                "model": self.model,
                "request": self.request,
                "_meta": { "agentsite/deadlineMs": self.deadline.as_millis() as u64 },
            },
        })
    }

    fn from_json(message: &Value) -> Result<ChatRelay, RpcError> {
        let params = message
            .get("params")
            .ok_or_else(|| invalid("llm/chat without params"))?;
        let model = params
            .get("model")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("llm/chat without a model"))?
            .to_owned();
        let request = params
            .get("request")
            .filter(|r| r.is_object())
            .cloned()
            .ok_or_else(|| invalid("llm/chat without a request object"))?;
        let deadline = deadline_in(params.get("_meta"));
        Ok(ChatRelay {
            model,
            request,
            deadline,
        })
    }
}

/// The id a caller gave its request; 0 when it gave none (such a request
/// cannot be cancelled).
pub(super) fn request_id(message: &Value) -> u64 {
    message.get("id").and_then(Value::as_u64).unwrap_or(0)
}

/// A fresh, random request id (never 0).
pub(super) fn new_request_id() -> u64 {
    getrandom::u64().unwrap_or_else(|_| {
        // No entropy: ids from a clock only need to differ per caller.
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |t| t.as_nanos() as u64)
    }) | 1
}

/// The message cancelling the request with `id`.
pub(super) fn cancel_request(id: u64) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "the caller stopped waiting"},
    })
}

/// A request's params the node cannot read.
fn invalid(message: &str) -> RpcError {
    RpcError {
        code: code::INVALID_PARAMS,
        message: message.to_owned(),
    }
}

/// The time the caller still waits, from a request's `_meta`: never more
/// than [`MAX_REMOTE_DEADLINE`], which is also what an absent one means.
fn deadline_in(meta: Option<&Value>) -> Duration {
    meta.and_then(|meta| meta.get("agentsite/deadlineMs"))
        .and_then(Value::as_u64)
        .map(Duration::from_millis)
        .unwrap_or(MAX_REMOTE_DEADLINE)
        .min(MAX_REMOTE_DEADLINE)
}

/// The `llm/models` request.
pub(super) fn models_request() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "llm/models"})
}

/// Why a remote call did not return a tool result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl CallRequest {
    /// The JSON-RPC message.
    pub(super) fn to_json(&self) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": self.tool,
                "arguments": self.arguments,
                "_meta": {
                    "agentsite/agent": self.agent,
                    "agentsite/depth": self.depth,
                    "agentsite/deadlineMs": self.deadline.as_millis() as u64,
                },
            },
        })
    }

    /// Reads the params of a `tools/call` from another node.
    fn from_json(message: &Value) -> Result<CallRequest, RpcError> {
        let params = message
            .get("params")
            .ok_or_else(|| invalid("tools/call without params"))?;
        let meta = params
            .get("_meta")
            .ok_or_else(|| invalid("tools/call without _meta naming the agent"))?;
        let agent = meta
            .get("agentsite/agent")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("_meta lacks agentsite/agent"))?
            .parse()
            .map_err(|e: crate::ParseAgentIdError| invalid(&e.to_string()))?;
        let tool = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("tools/call without a tool name"))?
            .to_owned();
        let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
        if !arguments.is_object() {
            return Err(invalid("arguments must be a JSON object"));
        }
        let depth = meta
            .get("agentsite/depth")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            .min(u64::from(u32::MAX)) as u32;
        let deadline = deadline_in(Some(meta));
        Ok(CallRequest {
            agent,
            tool,
            arguments,
            depth,
            deadline,
        })
    }
}

/// The JSON-RPC answer carrying `outcome`.
pub(super) fn response<T: serde::Serialize>(outcome: Result<T, RpcError>) -> Value {
    match outcome {
        Ok(output) => json!({"jsonrpc": "2.0", "id": 1, "result": output}),
        Err(error) => json!({
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": error.code, "message": error.message},
        }),
    }
}

/// Where a node puts its receipt in a tool call's result.
const RECEIPT_META: &str = "agentsite/receipt";

/// Another node's answer to a tool call.
#[derive(Debug, Clone)]
pub struct Answer {
    pub output: ToolOutput,
    /// The node's signed receipt of the call, checked against the call and
    /// this output; `None` from a node that gives none.
    pub receipt: Option<Receipt>,
    /// The result as it came, without the receipt: what the receipt's
    /// hash covers, and what evidence of the answer carries.
    pub result: Value,
}

/// The JSON-RPC answer to the tool call `request`: its result with a
/// receipt signed by `keypair` in the result's `_meta`, or the refusal.
pub(super) fn call_response(
    outcome: Result<Ran, RpcError>,
    request: &CallRequest,
    keypair: &Keypair,
) -> Value {
    let ran = match outcome {
        Ok(ran) => ran,
        Err(error) => return response::<()>(Err(error)),
    };
    let mut result = match serde_json::to_value(&ran.output) {
        Ok(result) => result,
        Err(e) => {
            return response::<()>(Err(RpcError {
                code: code::INTERNAL,
                message: format!("cannot write the result: {e}"),
            }));
        }
    };
    let receipt = Receipt::sign(
        keypair,
        Statement {
            agent: request.agent,
            tool: &request.tool,
            arguments: &request.arguments,
            result: &result,
            grants: &ran.grants,
            used: ran.used,
            at: crate::receipt::now_ms(),
        },
    );
    if let Some(object) = result.as_object_mut() {
        object.insert("_meta".into(), json!({ RECEIPT_META: receipt }));
    }
    response(Ok(result))
}

/// Reads `peer`'s answer to the tool call `request`, checking the receipt
/// it carries against the call and the result.
pub(super) fn read_answer(
    message: Value,
    peer: PeerId,
    request: &CallRequest,
) -> Result<Answer, RpcError> {
    let mut result = parse_result(message)?;
    let receipt = match result.as_object_mut().and_then(|o| o.remove("_meta")) {
        Some(meta) => meta.get(RECEIPT_META).map(Receipt::from_value),
        None => None,
    };
    let bad_receipt = |e: ReceiptError| RpcError {
        code: code::BAD_RECEIPT,
        message: format!("the node's receipt does not hold: {e}"),
    };
    let receipt = match receipt {
        None => None,
        Some(Err(e)) => return Err(bad_receipt(e)),
        Some(Ok(receipt)) => {
            receipt
                .check(
                    &peer,
                    &request.agent,
                    &request.tool,
                    &request.arguments,
                    &result,
                )
                .map_err(bad_receipt)?;
            Some(receipt)
        }
    };
    // Read in place: the result is kept as it came, for its receipt.
    let output = ToolOutput::deserialize(&result).map_err(|e| RpcError {
        code: code::INTERNAL,
        message: format!("the remote node's result is not a CallToolResult: {e}"),
    })?;
    Ok(Answer {
        output,
        receipt,
        result,
    })
}

/// The `result` of another node's answer, or its error.
pub(super) fn parse_result(message: Value) -> Result<Value, RpcError> {
    if let Some(error) = message.get("error") {
        return Err(RpcError {
            code: error
                .get("code")
                .and_then(Value::as_i64)
                .unwrap_or(code::INTERNAL),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("remote error without a message")
                .chars()
                .take(1000)
                .collect(),
        });
    }
    message.get("result").cloned().ok_or_else(|| RpcError {
        code: code::INTERNAL,
        message: "the remote node answered neither a result nor an error".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_request_round_trips() {
        let request = CallRequest {
            agent: AgentId::of(b"x"),
            tool: "add".into(),
            arguments: json!({"a": 1}),
            depth: 2,
            deadline: Duration::from_millis(1500),
        };
        assert_eq!(
            Inbound::from_json(&request.to_json()),
            Ok(Inbound::Call(request))
        );
        let relay = ChatRelay {
            model: "local".into(),
            request: json!({"messages": [{"role": "user", "content": "Hi"}]}),
            deadline: Duration::from_secs(3),
        };
        assert_eq!(
            Inbound::from_json(&relay.to_json()),
            Ok(Inbound::Chat(relay))
        );
        assert_eq!(Inbound::from_json(&models_request()), Ok(Inbound::Models));
        let id = new_request_id();
        assert_ne!(id, 0);
        assert_eq!(
            Inbound::from_json(&cancel_request(id)),
            Ok(Inbound::Cancel(id))
        );
    }

    #[test]
    fn an_answer_is_read_with_its_receipt_checked() {
        use crate::capabilities::sources::Used;
        use crate::receipt::Ran;
        let keypair = Keypair::generate_ed25519();
        let host = keypair.public().to_peer_id();
        let request = CallRequest {
            agent: AgentId::of(b"calculator"),
            tool: "add".into(),
            arguments: json!({"a": 1, "b": 2}),
            depth: 0,
            deadline: Duration::from_secs(1),
        };
        let ran = || Ran {
            output: serde_json::from_value(json!({"content": [{"type": "text", "text": "3"}]}))
                .unwrap(),
            grants: Vec::new(),
            used: Used::empty(),
        };
        let message = call_response(Ok(ran()), &request, &keypair);
        let answer = read_answer(message.clone(), host, &request).unwrap();
        assert!(answer.receipt.unwrap().replayable);
        assert_eq!(
            answer.result,
            json!({"content": [{"type": "text", "text": "3"}], "isError": false})
        );
        // The same answer said to come from another node, for another
        // call, or with its result changed on the way: the receipt fails.
        let stranger = Keypair::generate_ed25519().public().to_peer_id();
        let refused = |message: Value, peer, request: &CallRequest| {
            read_answer(message, peer, request).unwrap_err().code
        };
        assert_eq!(
            refused(message.clone(), stranger, &request),
            code::BAD_RECEIPT
        );
        let other = CallRequest {
            arguments: json!({"a": 1, "b": 3}),
            ..request.clone()
        };
        assert_eq!(refused(message.clone(), host, &other), code::BAD_RECEIPT);
        let mut altered = message.clone();
        altered["result"]["content"][0]["text"] = json!("4");
        assert_eq!(refused(altered, host, &request), code::BAD_RECEIPT);
        // A node that gives no receipt is read as before.
        let mut bare = message;
        bare["result"].as_object_mut().unwrap().remove("_meta");
        assert!(read_answer(bare, host, &request).unwrap().receipt.is_none());
        // A refusal stays a refusal.
        let refusal = call_response(Err(invalid("no")), &request, &keypair);
        assert_eq!(refused(refusal, host, &request), code::INVALID_PARAMS);
    }

    #[test]
    fn malformed_requests_get_json_rpc_errors() {
        let error = Inbound::from_json(&json!({"jsonrpc": "2.0", "method": "tools/list"}));
        assert_eq!(error.unwrap_err().code, code::METHOD_NOT_FOUND);
        let error = Inbound::from_json(
            &json!({"jsonrpc": "2.0", "method": "llm/chat", "params": {"model": "m", "request": []}}),
        );
        assert_eq!(error.unwrap_err().code, code::INVALID_PARAMS);
        let error = Inbound::from_json(&json!({"jsonrpc": "2.0", "method": "tools/call",
            "params": {"name": "add", "arguments": [1], "_meta": {"agentsite/agent": AgentId::of(b"x")}}}));
        assert_eq!(error.unwrap_err().code, code::INVALID_PARAMS);
        let deadline = CallRequest::from_json(&json!({"jsonrpc": "2.0", "method": "tools/call",
            "params": {"name": "add", "_meta": {"agentsite/agent": AgentId::of(b"x"), "agentsite/deadlineMs": u64::MAX}}}));
        assert_eq!(deadline.unwrap().deadline, MAX_REMOTE_DEADLINE);
    }
}
