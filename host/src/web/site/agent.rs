//! An agent's page (`/hub/agents/{agent}`): its card, its tools with their
//! arguments, resources and prompts, what it asks for beside what it is
//! granted; and the operator's actions on it: try a tool, install it from
//! its peers, publish, remove, grant and revoke.

use super::session::Access;
use super::views::AgentView;
use super::{JsonBody, Site, failure};
use crate::AgentId;
use crate::agent::tool::ToolSpec;
use crate::capabilities::peers::Hop;
use crate::hub::{FetchProgress, Found, HubError};
use crate::policy::Grant;
use crate::policy::edit::{NodeAccess, Subject, add_grants, remove_grants, subject_of};
use crate::store::AgentRecord;
use crate::store::Origin;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use minijinja::value::Serde;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the page waits for the network to describe an agent it does
/// not know yet.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a call from the page may run.
const CALL_DEADLINE: Duration = Duration::from_secs(60);

/// Where the node knows an agent from.
enum Known {
    Installed(Box<AgentRecord>, Option<Found>),
    Network(Found),
}

impl Site {
    /// The agent named `agent` (an id, or an installed agent's name or id
    /// prefix), or the page's answer when there is none.
    async fn find(&self, agent: &str) -> Result<Known, (StatusCode, String)> {
        if let Ok(record) = self.node.resolve(agent) {
            let found = self
                .hub
                .as_ref()
                .and_then(|hub| hub.known_agent(&record.id));
            return Ok(Known::Installed(Box::new(record), found));
        }
        let not_found = || {
            (
                StatusCode::NOT_FOUND,
                format!("no agent {agent:?} is installed here or known on the network"),
            )
        };
        let (Some(hub), Ok(id)) = (&self.hub, agent.parse::<AgentId>()) else {
            return Err(not_found());
        };
        if let Some(found) = hub.known_agent(&id) {
            return Ok(Known::Network(found));
        }
        match tokio::time::timeout(LOOKUP_TIMEOUT, hub.lookup(id)).await {
            Ok(Ok((found, _hosts))) => Ok(Known::Network(found)),
            Ok(Err(_)) => Err(not_found()),
            Err(_) => Err((
                StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "the network did not describe {id} within {}s",
                    LOOKUP_TIMEOUT.as_secs()
                ),
            )),
        }
    }
}

/// One argument of a tool, as the page lists it.
#[derive(Serialize)]
struct ArgumentView {
    name: String,
    kind: String,
    required: bool,
    description: String,
}

/// A tool on the agent page.
#[derive(Serialize)]
struct ToolView<'a> {
    #[serde(flatten)]
    spec: &'a ToolSpec,
    arguments: Vec<ArgumentView>,
}

/// The arguments of a tool, read from its input schema's properties.
fn arguments(schema: &Value) -> Vec<ArgumentView> {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema["properties"].as_object() else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, property)| ArgumentView {
            name: name.clone(),
            kind: kind(property),
            required: required.contains(&name.as_str()),
            description: property["description"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        })
        .collect()
}

/// A schema's type in a few words: `string`, `one of a, b`, `array of number`.
fn kind(schema: &Value) -> String {
    if let Some(options) = schema["enum"].as_array() {
        let options: Vec<String> = options.iter().take(8).map(|o| o.to_string()).collect();
        return format!("one of {}", options.join(", "));
    }
    match &schema["type"] {
        Value::String(t) if t == "array" => format!("array of {}", kind(&schema["items"])),
        Value::String(t) => t.clone(),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ if schema.get("anyOf").is_some() || schema.get("oneOf").is_some() => {
            "one of several shapes".into()
        }
        _ => "any".into(),
    }
}

/// `GET /hub/agents/{agent}`
pub async fn page(
    State(site): State<Arc<Site>>,
    Extension(access): Extension<Access>,
    Path(agent): Path<String>,
) -> Response {
    let known = match site.find(&agent).await {
        Ok(known) => known,
        Err((status, message)) => return site.error_page(Some(access), status, &message),
    };
    let (view, tools, id, name, origin): (AgentView, &[ToolSpec], AgentId, &str, Origin) =
        match &known {
            Known::Installed(record, found) => (
                site.installed_view(record, found.as_ref(), &site.trust()),
                &record.tools,
                record.id,
                &record.card.name,
                record.origin.clone(),
            ),
            Known::Network(found) => (
                site.found_view(found, &site.trust()),
                &found.tools,
                found.id,
                &found.card.name,
                Origin::Network {
                    publisher: found.publisher.parse().unwrap_or(site.node_peer()),
                },
            ),
        };
    let policy = site.node.policy().current();
    let (granted, refused, source) = match policy.grant_for(&id, name, &origin) {
        Ok((grant, source)) => (
            grant.resolve(site.node.config().limits).describe(),
            None,
            Some(format!("{source:?}").to_lowercase()),
        ),
        Err(refused) => (Vec::new(), Some(refused.to_string()), None),
    };
    let own: Vec<_> = policy
        .own(&id, name, &origin)
        .map(Grant::revocable)
        .unwrap_or_default()
        .into_iter()
        .map(|(label, item)| json!({ "label": label, "item": item }))
        .collect();
    let (resources, prompts, listing_problem) = match &known {
        Known::Installed(record, _) => listings(&site, record).await,
        Known::Network(_) => (None, None, None),
    };
    let origin_text = match (&known, origin) {
        (Known::Installed(record, _), Origin::Attached) => format!(
            "attached on this machine: {}",
            record
                .attached
                .as_ref()
                .map_or(String::new(), |a| a.target())
        ),
        (Known::Installed(..), origin) => origin.to_string(),
        (Known::Network(_), _) => "not installed here".to_owned(),
    };
    let tool_views: Vec<ToolView> = tools
        .iter()
        .map(|spec| ToolView {
            spec,
            arguments: arguments(&spec.input_schema),
        })
        .collect();
    let frame = site.frame(access, "hub");
    site.pages.render(
        StatusCode::OK,
        "agent.html",
        minijinja::context! {
            agent => Serde(view),
            tools => Serde(tool_views),
            granted,
            refused,
            source,
            own_grants => Serde(own),
            resources => Serde(resources),
            prompts => Serde(prompts),
            listing_problem,
            origin_text,
            ..frame,
        },
    )
}

/// The resources and prompts an installed agent lists now (listing runs the
/// agent, within the node's listing deadline).
async fn listings(
    site: &Site,
    record: &AgentRecord,
) -> (
    Option<crate::agent::resource::ResourceCatalog>,
    Option<Vec<crate::agent::prompt::PromptSpec>>,
    Option<String>,
) {
    let grants = match site.node.grants(record) {
        Ok(grants) => grants,
        Err(e) => return (None, None, Some(e.to_string())),
    };
    let (resources, prompts) = tokio::join!(
        site.node.resources(record, grants.clone()),
        site.node.prompts(record, grants)
    );
    let problem = [resources.as_ref().err(), prompts.as_ref().err()]
        .into_iter()
        .flatten()
        .map(ToString::to_string)
        .next();
    (resources.ok(), prompts.ok(), problem)
}

impl Site {
    /// This node's peer id (a stand-in publisher where none can be read).
    fn node_peer(&self) -> libp2p::PeerId {
        self.hub
            .as_ref()
            .map_or_else(libp2p::PeerId::random, |hub| hub.peer_id())
    }
}

fn off_the_network() -> Response {
    failure(
        StatusCode::CONFLICT,
        "this node is not on the network: start it without --no-p2p to install and publish",
    )
}

fn hub_failure(error: HubError) -> Response {
    let status = match &error {
        HubError::Resolve(_) | HubError::NoProvider(_) => StatusCode::NOT_FOUND,
        HubError::Refused(_) => StatusCode::FORBIDDEN,
        HubError::Add(_) | HubError::Fetch(_) | HubError::Net(_) => StatusCode::BAD_GATEWAY,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    failure(status, error)
}

/// `POST /hub/agents/{id}/install`: fetches the agent from its peers. The
/// answer is one JSON object per line: progress (`started`, `bytes`,
/// `verified`), then `{"event": "done", "name"}` or `{"event": "error", "error"}`.
pub async fn install(State(site): State<Arc<Site>>, Path(agent): Path<String>) -> Response {
    let hub = match site.hub.as_ref() {
        Some(hub) => hub.clone(),
        None => return off_the_network(),
    };
    let id: AgentId = match agent.parse() {
        Ok(id) => id,
        Err(e) => return failure(StatusCode::BAD_REQUEST, e),
    };
    let (lines, body) = tokio::sync::mpsc::unbounded_channel::<Value>();
    tokio::spawn(async move {
        let progress_lines = lines.clone();
        let progress = move |event: FetchProgress| {
            let _ = progress_lines.send(serde_json::to_value(event).unwrap_or_default());
        };
        let outcome = match hub.fetch(id, &progress).await {
            Ok(fetched) => json!({
                "event": "done",
                "name": fetched.record.card.name,
                "downloaded": fetched.downloaded,
                "liars": fetched.liars,
            }),
            Err(e) => {
                json!({ "event": "error", "error": crate::text::one_line(&e.to_string(), 500) })
            }
        };
        let _ = lines.send(outcome);
    });
    crate::http::streams::ndjson_stream(body)
}

/// `POST /hub/agents/{agent}/publish`
pub async fn publish(State(site): State<Arc<Site>>, Path(agent): Path<String>) -> Response {
    let hub = match site.hub.as_ref() {
        Some(hub) => hub,
        None => return off_the_network(),
    };
    match hub.publish(&agent).await {
        Ok((manifest, report)) => Json(json!({
            "id": manifest.id(),
            "keywords": manifest.keywords(),
            "report": report,
        }))
        .into_response(),
        Err(e) => hub_failure(e),
    }
}

/// `POST /hub/agents/{agent}/remove`
pub async fn remove(State(site): State<Arc<Site>>, Path(agent): Path<String>) -> Response {
    match site.node.remove(&agent, false) {
        Ok(removed) => Json(json!({
            "removed": removed.record.id,
            "name": removed.record.card.name,
            "grants_removed": removed.grants.iter().map(ToString::to_string).collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(e) => failure(StatusCode::NOT_FOUND, e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Items {
    /// Grant items as `agentsite grant` takes them: `kv=1MiB`, `llm`, ...
    items: Vec<String>,
}

/// The id of the agent a grant or revoke names: an installed agent, or any
/// agent id (granted before it is fetched).
fn subject(site: &Site, agent: &str) -> Result<Subject, crate::ParseAgentIdError> {
    match site.node.resolve(agent) {
        Ok(record) => Ok(subject_of(&record, agent)),
        Err(_) => agent
            .parse()
            .map(|id| Subject::Agent(crate::agent::key::AgentKey::Id(id))),
    }
}

/// `POST /hub/agents/{agent}/grant` `{"items": [...]}`
pub async fn grant(
    State(site): State<Arc<Site>>,
    Path(agent): Path<String>,
    JsonBody(items): JsonBody<Items>,
) -> Response {
    // The pages never grant what reaches the node itself: that takes the
    // command line's deliberately named flag.
    edit(&site, &agent, &items, |policy, subject, items| {
        add_grants(
            policy,
            subject,
            items,
            site.node.node_self(),
            NodeAccess::Refused,
        )
    })
}

/// `POST /hub/agents/{agent}/revoke` `{"items": [...]}`
pub async fn revoke(
    State(site): State<Arc<Site>>,
    Path(agent): Path<String>,
    JsonBody(items): JsonBody<Items>,
) -> Response {
    edit(&site, &agent, &items, remove_grants)
}

fn edit(
    site: &Site,
    agent: &str,
    Items { items }: &Items,
    change: impl FnOnce(&crate::policy::PolicyFile, &Subject, &[String]) -> anyhow::Result<Grant>,
) -> Response {
    let subject = match subject(site, agent) {
        Ok(subject) => subject,
        Err(e) => return failure(StatusCode::NOT_FOUND, e),
    };
    match change(site.node.policy(), &subject, items) {
        Ok(grant) => Json(json!({
            "granted": grant.resolve(site.node.config().limits).describe(),
        }))
        .into_response(),
        Err(e) => failure(StatusCode::BAD_REQUEST, format!("{e:#}")),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallRequest {
    tool: String,
    #[serde(default)]
    arguments: Option<Value>,
}

/// `POST /hub/agents/{agent}/call` `{"tool", "arguments"}`: calls the tool
/// here when the agent is installed, else on a node that hosts it. Answers
/// `{"output", "elapsed_ms", "ran_on"}`; a failure to call is
/// `{"error"}` with a 4xx or 5xx status, a tool's own error is an output
/// with `isError`.
pub async fn call(
    State(site): State<Arc<Site>>,
    Path(agent): Path<String>,
    JsonBody(request): JsonBody<CallRequest>,
) -> Response {
    let arguments = request.arguments.unwrap_or_else(|| json!({}));
    if !arguments.is_object() {
        return failure(StatusCode::BAD_REQUEST, "arguments must be a JSON object");
    }
    let started = Instant::now();
    let (outcome, ran_on) = match site.node.resolve(&agent) {
        Ok(record) => {
            let outcome = crate::NodeCallError::answer(
                site.node
                    .call(
                        &record.id.to_string(),
                        &request.tool,
                        &arguments.to_string(),
                        None,
                    )
                    .await,
            )
            .map_err(|e| (call_status(&e), e.to_string()));
            (outcome, "this node".to_owned())
        }
        Err(_) => {
            let hub = match site.hub.as_ref() {
                Some(hub) => hub,
                None => return off_the_network(),
            };
            let id: AgentId = match agent.parse() {
                Ok(id) => id,
                Err(e) => return failure(StatusCode::NOT_FOUND, e),
            };
            let hop = Hop {
                depth: 0,
                deadline: Instant::now() + CALL_DEADLINE,
            };
            match hub.call_remote_at(id, &request.tool, arguments, hop).await {
                Ok((answer, host)) => (Ok(answer.output), host.to_string()),
                Err(e) => (Err((StatusCode::BAD_GATEWAY, e.to_string())), String::new()),
            }
        }
    };
    match outcome {
        Ok(output) => Json(json!({
            "output": output,
            "elapsed_ms": started.elapsed().as_secs_f64() * 1000.0,
            "ran_on": ran_on,
        }))
        .into_response(),
        Err((status, message)) => failure(status, message),
    }
}

fn call_status(failure: &crate::capabilities::peers::PeerFailure) -> StatusCode {
    use crate::capabilities::peers::PeerFailure as F;
    match failure {
        F::UnknownTool(_) | F::InvalidArguments(_) => StatusCode::BAD_REQUEST,
        F::NotFound(_) => StatusCode::NOT_FOUND,
        F::DeadlineExceeded(_) => StatusCode::GATEWAY_TIMEOUT,
        F::DepthExceeded(_) | F::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}
