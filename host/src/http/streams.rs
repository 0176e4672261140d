//! Responses that go on: server-sent events (the pages, goals, A2A, `/v1`
//! streaming) and newline-delimited JSON (progress a script reads as it
//! arrives).

use axum::http::header;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};

/// How long an event stream stays quiet at most.
pub const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(1);

/// A response of server-sent events: each item sent to the other end of
/// `items`, as `to_event` writes it, with keep-alive comments between them,
/// until that end is dropped. A client going away drops `items`, which
/// tells the sender.
pub fn event_stream<T: Send + 'static>(
    items: tokio::sync::mpsc::Receiver<T>,
    to_event: fn(T) -> Event,
) -> Response {
    let stream = futures::stream::unfold(items, move |mut items| async move {
        let item = items.recv().await?;
        Some((Ok::<_, std::convert::Infallible>(to_event(item)), items))
    });
    // A comment line each second the stream is quiet: clients and proxies
    // with a read timeout (the A2A SDK's is a few seconds) stay connected
    // through a long step, and a client that left is noticed.
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// Where an event stream resumes: after the browser's `Last-Event-ID`
/// when it reconnects, else after `after`.
pub fn resume_from(headers: &axum::http::HeaderMap, after: u64) -> u64 {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(after)
}

/// A response of newline-delimited JSON: each item sent to the other end
/// of `items`, one per line as it comes, until that end is dropped (a
/// progress stream a script reads as it arrives).
pub fn ndjson_stream<T: serde::Serialize + Send + 'static>(
    items: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> Response {
    let stream = futures::stream::unfold(items, |mut items| async move {
        let item = items.recv().await?;
        Some((serde_json::to_string(&item).map(|text| text + "\n"), items))
    });
    (
        [
            (header::CONTENT_TYPE, "application/x-ndjson"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        axum::body::Body::from_stream(stream),
    )
        .into_response()
}
