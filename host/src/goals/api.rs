//! Goals over HTTP, on `agentsite serve`, behind the node's token and its
//! Host and Origin rules (the command line passes with its control token):
//!
//! | request | does |
//! |---|---|
//! | `POST /api/goals` `{"text", "team"?, "limits"?, "model"?}` | starts a goal (201, its record) |
//! | `GET /api/goals` | lists goals, newest first |
//! | `GET /api/goals/{id}` | the record and every message |
//! | `GET /api/goals/{id}/events?after=N` | server-sent events: the messages after N, then new ones as they happen, until the goal stops |
//! | `POST /api/goals/{id}/messages` `{"text"}` | a person's message (202) |
//! | `POST /api/goals/{id}/cancel` | stops it (202) |
//!
//! Errors are `{"error": "<one line>"}`.

use super::{GoalError, GoalEvent, GoalRecord, Goals, Message, NewGoal};
use crate::http::json_error::{body, failure};
use crate::http::token::{Family, Gate};
use crate::requester::Requester;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;

/// The largest request body: a goal's text and its options.
const MAX_BODY: usize = super::MAX_TEXT * 2 + 4096;

/// `GET /api/goals/{id}`
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GoalAnswer {
    pub record: GoalRecord,
    pub messages: Vec<Message>,
}

/// The `/api/goals` routes, behind `gate`.
pub fn router(goals: Arc<Goals>, gate: Gate) -> Router {
    let routes = Router::new()
        .route("/api/goals", post(create).get(list))
        .route("/api/goals/{id}", get(show))
        .route("/api/goals/{id}/events", get(events))
        .route("/api/goals/{id}/messages", post(say))
        .route("/api/goals/{id}/cancel", post(cancel))
        .layer(DefaultBodyLimit::max(MAX_BODY));
    gate.for_family(Family::Json)
        .guard(routes)
        .with_state(goals)
}

/// The `/api/goals` routes of a node whose goals cannot be had, each
/// answering 503 with `reason`.
pub fn unavailable(reason: String, gate: Gate) -> Router {
    let reason = Arc::new(format!("goals are unavailable on this node: {reason}"));
    let answer = move || {
        let reason = reason.clone();
        async move { failure(StatusCode::SERVICE_UNAVAILABLE, reason) }
    };
    gate.for_family(Family::Json).guard(
        Router::new()
            .route("/api/goals", axum::routing::any(answer.clone()))
            .route("/api/goals/{*rest}", axum::routing::any(answer)),
    )
}

fn refused(error: GoalError) -> Response {
    let status = match &error {
        GoalError::Invalid(_) => StatusCode::BAD_REQUEST,
        GoalError::NotFound(_) => StatusCode::NOT_FOUND,
        GoalError::Conflict(_) => StatusCode::CONFLICT,
        GoalError::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
        GoalError::Storage(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    failure(status, error)
}

async fn create(
    State(goals): State<Arc<Goals>>,
    from: Option<Extension<ConnectInfo<SocketAddr>>>,
    operator: Option<Extension<crate::requester::Operator>>,
    bytes: axum::body::Bytes,
) -> Response {
    let new: NewGoal = match body(&bytes) {
        Ok(new) => new,
        Err(why) => return failure(StatusCode::BAD_REQUEST, why),
    };
    let requester = Requester::of(
        "http",
        from.map(|Extension(ConnectInfo(at))| at.ip()),
        operator.is_some(),
    );
    match goals.start(new, &requester).await {
        Ok(record) => (StatusCode::CREATED, Json(record)).into_response(),
        Err(error) => refused(error),
    }
}

#[derive(Deserialize)]
struct ListQuery {
    limit: Option<usize>,
}

async fn list(State(goals): State<Arc<Goals>>, Query(query): Query<ListQuery>) -> Response {
    match goals.list(query.limit.unwrap_or(50)).await {
        Ok(records) => Json(records).into_response(),
        Err(error) => refused(error),
    }
}

async fn show(State(goals): State<Arc<Goals>>, Path(id): Path<String>) -> Response {
    let record = match goals.record(&id).await {
        Ok(record) => record,
        Err(error) => return refused(error),
    };
    match goals.messages(&id, 0, super::run::MAX_MESSAGES).await {
        Ok(messages) => Json(GoalAnswer { record, messages }).into_response(),
        Err(error) => refused(error),
    }
}

#[derive(Deserialize)]
struct Said {
    text: String,
}

async fn say(
    State(goals): State<Arc<Goals>>,
    Path(id): Path<String>,
    bytes: axum::body::Bytes,
) -> Response {
    let said: Said = match body(&bytes) {
        Ok(said) => said,
        Err(why) => return failure(StatusCode::BAD_REQUEST, why),
    };
    match goals.say(&id, said.text).await {
        Ok(record) => (StatusCode::ACCEPTED, Json(record)).into_response(),
        Err(error) => refused(error),
    }
}

async fn cancel(State(goals): State<Arc<Goals>>, Path(id): Path<String>) -> Response {
    if let Err(error) = goals.record(&id).await {
        return refused(error);
    }
    match goals.cancel(&id) {
        Ok(()) => (StatusCode::ACCEPTED, Json(json!({ "cancelled": id }))).into_response(),
        Err(error) => refused(error),
    }
}

#[derive(Deserialize)]
struct EventsQuery {
    #[serde(default)]
    after: u64,
}

/// One event of the stream: `message` (a [`Message`]) or `state` (a
/// [`GoalRecord`]), with the message's number as the event id so that a
/// client reconnecting with `Last-Event-ID` (or `after`) catches up.
pub(crate) fn sse_event(event: &GoalEvent) -> Event {
    match event {
        GoalEvent::Message { message, .. } => Event::default()
            .event("message")
            .id(message.seq.to_string())
            .json_data(message)
            .unwrap_or_default(),
        GoalEvent::State { record, .. } => Event::default()
            .event("state")
            .json_data(record)
            .unwrap_or_default(),
    }
}

async fn events(
    State(goals): State<Arc<Goals>>,
    Path(id): Path<String>,
    Query(query): Query<EventsQuery>,
    headers: axum::http::HeaderMap,
) -> Response {
    if let Err(error) = goals.record(&id).await {
        return refused(error);
    }
    let after = crate::http::streams::resume_from(&headers, query.after);
    let (sender, receiver) = tokio::sync::mpsc::channel(64);
    tokio::spawn(goals.follow(id, after, sender));
    crate::http::streams::event_stream(receiver, |event| sse_event(&event))
}
