//! AgentHub and AgentChat: the node's own web pages, served by `agentsite
//! serve` on the listener of its MCP endpoint, under the same `Host` and
//! `Origin` rules.
//!
//! The pages are rendered on the node ([`pages`]) and work without a
//! script; small scripts ([`assets`]) add what needs one: results that
//! arrive while the network is searched, forms built from a tool's schema,
//! progress bars. Who may see and change what is [`session`]'s job.
//!
//! | page | shows |
//! |---|---|
//! | `/` | the hub: this node's agents and the network's, searched |
//! | `/hub/agents/{agent}` | one agent: tools, resources, prompts, grants; try, install, publish, grant |
//! | `/chat`, `/chat/{id}` | conversations with agents, and teams at work on goals |
//! | `/login` | asks for the node's token |

mod agent;
mod app_view;
mod assets;
mod chat;
mod hub;
mod network;
mod pages;
pub(crate) mod session;
mod views;

use crate::Node;
use crate::http::json_error::failure;
use crate::hub::Hub;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use pages::Pages;
use session::{Access, Sessions};
use std::sync::Arc;

/// What the pages need of the node.
pub struct Site {
    node: Arc<Node>,
    /// The node on the network, when it joined one.
    hub: Option<Arc<Hub>>,
    pages: Pages,
    sessions: Sessions,
    /// The node's conversations, or why it has none.
    chats: Result<Arc<crate::chat::Chats>, String>,
    /// Its calls per second, for the network page's chart.
    call_rates: Arc<network::CallRates>,
}

/// `[web]` in the configuration file.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebConfig {
    /// Visitors without the token may browse (never change anything).
    pub public_read: bool,
}

impl Site {
    /// The pages of `node` (on the network as `hub`), behind `sessions`
    /// (the Host and Origin rules are the front end's: [`crate::http::guard`]).
    pub fn new(
        node: Arc<Node>,
        hub: Option<Arc<Hub>>,
        sessions: Sessions,
        chats: Result<Arc<crate::chat::Chats>, String>,
    ) -> Arc<Site> {
        Arc::new(Site {
            call_rates: network::CallRates::start(node.audit().clone()),
            node,
            hub,
            pages: Pages::new(),
            sessions,
            chats,
        })
    }

    /// What every page's frame needs: the anti-forgery value for its
    /// scripts, who is looking, and which part of the site it is.
    fn frame(&self, access: Access, section: &str) -> minijinja::Value {
        minijinja::context! {
            csrf => self.sessions.csrf(),
            operator => access == Access::Operator,
            has_token => self.sessions.has_token(),
            section => section,
            on_network => self.hub.is_some(),
        }
    }

    /// A page saying what went wrong, with `status`.
    fn error_page(&self, access: Option<Access>, status: StatusCode, message: &str) -> Response {
        let frame = self.frame(access.unwrap_or(Access::Reader), "");
        self.pages.render(
            status,
            "error.html",
            minijinja::context! { status => status.as_u16(), reason => status.canonical_reason(), message, ..frame },
        )
    }
}

/// The pages' routes.
pub fn router(site: Arc<Site>) -> Router {
    Router::new()
        .route("/", get(hub::page))
        .route("/hub/search", get(hub::search))
        .route("/hub/agents/{agent}", get(agent::page))
        .route("/hub/agents/{agent}/install", post(agent::install))
        .route("/hub/agents/{agent}/publish", post(agent::publish))
        .route("/hub/agents/{agent}/remove", post(agent::remove))
        .route("/hub/agents/{agent}/grant", post(agent::grant))
        .route("/hub/agents/{agent}/revoke", post(agent::revoke))
        .route("/hub/agents/{agent}/call", post(agent::call))
        .route("/hub/agents/{agent}/views", get(app_view::serve))
        .route("/chat", get(chat::list).post(chat::create))
        .route("/chat/{id}", get(chat::conversation))
        .route("/chat/{id}/messages", post(chat::say))
        .route("/chat/{id}/rename", post(chat::rename))
        .route("/chat/{id}/delete", post(chat::delete))
        .route("/chat/{id}/events", get(chat::events))
        .route("/chat/goals/{goal}", get(chat::goal))
        .route("/chat/goals/{goal}/events", get(chat::goal_events))
        .route("/chat/goals/{goal}/cancel", post(chat::cancel_goal))
        .route("/network", get(network::page))
        .route("/network/rates", get(network::rates))
        .route("/network/announcements", get(network::announcements))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/assets/{name}", get(assets::serve))
        .route_layer(middleware::from_fn_with_state(site.clone(), admit))
        .with_state(site)
}

/// Requests that need no session: logging in, and what the login page uses.
fn open_path(path: &str) -> bool {
    path == "/login" || path.starts_with("/assets/")
}

/// Whether the client asked for a page (a browser navigating) rather than
/// data for a script.
fn wants_page(request: &Request) -> bool {
    let form = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| {
            t.starts_with("application/x-www-form-urlencoded")
                || t.starts_with("multipart/form-data")
        });
    let html = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/html"));
    form || html
}

/// The gate of every page: who is asking, then for a change, that it comes from the node's own pages and from its
/// operator. Sets the response headers every page carries.
async fn admit(State(site): State<Arc<Site>>, mut request: Request, next: Next) -> Response {
    let page = wants_page(&request);
    let refuse = |access: Option<Access>, status: StatusCode, message: &str| {
        if page {
            site.error_page(access, status, message)
        } else {
            failure(status, message)
        }
    };
    let path = request.uri().path().to_owned();
    let access = site.sessions.access(request.headers());
    let change = !matches!(*request.method(), Method::GET | Method::HEAD);
    let response = if change
        && let Some(why) = site
            .sessions
            .forged(request.headers(), path == "/login" || path == "/logout")
    {
        refuse(access, StatusCode::FORBIDDEN, why)
    } else if open_path(&path) {
        next.run(request).await
    } else {
        match access {
            None if !change && page => {
                let next_page = request
                    .uri()
                    .path_and_query()
                    .map_or("/".to_owned(), ToString::to_string);
                let query = url_encoded(&[("next", next_page.as_str())]);
                Redirect::to(&format!("/login?{query}")).into_response()
            }
            None => refuse(
                None,
                StatusCode::UNAUTHORIZED,
                "log in with the node's token first (at /login)",
            ),
            Some(Access::Reader) if change => refuse(
                access,
                StatusCode::FORBIDDEN,
                "this page is open for reading only; log in with the node's token to change anything",
            ),
            Some(access) => {
                request.extensions_mut().insert(access);
                next.run(request).await
            }
        }
    };
    with_page_headers(response)
}

/// What every answer of the pages carries: no script, style or frame from
/// anywhere else, no guessing of content types, no referrer beyond the node.
/// An answer with a policy of its own (an agent's view, [`app_view`]) keeps
/// it: it is stricter.
fn with_page_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data: blob:; media-src 'self' data: blob:; \
             object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        ));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers
        .entry(header::REFERRER_POLICY)
        .or_insert(HeaderValue::from_static("same-origin"));
    response
}

/// A JSON request body; one that is not (or not this shape) is answered
/// 400 with the reason, as `{"error"}`.
pub struct JsonBody<T>(pub T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> axum::extract::FromRequest<S> for JsonBody<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        match Json::<T>::from_request(request, state).await {
            Ok(Json(body)) => Ok(JsonBody(body)),
            Err(e) => Err(failure(StatusCode::BAD_REQUEST, e.body_text())),
        }
    }
}

/// `{"error": "<one line>"}` with `status`: what scripts read.
fn url_encoded(pairs: &[(&str, &str)]) -> String {
    serde_urlencoded::to_string(pairs).unwrap_or_default()
}

/// Where a login sends the browser: a path on this node, nothing else.
fn local_path(next: Option<&str>) -> &str {
    match next {
        Some(path) if path.starts_with('/') && !path.starts_with("//") && !path.contains('\\') => {
            path
        }
        _ => "/",
    }
}

#[derive(serde::Deserialize)]
struct LoginQuery {
    next: Option<String>,
}

/// `GET /login`
async fn login_page(
    State(site): State<Arc<Site>>,
    axum::extract::Query(query): axum::extract::Query<LoginQuery>,
) -> Response {
    login_form(&site, StatusCode::OK, query.next.as_deref(), None)
}

fn login_form(
    site: &Site,
    status: StatusCode,
    next: Option<&str>,
    problem: Option<&str>,
) -> Response {
    let frame = site.frame(Access::Reader, "login");
    site.pages.render(
        status,
        "login.html",
        minijinja::context! { next => local_path(next), problem, has_token => site.sessions.has_token(), ..frame },
    )
}

#[derive(serde::Deserialize)]
struct LoginForm {
    token: String,
    next: Option<String>,
}

/// `POST /login` (a form): sets the session cookie when the token is right.
async fn login(State(site): State<Arc<Site>>, form: axum::extract::Form<LoginForm>) -> Response {
    let next = local_path(form.next.as_deref()).to_owned();
    let Some(cookie) = site.sessions.login_cookie() else {
        // Nothing to log in to: every visitor is the operator.
        return Redirect::to(&next).into_response();
    };
    if !site.sessions.token_matches(&form.token) {
        return login_form(
            &site,
            StatusCode::UNAUTHORIZED,
            Some(&next),
            Some(
                "That is not this node's token. It is the one `agentsite serve` was given (--token, or token under [serve]).",
            ),
        );
    }
    let mut response = Redirect::to(&next).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// `POST /logout`
async fn logout(State(site): State<Arc<Site>>) -> Response {
    let mut response = Redirect::to("/login").into_response();
    if let Ok(value) = HeaderValue::from_str(&site.sessions.logout_cookie()) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}
