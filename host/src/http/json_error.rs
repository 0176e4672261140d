//! The JSON APIs' answers to a request they refuse: `{"error": "<one
//! line>"}` with its status, and the one-line reason a body is not what
//! an endpoint takes.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// `{"error": message}`, the message on one line of at most 500 characters.
pub(crate) fn failure(status: StatusCode, message: impl std::fmt::Display) -> Response {
    let message = crate::text::one_line(&message.to_string(), 500);
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}

/// A JSON body, or the one-line reason it is not one.
pub(crate) fn body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    serde_json::from_slice(bytes)
        .map_err(|e| format!("the request body is not what this endpoint takes: {e}"))
}
