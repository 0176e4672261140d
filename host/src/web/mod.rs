//! The node's HTTP surface beyond MCP: the control API that the command line
//! uses to drive a running node.

pub mod api;
pub mod control;
pub mod guard;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};

/// A response of server-sent events: each event sent to the other end of
/// `events`, with keep-alive comments between them, until that end is
/// dropped. A client going away drops `events`, which tells the sender.
pub fn event_stream(events: tokio::sync::mpsc::Receiver<Event>) -> Response {
    let stream = futures::stream::unfold(events, |mut events| async move {
        let event = events.recv().await?;
        Some((Ok::<_, std::convert::Infallible>(event), events))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}
