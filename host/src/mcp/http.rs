//! MCP over streamable HTTP (rmcp's `StreamableHttpService` inside axum):
//! `/mcp` for every installed agent (or `/mcp?agents=a,b` for some),
//! `/agents/<agent>/mcp` for one, and `/health` and `/metrics`
//! (Prometheus) for operators.
//!
//! Security follows the spec's transport section: the `Host` header must
//! name this server (DNS rebinding), a browser `Origin` must be this machine
//! (403 otherwise), the server binds loopback by default, and binding any
//! other address requires a bearer token.

use super::dormant::{Dormant, Hibernating};
use super::exposed::Scope;
use super::hosted::{Hosted, ScopedTools};
use super::server::AgentServer;
use super::sessions::SessionBook;
use crate::AgentId;
use crate::http::body_limit::BodyRefused;
use crate::http::token::{Family, Gate};
use crate::requester::Requester;
use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Largest request body accepted, in bytes; larger ones get 413.
pub const MAX_REQUEST_BODY: usize = crate::http::body_limit::MAX_REQUEST_BODY;

/// rmcp's settings for an MCP endpoint whose sleeping sessions are kept
/// in `dormant`.
fn rmcp_config(stop: &CancellationToken, dormant: Arc<Dormant>) -> StreamableHttpServerConfig {
    // The Host and Origin rules are the front end's, checked once for
    // every route where a connection hands a request to the router
    // (crate::http::connections::serve): rmcp does not check them again.
    let mut config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(MAX_REQUEST_BODY)
        // A request whose handler sends nothing before its result is
        // answered with plain JSON, not an SSE stream of a priming event
        // and the result, in a session as without one; one that reports
        // progress or logs still streams, and so does a call still running
        // when an SSE keep-alive would be due.
        .with_json_response(true)
        .with_cancellation_token(stop.child_token());
    config.session_store = Some(dormant);
    config
}

type McpService = StreamableHttpService<AgentServer, Hibernating>;

/// One MCP endpoint: its service, and the sessions it keeps.
#[derive(Clone)]
struct Endpoint {
    service: McpService,
    sessions: Arc<Hibernating>,
}

/// The state of the MCP endpoints.
struct Front {
    hosted: Arc<Hosted>,
    stop: CancellationToken,
    all: Endpoint,
    /// One endpoint per agent served at `/agents/<agent>/mcp`, made on first use.
    per_agent: Mutex<HashMap<AgentId, Endpoint>>,
    /// One endpoint per set of agents chosen with `/mcp?agents=…`, made on
    /// first use; at most [`SETS_PER_REQUESTER`] made by one requester and
    /// [`MAX_CHOSEN_SETS`] in all.
    chosen: Mutex<HashMap<Vec<AgentId>, Chosen>>,
    /// Every endpoint's sessions, bounded per requester and overall.
    book: Arc<SessionBook>,
}

/// A set of agents chosen with `/mcp?agents=…`.
struct Chosen {
    endpoint: Endpoint,
    /// Who named it first.
    requester: Requester,
    used: Instant,
}

/// The most agents one `/mcp?agents=…` may name.
pub const MAX_CHOSEN_AGENTS: usize = 64;

/// The most distinct sets of agents `/mcp?agents=…` serves at once: each
/// keeps its sessions, so a client naming new sets without end must not
/// make the node keep endpoints without end. Past it (or past
/// [`SETS_PER_REQUESTER`]), the set used least recently goes, the
/// requester's own first: a new set is never refused.
pub const MAX_CHOSEN_SETS: usize = 64;

/// The most sets of agents one requester's `/mcp?agents=…` keeps.
pub const SETS_PER_REQUESTER: usize = 8;

/// An MCP endpoint for the agents in `scope`; rmcp makes one `AgentServer`
/// per session, all sharing the scope's tool snapshot.
fn mcp_service(hosted: &Arc<Hosted>, stop: &CancellationToken, scope: Scope) -> Endpoint {
    let hosted = hosted.clone();
    let tools = Arc::new(ScopedTools::new(scope));
    let dormant = Arc::new(Dormant::default());
    let sessions = Arc::new(Hibernating::new(dormant.clone()));
    let service = StreamableHttpService::new(
        move || Ok(AgentServer::new(hosted.clone(), tools.clone())),
        sessions.clone(),
        rmcp_config(stop, dormant),
    );
    Endpoint { service, sessions }
}

impl Front {
    fn agent_service(&self, id: AgentId) -> Endpoint {
        let mut services = self
            .per_agent
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        services
            .entry(id)
            .or_insert_with(|| mcp_service(&self.hosted, &self.stop, Scope::Agents(vec![id])))
            .clone()
    }

    /// The endpoint for the agents `ids` (sorted, without repeats), made
    /// for `requester` when there is none: the set used least recently
    /// goes to make room, the requester's own first.
    fn chosen_service(&self, ids: Vec<AgentId>, requester: &Requester) -> Endpoint {
        let mut sets = self.chosen.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(chosen) = sets.get_mut(&ids) {
            chosen.used = Instant::now();
            return chosen.endpoint.clone();
        }
        let own = sets.values().filter(|c| c.requester == *requester).count();
        let oldest = |sets: &HashMap<Vec<AgentId>, Chosen>, mine: bool| {
            sets.iter()
                .filter(|(_, c)| !mine || c.requester == *requester)
                .min_by_key(|(_, c)| c.used)
                .map(|(ids, _)| ids.clone())
        };
        let going = if own >= SETS_PER_REQUESTER {
            oldest(&sets, true)
        } else if sets.len() >= MAX_CHOSEN_SETS {
            oldest(&sets, false)
        } else {
            None
        };
        if let Some(gone) = going.and_then(|ids| sets.remove(&ids)) {
            tracing::info!(
                "a set of agents chosen with ?agents= goes to make room for {requester}'s"
            );
            self.book.forget_all_of(&gone.endpoint.sessions);
        }
        let endpoint = mcp_service(&self.hosted, &self.stop, Scope::Agents(ids.clone()));
        sets.insert(
            ids,
            Chosen {
                endpoint: endpoint.clone(),
                requester: requester.clone(),
                used: Instant::now(),
            },
        );
        endpoint
    }

    /// Serves `request` on `endpoint`, booking the session it opens (and
    /// ending what that pushes past the bounds) and counting each request
    /// of one until its response has been sent.
    async fn serve(&self, endpoint: Endpoint, request: Request) -> Response {
        // Named only if the request opens a session: most keep nothing.
        let (address, operator) = crate::requester::sender(request.extensions());
        let session = request
            .headers()
            .get(SESSION_HEADER)
            .and_then(|id| id.to_str().ok())
            .map(str::to_owned);
        let mut in_flight = None;
        match &session {
            Some(id) if request.method() == axum::http::Method::DELETE => self.book.forget(id),
            Some(id) => {
                if request.extensions().get::<KeepsSessionState>().is_some() {
                    self.book.pin(id);
                }
                in_flight = self.book.began(id).await;
            }
            None => {}
        }
        let response = endpoint.service.handle(request).await.into_response();
        if let Some(in_flight) = in_flight {
            return response.map(|body| {
                axum::body::Body::new(Counted {
                    body,
                    _in_flight: in_flight,
                })
            });
        }
        if session.is_none()
            && let Some(opened) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|id| id.to_str().ok())
        {
            let requester = Requester::of("mcp", address, operator);
            let closing = self
                .book
                .opened(Arc::from(opened), requester, endpoint.sessions.clone());
            if !closing.is_empty() {
                tokio::spawn(super::sessions::close(closing));
            }
        }
        response
    }
}

/// A response body that keeps its session's request counted until it has
/// been sent (or dropped).
struct Counted {
    body: axum::body::Body,
    /// Held for its drop.
    _in_flight: super::sessions::InFlight,
}

impl hyper::body::Body for Counted {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Marks a request that makes its session keep state of its own (a log
/// level, a subscription), which putting the session to sleep would lose.
#[derive(Clone, Copy)]
struct KeepsSessionState;

/// The methods that make a session keep state beyond its `initialize`.
const STATEFUL_METHODS: [&str; 2] = ["logging/setLevel", "resources/subscribe"];

/// The header that carries an MCP session's id.
const SESSION_HEADER: &str = "mcp-session-id";

/// The MCP endpoints, `/health` and `/metrics`; all but `/health` behind
/// `gate` (the node's token, refused as text). A session idle for
/// `dormant_after` is put to sleep (see [`super::dormant`]).
pub fn router(
    hosted: Arc<Hosted>,
    gate: Gate,
    stop: CancellationToken,
    dormant_after: std::time::Duration,
) -> Router {
    let book = Arc::new(SessionBook::default());
    tokio::spawn(super::sessions::keep_tidy(
        book.clone(),
        dormant_after,
        stop.child_token(),
    ));
    let front = Arc::new(Front {
        all: mcp_service(&hosted, &stop, Scope::All),
        hosted,
        stop,
        per_agent: Mutex::new(HashMap::new()),
        chosen: Mutex::new(HashMap::new()),
        book,
    });
    let mcp = Router::new()
        .route("/mcp", any(all_agents))
        .route("/agents/{agent}/mcp", any(one_agent))
        .route_layer(middleware::from_fn(check_jsonrpc))
        .route("/metrics", get(metrics));
    Router::new()
        .route("/health", get(health))
        .merge(gate.for_family(Family::Text).guard(mcp))
        .with_state(front)
}

async fn all_agents(State(front): State<Arc<Front>>, request: Request) -> Response {
    let endpoint = match chosen_agents(request.uri()) {
        None => front.all.clone(),
        Some(Err(refusal)) => return refusal,
        Some(Ok(names)) => match resolve_all(&front, &names) {
            Ok(ids) => {
                let requester = Requester::from_extensions("mcp", request.extensions());
                front.chosen_service(ids, &requester)
            }
            Err(e) => return (StatusCode::NOT_FOUND, format!("{e}\n")).into_response(),
        },
    };
    front.serve(endpoint, request).await
}

/// The agents named by `?agents=a,b` in `uri`, if it names any.
fn chosen_agents(uri: &axum::http::Uri) -> Option<Result<Vec<String>, Response>> {
    let query = axum::extract::Query::<HashMap<String, String>>::try_from_uri(uri).ok()?;
    let list = query.0.get("agents")?;
    let names: Vec<String> = list
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .take(MAX_CHOSEN_AGENTS + 1)
        .collect();
    let refuse = |reason: String| (StatusCode::BAD_REQUEST, format!("{reason}\n")).into_response();
    Some(match names.len() {
        0 => Err(refuse(
            "?agents= names no agent; name them separated by commas, or leave it out for all"
                .into(),
        )),
        n if n > MAX_CHOSEN_AGENTS => Err(refuse(format!(
            "?agents= names more than {MAX_CHOSEN_AGENTS} agents, the most served together"
        ))),
        _ => Ok(names),
    })
}

/// The ids of the agents `names` (names, ids or id prefixes), sorted and
/// without repeats, resolved in the watched snapshot of the catalog.
fn resolve_all(
    front: &Front,
    names: &[String],
) -> Result<Vec<AgentId>, crate::store::ResolveError> {
    let records = front.hosted.records();
    let mut ids = names
        .iter()
        .map(|name| crate::store::resolve_in(&records, name).map(|record| record.id))
        .collect::<Result<Vec<_>, _>>()?;
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

async fn one_agent(
    State(front): State<Arc<Front>>,
    Path(agent): Path<String>,
    request: Request,
) -> Response {
    // Resolved in the watched snapshot of the catalog: no disk access per request.
    match crate::store::resolve_in(&front.hosted.records(), &agent) {
        Ok(record) => {
            let endpoint = front.agent_service(record.id);
            front.serve(endpoint, request).await
        }
        Err(e) => (StatusCode::NOT_FOUND, format!("{e}\n")).into_response(),
    }
}

/// `GET /health`: whether the node serves, and what.
async fn health(State(front): State<Arc<Front>>) -> Response {
    let records = front.hosted.records();
    Json(serde_json::json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "agents": records.len(),
        "tools": records.iter().map(|r| r.tools.len()).sum::<usize>(),
    }))
    .into_response()
}

/// `GET /metrics`: the audit counters and latency histograms, in the
/// OpenMetrics text format Prometheus scrapes. Guarded by the token like MCP.
async fn metrics(State(front): State<Arc<Front>>) -> Response {
    let audit = front.hosted.node().audit();
    audit.agents_installed(front.hosted.records().len());
    let (awake, asleep) = front.book.awake_and_asleep();
    audit
        .section::<super::metrics::SessionMetrics>()
        .kept(awake, asleep);
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        audit.encode(),
    )
        .into_response()
}

/// Answers malformed POST bodies with the JSON-RPC error the spec names
/// (HTTP 400): -32700 for text that is not JSON, -32600 for a batch (not
/// part of MCP since 2025-06-18) or a message that is not JSON-RPC 2.0, and
/// 413 past [`MAX_REQUEST_BODY`]. Well-formed messages go on to rmcp.
/// A session ended by DELETE is answered 200, as the official SDKs do.
async fn check_jsonrpc(request: Request, next: Next) -> Response {
    if request.method() == axum::http::Method::DELETE {
        // rmcp acknowledges a session's end with 202; the official SDKs
        // answer 200 and the Python client warns on anything else.
        let mut response = next.run(request).await;
        if response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::OK;
        }
        return response;
    }
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match read_limited(body).await {
        Ok(bytes) => bytes,
        Err(refusal) => return refusal,
    };
    let mut request = Request::from_parts(parts, axum::body::Body::from(bytes.clone()));
    match read_envelope(&bytes) {
        Read::Refused(refusal) => return refusal,
        Read::Message(Some(method)) if STATEFUL_METHODS.contains(&method.as_ref()) => {
            request.extensions_mut().insert(KeepsSessionState);
        }
        Read::Message(_) => {}
    }
    next.run(request).await
}

/// The whole body if it is at most [`MAX_REQUEST_BODY`] bytes; else the
/// JSON-RPC error saying why not.
async fn read_limited(body: axum::body::Body) -> Result<bytes::Bytes, Response> {
    crate::http::body_limit::read_whole(body, MAX_REQUEST_BODY)
        .await
        .map_err(|refused| {
            let status = match refused {
                BodyRefused::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
                BodyRefused::Broken(_) => StatusCode::BAD_REQUEST,
            };
            jsonrpc_error(status, -32600, refused.to_string())
        })
}

/// The part of a JSON-RPC message checked here. Reading only this, with the
/// rest skipped, validates the whole text without building a tree of it: rmcp
/// parses the message again anyway.
#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
}

/// What a POST body is to the endpoints' first check.
enum Read<'a> {
    /// One JSON-RPC 2.0 message, with its method (none for a response).
    Message(Option<std::borrow::Cow<'a, str>>),
    /// Not one: the answer saying why.
    Refused(Response),
}

/// Reads the envelope of a POST body (see [`Read`]).
fn read_envelope(bytes: &[u8]) -> Read<'_> {
    let invalid = |reason: &str| {
        jsonrpc_error(
            StatusCode::BAD_REQUEST,
            -32600,
            format!("invalid request: {reason}"),
        )
    };
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        // Still a parse error if the batch is not even JSON.
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            return Read::Refused(parse_error(&e));
        }
        return Read::Refused(invalid(
            "JSON-RPC batches are not supported by MCP; send one message per request",
        ));
    }
    match serde_json::from_slice::<Envelope>(bytes) {
        Ok(envelope) if envelope.jsonrpc.as_deref() == Some("2.0") => {
            Read::Message(envelope.method)
        }
        Ok(_) => Read::Refused(invalid("\"jsonrpc\" must be \"2.0\"")),
        Err(e) if e.is_data() => Read::Refused(invalid(&format!(
            "a message is a JSON object whose \"jsonrpc\" is \"2.0\" ({e})"
        ))),
        Err(e) => Read::Refused(parse_error(&e)),
    }
}

fn parse_error(error: &serde_json::Error) -> Response {
    jsonrpc_error(
        StatusCode::BAD_REQUEST,
        -32700,
        format!("parse error: {error}"),
    )
}

/// A JSON-RPC error response with no id (the request's could not be read).
fn jsonrpc_error(status: StatusCode, code: i32, message: String) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": code, "message": message },
    });
    (status, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chosen(uri: &str) -> Option<Result<Vec<String>, StatusCode>> {
        chosen_agents(&uri.parse().unwrap()).map(|r| r.map_err(|refusal| refusal.status()))
    }

    #[test]
    fn agents_are_chosen_by_a_comma_separated_list_within_bounds() {
        assert_eq!(chosen("/mcp"), None);
        assert_eq!(chosen("/mcp?other=1"), None);
        assert_eq!(
            chosen("/mcp?agents=calculator,%20notes,"),
            Some(Ok(vec!["calculator".to_owned(), "notes".to_owned()]))
        );
        assert_eq!(chosen("/mcp?agents=,"), Some(Err(StatusCode::BAD_REQUEST)));
        let many = vec!["a"; MAX_CHOSEN_AGENTS + 1].join(",");
        assert_eq!(
            chosen(&format!("/mcp?agents={many}")),
            Some(Err(StatusCode::BAD_REQUEST))
        );
        let most = vec!["a"; MAX_CHOSEN_AGENTS].join(",");
        assert!(
            matches!(chosen(&format!("/mcp?agents={most}")), Some(Ok(names)) if names.len() == MAX_CHOSEN_AGENTS)
        );
    }
}
