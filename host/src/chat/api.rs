//! Conversations over HTTP for programs, on `agentsite serve`, behind the
//! node's token and its Host and Origin rules (the command line's
//! `agentsite chat` passes with its control token). The chat page uses the
//! same conversations through its own routes (`/chat/…`, with its session
//! and anti-forgery checks).
//!
//! | request | does |
//! |---|---|
//! | `POST /api/chat` `{"title"?, "agent"?}` | starts a conversation (201, its record) |
//! | `GET /api/chat` | lists conversations, newest first |
//! | `GET /api/chat/{id}?last=N` | the record and its last N entries (50; at most 500) |
//! | `POST /api/chat/{id}/messages` `{"text", "team_up"?}` | a person's message (202: the entry and the conversation's title); the answer follows on the events |
//! | `GET /api/chat/{id}/events?after=N` | server-sent events: `entry` (each entry after N, then new ones), `working`, `delta` (reply text as written), `idle` |
//!
//! Errors are `{"error": "<one line>"}`.

use super::{ChatError, ChatEvent, Chats, Conversation, Entry};
use crate::http::json_error::{body, failure};
use crate::http::token::{Family, Gate};
use crate::requester::Requester;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Extension, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::sync::Arc;

/// The largest request body: a message and its options.
const MAX_BODY: usize = super::MAX_TEXT * 2 + 4096;
/// Entries `GET /api/chat/{id}` returns by default, and at most.
const LAST_ENTRIES: usize = 50;
const MOST_ENTRIES: usize = 500;

/// `GET /api/chat/{id}`
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConversationAnswer {
    pub conversation: Conversation,
    /// Its last entries, oldest first.
    pub entries: Vec<Entry>,
}

/// The `/api/chat` routes, behind `gate`.
pub fn router(chats: Arc<Chats>, gate: Gate) -> Router {
    let routes = Router::new()
        .route("/api/chat", post(create).get(list))
        .route("/api/chat/{id}", get(show))
        .route("/api/chat/{id}/messages", post(say))
        .route("/api/chat/{id}/events", get(events))
        .layer(DefaultBodyLimit::max(MAX_BODY));
    gate.for_family(Family::Json)
        .guard(routes)
        .with_state(chats)
}

/// The `/api/chat` routes of a node whose conversations cannot be had,
/// each answering 503 with `reason`.
pub fn unavailable(reason: String, gate: Gate) -> Router {
    let reason = Arc::new(reason);
    let answer = move || {
        let reason = reason.clone();
        async move { failure(StatusCode::SERVICE_UNAVAILABLE, reason) }
    };
    gate.for_family(Family::Json).guard(
        Router::new()
            .route("/api/chat", axum::routing::any(answer.clone()))
            .route("/api/chat/{*rest}", axum::routing::any(answer)),
    )
}

/// The status and one-line body of a refused chat request.
pub(crate) fn refused(error: ChatError) -> Response {
    let status = match &error {
        ChatError::Invalid(_) => StatusCode::BAD_REQUEST,
        ChatError::NotFound(_) => StatusCode::NOT_FOUND,
        ChatError::Busy(_) => StatusCode::CONFLICT,
        ChatError::Storage(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    failure(status, error)
}

/// `{"title"?, "agent"?}`
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewConversation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// An agent (name or id) to talk to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// `{"text", "team_up"?}`
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Said {
    pub text: String,
    #[serde(default)]
    pub team_up: bool,
}

async fn create(State(chats): State<Arc<Chats>>, bytes: axum::body::Bytes) -> Response {
    let new: NewConversation = match body(&bytes) {
        Ok(new) => new,
        Err(why) => return failure(StatusCode::BAD_REQUEST, why),
    };
    match chats
        .create(new.title.as_deref(), new.agent.as_deref())
        .await
    {
        Ok(conversation) => (StatusCode::CREATED, Json(conversation)).into_response(),
        Err(error) => refused(error),
    }
}

async fn list(State(chats): State<Arc<Chats>>) -> Response {
    match chats.list().await {
        Ok(conversations) => Json(conversations).into_response(),
        Err(error) => refused(error),
    }
}

#[derive(Deserialize)]
struct ShowQuery {
    last: Option<usize>,
}

async fn show(
    State(chats): State<Arc<Chats>>,
    Path(id): Path<String>,
    Query(query): Query<ShowQuery>,
) -> Response {
    let conversation = match chats.get(&id).await {
        Ok(conversation) => conversation,
        Err(error) => return refused(error),
    };
    let mut entries = match chats.entries(&id, 0).await {
        Ok(entries) => entries,
        Err(error) => return refused(error),
    };
    let last = query.last.unwrap_or(LAST_ENTRIES).min(MOST_ENTRIES);
    entries.drain(..entries.len().saturating_sub(last));
    Json(ConversationAnswer {
        conversation,
        entries,
    })
    .into_response()
}

async fn say(
    State(chats): State<Arc<Chats>>,
    Path(id): Path<String>,
    from: Option<Extension<ConnectInfo<SocketAddr>>>,
    bytes: axum::body::Bytes,
) -> Response {
    let said: Said = match body(&bytes) {
        Ok(said) => said,
        Err(why) => return failure(StatusCode::BAD_REQUEST, why),
    };
    let requester = Requester::new("chat", from.map(|Extension(ConnectInfo(at))| at.ip()));
    match chats.send(&id, &said.text, said.team_up, &requester).await {
        Ok(entry) => {
            // With the conversation's title, which a first message may have made.
            let mut answer = serde_json::to_value(&entry).unwrap_or_default();
            if let Ok(conversation) = chats.get(&id).await {
                answer["title"] = conversation.title.into();
            }
            (StatusCode::ACCEPTED, Json(answer)).into_response()
        }
        Err(error) => refused(error),
    }
}

#[derive(Deserialize)]
struct After {
    #[serde(default)]
    after: u64,
}

async fn events(
    State(chats): State<Arc<Chats>>,
    Path(id): Path<String>,
    Query(query): Query<After>,
    headers: HeaderMap,
) -> Response {
    if let Err(error) = chats.get(&id).await {
        return refused(error);
    }
    let (sender, receiver) = tokio::sync::mpsc::channel(256);
    tokio::spawn(chats.follow(
        id,
        crate::http::streams::resume_from(&headers, query.after),
        sender,
    ));
    crate::http::streams::event_stream(receiver, sse_event)
}

/// A conversation's event as a server-sent event: `entry` (with the
/// entry's number as its id), `delta`, `working` or `idle`.
pub(crate) fn sse_event(event: ChatEvent) -> Event {
    match event {
        ChatEvent::Entry(entry) => Event::default()
            .event("entry")
            .id(entry.seq.to_string())
            .json_data(&entry)
            .unwrap_or_default(),
        ChatEvent::Delta(text) => Event::default()
            .event("delta")
            .json_data(&text)
            .unwrap_or_default(),
        ChatEvent::Working(text) => Event::default()
            .event("working")
            .json_data(&text)
            .unwrap_or_default(),
        ChatEvent::Idle => Event::default().event("idle").data("idle"),
    }
}
