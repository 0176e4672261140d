//! The OpenAI chat-completions wire format, both ways: what the node's
//! client sends to and reads from an OpenAI-compatible server, and what the
//! node's own `/v1` endpoint reads and answers.
//!
//! Everything read here comes from someone else (a server of unknown
//! quality, a client of the node), so reading is lenient about fields it
//! does not use and strict about bounds: an answer may carry at most
//! [`MAX_ANSWER_BYTES`] of text and [`MAX_TOOL_CALLS`] tool calls.

use super::{
    ChatRequest, Completion, Message, Role, StopReason, ToolCall, ToolChoice, ToolSpec, Usage,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Text an answer may carry, in bytes (content and tool arguments together).
pub const MAX_ANSWER_BYTES: usize = 4 << 20;
/// Tool calls one answer may carry.
pub const MAX_TOOL_CALLS: usize = 64;

/// `POST /chat/completions`, as much of it as the node uses. Fields it does
/// not know (`top_p`, `user`, `logit_bias`, ...) are accepted and ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ChatCompletionRequest {
    #[serde(default)]
    pub model: String,
    pub messages: Vec<WireMessage>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<WireTool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// `response_format`: free text, any JSON object, or JSON matching a schema.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    Text,
    JsonObject,
    JsonSchema { json_schema: JsonSchemaFormat },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JsonSchemaFormat {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// One message of the conversation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WireMessage {
    pub role: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<WireToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// A message's content: text, or a list of parts of which the node reads
/// the text ones.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireTool {
    #[serde(rename = "type")]
    pub kind: String,
    pub function: WireFunction,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireFunction {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default = "empty_object")]
    pub parameters: Value,
}

fn empty_object() -> Value {
    serde_json::json!({ "type": "object", "properties": {} })
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    pub function: WireCalledFunction,
}

fn function_kind() -> String {
    "function".to_owned()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireCalledFunction {
    pub name: String,
    /// A JSON object as text.
    #[serde(default)]
    pub arguments: String,
}

/// A whole answer (`"object": "chat.completion"`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChatCompletion {
    #[serde(default)]
    pub id: String,
    #[serde(default = "completion_object")]
    pub object: String,
    #[serde(default)]
    pub created: u64,
    #[serde(default)]
    pub model: String,
    pub choices: Vec<Choice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<WireUsage>,
}

fn completion_object() -> String {
    "chat.completion".to_owned()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Choice {
    #[serde(default)]
    pub index: u32,
    pub message: AnswerMessage,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// The assistant's message in an answer: content may be null.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AnswerMessage {
    #[serde(default = "assistant")]
    pub role: String,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<WireToolCall>,
}

fn assistant() -> String {
    "assistant".to_owned()
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: u32,
    #[serde(default)]
    pub completion_tokens: u32,
    #[serde(default)]
    pub total_tokens: u32,
}

impl From<Usage> for WireUsage {
    fn from(usage: Usage) -> Self {
        WireUsage {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: usage.prompt_tokens.saturating_add(usage.completion_tokens),
        }
    }
}

/// One event of a streamed answer (`"object": "chat.completion.chunk"`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChatCompletionChunk {
    #[serde(default)]
    pub id: String,
    #[serde(default = "chunk_object")]
    pub object: String,
    #[serde(default)]
    pub created: u64,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub choices: Vec<ChunkChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<WireUsage>,
}

fn chunk_object() -> String {
    "chat.completion.chunk".to_owned()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChunkChoice {
    #[serde(default)]
    pub index: u32,
    #[serde(default)]
    pub delta: ChunkDelta,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ChunkDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallDelta>,
}

/// A piece of a tool call: the first piece of a call carries its id and
/// name, later ones more of its arguments.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolCallDelta {
    pub index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<FunctionDelta>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FunctionDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
}

/// `{"error": {...}}`, as servers answer failures (also inside a stream).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorDetail {
    #[serde(default)]
    pub message: String,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<Value>,
}

/// `GET /models`
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelList {
    #[serde(default = "list_object")]
    pub object: String,
    pub data: Vec<ModelEntry>,
}

fn list_object() -> String {
    "list".to_owned()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelEntry {
    pub id: String,
    #[serde(default = "model_object")]
    pub object: String,
    #[serde(default)]
    pub created: u64,
    #[serde(default)]
    pub owned_by: String,
}

fn model_object() -> String {
    "model".to_owned()
}

// ---- the node's requests, in the wire format ----

/// `request` for the server's model `model`.
pub fn request_to_wire(model: &str, request: &ChatRequest, stream: bool) -> ChatCompletionRequest {
    ChatCompletionRequest {
        model: model.to_owned(),
        messages: request.messages.iter().map(message_to_wire).collect(),
        tools: request
            .tools
            .iter()
            .map(|tool| WireTool {
                kind: "function".to_owned(),
                function: WireFunction {
                    name: tool.name.clone(),
                    description: tool.description.clone(),
                    parameters: tool.parameters.clone(),
                },
            })
            .collect(),
        tool_choice: tool_choice_to_wire(&request.tool_choice, !request.tools.is_empty()),
        max_tokens: request.max_tokens,
        max_completion_tokens: None,
        temperature: request.temperature,
        seed: request.seed,
        frequency_penalty: request.frequency_penalty,
        presence_penalty: request.presence_penalty,
        stream,
        stream_options: stream.then_some(StreamOptions {
            include_usage: true,
        }),
        response_format: request
            .response_schema
            .clone()
            .map(|schema| ResponseFormat::JsonSchema {
                json_schema: JsonSchemaFormat {
                    name: "answer".to_owned(),
                    schema: Some(schema),
                    strict: Some(true),
                },
            }),
        n: None,
        parallel_tool_calls: request
            .parallel_tool_calls
            .filter(|_| !request.tools.is_empty()),
    }
}

/// `tool_choice` as the API writes it; left out when it is the default.
fn tool_choice_to_wire(choice: &ToolChoice, has_tools: bool) -> Option<Value> {
    match choice {
        ToolChoice::Auto => None,
        ToolChoice::None if !has_tools => None,
        ToolChoice::None => Some(Value::from("none")),
        ToolChoice::Required => Some(Value::from("required")),
        ToolChoice::Named(name) => Some(serde_json::json!({
            "type": "function",
            "function": { "name": name },
        })),
    }
}

/// Reads `tool_choice`: "auto", "none", "required", or a named function.
fn tool_choice_from_wire(choice: Option<Value>) -> Result<ToolChoice, String> {
    let Some(choice) = choice else {
        return Ok(ToolChoice::Auto);
    };
    match choice.as_str() {
        Some("auto") => return Ok(ToolChoice::Auto),
        Some("none") => return Ok(ToolChoice::None),
        Some("required") => return Ok(ToolChoice::Required),
        _ => {}
    }
    let named = choice
        .get("function")
        .and_then(|f| f.get("name"))
        .and_then(Value::as_str)
        .filter(|_| choice.get("type").and_then(Value::as_str) == Some("function"));
    match named {
        Some(name) => Ok(ToolChoice::Named(name.to_owned())),
        None => Err(
            "`tool_choice` must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}"
                .to_owned(),
        ),
    }
}

fn message_to_wire(message: &Message) -> WireMessage {
    let tool_calls: Vec<WireToolCall> = message
        .tool_calls
        .iter()
        .map(|call| WireToolCall {
            id: call.id.clone(),
            kind: function_kind(),
            function: WireCalledFunction {
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            },
        })
        .collect();
    let content = content_or_null(&message.content, !tool_calls.is_empty()).map(Content::Text);
    WireMessage {
        role: message.role.as_str().to_owned(),
        content,
        tool_calls,
        tool_call_id: message.tool_call_id.clone(),
    }
}

/// A message's content as the API writes it: an assistant message that
/// only calls tools has null content.
pub fn content_or_null(content: &str, calls_tools: bool) -> Option<String> {
    (!content.is_empty() || !calls_tools).then(|| content.to_owned())
}

/// A whole answer in the OpenAI format.
pub fn completion_to_wire(id: &str, created: u64, completion: &Completion) -> ChatCompletion {
    let tool_calls = completion
        .tool_calls
        .iter()
        .map(|call: &ToolCall| WireToolCall {
            id: call.id.clone(),
            kind: "function".into(),
            function: WireCalledFunction {
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            },
        })
        .collect::<Vec<_>>();
    let content = content_or_null(&completion.content, !tool_calls.is_empty());
    ChatCompletion {
        id: id.to_owned(),
        object: "chat.completion".into(),
        created,
        model: completion.model.clone(),
        choices: vec![Choice {
            index: 0,
            message: AnswerMessage {
                role: "assistant".into(),
                content,
                tool_calls,
            },
            finish_reason: Some(completion.stop_reason.openai().to_owned()),
        }],
        usage: Some(completion.usage.into()),
    }
}

/// What a client of the node's `/v1` endpoint asked for.
#[derive(Debug, Clone)]
pub struct ReadRequest {
    /// The model named, if any.
    pub model: Option<String>,
    pub request: ChatRequest,
    pub stream: bool,
    pub include_usage: bool,
}

/// Reads a request a client sent to the node's `/v1/chat/completions`.
/// The error is one line saying what is wrong with it.
pub fn request_from_wire(wire: ChatCompletionRequest) -> Result<ReadRequest, String> {
    if wire.messages.is_empty() {
        return Err("`messages` must hold at least one message".to_owned());
    }
    if wire.messages.len() > super::MAX_MESSAGES {
        return Err(format!(
            "a request may carry at most {} messages",
            super::MAX_MESSAGES
        ));
    }
    if wire.n.is_some_and(|n| n != 1) {
        return Err("this node answers with one choice (`n` must be 1)".to_owned());
    }
    for (name, penalty) in [
        ("frequency_penalty", wire.frequency_penalty),
        ("presence_penalty", wire.presence_penalty),
    ] {
        if penalty.is_some_and(|p| !(-2.0..=2.0).contains(&p)) {
            return Err(format!("`{name}` must be between -2 and 2"));
        }
    }
    let tool_choice = tool_choice_from_wire(wire.tool_choice)?;
    let tools_off = tool_choice == ToolChoice::None;
    let messages = wire
        .messages
        .into_iter()
        .enumerate()
        .map(|(index, message)| message_from_wire(index, message))
        .collect::<Result<Vec<_>, _>>()?;
    let tools = if tools_off {
        Vec::new()
    } else {
        wire.tools
            .into_iter()
            .map(|tool| {
                if tool.kind != "function" {
                    return Err(format!(
                        "tool {:?} is of type {:?}; only \"function\" tools are supported",
                        tool.function.name, tool.kind
                    ));
                }
                Ok(ToolSpec {
                    name: tool.function.name,
                    description: tool.function.description,
                    parameters: tool.function.parameters,
                })
            })
            .collect::<Result<Vec<_>, _>>()?
    };
    let response_schema = match wire.response_format {
        None | Some(ResponseFormat::Text) => None,
        Some(ResponseFormat::JsonObject) => Some(serde_json::json!({ "type": "object" })),
        Some(ResponseFormat::JsonSchema { json_schema }) => Some(
            json_schema
                .schema
                .ok_or("`response_format.json_schema` needs a `schema`".to_owned())?,
        ),
    };
    let model = Some(wire.model).filter(|m| !m.is_empty());
    Ok(ReadRequest {
        model,
        request: ChatRequest {
            messages,
            tools,
            tool_choice,
            max_tokens: wire.max_completion_tokens.or(wire.max_tokens),
            temperature: wire.temperature,
            response_schema,
            seed: wire.seed,
            frequency_penalty: wire.frequency_penalty,
            presence_penalty: wire.presence_penalty,
            parallel_tool_calls: wire.parallel_tool_calls,
            grounding: None,
            caller: None,
        },
        stream: wire.stream,
        include_usage: wire.stream_options.is_some_and(|o| o.include_usage),
    })
}

fn message_from_wire(index: usize, wire: WireMessage) -> Result<Message, String> {
    let role = match wire.role.as_str() {
        "system" | "developer" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        other => {
            return Err(format!(
                "messages[{index}] has role {other:?}; the roles are system, developer, user, assistant and tool"
            ));
        }
    };
    let content = match wire.content {
        None => String::new(),
        Some(Content::Text(text)) => text,
        Some(Content::Parts(parts)) => {
            let mut text = String::new();
            for part in parts {
                match (part.kind.as_str(), part.text) {
                    ("text", Some(piece)) => text.push_str(&piece),
                    (kind, _) => {
                        return Err(format!(
                            "messages[{index}] holds a {kind:?} part; the node's models read text only"
                        ));
                    }
                }
            }
            text
        }
    };
    if role == Role::Tool && wire.tool_call_id.is_none() {
        return Err(format!(
            "messages[{index}] is a tool result without `tool_call_id`"
        ));
    }
    Ok(Message {
        role,
        content,
        tool_calls: wire
            .tool_calls
            .into_iter()
            .map(|call| ToolCall {
                id: call.id,
                name: call.function.name,
                arguments: call.function.arguments,
            })
            .collect(),
        tool_call_id: wire.tool_call_id,
    })
}

// ---- answers, read from a server ----

/// Reads a whole (not streamed) answer of a server.
pub fn completion_from_wire(body: &[u8], model: &str) -> Result<Completion, String> {
    if let Ok(error) = serde_json::from_slice::<ErrorBody>(body) {
        return Err(format!(
            "the server answered an error: {}",
            one_line(&error.error.message)
        ));
    }
    let answer: ChatCompletion = serde_json::from_slice(body)
        .map_err(|e| format!("the server's answer is not a chat completion: {e}"))?;
    let choice = answer
        .choices
        .into_iter()
        .next()
        .ok_or("the server's answer holds no choice")?;
    let content = choice.message.content.unwrap_or_default();
    let mut size = content.len();
    if choice.message.tool_calls.len() > MAX_TOOL_CALLS {
        return Err(format!(
            "the server's answer holds {} tool calls; at most {MAX_TOOL_CALLS} are read",
            choice.message.tool_calls.len()
        ));
    }
    let tool_calls: Vec<ToolCall> = choice
        .message
        .tool_calls
        .into_iter()
        .map(|call| {
            size += call.function.arguments.len() + call.function.name.len();
            ToolCall {
                id: call.id,
                name: call.function.name,
                arguments: call.function.arguments,
            }
        })
        .collect();
    if size > MAX_ANSWER_BYTES {
        return Err(format!(
            "the server's answer is larger than {MAX_ANSWER_BYTES} bytes"
        ));
    }
    let usage = answer.usage.unwrap_or_default();
    Ok(Completion {
        stop_reason: stop_reason(choice.finish_reason.as_deref(), !tool_calls.is_empty()),
        content,
        tool_calls,
        model: model.to_owned(),
        usage: Usage {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
        },
        time_to_first_token: None,
    })
}

fn stop_reason(finish_reason: Option<&str>, called_tools: bool) -> StopReason {
    match finish_reason {
        _ if called_tools => StopReason::ToolCalls,
        Some("length") => StopReason::MaxTokens,
        Some("tool_calls" | "function_call") => StopReason::ToolCalls,
        _ => StopReason::EndTurn,
    }
}

/// Puts a streamed answer together from its events.
#[derive(Debug, Default)]
pub struct StreamAssembler {
    content: String,
    /// Tool calls by their index in the stream.
    calls: BTreeMap<u32, ToolCall>,
    finish_reason: Option<String>,
    usage: Option<WireUsage>,
    /// Content chunks seen: the completion's length when the server does
    /// not report usage.
    pieces: u32,
    done: bool,
    size: usize,
}

impl StreamAssembler {
    /// Reads one event's data. Returns the text that arrived with it; tool
    /// calls are whole only at the end (see [`Self::finish`]).
    pub fn push(&mut self, data: &str) -> Result<Option<String>, String> {
        if self.done {
            return Ok(None);
        }
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(None);
        }
        if let Ok(error) = serde_json::from_str::<ErrorBody>(data) {
            return Err(format!(
                "the server reported an error mid-answer: {}",
                one_line(&error.error.message)
            ));
        }
        let chunk: ChatCompletionChunk = serde_json::from_str(data)
            .map_err(|e| format!("the server sent a malformed stream event: {e}"))?;
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
        }
        let Some(choice) = chunk.choices.into_iter().find(|c| c.index == 0) else {
            return Ok(None);
        };
        if let Some(reason) = choice.finish_reason {
            self.finish_reason = Some(reason);
        }
        for piece in choice.delta.tool_calls {
            self.grow(
                piece.id.as_ref().map_or(0, String::len)
                    + piece.function.as_ref().map_or(0, |f| {
                        f.name.as_ref().map_or(0, String::len)
                            + f.arguments.as_ref().map_or(0, String::len)
                    }),
            )?;
            if !self.calls.contains_key(&piece.index) && self.calls.len() >= MAX_TOOL_CALLS {
                return Err(format!(
                    "the server's answer holds more than {MAX_TOOL_CALLS} tool calls"
                ));
            }
            let call = self.calls.entry(piece.index).or_insert_with(|| ToolCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            });
            if let Some(id) = piece.id {
                call.id = id;
            }
            if let Some(function) = piece.function {
                if let Some(name) = function.name {
                    call.name.push_str(&name);
                }
                if let Some(arguments) = function.arguments {
                    call.arguments.push_str(&arguments);
                }
            }
        }
        match choice.delta.content {
            Some(text) if !text.is_empty() => {
                self.grow(text.len())?;
                self.content.push_str(&text);
                self.pieces += 1;
                Ok(Some(text))
            }
            _ => Ok(None),
        }
    }

    fn grow(&mut self, bytes: usize) -> Result<(), String> {
        self.size += bytes;
        if self.size > MAX_ANSWER_BYTES {
            return Err(format!(
                "the server's answer is larger than {MAX_ANSWER_BYTES} bytes"
            ));
        }
        Ok(())
    }

    /// Whether the stream's end marker (`[DONE]`) arrived.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Whether the server said the answer is complete.
    pub fn is_complete(&self) -> bool {
        self.done || self.finish_reason.is_some()
    }

    /// The answer, once the stream has ended; an error if it ended before
    /// the server said the answer was complete (a server that died).
    pub fn finish(self, model: &str) -> Result<Completion, String> {
        if !self.is_complete() {
            return Err("the server's stream ended before the answer was complete".to_owned());
        }
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, call) in self.calls {
            if call.name.is_empty() {
                return Err(format!("the server's tool call {index} has no name"));
            }
            tool_calls.push(ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{index}")
                } else {
                    call.id
                },
                ..call
            });
        }
        let usage = self.usage.map_or(
            Usage {
                prompt_tokens: 0,
                completion_tokens: self.pieces,
            },
            |u| Usage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
            },
        );
        Ok(Completion {
            stop_reason: stop_reason(self.finish_reason.as_deref(), !tool_calls.is_empty()),
            content: self.content,
            tool_calls,
            model: model.to_owned(),
            usage,
            time_to_first_token: None,
        })
    }
}

/// A server's message made one line of bounded length, fit for an error.
pub fn one_line(text: &str) -> String {
    crate::text::one_line(text, 300)
}

/// A fresh id for a chat completion, in OpenAI's form.
pub fn completion_id() -> String {
    let mut bytes = [0u8; 12];
    // An id only has to be unique enough to tell answers apart in logs.
    let _ = getrandom::fill(&mut bytes);
    format!("chatcmpl-{}", hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_answer_with_tool_calls_is_put_together() {
        let mut stream = StreamAssembler::default();
        for event in [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"check."}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"weather","arguments":"{\"ci"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Paris\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}"#,
            "[DONE]",
        ] {
            stream.push(event).unwrap();
        }
        let completion = stream.finish("gpt").unwrap();
        assert_eq!(completion.content, "Let me check.");
        assert_eq!(completion.tool_calls.len(), 1);
        assert_eq!(completion.tool_calls[0].id, "c1");
        assert_eq!(completion.tool_calls[0].arguments, r#"{"city":"Paris"}"#);
        assert_eq!(completion.stop_reason, StopReason::ToolCalls);
        assert_eq!(completion.usage.prompt_tokens, 12);
    }

    #[test]
    fn a_stream_cut_short_or_garbled_is_an_error() {
        let mut stream = StreamAssembler::default();
        stream
            .push(r#"{"choices":[{"index":0,"delta":{"content":"Par"}}]}"#)
            .unwrap();
        let error = stream.finish("m").unwrap_err();
        assert!(error.contains("ended before"), "{error}");

        let mut stream = StreamAssembler::default();
        let error = stream.push("{\"choices\": [oops").unwrap_err();
        assert!(error.contains("malformed stream event"), "{error}");

        let mut stream = StreamAssembler::default();
        let error = stream
            .push(r#"{"error":{"message":"overloaded\nplease retry"}}"#)
            .unwrap_err();
        assert!(error.ends_with("overloaded please retry"), "{error}");
    }

    #[test]
    fn a_whole_answer_is_read_and_bounded() {
        let body = br#"{"id":"x","object":"chat.completion","created":1,"model":"m",
            "choices":[{"index":0,"message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},
            "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}"#;
        let completion = completion_from_wire(body, "m").unwrap();
        assert_eq!(completion.content, "");
        assert_eq!(completion.tool_calls[0].name, "f");
        assert_eq!(completion.usage.completion_tokens, 4);

        let error = completion_from_wire(b"<html>502</html>", "m").unwrap_err();
        assert!(error.contains("not a chat completion"), "{error}");
        let error = completion_from_wire(br#"{"choices":[]}"#, "m").unwrap_err();
        assert!(error.contains("no choice"), "{error}");
    }

    #[test]
    fn a_request_reads_the_way_clients_write_it() {
        let wire: ChatCompletionRequest = serde_json::from_value(serde_json::json!({
            "model": "local",
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c", "content": "42"}
            ],
            "max_completion_tokens": 5,
            "top_p": 0.9,
            "stream": true,
            "stream_options": {"include_usage": true},
            "response_format": {"type": "json_object"},
            "frequency_penalty": 0.5
        }))
        .unwrap();
        let read = request_from_wire(wire).unwrap();
        assert_eq!(read.model.as_deref(), Some("local"));
        assert_eq!(read.request.frequency_penalty, Some(0.5));
        assert!(read.stream && read.include_usage);
        assert_eq!(read.request.max_tokens, Some(5));
        assert_eq!(read.request.messages[0].role, Role::System);
        assert_eq!(read.request.messages[1].content, "Hi");
        assert_eq!(read.request.messages[2].tool_calls[0].name, "f");
        assert!(read.request.response_schema.is_some());

        for (request, reason) in [
            (serde_json::json!({"messages": []}), "at least one"),
            (
                serde_json::json!({"messages": [{"role": "wizard", "content": "x"}]}),
                "role \"wizard\"",
            ),
            (
                serde_json::json!({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}),
                "text only",
            ),
            (
                serde_json::json!({"messages": [{"role": "user", "content": "x"}], "n": 3}),
                "one choice",
            ),
            (
                serde_json::json!({"messages": vec![serde_json::json!({"role": "user", "content": "x"}); crate::llm::MAX_MESSAGES + 1]}),
                "at most 1000 messages",
            ),
            (
                serde_json::json!({"messages": [{"role": "user", "content": "x"}], "tool_choice": "any"}),
                "`tool_choice` must be",
            ),
            (
                serde_json::json!({"messages": [{"role": "user", "content": "x"}], "presence_penalty": 3.0}),
                "between -2 and 2",
            ),
        ] {
            let wire: ChatCompletionRequest = serde_json::from_value(request).unwrap();
            let error = request_from_wire(wire).unwrap_err();
            assert!(error.contains(reason), "{error}");
        }
    }

    #[test]
    fn our_request_round_trips_through_the_wire_format() {
        let request = ChatRequest {
            messages: vec![Message::system("s"), Message::user("u")],
            tools: vec![ToolSpec {
                name: "f".into(),
                description: "does f".into(),
                parameters: serde_json::json!({"type": "object"}),
            }],
            tool_choice: ToolChoice::Auto,
            max_tokens: Some(7),
            temperature: Some(0.0),
            response_schema: None,
            seed: Some(3),
            frequency_penalty: None,
            presence_penalty: None,
            parallel_tool_calls: Some(false),
            grounding: None,
            caller: None,
        };
        for choice in [
            ToolChoice::Auto,
            ToolChoice::Required,
            ToolChoice::Named("f".into()),
        ] {
            let request = ChatRequest {
                tool_choice: choice,
                ..request.clone()
            };
            let wire = request_to_wire("m", &request, false);
            let text = serde_json::to_string(&wire).unwrap();
            let back = request_from_wire(serde_json::from_str(&text).unwrap()).unwrap();
            assert_eq!(back.request, request);
        }
    }
}
