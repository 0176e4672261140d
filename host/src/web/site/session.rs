//! Who is looking at the pages, and whether they may change anything.
//!
//! A node without a token listens on loopback only (see
//! [`crate::http::HttpOptions::check`]): whoever reaches it is its
//! operator, as on its MCP endpoint. A node with a token asks for it once on
//! `/login` and keeps a value derived from it in an `HttpOnly`,
//! `SameSite=Strict` cookie; the token itself never goes into a cookie, and
//! changing the token ends every session. With `[web] public_read`, visitors
//! without the token may browse but change nothing.
//!
//! Every change is a `POST` that must come from the node's own pages: its
//! `Origin` names this node (a browser always sends it on a `POST`), and it
//! carries the page's anti-forgery value in `X-Agentsite-Csrf` (a form on
//! another site can set neither).

use crate::http::token::same_secret;
use axum::http::{HeaderMap, header};
use sha2::{Digest, Sha256};

/// The header a page's script sends its anti-forgery value in.
pub const CSRF_HEADER: &str = "x-agentsite-csrf";

/// What a visitor may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Browse and change: the operator.
    Operator,
    /// Browse only (`public_read`).
    Reader,
}

/// The secrets and settings sessions are checked against.
pub struct Sessions {
    token: Option<String>,
    /// The cookie value a logged-in browser holds.
    session: Option<String>,
    csrf: String,
    cookie_name: String,
    public_read: bool,
}

fn derived(purpose: &str, token: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(b"agentsite web ");
    hash.update(purpose.as_bytes());
    hash.update([0]);
    hash.update(token.as_bytes());
    hex::encode(hash.finalize())
}

impl Sessions {
    /// Sessions of a node listening on `port` that asks for `token` (none:
    /// every visitor is its operator).
    pub fn new(token: Option<String>, port: u16, public_read: bool) -> anyhow::Result<Sessions> {
        let token = token.filter(|t| !t.is_empty());
        let csrf = match &token {
            Some(token) => derived("csrf", token),
            // Nothing to derive from: a value of this process's own, which a
            // page loaded before a restart no longer has.
            None => {
                let mut bytes = [0u8; 32];
                getrandom::fill(&mut bytes)
                    .map_err(|e| anyhow::anyhow!("no randomness for the web pages: {e}"))?;
                hex::encode(bytes)
            }
        };
        Ok(Sessions {
            session: token.as_deref().map(|t| derived("session", t)),
            token,
            csrf,
            // Cookies are shared by every port of a host: one name per node.
            cookie_name: format!("agentsite_session_{port}"),
            public_read,
        })
    }

    /// Whether the node asks for a token at all.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    pub fn csrf(&self) -> &str {
        &self.csrf
    }

    /// What the sender of `headers` may do, if anything.
    pub fn access(&self, headers: &HeaderMap) -> Option<Access> {
        let (Some(token), Some(session)) = (&self.token, &self.session) else {
            return Some(Access::Operator);
        };
        let logged_in = cookie(headers, &self.cookie_name)
            .is_some_and(|value| same_secret(value.as_bytes(), session.as_bytes()));
        if logged_in || crate::http::token::bearer_matches(headers, token) {
            Some(Access::Operator)
        } else if self.public_read {
            Some(Access::Reader)
        } else {
            None
        }
    }

    /// Whether `offered` is the node's token.
    pub fn token_matches(&self, offered: &str) -> bool {
        self.token
            .as_ref()
            .is_some_and(|token| same_secret(offered.trim().as_bytes(), token.as_bytes()))
    }

    /// The `Set-Cookie` value that logs a browser in.
    pub fn login_cookie(&self) -> Option<String> {
        let session = self.session.as_ref()?;
        Some(format!(
            "{}={session}; Path=/; HttpOnly; SameSite=Strict; Max-Age=2592000",
            self.cookie_name
        ))
    }

    /// The `Set-Cookie` value that logs a browser out.
    pub fn logout_cookie(&self) -> String {
        format!(
            "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
            self.cookie_name
        )
    }

    /// Why a change request is not from this node's own pages, if it is not.
    /// `form` requests (the login form) carry no anti-forgery header.
    pub fn forged(&self, headers: &HeaderMap, form: bool) -> Option<&'static str> {
        if !same_origin(headers) {
            return Some(
                "cross-site request refused: changes to this node can only be made from its own pages",
            );
        }
        if form {
            return None;
        }
        let sent = headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if sent.is_empty() {
            return Some("the request lacks the page's anti-forgery header; use the node's pages");
        }
        if !same_secret(sent.as_bytes(), self.csrf.as_bytes()) {
            return Some(
                "this page is out of date (the node restarted or its token changed): reload it",
            );
        }
        None
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// Whether a request comes from a page of this node: its `Origin` (or, for a
/// browser that sent none, `Sec-Fetch-Site`) says so. A request with
/// neither is no browser's: tools such as curl cannot be made to forge.
fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        let origin = origin
            .to_str()
            .ok()
            .and_then(|o| http::Uri::try_from(o).ok());
        return match (origin, host) {
            (Some(origin), Some(host)) => origin
                .authority()
                .is_some_and(|a| a.as_str().eq_ignore_ascii_case(host)),
            _ => false,
        };
    }
    match headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        Some(site) => site == "same-origin" || site == "none",
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                header::HeaderName::try_from(*name).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn without_a_token_everyone_is_the_operator() {
        let sessions = Sessions::new(None, 7777, false).unwrap();
        assert_eq!(sessions.access(&headers(&[])), Some(Access::Operator));
        assert!(sessions.login_cookie().is_none());
    }

    #[test]
    fn a_token_is_asked_for_and_its_cookie_admits() {
        let sessions = Sessions::new(Some("s3cret".into()), 7777, false).unwrap();
        assert_eq!(sessions.access(&headers(&[])), None);
        let set = sessions.login_cookie().unwrap();
        assert!(
            !set.contains("s3cret"),
            "the token itself is never a cookie"
        );
        let value = set.split(';').next().unwrap();
        assert_eq!(
            sessions.access(&headers(&[("cookie", &format!("a=b; {value}"))])),
            Some(Access::Operator)
        );
        assert_eq!(
            sessions.access(&headers(&[("cookie", "agentsite_session_7777=nope")])),
            None
        );
        // Another node's cookie on the same host is not this one's.
        let other = Sessions::new(Some("s3cret".into()), 7778, false).unwrap();
        assert_eq!(
            other.access(&headers(&[("cookie", value)])),
            None,
            "cookie names are per port"
        );
        assert_eq!(
            sessions.access(&headers(&[("authorization", "Bearer s3cret")])),
            Some(Access::Operator)
        );
        assert!(sessions.token_matches(" s3cret\n"));
        assert!(!sessions.token_matches("s3cre"));
    }

    #[test]
    fn public_read_admits_readers() {
        let sessions = Sessions::new(Some("s3cret".into()), 7777, true).unwrap();
        assert_eq!(sessions.access(&headers(&[])), Some(Access::Reader));
    }

    #[test]
    fn changes_must_come_from_the_nodes_own_pages() {
        let sessions = Sessions::new(Some("s3cret".into()), 7777, false).unwrap();
        let csrf = sessions.csrf().to_owned();
        let own = [
            ("host", "127.0.0.1:7777"),
            ("origin", "http://127.0.0.1:7777"),
            (CSRF_HEADER, csrf.as_str()),
        ];
        assert_eq!(sessions.forged(&headers(&own), false), None);
        for bad in [
            vec![
                ("host", "127.0.0.1:7777"),
                ("origin", "http://127.0.0.1:9999"),
                (CSRF_HEADER, csrf.as_str()),
            ],
            vec![
                ("host", "127.0.0.1:7777"),
                ("origin", "http://localhost:7777"),
                (CSRF_HEADER, csrf.as_str()),
            ],
            vec![
                ("host", "127.0.0.1:7777"),
                ("origin", "null"),
                (CSRF_HEADER, csrf.as_str()),
            ],
            vec![
                ("host", "127.0.0.1:7777"),
                ("sec-fetch-site", "cross-site"),
                (CSRF_HEADER, csrf.as_str()),
            ],
            vec![
                ("host", "127.0.0.1:7777"),
                ("origin", "http://127.0.0.1:7777"),
            ],
            vec![
                ("host", "127.0.0.1:7777"),
                ("origin", "http://127.0.0.1:7777"),
                (CSRF_HEADER, "0000"),
            ],
        ] {
            assert!(sessions.forged(&headers(&bad), false).is_some(), "{bad:?}");
        }
        // The login form carries no header, but must still be same-origin.
        assert_eq!(sessions.forged(&headers(&own[..2]), true), None);
        assert!(
            sessions
                .forged(
                    &headers(&[
                        ("host", "127.0.0.1:7777"),
                        ("origin", "http://evil.example")
                    ]),
                    true
                )
                .is_some()
        );
    }
}
