//! The body of an HTTP response from a server the node does not trust (a
//! model provider, an attached A2A agent), read up to a bound: a server
//! that answers without end makes the node hold no more than the bound.

/// Why a body was not read whole.
#[derive(Debug)]
pub enum BodyError {
    /// It is longer than the bound, in bytes.
    TooLarge(usize),
    /// The connection failed while it was read.
    Broke(reqwest::Error),
}

/// The body of `response`, refusing one longer than `limit` bytes. Its
/// caller bounds the time.
pub async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Broke)? {
        if body.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
