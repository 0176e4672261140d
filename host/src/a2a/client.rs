//! An A2A agent attached as an agent of the node. Its Agent Card's skills
//! become tools that take a message; a call sends the message
//! (`SendMessage`, answered as soon as the task exists) and follows the
//! task (`GetTask`) until it ends, all within the call's deadline, and
//! cancels it (`CancelTask`) when the deadline passes first. An agent
//! whose card offers only A2A 0.3 is called the same way in 0.3's binding
//! (`message/send`, `tasks/get`, `tasks/cancel`; see [`crate::a2a::v0_3`]). What the peer
//! answers is untrusted: every body is read up to a bound, malformed JSON
//! and JSON-RPC errors are said in one line, and the result goes through
//! the checks a component's result goes through.

use crate::a2a::v0_3;
use crate::a2a::wire::{
    self, AgentCard as A2aCard, Binding, CancelTaskRequest, GetTaskRequest, JsonRpcId,
    JsonRpcRequest, JsonRpcResponse, Message, Part, PartContent, Role, SendMessageConfiguration,
    SendMessageRequest, SendMessageResponse, Task, TaskState, error_code,
};
use crate::agent::tool::{AgentCard, ToolOutput, ToolSpec, card_limits};
use crate::capabilities::bindings::types;
use crate::config::Limits;
use crate::runtime::CallError;
use crate::runtime::result;
use serde::de::DeserializeOwned;
use serde::{Deserialize as _, Serialize};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// How long reading an agent's card may take.
const CARD_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest card read.
const MAX_CARD: usize = 1 << 20;
/// How long connecting to an A2A agent may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Polls of a running task start this far apart and slow down to the
/// second.
const FIRST_POLL: Duration = Duration::from_millis(50);
const SLOWEST_POLL: Duration = Duration::from_secs(1);
/// How long the node waits for a peer to take a cancel at the deadline.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(2);
/// The argument every tool of an A2A agent takes.
const MESSAGE: &str = "message";

/// An HTTP client for A2A peers: version header, connect timeout, no
/// redirects to elsewhere.
pub fn client() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        wire::VERSION_HEADER,
        reqwest::header::HeaderValue::from_static(wire::VERSION),
    );
    crate::http::destination::guarded(reqwest::Client::builder())
        .default_headers(headers)
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
}

/// Where the card of the agent at `url` is: `url` itself when it names
/// the card, else the well-known path below it.
pub fn card_url(url: &str) -> String {
    if url.ends_with(wire::CARD_PATH) {
        url.to_owned()
    } else {
        format!("{}{}", url.trim_end_matches('/'), wire::CARD_PATH)
    }
}

/// The A2A agent's card at `url`, if one is there and it offers the
/// JSON-RPC binding of A2A 1.0 or 0.3 (1.0 where it offers both); why not
/// otherwise. The node posts to the endpoint a card names on the card's
/// own origin, or to the one the operator named (`named_endpoint`) on
/// another: a card is anyone's text, and its endpoint could be any service
/// this node can reach.
pub async fn discover(
    url: &str,
    named_endpoint: Option<&str>,
) -> Result<(String, A2aCard, String, Binding), String> {
    let card_url = card_url(url);
    let fetch = async {
        let response = client()
            .get(&card_url)
            .send()
            .await
            .map_err(|e| format!("cannot reach {card_url}: {}", crate::text::root_cause(&e)))?;
        if !response.status().is_success() {
            return Err(format!("{card_url} answered {}", response.status()));
        }
        read_bounded(response, MAX_CARD).await
    };
    let body = tokio::time::timeout(CARD_TIMEOUT, fetch)
        .await
        .map_err(|_| {
            format!(
                "{card_url} did not answer within {} s",
                CARD_TIMEOUT.as_secs()
            )
        })??;
    let (card, endpoint, binding) = read_card(&card_url, &body, named_endpoint)?;
    Ok((card_url, card, endpoint, binding))
}

/// The card `body` read from `card_url`: its signature checked when it has
/// one, and the JSON-RPC endpoint it names (1.0's, else 0.3's) with the
/// binding spoken there, on the card's origin or the one the operator
/// named; why not otherwise.
pub fn read_card(
    card_url: &str,
    body: &[u8],
    named_endpoint: Option<&str>,
) -> Result<(A2aCard, String, Binding), String> {
    let raw: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| format!("{card_url} is not an Agent Card: {e}"))?;
    // A signed card must verify; an unsigned one is taken as before.
    match crate::a2a::signed::check(&raw) {
        Ok(crate::a2a::signed::Checked::SignedBy(did)) => {
            tracing::info!(card = %card_url, signer = %did, "the Agent Card's signature verifies");
        }
        Ok(crate::a2a::signed::Checked::Unsigned) => {}
        Err(refused) => return Err(format!("the Agent Card at {card_url}: {refused}")),
    }
    let current = A2aCard::deserialize(&raw)
        .map_err(|e| format!("{card_url} is not an Agent Card: {e}"))
        .and_then(|card| match wire::jsonrpc_url(&card) {
            Some(endpoint) => Ok((endpoint.to_owned(), card)),
            None => Err(format!(
                "the Agent Card at {card_url} offers no JSON-RPC interface of A2A 1.0 or 0.3"
            )),
        });
    let (card, endpoint, binding) = match current {
        Ok((endpoint, card)) => (card, endpoint, Binding::V1_0),
        Err(why) => match v0_3::read_card(&raw) {
            Some((card, endpoint)) => (card, endpoint, Binding::V0_3),
            None => return Err(why),
        },
    };
    let parsed = reqwest::Url::parse(&endpoint)
        .map_err(|e| format!("the Agent Card at {card_url} names no URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "the Agent Card at {card_url} names {endpoint:?}, not an http(s) endpoint"
        ));
    }
    let same_origin =
        reqwest::Url::parse(card_url).is_ok_and(|card| card.origin() == parsed.origin());
    if !same_origin && named_endpoint != Some(endpoint.as_str()) {
        return Err(format!(
            "the Agent Card at {card_url} names its endpoint {}, on another origin than the card: \
             the node posts there only if you name it (attach again with `--endpoint {}` before the URL)",
            crate::text::terminal_safe(&endpoint),
            crate::text::terminal_safe(&endpoint),
        ));
    }
    Ok((card, endpoint, binding))
}

/// The card and tools of the A2A agent attached as `name`: a tool per
/// skill (one `ask` tool when it lists none), each taking a message,
/// checked against the contract as a component's are.
pub fn describe(name: &str, card: &A2aCard) -> Result<(AgentCard, Vec<ToolSpec>), String> {
    let description = if card.description.trim().is_empty() {
        format!(
            "{}, an attached A2A agent",
            crate::text::one_line(&card.name, 128)
        )
    } else {
        crate::text::one_line(&card.description, card_limits::DESCRIPTION - 128)
    };
    let contract = types::AgentCard {
        name: name.to_owned(),
        version: crate::text::one_line(&card.version, card_limits::VERSION),
        description,
        tags: vec!["a2a".into(), "attached".into()],
        homepage: card
            .documentation_url
            .clone()
            .filter(|url| url.len() <= card_limits::HOMEPAGE),
    };
    let mut tools: Vec<types::Tool> = Vec::new();
    for skill in card.skills.iter().take(card_limits::TOOLS + 1) {
        let mut about = crate::text::one_line(&skill.description, 2000);
        if let Some(examples) = skill.examples.as_ref().filter(|e| !e.is_empty()) {
            let examples: Vec<String> = examples
                .iter()
                .take(4)
                .map(|e| crate::text::one_line(e, 200))
                .collect();
            about.push_str(&format!(" Examples: {}", examples.join("; ")));
        }
        tools.push(tool(&tool_name(&skill.id), Some(&skill.name), about));
    }
    if tools.is_empty() {
        let about = format!("Sends a message to the A2A agent {}.", card.name);
        tools.push(tool("ask", None, crate::text::one_line(&about, 2000)));
    }
    result::describe(contract, tools, Vec::new()).map_err(|e| match e {
        CallError::MalformedResult(why) => format!("{name} breaks the agent contract: {why}"),
        other => format!("{name} breaks the agent contract: {other}"),
    })
}

/// A skill's id as a tool name: the letters a tool name may have.
fn tool_name(skill: &str) -> String {
    let name: String = skill
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() { "ask".into() } else { name }
}

fn tool(name: &str, title: Option<&str>, description: String) -> types::Tool {
    let schema = json!({
        "type": "object",
        "properties": {MESSAGE: {"type": "string", "description": "What to ask the agent, in words"}},
        "required": [MESSAGE],
    });
    types::Tool {
        name: name.to_owned(),
        title: title.map(|t| crate::text::one_line(t, 128)),
        description,
        input_schema: schema.to_string(),
        output_schema: None,
        annotations: types::ToolAnnotations {
            read_only: None,
            destructive: None,
            idempotent: None,
            open_world: Some(true),
        },
    }
}

/// One call of the A2A agent `peer`: the `message` argument sent for
/// `skill`, its task followed to its end, within `limits`.
pub async fn call(
    peer: &Peer<'_>,
    skill: &str,
    arguments: Map<String, Value>,
    limits: &Limits,
    deadline: Instant,
) -> Result<ToolOutput, CallError> {
    let name = peer.name;
    let Some(Value::String(text)) = arguments.get(MESSAGE) else {
        return Err(CallError::InvalidArguments(format!(
            "the argument {MESSAGE:?} is the message to send, as a string"
        )));
    };
    let mut message = Message::new(Role::User, vec![Part::text(text.clone())]);
    message.metadata = Some(HashMap::from([(
        "skill".to_owned(),
        Value::String(skill.to_owned()),
    )]));
    let request = SendMessageRequest {
        message,
        configuration: Some(SendMessageConfiguration {
            accepted_output_modes: Some(vec!["text/plain".into(), "application/json".into()]),
            task_push_notification_config: None,
            history_length: None,
            return_immediately: Some(true),
        }),
        metadata: None,
        tenant: None,
    };
    let mut task = match peer.send(request, deadline).await? {
        SendMessageResponse::Message(message) => return output(name, &message.parts, limits),
        SendMessageResponse::Task(task) => task,
    };
    let mut wait = FIRST_POLL;
    while !wire::is_settled(&task.status.state) {
        if task.id.is_empty() {
            return Err(CallError::Failed(format!(
                "{name} answered with a task that has no id"
            )));
        }
        if Instant::now() + wait >= deadline {
            peer.cancel(&task.id).await;
            return Err(CallError::DeadlineExceeded(limits.deadline));
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(SLOWEST_POLL);
        let id = task.id.clone();
        task = match peer.get_task(&id, deadline).await {
            Ok(task) => task,
            Err(CallError::DeadlineExceeded(_)) => {
                peer.cancel(&id).await;
                return Err(CallError::DeadlineExceeded(limits.deadline));
            }
            Err(other) => return Err(other),
        };
        if task.id != id {
            return Err(CallError::Failed(format!(
                "{name} answered GetTask({id}) with task {:?}",
                task.id
            )));
        }
    }
    finished(name, task, limits)
}

/// What a task that stopped running means for the call.
fn finished(name: &str, task: Task, limits: &Limits) -> Result<ToolOutput, CallError> {
    let said = task
        .status
        .message
        .as_ref()
        .map(|m| crate::text::one_line(&wire::text(m), 2000))
        .filter(|text| !text.is_empty());
    let state = task.status.state;
    match state {
        TaskState::Completed => {
            let mut parts: Vec<Part> = task
                .artifacts
                .into_iter()
                .flatten()
                .flat_map(|a| a.parts)
                .collect();
            // A task that produced no artifact answers in its last message.
            if parts.is_empty() {
                parts = task.status.message.map(|m| m.parts).unwrap_or_default();
            }
            output(name, &parts, limits)
        }
        TaskState::InputRequired | TaskState::AuthRequired => Ok(ToolOutput::failure(format!(
            "{name} asks for {} before it goes on ({}); the node does not carry on conversations with attached A2A agents",
            if state == TaskState::AuthRequired {
                "authorization"
            } else {
                "more input"
            },
            said.as_deref().unwrap_or("it said nothing more")
        ))),
        _ => Ok(ToolOutput::failure(format!(
            "{name}'s task {}: {}",
            wire::state_words(&state),
            said.as_deref().unwrap_or("it gave no reason")
        ))),
    }
}

/// Parts as a tool's result: text parts as text, the first data part that
/// is an object as structured content (every data part also as text),
/// files named by their URL; checked against the output cap.
fn output(name: &str, parts: &[Part], limits: &Limits) -> Result<ToolOutput, CallError> {
    result::check_count("parts", parts.len(), result::MAX_CONTENT_ITEMS)?;
    let mut content = Vec::new();
    let mut structured = None;
    for part in parts {
        match &part.content {
            PartContent::Text(text) => content.push(types::Content::Text(text.clone())),
            PartContent::Data(data) => {
                if structured.is_none() && data.is_object() {
                    structured = Some(data.to_string());
                }
                content.push(types::Content::Text(data.to_string()));
            }
            PartContent::Url(url) => content.push(types::Content::Text(format!("file: {url}"))),
            PartContent::Raw(_) => {
                let what = part.media_type.as_deref().unwrap_or("bytes");
                content.push(types::Content::Text(format!(
                    "{name} sent a file ({what}) that the node does not pass on"
                )));
            }
        }
    }
    result::tool_output(
        types::ToolResult {
            content,
            structured_content: structured,
            is_error: false,
        },
        limits,
    )
}

/// An attached A2A agent's JSON-RPC endpoint, and the binding it speaks.
pub struct Peer<'a> {
    http: &'a reqwest::Client,
    name: &'a str,
    endpoint: &'a str,
    binding: Binding,
    /// The largest answer read.
    max: usize,
    /// The call's time, which a deadline passed is reported with.
    budget: Duration,
}

impl<'a> Peer<'a> {
    /// The agent `name` at `endpoint`, speaking `binding`, called within
    /// `limits`.
    pub fn new(
        http: &'a reqwest::Client,
        name: &'a str,
        endpoint: &'a str,
        binding: Binding,
        limits: &Limits,
    ) -> Self {
        Peer {
            http,
            name,
            endpoint,
            binding,
            max: limits.max_message(),
            budget: limits.deadline,
        }
    }

    /// Sends a message: `SendMessage`, or 0.3's `message/send`.
    async fn send(
        &self,
        request: SendMessageRequest,
        deadline: Instant,
    ) -> Result<SendMessageResponse, CallError> {
        match self.binding {
            Binding::V1_0 => {
                self.rpc(wire::methods::SEND_MESSAGE, &request, deadline)
                    .await
            }
            Binding::V0_3 => {
                let params = v0_3::SendParams::from(request);
                let event: v0_3::Event = self.rpc(v0_3::methods::SEND, &params, deadline).await?;
                match wire::StreamResponse::from(event) {
                    wire::StreamResponse::Task(task) => Ok(SendMessageResponse::Task(task)),
                    wire::StreamResponse::Message(message) => {
                        Ok(SendMessageResponse::Message(message))
                    }
                    _ => Err(CallError::Failed(format!(
                        "{} answered message/send with an update, not a task or a message",
                        self.name
                    ))),
                }
            }
        }
    }

    /// The task `id` without its history: `GetTask`, or 0.3's `tasks/get`.
    async fn get_task(&self, id: &str, deadline: Instant) -> Result<Task, CallError> {
        match self.binding {
            Binding::V1_0 => {
                let request = GetTaskRequest {
                    id: id.to_owned(),
                    history_length: Some(0),
                    tenant: None,
                };
                self.rpc(wire::methods::GET_TASK, &request, deadline).await
            }
            Binding::V0_3 => {
                let params = v0_3::QueryParams {
                    id: id.to_owned(),
                    history_length: Some(0),
                };
                let task: v0_3::Task = self.rpc(v0_3::methods::GET, &params, deadline).await?;
                Ok(task.into())
            }
        }
    }

    /// Calls `method` and reads its result, or says in one line why not.
    async fn rpc<T: DeserializeOwned>(
        &self,
        method: &str,
        params: &impl Serialize,
        deadline: Instant,
    ) -> Result<T, CallError> {
        let name = self.name;
        let params = serde_json::to_value(params)
            .map_err(|e| CallError::Failed(format!("{method} for {name}: {e}")))?;
        let request = JsonRpcRequest::new(
            JsonRpcId::String(wire::new_message_id()),
            method,
            Some(params),
        );
        let version = match self.binding {
            Binding::V1_0 => wire::VERSION,
            Binding::V0_3 => "0.3",
        };
        let exchange = async {
            let response = self
                .http
                .post(self.endpoint)
                .header(wire::VERSION_HEADER, version)
                .json(&request)
                .send()
                .await
                .map_err(|e| {
                    CallError::Unavailable(format!(
                        "cannot reach {name} at {}: {}",
                        self.endpoint,
                        crate::text::root_cause(&e)
                    ))
                })?;
            let status = response.status();
            let body = read_bounded(response, self.max)
                .await
                .map_err(|why| CallError::Failed(format!("{name}: {why}")))?;
            Ok::<_, CallError>((status, body))
        };
        let (status, body) = tokio::time::timeout_at(deadline, exchange)
            .await
            .map_err(|_| CallError::DeadlineExceeded(self.budget))??;
        // One pass over the body: serde tells text that is not JSON from
        // JSON that is not a response.
        let answer = serde_json::from_slice::<JsonRpcResponse>(&body).map_err(|e| {
            let what = if e.is_syntax() || e.is_eof() {
                format!("malformed JSON ({e})")
            } else {
                format!("what is not a JSON-RPC response ({e})")
            };
            // An error page is not the agent's answer, and could be any
            // service's: it goes to the log, not to whoever called the tool.
            let said = if status.is_success() {
                format!("answered {method} with {what}")
            } else {
                tracing::debug!(
                    agent = name,
                    %status,
                    body = %crate::text::one_line(&String::from_utf8_lossy(&body), 200),
                    "an A2A peer's error page"
                );
                format!("answered {method} with HTTP {status} and no JSON-RPC response")
            };
            CallError::Failed(format!("{name} {said}"))
        })?;
        if let Some(error) = answer.error {
            let message = crate::text::one_line(&error.message, 1000);
            let code = error.code;
            return Err(if code == error_code::INVALID_PARAMS {
                CallError::InvalidArguments(message)
            } else {
                CallError::Failed(format!("{name} refused {method}: {message} (error {code})"))
            });
        }
        let Some(result) = answer.result else {
            return Err(CallError::Failed(format!(
                "{name} answered {method} with neither a result nor an error"
            )));
        };
        T::deserialize(result).map_err(|e| {
            CallError::Failed(format!(
                "{name} answered {method} with a result that is not one ({e})"
            ))
        })
    }

    /// Asks the peer to stop task `id`, briefly; a peer that does not is
    /// left to it.
    async fn cancel(&self, id: &str) {
        let deadline = Instant::now() + CANCEL_TIMEOUT;
        let cancelled = match self.binding {
            Binding::V1_0 => {
                let request = CancelTaskRequest {
                    id: id.to_owned(),
                    metadata: None,
                    tenant: None,
                };
                self.rpc::<Value>(wire::methods::CANCEL_TASK, &request, deadline)
                    .await
            }
            Binding::V0_3 => {
                let params = v0_3::IdParams { id: id.to_owned() };
                self.rpc::<Value>(v0_3::methods::CANCEL, &params, deadline)
                    .await
            }
        };
        if let Err(e) = cancelled {
            tracing::debug!(agent = self.name, "cancelling task {id}: {e}");
        }
    }
}

/// A response body of at most `max` bytes (its reader bounds the time).
async fn read_bounded(response: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    use crate::http::bounded::BodyError;
    crate::http::bounded::read_bounded(response, max)
        .await
        .map_err(|e| match e {
            BodyError::TooLarge(max) => format!("its answer is larger than {max} bytes"),
            BodyError::Broke(e) => format!("its answer broke off: {}", crate::text::root_cause(&e)),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skills_become_tools_that_take_a_message() {
        let card: A2aCard = serde_json::from_value(json!({
            "name": "Echo", "description": "Says it back.", "version": "1.2",
            "supportedInterfaces": [], "capabilities": {},
            "skills": [
                {"id": "echo", "name": "Echo", "description": "Echoes.", "tags": [], "examples": ["hi"]},
                {"id": "shout loud!", "name": "Shout", "description": "Loudly.", "tags": []}
            ]
        }))
        .unwrap();
        let (contract, tools) = describe("echo", &card).unwrap();
        assert_eq!(contract.name, "echo");
        assert_eq!(contract.description, "Says it back.");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["echo", "shout_loud_"]);
        assert!(tools[0].description.contains("Examples: hi"));
        assert_eq!(tools[0].input_schema["required"], json!(["message"]));

        // The least a card is: a name, a version, interfaces, capabilities.
        let bare: A2aCard = serde_json::from_value(json!({
            "name": "Bare", "version": "0", "supportedInterfaces": [], "capabilities": {}
        }))
        .unwrap();
        let (_, tools) = describe("bare", &bare).unwrap();
        assert_eq!(tools[0].name, "ask");
        assert_eq!(
            card_url("http://a:1/"),
            "http://a:1/.well-known/agent-card.json"
        );
        assert_eq!(
            card_url("http://a:1/.well-known/agent-card.json"),
            "http://a:1/.well-known/agent-card.json"
        );
    }

    #[test]
    fn a_task_ends_as_a_result_or_a_failure() {
        let limits = Limits::default();
        let task: Task = serde_json::from_value(json!({
            "id": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a", "parts": [{"text": "42"}, {"data": {"n": 42}}]}]
        }))
        .unwrap();
        let done = finished("calc", task, &limits).unwrap();
        assert_eq!(done.text(), "42\n{\"n\":42}");
        assert_eq!(done.structured_content.unwrap(), json!({"n": 42}));
        let failed: Task = serde_json::from_value(json!({
            "id": "t", "contextId": "c", "status": {"state": "TASK_STATE_FAILED",
                "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "no"}]}}
        }))
        .unwrap();
        let failed = finished("calc", failed, &limits).unwrap();
        assert!(failed.is_error);
        assert_eq!(failed.text(), "calc's task failed: no");
    }
}
