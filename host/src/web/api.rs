//! The control API of a running node, under `/api/`: what `agentsite publish`,
//! `fetch`, `search`, `peers`, `id` and `call --remote` ask of the node that
//! serves their data directory. Every request carries the node's control
//! token (see [`super::control`]).
//!
//! Answers are JSON; errors are `{"error": "<one line>"}` with a 4xx or 5xx
//! status. A fetch answers with one JSON object per line (progress events,
//! then `done` or `error`), so the command line can draw a progress bar.

use crate::AgentId;
use crate::agent::tool::ToolOutput;
use crate::capabilities::peers::Hop;
use crate::http::token::{Family, Gate};
use crate::hub::{CHECK_DEADLINE, FetchProgress, Fetched, Hub, HubError, Verdict};
use crate::net::PublishReport;
use crate::receipt::{Evidence, Receipt};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `GET /api/node`
#[derive(Debug, Serialize, Deserialize)]
pub struct NodeAnswer {
    pub peer_id: String,
    /// libp2p addresses, each ending in `/p2p/<peer id>`.
    pub addresses: Vec<String>,
    /// Whether other nodes can dial it: public, relayed or unknown yet.
    pub reachability: crate::net::reach::Reachability,
}

/// `POST /api/publish`
#[derive(Debug, Serialize, Deserialize)]
pub struct PublishAnswer {
    pub id: AgentId,
    pub name: String,
    /// The keywords the agent is now found by.
    pub keywords: Vec<String>,
    pub report: PublishReport,
    /// Peers the node was connected to: none means it publishes again when
    /// the first one comes.
    #[serde(default)]
    pub peers: usize,
}

/// One line of `POST /api/fetch`: progress, then the outcome.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FetchLine {
    Progress(FetchProgress),
    Outcome(FetchOutcome),
}

/// The last line of a fetch.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum FetchOutcome {
    Done { fetched: Box<Fetched> },
    Error { error: String },
}

/// `POST /api/call`
#[derive(Debug, Serialize, Deserialize)]
pub struct CallAnswer {
    /// The id of the agent that was called.
    pub agent: AgentId,
    pub output: ToolOutput,
    /// The did:key of the node that ran it.
    #[serde(default)]
    pub node: String,
    /// That node's signed receipt, if it gave one.
    #[serde(default)]
    pub receipt: Option<Receipt>,
    /// What checking the answer found, when it was asked for.
    #[serde(default)]
    pub check: Option<Verdict>,
}

struct Api {
    hub: Arc<Hub>,
}

/// The `/api` routes for `hub`, guarded by the control `token`.
pub fn router(hub: Arc<Hub>, token: String) -> Router {
    let gate = Gate::new(Some(token), Family::Json)
        .telling("the control API needs the token in <data-dir>/control.token");
    let api = Arc::new(Api { hub });
    let routes = Router::new()
        .route("/api/node", get(node))
        .route("/api/peers", get(peers))
        .route("/api/publish", post(publish))
        .route("/api/search", get(search))
        .route("/api/models/network", get(network_models))
        .route("/api/fetch", post(fetch))
        .route("/api/call", post(call))
        .route("/api/evidence/check", post(check_evidence));
    gate.guard(routes).with_state(api)
}

/// The `/api` routes that need no network: a call of an agent installed
/// here, for the command line beside a running node (which holds the
/// agents' stores), guarded by the control `token`.
pub fn node_router(node: Arc<crate::Node>, hub: Option<Arc<Hub>>, token: String) -> Router {
    let gate = Gate::new(Some(token), Family::Json)
        .telling("the control API needs the token in <data-dir>/control.token");
    let routes = Router::new()
        .route("/api/agents/call", post(call_here))
        .route("/api/agents/resolve", get(resolve_here));
    gate.guard(routes).with_state(Arc::new(Here { node, hub }))
}

/// What a call of an agent installed here needs: the node, and the
/// network it is on (to say where an agent not installed here is).
struct Here {
    node: Arc<crate::Node>,
    hub: Option<Arc<Hub>>,
}

/// For a name not installed here that the network knows: how to reach it.
fn on_the_network(hub: Option<&Hub>, name: &str) -> Option<String> {
    let id = hub?.with_known(|known| {
        known
            .map(|k| &k.manifest)
            .find(|m| m.manifest().card.name == name)
            .map(|m| m.id())
    })?;
    Some(format!(
        "the network has an agent of that name: `agentsite call --remote {name} …` runs it where it lives, `agentsite fetch {id}` installs it here"
    ))
}

/// `POST /api/agents/call`: what `agentsite call` does, done by this node.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalCall {
    /// Name, id or unique id prefix.
    pub agent: String,
    pub tool: String,
    /// The arguments' JSON text, as typed.
    pub arguments: String,
    /// The command line's own limits, over the policy's (memory in bytes).
    #[serde(default)]
    pub deadline: Option<Duration>,
    #[serde(default)]
    pub memory: Option<u64>,
}

/// The answer of `POST /api/agents/call`.
#[derive(Debug, Serialize, Deserialize)]
pub struct LocalAnswer {
    /// The agent's card name.
    pub name: String,
    pub output: ToolOutput,
}

impl LocalCall {
    /// Resolves the agent, applies the command line's limits over its
    /// grants and calls the tool: what `agentsite call` does, alone or
    /// through a running node. Errors read as the command line shows them
    /// (`calculator.divide failed: division by zero`, with `{:#}`).
    pub async fn run(
        &self,
        node: &crate::Node,
        caller: Option<Arc<dyn crate::capabilities::caller::Caller>>,
    ) -> anyhow::Result<(crate::store::AgentRecord, ToolOutput)> {
        use anyhow::Context as _;
        let record = node.resolve(&self.agent)?;
        let mut grants = node.grants(&record)?;
        // The operator's own command line overrides the policy's limits.
        if let Some(deadline) = self.deadline {
            grants.limits.deadline = deadline;
        }
        if let Some(memory) = self.memory {
            grants.limits.memory = bytesize::ByteSize(memory);
        }
        grants.limits.validate()?;
        let output = node
            .call_record(&record, &self.tool, &self.arguments, grants, caller)
            .await
            .with_context(|| format!("{}.{} failed", record.card.name, self.tool))?;
        Ok((record, output))
    }
}

async fn call_here(State(here): State<Arc<Here>>, Json(request): Json<LocalCall>) -> Response {
    match request.run(&here.node, None).await {
        Ok((record, output)) => Json(LocalAnswer {
            name: record.card.name,
            output,
        })
        .into_response(),
        Err(e) => match e.downcast_ref::<crate::store::ResolveError>() {
            Some(refused) => here.not_resolved(&request.agent, refused),
            None => failure(StatusCode::UNPROCESSABLE_ENTITY, format!("{e:#}")),
        },
    }
}

/// `GET /api/agents/resolve?name=…`: the installed agent a name, id or id
/// prefix means, as `{"id", "name"}`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Resolved {
    pub id: String,
    pub name: String,
}

#[derive(Deserialize)]
struct ResolveQuery {
    name: String,
}

async fn resolve_here(
    State(here): State<Arc<Here>>,
    Query(query): Query<ResolveQuery>,
) -> Response {
    match here.node.resolve(&query.name) {
        Ok(record) => Json(Resolved {
            id: record.id.to_string(),
            name: record.card.name,
        })
        .into_response(),
        Err(refused) => here.not_resolved(&query.name, &refused),
    }
}

impl Here {
    /// The answer to a name that names no installed agent, or more than one:
    /// where the network has an agent of that name, how to reach it.
    fn not_resolved(&self, name: &str, refused: &crate::store::ResolveError) -> Response {
        match refused {
            crate::store::ResolveError::NotFound { .. } => {
                let message = match on_the_network(self.hub.as_deref(), name) {
                    Some(there) => format!("no installed agent matches {name:?}; {there}"),
                    None => refused.to_string(),
                };
                failure(StatusCode::NOT_FOUND, message)
            }
            _ => failure(StatusCode::UNPROCESSABLE_ENTITY, refused.to_string()),
        }
    }
}

fn failure(status: StatusCode, message: impl std::fmt::Display) -> Response {
    let message = message.to_string().replace('\n', " ");
    (status, Json(json!({ "error": message }))).into_response()
}

fn hub_failure(error: HubError) -> Response {
    use crate::net::rpc::code;
    let status = match &error {
        HubError::Resolve(_) | HubError::NoProvider(_) => StatusCode::NOT_FOUND,
        HubError::Net(crate::net::NetError::NotFound(_)) => StatusCode::NOT_FOUND,
        HubError::Net(crate::net::NetError::LookupTimedOut(_)) => StatusCode::GATEWAY_TIMEOUT,
        HubError::Remote(e) if [code::INVALID_PARAMS, code::UNKNOWN_TOOL].contains(&e.code) => {
            StatusCode::BAD_REQUEST
        }
        HubError::Add(_) | HubError::Fetch(_) => StatusCode::BAD_GATEWAY,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    failure(status, error)
}

async fn node(State(api): State<Arc<Api>>) -> Response {
    let network = api.hub.network();
    match tokio::try_join!(network.addresses(), network.reachability()) {
        Ok((addresses, reachability)) => Json(NodeAnswer {
            peer_id: api.hub.peer_id().to_string(),
            addresses: addresses.iter().map(ToString::to_string).collect(),
            reachability,
        })
        .into_response(),
        Err(e) => failure(StatusCode::SERVICE_UNAVAILABLE, e),
    }
}

async fn peers(State(api): State<Arc<Api>>) -> Response {
    match api.hub.network().peers().await {
        Ok(peers) => Json(peers).into_response(),
        Err(e) => failure(StatusCode::SERVICE_UNAVAILABLE, e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PublishRequest {
    agent: String,
}

async fn publish(State(api): State<Arc<Api>>, Json(request): Json<PublishRequest>) -> Response {
    match api.hub.publish(&request.agent).await {
        Ok((manifest, report)) => Json(PublishAnswer {
            id: manifest.id(),
            name: manifest.manifest().card.name.clone(),
            keywords: manifest.keywords().to_vec(),
            report,
            peers: api.hub.peers_connected(),
        })
        .into_response(),
        Err(e) => hub_failure(e),
    }
}

#[derive(Deserialize)]
struct SearchQuery {
    q: String,
    #[serde(default = "default_limit")]
    limit: usize,
}

fn default_limit() -> usize {
    20
}

async fn search(State(api): State<Arc<Api>>, Query(query): Query<SearchQuery>) -> Response {
    match api.hub.search(&query.q, query.limit.clamp(1, 200)).await {
        Ok(found) => Json(found).into_response(),
        Err(e) => hub_failure(e),
    }
}

async fn network_models(State(api): State<Arc<Api>>) -> Response {
    match api.hub.shared_models().await {
        Ok(found) => Json(found).into_response(),
        Err(e) => failure(StatusCode::BAD_GATEWAY, e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FetchRequest {
    id: String,
}

async fn fetch(State(api): State<Arc<Api>>, Json(request): Json<FetchRequest>) -> Response {
    let id: AgentId = match request.id.parse() {
        Ok(id) => id,
        Err(e) => return failure(StatusCode::BAD_REQUEST, e),
    };
    let (lines, body) = tokio::sync::mpsc::unbounded_channel::<FetchLine>();
    tokio::spawn(async move {
        let progress_lines = lines.clone();
        let progress = move |event: FetchProgress| {
            let _ = progress_lines.send(FetchLine::Progress(event));
        };
        let outcome = match api.hub.fetch(id, &progress).await {
            Ok(fetched) => FetchOutcome::Done {
                fetched: Box::new(fetched),
            },
            Err(e) => FetchOutcome::Error {
                error: e.to_string().replace('\n', " "),
            },
        };
        let _ = lines.send(FetchLine::Outcome(outcome));
    });
    crate::http::streams::ndjson_stream(body)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallRequest {
    /// An agent id, or a name found by searching the network.
    agent: String,
    tool: String,
    #[serde(default)]
    arguments: Option<Value>,
    /// How long to wait, in milliseconds.
    #[serde(default)]
    deadline_ms: Option<u64>,
    /// Check the answer by running the call again (a replayable one).
    #[serde(default)]
    verify: bool,
}

async fn call(State(api): State<Arc<Api>>, Json(request): Json<CallRequest>) -> Response {
    let arguments = request.arguments.unwrap_or_else(|| json!({}));
    if !arguments.is_object() {
        return failure(StatusCode::BAD_REQUEST, "arguments must be a JSON object");
    }
    let id = match request.agent.parse::<AgentId>() {
        Ok(id) => id,
        Err(_) => match find_by_prefix(&api.hub, &request.agent) {
            Some(Ok(id)) => id,
            Some(Err(response)) => return response,
            None => match find_by_name(&api.hub, &request.agent).await {
                Ok(id) => id,
                Err(response) => return response,
            },
        },
    };
    let deadline = request
        .deadline_ms
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(30))
        .min(crate::net::rpc::MAX_REMOTE_DEADLINE);
    let hop = Hop {
        depth: 0,
        deadline: Instant::now() + deadline,
    };
    let (answer, host) = match api
        .hub
        .call_remote_at(id, &request.tool, arguments.clone(), hop)
        .await
    {
        Ok(answered) => answered,
        Err(e) => return hub_failure(e),
    };
    let check = if request.verify {
        let deadline = Instant::now() + CHECK_DEADLINE;
        let hub = &api.hub;
        Some(
            hub.check_answer(id, &request.tool, &arguments, &answer, host, deadline)
                .await,
        )
    } else {
        None
    };
    Json(CallAnswer {
        agent: id,
        output: answer.output,
        node: crate::did::shown(&host),
        receipt: answer.receipt,
        check,
    })
    .into_response()
}

/// `POST /api/evidence/check`: evidence another node kept (a receipt with
/// the arguments and result it covers), checked by running the call here.
async fn check_evidence(State(api): State<Arc<Api>>, Json(evidence): Json<Evidence>) -> Response {
    let deadline = Instant::now() + CHECK_DEADLINE;
    Json(api.hub.check_evidence(&evidence, deadline).await).into_response()
}

/// The agent whose id starts with `prefix` (the short ids `ls` and
/// `search` show, with or without `sha256:`), among those this node knows
/// of: its own and what announcements and searches brought. None when
/// `prefix` is not hex of at least 4 digits or matches none of them.
fn find_by_prefix(hub: &Hub, prefix: &str) -> Option<Result<AgentId, Response>> {
    let hex = prefix.strip_prefix("sha256:").unwrap_or(prefix);
    if hex.len() < 4
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let mut matches: Vec<AgentId> = hub.with_known(|known| {
        known
            .map(|k| k.manifest.id())
            .filter(|id| id.hex().starts_with(hex))
            .take(8)
            .collect()
    });
    matches.dedup();
    match matches.as_slice() {
        [] => None,
        [one] => Some(Ok(*one)),
        many => Some(Err(failure(
            StatusCode::CONFLICT,
            format!(
                "{prefix:?} starts the ids of several agents ({}); use a longer prefix",
                many.iter()
                    .map(AgentId::short)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ))),
    }
}

/// The id of the agent called `name` on the network; refuses a name that
/// several different agents carry.
async fn find_by_name(hub: &Hub, name: &str) -> Result<AgentId, Response> {
    let found = hub.search(name, 50).await.map_err(hub_failure)?;
    let named: Vec<_> = found.iter().filter(|f| f.card.name == name).collect();
    match named.as_slice() {
        [one] => Ok(one.id),
        [] => Err(failure(
            StatusCode::NOT_FOUND,
            format!(
                "no agent named {name:?} was found on the network; try `agentsite search {name}`"
            ),
        )),
        many => Err(failure(
            StatusCode::CONFLICT,
            format!(
                "{} agents on the network are named {name:?}; call one by id: {}",
                many.len(),
                many.iter()
                    .map(|f| f.id.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}
