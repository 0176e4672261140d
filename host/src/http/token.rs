//! The node's bearer token, where a route asks for it, and the body each
//! family of clients reads when a request is turned away.
//!
//! A router puts its routes behind a [`Gate`] with [`Gate::guard`]: the
//! request goes on when it carries the token (or, where the gate also
//! accepts it, the command line's control token), else it is answered 401
//! with `WWW-Authenticate: Bearer` and the body its clients read.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::json;
use std::sync::Arc;

/// The words of a refusal for want of the token, unless a gate says more.
const TOKEN_REQUIRED: &str = "a bearer token is required: Authorization: Bearer <token>";

/// The clients of a route, by the shape of error body they read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// OpenAI's clients (`/v1`) and the front end's own refusals:
    /// `{"error": {"message", "type"}}`.
    OpenAi,
    /// The node's JSON APIs (goals, A2A, the control API): `{"error": "…"}`.
    Json,
    /// MCP clients and Prometheus, which show the body as text: one line.
    Text,
}

impl Family {
    /// A refusal with `status` as this family reads it; `kind` is the
    /// OpenAI error type (`permission_error`, `authentication_error`).
    pub fn refusal(self, status: StatusCode, kind: &str, message: &str) -> Response {
        let message = crate::text::one_line(message, 500);
        match self {
            Family::OpenAi => (
                status,
                Json(json!({"error": {"message": message, "type": kind}})),
            )
                .into_response(),
            Family::Json => (status, Json(json!({"error": message}))).into_response(),
            Family::Text => (status, format!("{message}\n")).into_response(),
        }
    }

    /// 401 for a missing or wrong token, saying `message`.
    fn unauthorized(self, message: &str) -> Response {
        let mut response = self.refusal(StatusCode::UNAUTHORIZED, "authentication_error", message);
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        response
    }
}

/// Who may pass where a route asks for the token.
#[derive(Debug, Clone)]
pub struct Gate {
    /// `None`: the node has no token, and everyone passes.
    token: Option<String>,
    /// Another token that passes: the control token of the node's own
    /// command line.
    also: Option<String>,
    family: Family,
    /// What a refused client is told.
    hint: &'static str,
}

impl Gate {
    /// A gate asking for `token` when it is set and not empty, refusing in
    /// the body `family` reads.
    pub fn new(token: Option<String>, family: Family) -> Gate {
        Gate {
            token: token.filter(|t| !t.is_empty()),
            also: None,
            family,
            hint: TOKEN_REQUIRED,
        }
    }

    /// Also lets requests carrying `token` through.
    pub fn also_accepting(mut self, token: String) -> Gate {
        self.also = Some(token).filter(|t| !t.is_empty());
        self
    }

    /// The same gate for clients of another `family`.
    pub fn for_family(mut self, family: Family) -> Gate {
        self.family = family;
        self
    }

    /// Tells a refused client `hint` (where to find the token, say).
    pub fn telling(mut self, hint: &'static str) -> Gate {
        self.hint = hint;
        self
    }

    /// Whether `headers` may pass.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(expected) = &self.token else {
            return true;
        };
        bearer_matches(headers, expected)
            || self
                .also
                .as_ref()
                .is_some_and(|also| bearer_matches(headers, also))
    }

    /// `router`'s routes behind this gate.
    pub fn guard<S: Clone + Send + Sync + 'static>(self, router: Router<S>) -> Router<S> {
        router.route_layer(middleware::from_fn_with_state(Arc::new(self), require))
    }
}

async fn require(State(gate): State<Arc<Gate>>, mut request: Request, next: Next) -> Response {
    if !gate.admits(request.headers()) {
        return gate.family.unauthorized(gate.hint);
    }
    // A request with a token is the operator's, also on a node that asks
    // for none: what it makes is kept as the operator's.
    let headers = request.headers();
    let operator = [&gate.token, &gate.also]
        .into_iter()
        .flatten()
        .any(|token| bearer_matches(headers, token));
    if operator {
        request.extensions_mut().insert(crate::requester::Operator);
    }
    next.run(request).await
}

/// Whether `headers` carry `Authorization: Bearer <expected>`.
pub fn bearer_matches(headers: &HeaderMap, expected: &str) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|presented| same_secret(presented.as_bytes(), expected.as_bytes()))
}

/// Compares secrets in time that depends only on their lengths.
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(authorization: Option<&str>) -> HeaderMap {
        let mut map = HeaderMap::new();
        if let Some(value) = authorization {
            map.insert(header::AUTHORIZATION, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn a_token_is_asked_for_when_set() {
        let gate = Gate::new(Some("s3cret".into()), Family::Json);
        assert!(!gate.admits(&headers(None)));
        assert!(!gate.admits(&headers(Some("Bearer nope"))));
        assert!(!gate.admits(&headers(Some("s3cret"))));
        assert!(gate.admits(&headers(Some("Bearer s3cret"))));
        let gate = gate.also_accepting("control".into());
        assert!(gate.admits(&headers(Some("Bearer control"))));
        assert!(gate.admits(&headers(Some("Bearer s3cret"))));
        assert!(Gate::new(None, Family::Text).admits(&headers(None)));
        assert!(Gate::new(Some(String::new()), Family::Text).admits(&headers(None)));
    }

    #[test]
    fn token_comparison() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
    }
}
