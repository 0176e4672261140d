//! The rules every HTTP request to the node is held to: the `Host` header
//! must name this server (against DNS rebinding), a browser's `Origin` must
//! be one the node allows, and when a route asks for the node's token the
//! request must carry it. The front end checks the first two once for every
//! request, where a connection hands it to the router
//! ([`crate::web::connections::serve`]); routers add the token where they
//! need it. The lists are the ones [`crate::mcp::http::HttpOptions`] gives
//! and read the same way: a host without a port allows any port, an origin
//! ending in `:*` any port.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// One allowed `host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Authority {
    host: String,
    /// `None`: any port.
    port: Option<u16>,
}

/// One allowed `scheme://host[:port|:*]`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    /// `None`: any port.
    port: Option<u16>,
}

/// Who may talk to the node over HTTP.
#[derive(Debug, Clone)]
pub struct Guard {
    hosts: Vec<Authority>,
    origins: Vec<Origin>,
    token: Option<String>,
    /// Another token that passes where `token` is asked for: the control
    /// token of the node's own command line.
    also: Option<String>,
}

/// Why a request was turned away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 400: a `Host` or `Origin` header that cannot be read.
    Malformed(&'static str),
    /// 403: a host or origin the node does not allow.
    Forbidden(&'static str),
    /// 401: the token is missing or wrong.
    Unauthorized,
}

impl Refusal {
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::Malformed(_) => StatusCode::BAD_REQUEST,
            Refusal::Forbidden(_) => StatusCode::FORBIDDEN,
            Refusal::Unauthorized => StatusCode::UNAUTHORIZED,
        }
    }

    pub fn message(&self) -> &'static str {
        match self {
            Refusal::Malformed(why) | Refusal::Forbidden(why) => why,
            Refusal::Unauthorized => "a bearer token is required: Authorization: Bearer <token>",
        }
    }
}

fn normal_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

fn authority(text: &str) -> Option<Authority> {
    let parsed = http::uri::Authority::try_from(text.trim()).ok()?;
    Some(Authority {
        host: normal_host(parsed.host()),
        port: parsed.port_u16(),
    })
}

fn origin(text: &str) -> Option<Origin> {
    let (text, any_port) = match text.trim().strip_suffix(":*") {
        Some(base) => (base, true),
        None => (text.trim(), false),
    };
    let uri = http::Uri::try_from(text).ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let authority = uri.authority()?;
    let port = authority.port_u16().or(match (any_port, scheme.as_str()) {
        (true, _) => None,
        (false, "http") => Some(80),
        (false, "https") => Some(443),
        _ => None,
    });
    Some(Origin {
        host: normal_host(authority.host()),
        scheme,
        port,
    })
}

impl Guard {
    /// A guard allowing `hosts` and `origins` (entries that cannot be read
    /// are left out), asking for `token` when set.
    pub fn new(hosts: &[String], origins: &[String], token: Option<String>) -> Guard {
        Guard {
            // A bare IPv6 address such as `::1` is no authority: it is a
            // host, on any port.
            hosts: hosts
                .iter()
                .filter(|h| !h.trim().is_empty())
                .map(|h| {
                    authority(h).unwrap_or_else(|| Authority {
                        host: normal_host(h.trim()),
                        port: None,
                    })
                })
                .collect(),
            origins: origins.iter().filter_map(|o| origin(o)).collect(),
            token: token.filter(|t| !t.is_empty()),
            also: None,
        }
    }

    /// Also lets requests carrying `token` through where the node's token
    /// is asked for.
    pub fn also_accepting(mut self, token: String) -> Guard {
        self.also = Some(token).filter(|t| !t.is_empty());
        self
    }

    /// Checks a request's headers.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = headers
            .get(header::HOST)
            .ok_or(Refusal::Malformed("the request has no Host header"))?
            .to_str()
            .ok()
            .and_then(authority)
            .ok_or(Refusal::Malformed("the Host header cannot be read"))?;
        let host_allowed = self.hosts.iter().any(|allowed| {
            allowed.host == host.host && allowed.port.is_none_or(|p| host.port == Some(p))
        });
        if !host_allowed {
            return Err(Refusal::Forbidden(
                "the Host header names a server this node does not answer for",
            ));
        }
        if let Some(value) = headers.get(header::ORIGIN) {
            let from = value
                .to_str()
                .ok()
                .and_then(origin)
                .ok_or(Refusal::Forbidden(
                    "the Origin header is not an allowed origin",
                ))?;
            let allowed = self.origins.iter().any(|allowed| {
                allowed.scheme == from.scheme
                    && allowed.host == from.host
                    && allowed.port.is_none_or(|p| from.port == Some(p))
            });
            if !allowed {
                return Err(Refusal::Forbidden(
                    "the Origin header is not an allowed origin",
                ));
            }
        }
        if let Some(expected) = &self.token
            && !crate::mcp::http::bearer_matches(headers, expected)
            && !self
                .also
                .as_ref()
                .is_some_and(|also| crate::mcp::http::bearer_matches(headers, also))
        {
            return Err(Refusal::Unauthorized);
        }
        Ok(())
    }
}

impl IntoResponse for Refusal {
    /// The refusal as `{"error": {"message", "type"}}` (the shape OpenAI
    /// clients read), with `WWW-Authenticate: Bearer` when a token is
    /// missing.
    fn into_response(self) -> Response {
        let unauthorized = self == Refusal::Unauthorized;
        let mut response = (
            self.status(),
            axum::Json(serde_json::json!({
                "error": {
                    "message": self.message(),
                    "type": if unauthorized {
                        "authentication_error"
                    } else {
                        "permission_error"
                    },
                }
            })),
        )
            .into_response();
        if unauthorized {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

/// Middleware: the request goes on if `guard` lets it, else it is answered
/// with the refusal.
pub async fn require(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    match guard.check(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(
                header::HeaderName::try_from(*name).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    fn guard(token: Option<&str>) -> Guard {
        Guard::new(
            &[
                "localhost".into(),
                "127.0.0.1".into(),
                "::1".into(),
                "node.example:8443".into(),
            ],
            &[
                "http://localhost:*".into(),
                "http://127.0.0.1:*".into(),
                "https://app.example".into(),
            ],
            token.map(str::to_owned),
        )
    }

    #[test]
    fn hosts_and_origins_follow_the_lists() {
        let guard = guard(None);
        for ok in [
            vec![("host", "127.0.0.1:7777")],
            vec![("host", "[::1]:7777")],
            vec![("host", "LOCALHOST")],
            vec![("host", "node.example:8443")],
            vec![
                ("host", "localhost:7777"),
                ("origin", "http://localhost:3000"),
            ],
            vec![
                ("host", "localhost:7777"),
                ("origin", "https://app.example"),
            ],
            vec![
                ("host", "localhost:7777"),
                ("origin", "https://app.example:443"),
            ],
        ] {
            assert_eq!(guard.check(&headers(&ok)), Ok(()), "{ok:?}");
        }
        for (bad, status) in [
            (vec![("host", "evil.example")], StatusCode::FORBIDDEN),
            (vec![("host", "node.example:80")], StatusCode::FORBIDDEN),
            (vec![], StatusCode::BAD_REQUEST),
            (
                vec![("host", "localhost"), ("origin", "http://evil.example")],
                StatusCode::FORBIDDEN,
            ),
            (
                vec![
                    ("host", "localhost"),
                    ("origin", "https://app.example:8443"),
                ],
                StatusCode::FORBIDDEN,
            ),
            (
                vec![("host", "localhost"), ("origin", "null")],
                StatusCode::FORBIDDEN,
            ),
        ] {
            assert_eq!(
                guard.check(&headers(&bad)).map_err(|r| r.status()),
                Err(status),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_token_is_asked_for_when_set() {
        let guard = guard(Some("s3cret"));
        assert_eq!(
            guard.check(&headers(&[("host", "localhost")])),
            Err(Refusal::Unauthorized)
        );
        assert_eq!(
            guard.check(&headers(&[
                ("host", "localhost"),
                ("authorization", "Bearer nope")
            ])),
            Err(Refusal::Unauthorized)
        );
        assert_eq!(
            guard.check(&headers(&[
                ("host", "localhost"),
                ("authorization", "Bearer s3cret")
            ])),
            Ok(())
        );
    }
}
