//! A request body read whole up to a limit. Past the limit the rest is
//! still drained for a while, so that the client hears why: a server that
//! stops reading while the client is still sending makes its TCP stack
//! reset the connection, and the client then fails with a broken pipe
//! instead of reading the answer (RFC 9112 §9.6, "lingering close").

use futures::StreamExt as _;
use std::time::Duration;

/// The largest request body the node's JSON endpoints take (MCP, `/v1`):
/// a long prompt or a large tool argument, far from what a client sends in
/// the ordinary course.
pub const MAX_REQUEST_BODY: usize = 4 << 20;

/// How much of a refused body is still read, and for how long, before the
/// refusal goes out. Past these bounds the client is cut off.
const DRAIN_LIMIT: usize = 64 << 20;
const DRAIN_TIME: Duration = Duration::from_secs(5);

/// Why a body was not taken.
#[derive(Debug, thiserror::Error)]
pub enum BodyRefused {
    #[error("request body exceeds {0} bytes")]
    TooLarge(usize),
    #[error("request body could not be read: {0}")]
    Broken(String),
}

/// The whole of `body` if it is at most `limit` bytes. A longer one is
/// refused, after the rest of it is drained within [`DRAIN_LIMIT`] and
/// [`DRAIN_TIME`].
pub async fn read_whole(body: axum::body::Body, limit: usize) -> Result<bytes::Bytes, BodyRefused> {
    let mut stream = body.into_data_stream();
    let mut kept = bytes::BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| BodyRefused::Broken(e.to_string()))?;
        if kept.len() + chunk.len() > limit {
            let mut drained = kept.len() + chunk.len();
            let drain = async {
                while let Some(Ok(chunk)) = stream.next().await {
                    drained += chunk.len();
                    if drained > DRAIN_LIMIT {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(DRAIN_TIME, drain).await;
            return Err(BodyRefused::TooLarge(limit));
        }
        kept.extend_from_slice(&chunk);
    }
    Ok(kept.freeze())
}
