//! A model on a server that speaks the OpenAI chat-completions API: OpenAI
//! itself, Ollama, vLLM, llama.cpp's server, LM Studio, or another node's
//! `/v1` endpoint.
//!
//! A request streams when its caller wants the text as it comes (and to
//! know the time to first token); otherwise it asks for the whole answer.
//! Either way the whole exchange runs under the earlier of the caller's
//! deadline and the model's configured timeout, reads at most
//! [`MAX_RESPONSE_BYTES`] of the server's answer, and turns every failure
//! into one line that names the model.

use super::config::OpenAiConfig;
use super::wire::{self, ModelList, StreamAssembler};
use super::{ChatModel, ChatRequest, Completion, Delta, DeltaSink, LlmFailure, ModelStatus};
use futures::{Stream, StreamExt as _, TryStreamExt as _};
use reqwest::StatusCode;
use std::time::{Duration, Instant};

/// Bytes of a server's answer read at most, streamed or whole. A stream of
/// text is a few times the size of the text it carries.
pub const MAX_RESPONSE_BYTES: usize = 4 * wire::MAX_ANSWER_BYTES;
/// Bytes of an error answer read for its message.
const MAX_ERROR_BYTES: usize = 64 << 10;
/// How long `agentsite models` waits for a server to list its models.
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);

pub struct OpenAiModel {
    name: String,
    config: OpenAiConfig,
    client: reqwest::Client,
}

impl OpenAiModel {
    pub fn new(name: &str, config: &OpenAiConfig) -> anyhow::Result<Self> {
        let mut headers = reqwest::header::HeaderMap::new();
        for (key, value) in &config.headers {
            headers.insert(
                reqwest::header::HeaderName::try_from(key.as_str())?,
                reqwest::header::HeaderValue::try_from(value.as_str())?,
            );
        }
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .default_headers(headers)
            .user_agent(concat!("agentsite/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(OpenAiModel {
            name: name.to_owned(),
            config: config.clone(),
            client,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.config.base_url.trim_end_matches('/'))
    }

    /// The API key from its variable; read per request, so that an
    /// operator can set it without restarting the node.
    fn api_key(&self) -> Result<Option<String>, LlmFailure> {
        let Some(variable) = &self.config.api_key_env else {
            return Ok(None);
        };
        match std::env::var(variable) {
            Ok(key) if !key.trim().is_empty() => Ok(Some(key.trim().to_owned())),
            _ => Err(LlmFailure::Unavailable(format!(
                "model {:?}: its API key variable {variable} is not set",
                self.name
            ))),
        }
    }

    fn post(&self, key: Option<&str>) -> reqwest::RequestBuilder {
        let request = self.client.post(self.url("chat/completions"));
        match key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    fn failure(&self, why: impl std::fmt::Display) -> LlmFailure {
        LlmFailure::Unavailable(format!("model {:?}: {why}", self.name))
    }

    fn unreachable(&self, error: &reqwest::Error) -> LlmFailure {
        self.failure(format!(
            "cannot reach {}: {}",
            self.config.base_url,
            error_chain(error)
        ))
    }

    /// The failure an HTTP error status stands for, with the server's message.
    fn refused(&self, status: StatusCode, body: &[u8]) -> LlmFailure {
        let message = serde_json::from_slice::<wire::ErrorBody>(body)
            .map(|e| e.error.message)
            .unwrap_or_else(|_| String::from_utf8_lossy(body).into_owned());
        let message = wire::one_line(&message);
        let said = if message.is_empty() {
            format!("the server answered {status}")
        } else {
            format!("the server answered {status}: {message}")
        };
        let line = format!("model {:?}: {said}", self.name);
        match status {
            StatusCode::TOO_MANY_REQUESTS => LlmFailure::Busy(line),
            StatusCode::BAD_REQUEST
            | StatusCode::NOT_FOUND
            | StatusCode::PAYLOAD_TOO_LARGE
            | StatusCode::UNPROCESSABLE_ENTITY => LlmFailure::InvalidRequest(line),
            _ => LlmFailure::Unavailable(line),
        }
    }

    async fn exchange(
        &self,
        request: &ChatRequest,
        started: Instant,
        sink: DeltaSink,
    ) -> Result<Completion, LlmFailure> {
        let key = self.api_key()?;
        let stream = sink.is_some();
        let body = wire::request_to_wire(&self.config.model, request, stream);
        let response = self
            .post(key.as_deref())
            .json(&body)
            .send()
            .await
            .map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        if !status.is_success() {
            let body = read_bounded(response, MAX_ERROR_BYTES)
                .await
                .unwrap_or_default();
            return Err(self.refused(status, &body));
        }
        if !stream {
            let body = read_bounded(response, MAX_RESPONSE_BYTES)
                .await
                .map_err(|e| self.failure(e))?;
            return wire::completion_from_wire(&body, &self.name).map_err(|e| self.failure(e));
        }
        let bytes = response.bytes_stream().map_err(|e| error_chain(&e));
        assemble_stream(bytes, &self.name, started, &sink)
            .await
            .map_err(|e| self.failure(e))
    }
}

/// Reads a streamed answer (server-sent events of chat completion chunks)
/// from `bytes`, sending text to `sink` as it arrives and the tool calls
/// once whole. Reads at most [`MAX_RESPONSE_BYTES`]; errors are one line.
pub async fn assemble_stream<S>(
    bytes: S,
    model: &str,
    started: Instant,
    sink: &DeltaSink,
) -> Result<Completion, String>
where
    S: Stream<Item = Result<bytes::Bytes, String>> + Unpin,
{
    let mut read = 0usize;
    let bounded = bytes.map(move |chunk| {
        let chunk = chunk?;
        read += chunk.len();
        if read > MAX_RESPONSE_BYTES {
            return Err(format!(
                "the server's stream is larger than {MAX_RESPONSE_BYTES} bytes"
            ));
        }
        Ok(chunk)
    });
    let mut events = sse_stream::SseStream::from_bytes_stream(bounded.map_err(StreamBroke));
    let mut assembler = StreamAssembler::default();
    let mut first_text = None;
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| format!("the server's stream broke: {e}"))?;
        let Some(data) = event.data else { continue };
        if let Some(text) = assembler.push(&data)? {
            first_text.get_or_insert_with(|| started.elapsed());
            if let Some(sink) = sink {
                // A receiver that went away is the caller's business: the
                // answer is still returned whole.
                let _ = sink.send(Delta::Text(text)).await;
            }
        }
        if assembler.is_done() {
            break;
        }
    }
    let mut completion = assembler.finish(model)?;
    completion.time_to_first_token = first_text.or_else(|| Some(started.elapsed()));
    if let Some(sink) = sink {
        for call in &completion.tool_calls {
            let _ = sink.send(Delta::ToolCall(call.clone())).await;
        }
    }
    Ok(completion)
}

/// Why a stream's bytes stopped, as an error the SSE reader carries.
#[derive(Debug)]
pub(crate) struct StreamBroke(pub(crate) String);

impl std::fmt::Display for StreamBroke {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StreamBroke {}

/// The body of `response`, refusing one longer than `limit` bytes.
async fn read_bounded(response: reqwest::Response, limit: usize) -> Result<Vec<u8>, String> {
    use crate::http::bounded::BodyError;
    crate::http::bounded::read_bounded(response, limit)
        .await
        .map_err(|e| match e {
            BodyError::TooLarge(limit) => {
                format!("the server's answer is larger than {limit} bytes")
            }
            BodyError::Broke(e) => format!("the server's answer broke off: {}", error_chain(&e)),
        })
}

/// An error and its causes on one line: reqwest's own message alone says
/// only "error sending request".
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    wire::one_line(&line)
}

#[async_trait::async_trait]
impl ChatModel for OpenAiModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn complete(
        &self,
        request: ChatRequest,
        deadline: Instant,
        sink: DeltaSink,
    ) -> Result<Completion, LlmFailure> {
        let started = Instant::now();
        let deadline = deadline.min(started + self.config.timeout);
        match tokio::time::timeout_at(deadline.into(), self.exchange(&request, started, sink)).await
        {
            Ok(result) => result,
            Err(_) => Err(LlmFailure::DeadlineExceeded(format!(
                "model {:?} did not finish before the deadline ({} ms)",
                self.name,
                deadline.saturating_duration_since(started).as_millis()
            ))),
        }
    }

    async fn status(&self) -> ModelStatus {
        let state = match self.api_key() {
            Err(failure) => failure.to_string(),
            Ok(key) => {
                let mut request = self.client.get(self.url("models"));
                if let Some(key) = key {
                    request = request.bearer_auth(key);
                }
                match tokio::time::timeout(STATUS_TIMEOUT, request.send()).await {
                    Err(_) => format!(
                        "unreachable: no answer within {} s",
                        STATUS_TIMEOUT.as_secs()
                    ),
                    Ok(Err(e)) => format!("unreachable: {}", error_chain(&e)),
                    Ok(Ok(response)) if !response.status().is_success() => {
                        let status = response.status();
                        let body = read_bounded(response, MAX_ERROR_BYTES)
                            .await
                            .unwrap_or_default();
                        self.refused(status, &body).to_string()
                    }
                    Ok(Ok(response)) => {
                        let listed = read_bounded(response, MAX_ERROR_BYTES * 16)
                            .await
                            .ok()
                            .and_then(|body| serde_json::from_slice::<ModelList>(&body).ok());
                        match listed {
                            Some(list) if list.data.iter().any(|m| m.id == self.config.model) => {
                                "reachable".to_owned()
                            }
                            Some(_) => format!(
                                "reachable, but the server does not list model {:?}",
                                self.config.model
                            ),
                            None => "reachable (its model list is unreadable)".to_owned(),
                        }
                    }
                }
            }
        };
        ModelStatus {
            name: self.name.clone(),
            kind: "openai".into(),
            location: format!("{} ({})", self.config.base_url, self.config.model),
            state,
            size: None,
            default: false,
        }
    }
}
