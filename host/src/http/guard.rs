//! The Host and Origin rules every HTTP request to the node is held to: the
//! `Host` header must name this server (against DNS rebinding) and a
//! browser's `Origin` must be one the node allows. The front end checks them
//! once for every request, where a connection hands it to the router
//! ([`super::connections::serve`]), so that no route, today's or a later
//! one, can miss them; the token is [`super::token`]'s. The lists are the
//! ones [`super::HttpOptions`] gives and read the same way: a host without a
//! port allows any port, an origin ending in `:*` any port.

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

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

/// The names and pages the node answers for.
#[derive(Debug, Clone)]
pub struct Rules {
    hosts: Vec<Authority>,
    origins: Vec<Origin>,
}

/// Why a request was turned away by the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 400: a `Host` or `Origin` header that cannot be read.
    Malformed(&'static str),
    /// 403: a host or origin the node does not allow.
    Forbidden(&'static str),
}

impl Refusal {
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::Malformed(_) => StatusCode::BAD_REQUEST,
            Refusal::Forbidden(_) => StatusCode::FORBIDDEN,
        }
    }

    pub fn message(&self) -> &'static str {
        match self {
            Refusal::Malformed(why) | Refusal::Forbidden(why) => why,
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

impl Rules {
    /// Rules allowing `hosts` and `origins` (entries that cannot be read are
    /// left out).
    pub fn new(hosts: &[String], origins: &[String]) -> Rules {
        Rules {
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
        }
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
        Ok(())
    }
}

impl IntoResponse for Refusal {
    /// The refusal as `{"error": {"message", "type"}}`, the shape OpenAI
    /// clients read and the others show as text.
    fn into_response(self) -> Response {
        super::token::Family::OpenAi.refusal(self.status(), "permission_error", self.message())
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

    fn rules() -> Rules {
        Rules::new(
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
        )
    }

    #[test]
    fn hosts_and_origins_follow_the_lists() {
        let guard = rules();
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
}
