//! The node's models over HTTP in the OpenAI format: `GET /v1/models` and
//! `POST /v1/chat/completions` (whole answers, or server-sent events with
//! `stream: true`), so that any OpenAI client, and other nodes with
//! `kind = "openai"`, can use them. Behind the node's token where it has
//! one, as MCP is (the Host and Origin rules are the front end's:
//! [`crate::http::guard`]).

use crate::answers::steer::Steered;
use crate::answers::tool_loop::Turn;
use crate::clock::unix_seconds;
use crate::http::token::{Family, Gate};
use crate::llm::models::Models;
use crate::llm::wire::{self, ChatCompletionRequest, completion_id};
use crate::llm::{Completion, Delta, LlmFailure};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How long one request may run: the OpenAI API has no deadline of its
/// own, and a client that goes away stops its request anyway.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(600);
/// Largest request body, as for MCP.
const MAX_BODY: usize = crate::http::body_limit::MAX_REQUEST_BODY;
/// Who the metrics say asked.
const REQUESTER: &str = "http";

struct V1 {
    models: Arc<Models>,
}

/// The `/v1` routes for `models`, behind `gate`.
pub fn router(models: Arc<Models>, gate: Gate) -> Router {
    let routes = Router::new()
        .route("/v1/models", get(list_models))
        .route("/v1/chat/completions", post(chat_completions))
        .layer(DefaultBodyLimit::max(MAX_BODY));
    gate.for_family(Family::OpenAi)
        .guard(routes)
        .with_state(Arc::new(V1 { models }))
}

/// An error in the OpenAI shape.
fn error(status: StatusCode, kind: &str, code: Option<&str>, message: &str) -> Response {
    error_at(status, kind, code, None, message)
}

/// An error in OpenAI's shape; `param` names the request's field it is
/// about, as OpenAI's own errors do.
fn error_at(
    status: StatusCode,
    kind: &str,
    code: Option<&str>,
    param: Option<&str>,
    message: &str,
) -> Response {
    let message = wire::one_line(message);
    (
        status,
        Json(json!({
            "error": { "message": message, "type": kind, "param": param, "code": code }
        })),
    )
        .into_response()
}

/// The request body as a chat completion request, or the error naming
/// the field that does not fit (`max_tokens: expected a whole number, 0 or
/// more, got the integer -1`, param `max_tokens`).
fn read_request(
    headers: &axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<ChatCompletionRequest, Box<Response>> {
    let body = body.map_err(|rejection| {
        let status = match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::BAD_REQUEST,
        };
        error(
            status,
            "invalid_request_error",
            None,
            &rejection.body_text(),
        )
    })?;
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .is_some_and(|essence| essence == "application/json" || essence.ends_with("+json"));
    if !json {
        return Err(Box::new(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request_error",
            None,
            "the request body must be JSON, sent with Content-Type: application/json",
        )));
    }
    agentsite_json_words::parse(&body).map_err(|refusal| {
        // OpenAI names the top-level field: `messages` for `messages[0].role`.
        let param = refusal
            .path
            .as_deref()
            .map(|path| path.split(['.', '[']).next().unwrap_or(path));
        let message = match &refusal.kind {
            agentsite_json_words::Kind::NotJson(_) => format!("the request body is {refusal}"),
            _ => refusal.to_string(),
        };
        Box::new(error_at(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            None,
            param,
            &message,
        ))
    })
}

fn invalid(message: &str) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        None,
        message,
    )
}

/// The HTTP answer a failure of a model is.
fn failed(failure: &LlmFailure) -> Response {
    let (status, kind, code) = failure_status(failure);
    let mut response = error(status, kind, Some(code), &failure.to_string());
    if status == StatusCode::TOO_MANY_REQUESTS {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    }
    response
}

fn failure_status(failure: &LlmFailure) -> (StatusCode, &'static str, &'static str) {
    match failure {
        LlmFailure::NotGranted(_) => (StatusCode::FORBIDDEN, "permission_error", "not_granted"),
        LlmFailure::InvalidRequest(_) => (
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "invalid_request",
        ),
        LlmFailure::Refused(_) => (StatusCode::BAD_REQUEST, "invalid_request_error", "refused"),
        LlmFailure::BudgetExceeded(_) => (
            StatusCode::TOO_MANY_REQUESTS,
            "insufficient_quota",
            "budget_exceeded",
        ),
        LlmFailure::Busy(_) => (StatusCode::TOO_MANY_REQUESTS, "rate_limit_error", "busy"),
        LlmFailure::DeadlineExceeded(_) => (StatusCode::GATEWAY_TIMEOUT, "timeout", "deadline"),
        LlmFailure::Unavailable(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "unavailable",
        ),
    }
}

async fn list_models(State(v1): State<Arc<V1>>) -> Response {
    let list = wire::ModelList {
        object: "list".into(),
        data: v1
            .models
            .names()
            .into_iter()
            .map(|name| wire::ModelEntry {
                id: name.to_owned(),
                object: "model".into(),
                created: 0,
                owned_by: "agentsite".into(),
            })
            .collect(),
    };
    Json(list).into_response()
}

async fn chat_completions(
    State(v1): State<Arc<V1>>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let wire = match read_request(&headers, body) {
        Ok(wire) => wire,
        Err(refused) => return *refused,
    };
    let read = match wire::request_from_wire(wire) {
        Ok(read) => read,
        Err(why) => return invalid(&why),
    };
    let mut read = read;
    let model = match v1.models.get(read.model.as_deref()) {
        Ok(model) => model,
        Err(failure) => {
            return error(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                Some("model_not_found"),
                &failure.to_string(),
            );
        }
    };
    let deadline = Instant::now() + REQUEST_DEADLINE;
    // A model held to groundings is steered: it calls a tool when one is
    // plainly needed, and keeps to what the tools returned.
    let grounds = model.grounds();
    let model = model.name().to_owned();
    let id = completion_id();
    let created = unix_seconds();
    let (stream, include_usage) = (read.stream, read.include_usage);
    let respond =
        |completion: &Completion| whole(&id, created, &model, completion, stream, include_usage);
    let mut steered = Steered::Unchecked;
    if grounds {
        let ask = crate::answers::NodeAsk {
            models: v1.models.clone(),
            model: Some(model.clone()),
            requester: REQUESTER,
            caller: REQUESTER.to_owned(),
            deadline,
        };
        // With tools, the node plays the client's tool loop: each call
        // checked against the part it is for, the answer from the results.
        match crate::answers::tool_loop::play(&read.request, &ask, &model).await {
            Ok(Turn::Played(completion)) => return respond(&completion),
            Ok(Turn::ToTheModel) => steered = crate::answers::steer::steer(&mut read.request),
            Err(crate::answers::NodeAskFailure::Model(failure)) => return failed(&failure),
            Err(unusable) => {
                return error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "server_error",
                    Some("unavailable"),
                    &wire::one_line(&unusable.to_string()),
                );
            }
        }
    }
    // A steered model's answer that is checked (against the tools' results,
    // or for what only its memory could say) is checked before anyone
    // reads it, so it is written whole first.
    if !read.stream || steered.checks_the_answer() {
        let request = read.request.clone();
        let answered = v1
            .models
            .complete(Some(&model), read.request, deadline, None, REQUESTER)
            .await
            .map(|mut completion| {
                if let Some(replaced) =
                    crate::answers::steer::checked(&request, steered, &completion.content)
                {
                    completion.content = replaced;
                }
                completion
            });
        return match answered {
            Ok(completion) => respond(&completion),
            Err(failure) => failed(&failure),
        };
    }
    let (events, receiver) = mpsc::channel::<Event>(64);
    let chunk = Chunks {
        id,
        created,
        model: model.clone(),
    };
    tokio::spawn(stream_answer(
        v1.models.clone(),
        model,
        read.request,
        read.include_usage,
        deadline,
        chunk,
        events,
    ));
    crate::http::streams::event_stream(receiver, std::convert::identity)
}

/// `completion`, written whole, sent as the client asked: one JSON
/// answer, or (`stream`) its events at once.
fn whole(
    id: &str,
    created: u64,
    model: &str,
    completion: &Completion,
    stream: bool,
    include_usage: bool,
) -> Response {
    if !stream {
        return Json(wire::completion_to_wire(id, created, completion)).into_response();
    }
    let chunk = Chunks {
        id: id.to_owned(),
        created,
        model: model.to_owned(),
    };
    let events = whole_answer_events(&chunk, completion, include_usage);
    let (sender, receiver) = mpsc::channel::<Event>(events.len().max(1));
    for event in events {
        let _ = sender.try_send(event);
    }
    drop(sender);
    crate::http::streams::event_stream(receiver, std::convert::identity)
}

/// Runs a streamed request, sending its events to `events` until the
/// answer is whole or the client goes away (which stops the model).
async fn stream_answer(
    models: Arc<Models>,
    model: String,
    request: crate::llm::ChatRequest,
    include_usage: bool,
    deadline: Instant,
    chunk: Chunks,
    events: mpsc::Sender<Event>,
) {
    let (sink, mut deltas) = mpsc::channel::<Delta>(64);
    let answer = models.complete(Some(&model), request, deadline, Some(sink), REQUESTER);
    tokio::pin!(answer);
    if events.send(chunk.start()).await.is_err() {
        return;
    }
    let mut calls = 0u32;
    let result = loop {
        tokio::select! {
            biased;
            Some(delta) = deltas.recv() => {
                if events.send(chunk.delta(delta, &mut calls)).await.is_err() {
                    // The client is gone: dropping the answer stops the model.
                    return;
                }
            }
            result = &mut answer => break result,
            // The client went away while the model was still reading.
            () = events.closed() => return,
        }
    };
    // What the model sent just before it finished.
    while let Ok(delta) = deltas.try_recv() {
        if events.send(chunk.delta(delta, &mut calls)).await.is_err() {
            return;
        }
    }
    let last = match result {
        Ok(completion) => {
            let _ = events.send(chunk.finish(&completion)).await;
            if include_usage {
                let _ = events.send(chunk.usage(&completion)).await;
            }
            Event::default().data("[DONE]")
        }
        Err(failure) => {
            let (_, kind, code) = failure_status(&failure);
            Event::default().data(
                json!({ "error": {
                    "message": wire::one_line(&failure.to_string()),
                    "type": kind,
                    "code": code,
                }})
                .to_string(),
            )
        }
    };
    let _ = events.send(last).await;
}

/// The events of an answer written whole before it is sent: who speaks,
/// its text, how it ended, its usage when asked, and the end.
fn whole_answer_events(chunk: &Chunks, completion: &Completion, include_usage: bool) -> Vec<Event> {
    let mut events = vec![chunk.start()];
    let mut calls = 0;
    if !completion.content.is_empty() {
        events.push(chunk.delta(Delta::Text(completion.content.clone()), &mut calls));
    }
    for call in &completion.tool_calls {
        events.push(chunk.delta(Delta::ToolCall(call.clone()), &mut calls));
    }
    events.push(chunk.finish(completion));
    if include_usage {
        events.push(chunk.usage(completion));
    }
    events.push(Event::default().data("[DONE]"));
    events
}

/// Builds the events of one streamed answer.
struct Chunks {
    id: String,
    created: u64,
    model: String,
}

impl Chunks {
    fn chunk(&self, choices: Vec<wire::ChunkChoice>, usage: Option<wire::WireUsage>) -> Event {
        let chunk = wire::ChatCompletionChunk {
            id: self.id.clone(),
            object: "chat.completion.chunk".into(),
            created: self.created,
            model: self.model.clone(),
            choices,
            usage,
        };
        Event::default().data(serde_json::to_string(&chunk).unwrap_or_default())
    }

    fn event(&self, delta: wire::ChunkDelta, finish_reason: Option<&str>) -> Event {
        let choice = wire::ChunkChoice {
            index: 0,
            delta,
            finish_reason: finish_reason.map(str::to_owned),
        };
        self.chunk(vec![choice], None)
    }

    /// The first event: who speaks.
    fn start(&self) -> Event {
        self.event(
            wire::ChunkDelta {
                role: Some("assistant".into()),
                content: Some(String::new()),
                ..wire::ChunkDelta::default()
            },
            None,
        )
    }

    fn delta(&self, delta: Delta, calls: &mut u32) -> Event {
        match delta {
            Delta::Text(text) => self.event(
                wire::ChunkDelta {
                    content: Some(text),
                    ..wire::ChunkDelta::default()
                },
                None,
            ),
            Delta::ToolCall(call) => {
                let index = *calls;
                *calls += 1;
                let piece = wire::ToolCallDelta {
                    index,
                    id: Some(call.id),
                    kind: Some("function".into()),
                    function: Some(wire::FunctionDelta {
                        name: Some(call.name),
                        arguments: Some(call.arguments),
                    }),
                };
                self.event(
                    wire::ChunkDelta {
                        tool_calls: vec![piece],
                        ..wire::ChunkDelta::default()
                    },
                    None,
                )
            }
        }
    }

    fn finish(&self, completion: &Completion) -> Event {
        self.event(
            wire::ChunkDelta::default(),
            Some(completion.stop_reason.openai()),
        )
    }

    fn usage(&self, completion: &Completion) -> Event {
        self.chunk(Vec::new(), Some(completion.usage.into()))
    }
}
