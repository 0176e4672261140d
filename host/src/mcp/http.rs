//! MCP over streamable HTTP (rmcp's `StreamableHttpService` inside axum):
//! `/mcp` for every installed agent, `/agents/<agent>/mcp` for one, and
//! `/health` and `/metrics` (Prometheus) for operators.
//!
//! Security follows the spec's transport section: the `Host` header must
//! name this server (DNS rebinding), a browser `Origin` must be this machine
//! (403 otherwise), the server binds loopback by default, and binding any
//! other address requires a bearer token.

use super::exposed::Scope;
use super::hosted::{Hosted, ScopedTools};
use super::server::AgentServer;
use crate::AgentId;
use crate::http::body_limit::BodyRefused;
use crate::http::token::{Family, Gate};
use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio_util::sync::CancellationToken;

/// Largest request body accepted, in bytes; larger ones get 413.
pub const MAX_REQUEST_BODY: usize = crate::http::body_limit::MAX_REQUEST_BODY;

/// rmcp's settings for the node's MCP endpoints.
fn rmcp_config(stop: &CancellationToken) -> StreamableHttpServerConfig {
    // The Host and Origin rules are the front end's, checked once for
    // every route where a connection hands a request to the router
    // (crate::http::connections::serve): rmcp does not check them again.
    StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(MAX_REQUEST_BODY)
        // A stateless (2026-07-28) request whose handler sends nothing
        // before its result is answered with plain JSON, not a one-event
        // SSE stream; one that reports progress or logs still streams.
        .with_json_response(true)
        .with_cancellation_token(stop.child_token())
}

type McpService = StreamableHttpService<AgentServer, LocalSessionManager>;

/// The state of the MCP endpoints.
struct Front {
    hosted: Arc<Hosted>,
    stop: CancellationToken,
    all: McpService,
    /// One service per agent served at `/agents/<agent>/mcp`, made on first use.
    per_agent: Mutex<HashMap<AgentId, McpService>>,
}

/// An MCP endpoint for the agents in `scope`; rmcp makes one `AgentServer`
/// per session, all sharing the scope's tool snapshot.
fn mcp_service(hosted: &Arc<Hosted>, stop: &CancellationToken, scope: Scope) -> McpService {
    let hosted = hosted.clone();
    let tools = Arc::new(ScopedTools::new(scope));
    StreamableHttpService::new(
        move || Ok(AgentServer::new(hosted.clone(), tools.clone())),
        Arc::new(LocalSessionManager::default()),
        rmcp_config(stop),
    )
}

impl Front {
    fn agent_service(&self, id: AgentId) -> McpService {
        let mut services = self
            .per_agent
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        services
            .entry(id)
            .or_insert_with(|| mcp_service(&self.hosted, &self.stop, Scope::Agents(vec![id])))
            .clone()
    }
}

/// The MCP endpoints, `/health` and `/metrics`; all but `/health` behind
/// `gate` (the node's token, refused as text).
pub fn router(hosted: Arc<Hosted>, gate: Gate, stop: CancellationToken) -> Router {
    let front = Arc::new(Front {
        all: mcp_service(&hosted, &stop, Scope::All),
        hosted,
        stop,
        per_agent: Mutex::new(HashMap::new()),
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
    front.all.handle(request).await.into_response()
}

async fn one_agent(
    State(front): State<Arc<Front>>,
    Path(agent): Path<String>,
    request: Request,
) -> Response {
    // Resolved in the watched snapshot of the catalog: no disk access per request.
    match crate::store::resolve_in(&front.hosted.records(), &agent) {
        Ok(record) => front
            .agent_service(record.id)
            .handle(request)
            .await
            .into_response(),
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
    if let Some(refusal) = refusal(&bytes) {
        return refusal;
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
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
}

/// The answer refusing a body that is not one JSON-RPC 2.0 message, if it is not.
fn refusal(bytes: &[u8]) -> Option<Response> {
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
            return Some(parse_error(&e));
        }
        return Some(invalid(
            "JSON-RPC batches are not supported by MCP; send one message per request",
        ));
    }
    match serde_json::from_slice::<Envelope>(bytes) {
        Ok(envelope) if envelope.jsonrpc.as_deref() == Some("2.0") => None,
        Ok(_) => Some(invalid("\"jsonrpc\" must be \"2.0\"")),
        Err(e) if e.is_data() => Some(invalid(&format!(
            "a message is a JSON object whose \"jsonrpc\" is \"2.0\" ({e})"
        ))),
        Err(e) => Some(parse_error(&e)),
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
