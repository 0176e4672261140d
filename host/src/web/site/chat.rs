//! AgentChat's pages (`/chat`): the node's conversations, one at a time,
//! its entries streamed to the page (server-sent events that a reconnecting
//! page resumes from the last entry it has), and the goals "team up"
//! messages start, shown as they happen.

use super::session::Access;
use super::{JsonBody, Site, failure};
use crate::chat::Chats;
use crate::chat::api::{NewConversation, Said, refused};
use crate::requester::Requester;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use minijinja::value::Serde;
use serde::Deserialize;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;

/// Why a node without goals cannot show or stop one.
const NO_GOALS: &str = "goals are unavailable on this node";

/// Why this node has no conversations or no goals; answered as 503.
struct Unavailable(String);

impl From<Unavailable> for Response {
    fn from(unavailable: Unavailable) -> Response {
        failure(StatusCode::SERVICE_UNAVAILABLE, unavailable.0)
    }
}

impl Site {
    /// The node's conversations, or why it has none.
    fn chats(&self) -> Result<&Arc<Chats>, Unavailable> {
        self.chats.as_ref().map_err(|why| Unavailable(why.clone()))
    }

    /// The node's goals, or why it has none.
    fn goals(&self) -> Result<Arc<crate::goals::Goals>, Unavailable> {
        self.chats()?
            .goals()
            .cloned()
            .ok_or_else(|| Unavailable(NO_GOALS.to_owned()))
    }
}

/// Goals listed beside the conversations (the newest).
const GOALS_LISTED: usize = 20;

/// What the chat pages show: the conversations list, and one conversation
/// or one goal.
enum Shown {
    Nothing,
    Conversation(String),
    Goal(String),
}

/// `GET /chat`, `GET /chat/{id}` and `GET /chat/goals/{goal}`: the
/// conversations and the node's goals (started here, from the command
/// line, over MCP), and one of them.
async fn chat_page(site: &Site, access: Access, shown: Shown) -> Response {
    let chats = match &site.chats {
        Ok(chats) => chats,
        Err(why) => return site.error_page(Some(access), StatusCode::SERVICE_UNAVAILABLE, why),
    };
    let conversations = match chats.list().await {
        Ok(list) => list,
        Err(e) => {
            return site.error_page(
                Some(access),
                StatusCode::INTERNAL_SERVER_ERROR,
                &e.to_string(),
            );
        }
    };
    let current = match &shown {
        Shown::Conversation(id) => match chats.get(id).await {
            Ok(conversation) => Some(conversation),
            Err(e) => return site.error_page(Some(access), StatusCode::NOT_FOUND, &e.to_string()),
        },
        _ => None,
    };
    let goals = match chats.goals() {
        Some(goals) => goals.list(GOALS_LISTED).await.unwrap_or_default(),
        None => Vec::new(),
    };
    let goal = match (&shown, chats.goals()) {
        (Shown::Goal(id), Some(goals)) => match goals.record(id).await {
            Ok(record) => Some(record),
            Err(e) => return site.error_page(Some(access), StatusCode::NOT_FOUND, &e.to_string()),
        },
        (Shown::Goal(_), None) => {
            return site.error_page(Some(access), StatusCode::SERVICE_UNAVAILABLE, NO_GOALS);
        }
        _ => None,
    };
    let frame = site.frame(access, "chat");
    site.pages.render(
        StatusCode::OK,
        "chat.html",
        minijinja::context! {
            conversations => Serde(conversations),
            current => Serde(current),
            goals => Serde(goals),
            goal => Serde(goal),
            goals_enabled => chats.goals().is_some(),
            ..frame,
        },
    )
}

pub async fn list(State(site): State<Arc<Site>>, Extension(access): Extension<Access>) -> Response {
    chat_page(&site, access, Shown::Nothing).await
}

pub async fn conversation(
    State(site): State<Arc<Site>>,
    Extension(access): Extension<Access>,
    Path(id): Path<String>,
) -> Response {
    chat_page(&site, access, Shown::Conversation(id)).await
}

pub async fn goal(
    State(site): State<Arc<Site>>,
    Extension(access): Extension<Access>,
    Path(goal): Path<String>,
) -> Response {
    chat_page(&site, access, Shown::Goal(goal)).await
}

/// `POST /chat` `{"title"?, "agent"?}`: a new conversation, `{"id", "url"}`.
pub async fn create(
    State(site): State<Arc<Site>>,
    JsonBody(new): JsonBody<NewConversation>,
) -> Result<Response, Response> {
    let conversation = site
        .chats()?
        .create(new.title.as_deref(), new.agent.as_deref())
        .await
        .map_err(refused)?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "id": conversation.id, "url": format!("/chat/{}", conversation.id) })),
    )
        .into_response())
}

/// `POST /chat/{id}/messages` `{"text", "team_up"?}` (202): the entry and
/// the conversation's `title`; the answer follows on the conversation's
/// events.
pub async fn say(
    State(site): State<Arc<Site>>,
    Path(id): Path<String>,
    from: Option<Extension<ConnectInfo<SocketAddr>>>,
    JsonBody(said): JsonBody<Said>,
) -> Result<Response, Response> {
    let requester = Requester::new("chat", from.map(|Extension(ConnectInfo(at))| at.ip()));
    let chats = site.chats()?;
    let entry = chats
        .send(&id, &said.text, said.team_up, &requester)
        .await
        .map_err(refused)?;
    // With the conversation's title, which a first message may have made.
    let mut answer = serde_json::to_value(&entry).unwrap_or_default();
    if let Ok(conversation) = chats.get(&id).await {
        answer["title"] = conversation.title.into();
    }
    Ok((StatusCode::ACCEPTED, Json(answer)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Renamed {
    title: String,
}

/// `POST /chat/{id}/rename` `{"title"}`
pub async fn rename(
    State(site): State<Arc<Site>>,
    Path(id): Path<String>,
    JsonBody(renamed): JsonBody<Renamed>,
) -> Result<Response, Response> {
    let conversation = site
        .chats()?
        .rename(&id, &renamed.title)
        .await
        .map_err(refused)?;
    Ok(Json(conversation).into_response())
}

/// `POST /chat/{id}/delete`
pub async fn delete(
    State(site): State<Arc<Site>>,
    Path(id): Path<String>,
) -> Result<Response, Response> {
    site.chats()?.delete(&id).await.map_err(refused)?;
    Ok(Json(json!({ "deleted": id })).into_response())
}

#[derive(Deserialize)]
pub struct After {
    #[serde(default)]
    after: u64,
}

/// `GET /chat/{id}/events?after=N`: `entry` events (with the entry's
/// number as id), `working` (what the node does for the answer now),
/// `delta` (text of the reply being written) and `idle`.
pub async fn events(
    State(site): State<Arc<Site>>,
    Path(id): Path<String>,
    Query(query): Query<After>,
    headers: HeaderMap,
) -> Result<Response, Response> {
    let chats = site.chats()?.clone();
    chats.get(&id).await.map_err(refused)?;
    let (sender, receiver) = tokio::sync::mpsc::channel(256);
    tokio::spawn(chats.follow(
        id,
        crate::http::streams::resume_from(&headers, query.after),
        sender,
    ));
    Ok(crate::http::streams::event_stream(
        receiver,
        crate::chat::api::sse_event,
    ))
}

/// `GET /chat/goals/{goal}/events?after=N`: the goal's messages and states,
/// as `/api/goals/{goal}/events` sends them.
pub async fn goal_events(
    State(site): State<Arc<Site>>,
    Path(goal): Path<String>,
    Query(query): Query<After>,
    headers: HeaderMap,
) -> Result<Response, Response> {
    let goals = site.goals()?;
    goals
        .record(&goal)
        .await
        .map_err(|e| failure(StatusCode::NOT_FOUND, e))?;
    let (sender, receiver) = tokio::sync::mpsc::channel(256);
    tokio::spawn(goals.follow(
        goal,
        crate::http::streams::resume_from(&headers, query.after),
        sender,
    ));
    Ok(crate::http::streams::event_stream(receiver, |event| {
        crate::goals::api::sse_event(&event)
    }))
}

/// `POST /chat/goals/{goal}/cancel`
pub async fn cancel_goal(
    State(site): State<Arc<Site>>,
    Path(goal): Path<String>,
) -> Result<Response, Response> {
    site.goals()?
        .cancel(&goal)
        .map_err(|e| failure(StatusCode::CONFLICT, e))?;
    Ok(Json(json!({ "cancelled": goal })).into_response())
}
