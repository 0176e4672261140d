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
use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Largest request body accepted, in bytes; larger ones get 413.
pub const MAX_REQUEST_BODY: usize = 4 << 20;

/// How much of a refused body is still read, and for how long, before the
/// 413 goes out. A server that stops reading while the client is still
/// sending makes its TCP stack reset the connection, and the client then
/// fails with a broken pipe instead of reading the answer (RFC 9112 §9.6,
/// "lingering close"). Past these bounds the client is cut off.
const DRAIN_LIMIT: usize = 64 << 20;
const DRAIN_TIME: Duration = Duration::from_secs(5);

/// How a node serves HTTP.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub listen: SocketAddr,
    /// Required as `Authorization: Bearer <token>` on MCP endpoints when set.
    pub token: Option<String>,
    /// Host names (or host:port) clients may use besides the loopback names
    /// and the listen address, for example a public DNS name.
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed besides this machine's own, such as
    /// `https://app.example.com:443`.
    pub allowed_origins: Vec<String>,
    /// How many connections the front end holds, and for how long.
    pub connections: crate::web::connections::ConnectionLimits,
}

impl HttpOptions {
    /// Refuses to expose the node beyond this machine without a token.
    pub fn check(&self) -> anyhow::Result<()> {
        if !self.listen.ip().is_loopback() && self.token.as_deref().is_none_or(str::is_empty) {
            anyhow::bail!(
                "refusing to listen on {} without a bearer token: anyone who can reach it could run the hosted agents; set --token (or `token` under [serve] in the config), or listen on 127.0.0.1",
                self.listen
            );
        }
        Ok(())
    }

    /// The `Host` names clients may use: the loopback names, the listen
    /// address and the configured ones.
    pub fn allowed_hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).into();
        if !self.listen.ip().is_unspecified() {
            hosts.push(self.listen.ip().to_string());
        }
        hosts.extend(self.allowed_hosts.iter().cloned());
        hosts
    }

    /// The browser origins allowed: this machine's, on any port, and the
    /// configured ones.
    pub fn allowed_origins(&self) -> Vec<String> {
        let mut origins: Vec<String> =
            ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
                .map(String::from)
                .into();
        origins.extend(self.allowed_origins.iter().cloned());
        origins
    }

    /// The same rules for the node's other HTTP endpoints.
    pub fn guard(&self) -> crate::web::guard::Guard {
        crate::web::guard::Guard::new(
            &self.allowed_hosts(),
            &self.allowed_origins(),
            self.token.clone(),
        )
    }

    fn rmcp_config(&self, stop: &CancellationToken) -> StreamableHttpServerConfig {
        // The Host and Origin rules are the front end's, checked once for
        // every route where a connection hands a request to the router
        // (crate::web::connections::serve): rmcp does not check them again.
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
}

type McpService = StreamableHttpService<AgentServer, LocalSessionManager>;

/// The state of the HTTP front end.
struct Front {
    hosted: Arc<Hosted>,
    options: HttpOptions,
    stop: CancellationToken,
    all: McpService,
    /// One service per agent served at `/agents/<agent>/mcp`, made on first use.
    per_agent: Mutex<HashMap<AgentId, McpService>>,
}

/// An MCP endpoint for the agents in `scope`; rmcp makes one `AgentServer`
/// per session, all sharing the scope's tool snapshot.
fn mcp_service(
    hosted: &Arc<Hosted>,
    options: &HttpOptions,
    stop: &CancellationToken,
    scope: Scope,
) -> McpService {
    let hosted = hosted.clone();
    let tools = Arc::new(ScopedTools::new(scope));
    StreamableHttpService::new(
        move || Ok(AgentServer::new(hosted.clone(), tools.clone())),
        Arc::new(LocalSessionManager::default()),
        options.rmcp_config(stop),
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
            .or_insert_with(|| {
                mcp_service(
                    &self.hosted,
                    &self.options,
                    &self.stop,
                    Scope::Agents(vec![id]),
                )
            })
            .clone()
    }
}

/// The axum router of a node's HTTP front end.
pub fn router(hosted: Arc<Hosted>, options: HttpOptions, stop: CancellationToken) -> Router {
    let front = Arc::new(Front {
        all: mcp_service(&hosted, &options, &stop, Scope::All),
        hosted,
        options,
        stop,
        per_agent: Mutex::new(HashMap::new()),
    });
    let mcp = Router::new()
        .route("/mcp", any(all_agents))
        .route("/agents/{agent}/mcp", any(one_agent))
        .route_layer(middleware::from_fn(check_jsonrpc))
        .route_layer(middleware::from_fn_with_state(front.clone(), require_token));
    let metrics = Router::new()
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(front.clone(), require_token));
    Router::new()
        .route("/health", get(health))
        .merge(mcp)
        .merge(metrics)
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

/// Checks `Authorization: Bearer <token>` when the node has a token.
async fn require_token(State(front): State<Arc<Front>>, request: Request, next: Next) -> Response {
    let Some(expected) = front.options.token.as_deref() else {
        return next.run(request).await;
    };
    if bearer_matches(request.headers(), expected) {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "a bearer token is required: Authorization: Bearer <token>\n",
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

/// The whole body if it is at most [`MAX_REQUEST_BODY`] bytes. A longer one
/// is refused with 413, and the rest of it drained within [`DRAIN_LIMIT`]
/// and [`DRAIN_TIME`] so the client hears why.
async fn read_limited(body: axum::body::Body) -> Result<bytes::Bytes, Response> {
    use futures::StreamExt;
    let mut stream = body.into_data_stream();
    let mut kept = bytes::BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            jsonrpc_error(
                StatusCode::BAD_REQUEST,
                -32600,
                format!("request body could not be read: {e}"),
            )
        })?;
        if kept.len() + chunk.len() > MAX_REQUEST_BODY {
            let mut drained = kept.len() + chunk.len();
            let drain = async {
                while let Some(Ok(chunk)) = stream.next().await {
                    drained += chunk.len();
                    if drained > DRAIN_LIMIT {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(DRAIN_TIME, drain).await;
            return Err(jsonrpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                -32600,
                format!("request body exceeds {MAX_REQUEST_BODY} bytes"),
            ));
        }
        kept.extend_from_slice(&chunk);
    }
    Ok(kept.freeze())
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

/// Whether `headers` carry `Authorization: Bearer <expected>`, compared in
/// constant time.
pub(crate) fn bearer_matches(headers: &axum::http::HeaderMap, expected: &str) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|presented| constant_time_eq(presented.as_bytes(), expected.as_bytes()))
}

/// Compares secrets in time that depends only on their lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_address_needs_a_token() {
        let mut options = HttpOptions {
            listen: "0.0.0.0:7777".parse().unwrap(),
            token: None,
            allowed_hosts: vec![],
            allowed_origins: vec![],
            connections: Default::default(),
        };
        let error = options.check().unwrap_err().to_string();
        assert!(error.contains("without a bearer token"), "{error}");
        options.token = Some("s3cret".into());
        options.check().unwrap();
        options.token = None;
        options.listen = "127.0.0.1:7777".parse().unwrap();
        options.check().unwrap();
    }

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
