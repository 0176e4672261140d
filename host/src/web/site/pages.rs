//! The HTML of the pages: templates compiled into the binary, rendered with
//! minijinja, which escapes every value for HTML (an agent's description or
//! a peer's manifest cannot become markup). Values a script reads go in
//! through `tojson`, which also escapes `<`, `>`, `&` and `'`.

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use minijinja::{Environment, Value};

pub struct Pages {
    env: Environment<'static>,
}

macro_rules! template {
    ($env:ident, $name:literal) => {
        $env.add_template($name, include_str!(concat!("templates/", $name)))
            .expect(concat!("template ", $name, " compiles"))
    };
}

impl Pages {
    pub fn new() -> Pages {
        let mut env = Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::SemiStrict);
        template!(env, "base.html");
        template!(env, "macros.html");
        template!(env, "card.html");
        template!(env, "hub.html");
        template!(env, "agent.html");
        template!(env, "login.html");
        template!(env, "chat.html");
        template!(env, "network.html");
        template!(env, "error.html");
        // For data attributes scripts read: `true` or `false`.
        env.add_filter(
            "flag",
            |value: minijinja::Value| if value.is_true() { "true" } else { "false" },
        );
        env.add_filter("bytes", |n: u64| bytesize::ByteSize(n).to_string());
        env.add_filter("short_id", |id: String| short_id(&id));
        env.add_filter("short_peer", |peer: String| short_peer(&peer));
        // Its first line, at most `max` bytes (a goal's text in a list).
        env.add_filter("excerpt", |text: String, max: usize| {
            crate::text::one_line(&text, max)
        });
        Pages { env }
    }

    /// `name` rendered with `context`, as a response with `status`.
    pub fn render(&self, status: StatusCode, name: &str, context: Value) -> Response {
        match self
            .env
            .get_template(name)
            .and_then(|template| template.render(context))
        {
            Ok(html) => (status, Html(html)).into_response(),
            Err(e) => {
                tracing::error!("page {name} cannot be rendered: {e}");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "this page cannot be shown; the node's log says why",
                )
                    .into_response()
            }
        }
    }

    /// One agent's card: the same markup the hub page has, for results
    /// that arrive later.
    pub fn card(&self, agent: Value) -> Result<String, minijinja::Error> {
        self.env
            .get_template("card.html")?
            .render(minijinja::context! { agent })
    }
}

impl Default for Pages {
    fn default() -> Self {
        Pages::new()
    }
}

/// `sha256:0123456789ab…`: enough to tell agents apart on a page.
pub fn short_id(id: &str) -> String {
    match id.char_indices().nth(19) {
        Some((end, _)) => format!("{}…", &id[..end]),
        None => id.to_owned(),
    }
}

/// `…` and the last 8 characters of a peer id (its first ones are the same
/// for every Ed25519 key).
pub fn short_peer(peer: &str) -> String {
    let count = peer.chars().count();
    if count <= 12 {
        return peer.to_owned();
    }
    let tail: String = peer.chars().skip(count - 8).collect();
    format!("…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_compile_and_ids_shorten() {
        let _ = Pages::new();
        assert_eq!(
            short_id("sha256:0123456789abcdef0123"),
            "sha256:0123456789ab…"
        );
        assert_eq!(short_id("sha256:01"), "sha256:01");
        assert_eq!(
            short_peer("12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo"),
            "…kSCVe2Xo"
        );
    }
}
