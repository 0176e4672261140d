//! Agents that are not components: MCP servers and A2A agents the operator
//! attaches, served as agents of the node.
//!
//! An attached server is a program the node starts and talks MCP to over
//! stdio (`agentsite attach NAME -- COMMAND ARGS...`), a streamable-HTTP
//! endpoint (`agentsite attach NAME URL`), or an A2A agent (the same
//! command, for a URL with an Agent Card: [`crate::crate::a2a::client::client`]). Its tools are probed when it is
//! attached, checked as a component's are, and kept in an [`AgentRecord`]
//! like any agent's, so that listings, `/mcp`, `peers.call`, remote calls
//! and goals reach it through the node's one call path.
//!
//! What differs is isolation: the node does not sandbox it (it runs with
//! the operator's rights, or elsewhere), has no capabilities to grant it,
//! and has no bytes to serve, so it is never fetchable by hash. What the
//! node still holds it to is what a caller sees: the call's deadline, the
//! output cap, the agent's concurrency slots, and well-formed results. A
//! stdio server that exits is started again with backoff.

mod convert;
mod http;
mod link;
mod stdio;

pub use crate::store::attachment::{Attachment, InvalidAttachment};
pub use link::START_TIMEOUT;

use crate::AgentId;
use crate::agent::tool::{AgentCard, ToolOutput, ToolSpec};
use crate::config::Limits;
use crate::runtime::CallError;
use crate::runtime::CallSlots;
use crate::store::{AgentRecord, Catalog};
use futures::future::BoxFuture;
use link::Link;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ErrorCode,
    Implementation, ServerPeerInfo,
};
use rmcp::service::{NotificationContext, ServiceError};
use rmcp::{ClientHandler, Peer, RoleClient};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// How long re-listing a server's tools after it says they changed may
/// take.
const RELIST_TIMEOUT: Duration = Duration::from_secs(10);

/// A connected server: where calls go.
pub struct Session {
    peer: Peer<RoleClient>,
    info: Option<Arc<ServerPeerInfo>>,
    /// Whether the end of the connection is seen from the server's side (a
    /// process exiting) rather than only by a failed request.
    watched: bool,
    /// Why it ended, once it has.
    ended: std::sync::OnceLock<String>,
    /// Stops the server when the last holder lets go.
    _stop: tokio_util::sync::DropGuard,
}

impl Session {
    /// The session of the client `running`, and the token that is
    /// cancelled when the last holder of the session lets go.
    fn new(
        running: &rmcp::service::RunningService<RoleClient, Client>,
        watched: bool,
    ) -> (Session, tokio_util::sync::CancellationToken) {
        let stop = tokio_util::sync::CancellationToken::new();
        let session = Session {
            peer: running.peer().clone(),
            info: running.peer_info(),
            watched,
            ended: std::sync::OnceLock::new(),
            _stop: stop.clone().drop_guard(),
        };
        (session, stop)
    }
}

/// A session just made, and what resolves (with the reason) when it ends.
pub struct Connected {
    session: Session,
    ended: BoxFuture<'static, String>,
}

/// Called with the server's peer when it says its tools changed.
type ToolsChanged = Arc<dyn Fn(Peer<RoleClient>) + Send + Sync>;

/// The node as an MCP client of an attached server: it announces itself
/// and listens for the server's tool list changing. It offers no sampling,
/// roots or elicitation: an attached server gets nothing from the node
/// but calls.
#[derive(Clone)]
struct Client {
    tools_changed: Option<ToolsChanged>,
}

impl ClientHandler for Client {
    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        if let Some(tools_changed) = &self.tools_changed {
            tools_changed(context.peer);
        }
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("agentsite", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// Connects to `attachment`, handing `client` the server's notifications.
async fn connect_with(
    name: &str,
    attachment: &Attachment,
    max_message: usize,
    client: Client,
) -> Result<Connected, String> {
    match attachment {
        Attachment::Stdio { command, args, dir } => {
            stdio::connect(name, command, args, dir, max_message, client).await
        }
        Attachment::Http { url } => http::connect(name, url, max_message, client).await,
        Attachment::A2a { card, .. } => Err(format!(
            "{name} is the A2A agent at {card}, not an MCP server"
        )),
    }
}

/// Connects to `attachment` without listening for changes.
async fn connect(
    name: &str,
    attachment: &Attachment,
    max_message: usize,
) -> Result<Connected, String> {
    connect_with(
        name,
        attachment,
        max_message,
        Client {
            tools_changed: None,
        },
    )
    .await
}

/// Connects to `attachment` once and returns what it is (a URL with an A2A
/// Agent Card is an A2A agent, another an MCP server), and the card and
/// tools it offers as the agent `name`, checked against the contract; an
/// MCP server is stopped again. What `agentsite attach` runs before it
/// records anything.
pub async fn probe(
    name: &str,
    attachment: &Attachment,
    limits: &Limits,
) -> Result<(Attachment, AgentCard, Vec<ToolSpec>), String> {
    let card_at = match attachment {
        Attachment::Http { url } => Some(url),
        Attachment::A2a { card, .. } => Some(card),
        Attachment::Stdio { .. } => None,
    };
    let mut no_card = None;
    if let Some(url) = card_at {
        let named_endpoint = match attachment {
            Attachment::A2a { endpoint, .. } => Some(endpoint.as_str()),
            _ => None,
        };
        match crate::a2a::client::discover(url, named_endpoint).await {
            Ok((card_url, card, endpoint, binding)) => {
                let (card, tools) = crate::a2a::client::describe(name, &card)?;
                let attachment = Attachment::A2a {
                    card: card_url,
                    endpoint,
                    protocol: binding.version(),
                };
                attachment.check().map_err(|e| e.to_string())?;
                return Ok((attachment, card, tools));
            }
            Err(why) if matches!(attachment, Attachment::A2a { .. }) => return Err(why),
            Err(why) => no_card = Some(why),
        }
    }
    let described = async {
        let connected = connect(name, attachment, limits.max_message()).await?;
        let session = connected.session;
        let tools = list_tools(name, &session.peer).await?;
        describe(name, attachment, session.info.as_deref(), tools)
    };
    let described = tokio::time::timeout(START_TIMEOUT, described)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "{name} did not start and list its tools within {} s",
                START_TIMEOUT.as_secs()
            ))
        });
    match (described, no_card) {
        (Ok((card, tools)), _) => Ok((attachment.clone(), card, tools)),
        // A server that answered but is neither: say both.
        (Err(e), Some(why)) if !why.starts_with("cannot reach") => {
            Err(format!("{e}; nor is it an A2A agent: {why}"))
        }
        (Err(e), _) => Err(e),
    }
}

/// Pages of a tool list read at most: a server that hands out cursors
/// forever is stopped here, not by what it makes the node hold.
const MAX_TOOL_PAGES: usize = 64;

/// Every page of the server's tools, refusing more tools than an agent may
/// offer (the contract's bound, checked again by [`describe`]) or more than
/// [`MAX_TOOL_PAGES`] pages, before they pile up.
async fn list_tools(name: &str, peer: &Peer<RoleClient>) -> Result<Vec<rmcp::model::Tool>, String> {
    let limit = crate::agent::tool::card_limits::TOOLS;
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_TOOL_PAGES {
        let page = peer
            .list_tools(Some(
                rmcp::model::PaginatedRequestParams::default().with_cursor(cursor),
            ))
            .await
            .map_err(|e| format!("{name} did not list its tools: {e}"))?;
        tools.extend(page.tools);
        if tools.len() > limit {
            return Err(format!(
                "{name} lists more than {limit} tools, the most an agent may offer"
            ));
        }
        cursor = page.next_cursor;
        if cursor.is_none() {
            return Ok(tools);
        }
    }
    Err(format!(
        "{name} kept paging its tool list past {MAX_TOOL_PAGES} pages"
    ))
}

fn describe(
    name: &str,
    attachment: &Attachment,
    info: Option<&ServerPeerInfo>,
    tools: Vec<rmcp::model::Tool>,
) -> Result<(AgentCard, Vec<ToolSpec>), String> {
    convert::describe(
        name,
        attachment.kind(),
        info.and_then(|i| i.server_info.as_ref()),
        info.and_then(|i| i.instructions.as_deref()),
        tools,
    )
    .map_err(|e| match e {
        CallError::MalformedResult(why) => format!("{name} breaks the agent contract: {why}"),
        other => format!("{name} breaks the agent contract: {other}"),
    })
}

/// What went wrong, in a person's words ([`crate::text::root_cause`]),
/// through the MCP library's HTTP transport, whose error holds the HTTP
/// client's without naming it as its source.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    match error.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
        Some(StreamableHttpError::Client(inner)) => crate::text::root_cause(inner),
        _ => crate::text::root_cause(error),
    }
}

/// How often a node looks for servers detached by another process (the
/// `agentsite detach` command beside a serving node) to stop them.
const SWEEP_EVERY: Duration = Duration::from_secs(2);

type Links = Mutex<HashMap<AgentId, Arc<Link>>>;

/// The attached servers of one node, connected as they are called.
pub struct Bridge {
    catalog: Catalog,
    links: Arc<Links>,
    /// The concurrency slots of each attached A2A agent.
    a2a_slots: Mutex<HashMap<AgentId, Arc<CallSlots>>>,
    /// The HTTP client for A2A agents, made on first use.
    a2a_http: std::sync::OnceLock<reqwest::Client>,
    /// Whether the sweep runs.
    sweeping: std::sync::atomic::AtomicBool,
}

impl Bridge {
    /// A bridge whose records live in `catalog` (where a changed tool list
    /// is written back).
    pub fn new(catalog: Catalog) -> Self {
        Bridge {
            catalog,
            links: Arc::new(Mutex::new(HashMap::new())),
            a2a_slots: Mutex::new(HashMap::new()),
            a2a_http: std::sync::OnceLock::new(),
            sweeping: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Stops, every [`SWEEP_EVERY`], the servers whose record is gone or
    /// changed, until the bridge is dropped. Started with the first link.
    fn sweep(catalog: Catalog, links: std::sync::Weak<Links>) {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SWEEP_EVERY).await;
                let Some(links) = links.upgrade() else { return };
                let current: Vec<(AgentId, Arc<Link>)> = links
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                    .map(|(id, link)| (*id, link.clone()))
                    .collect();
                for (id, link) in current {
                    let gone = match catalog.get(&id) {
                        Ok(Some(record)) => record.attached.as_ref() != Some(link.attachment()),
                        Ok(None) => true,
                        // A catalog that cannot be read says nothing.
                        Err(_) => false,
                    };
                    if gone {
                        tracing::info!(agent = %id, "detached; stopping its server");
                        links
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .remove(&id);
                        link.close();
                    }
                }
            }
        });
    }

    /// Calls `tool` of the attached agent of `record` with `arguments`
    /// under `limits`: one of its call slots, the
    /// server (started if need be) and its answer, all within the deadline,
    /// and the answer checked as a component's result is.
    pub async fn call(
        &self,
        record: &AgentRecord,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        limits: &Limits,
    ) -> Result<ToolOutput, CallError> {
        let deadline = Instant::now() + limits.deadline;
        if let Some(Attachment::A2a {
            endpoint, protocol, ..
        }) = &record.attached
        {
            let slots = self
                .a2a_slots
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(record.id)
                .or_insert_with(|| Arc::new(CallSlots::new(limits.max_concurrent_calls)))
                .clone();
            let _slot = slots.take(limits.max_concurrent_calls, deadline).await?;
            let http = self.a2a_http.get_or_init(crate::a2a::client::client);
            let name = &record.card.name;
            let binding = crate::a2a::wire::Binding::of_version(protocol.as_deref());
            let peer = crate::a2a::client::Peer::new(http, name, endpoint, binding, limits);
            return crate::a2a::client::call(&peer, tool, arguments, limits, deadline).await;
        }
        let link = self.link(record, limits)?;
        let _slot = link
            .slots()
            .take(limits.max_concurrent_calls, deadline)
            .await?;
        let session = link.session(deadline).await?;
        let request = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        // Giving up at the deadline drops the request, which tells the
        // server the call is cancelled.
        let answer = tokio::time::timeout_at(deadline, session.peer.call_tool_once(request)).await;
        let name = &record.card.name;
        match answer {
            Err(_) => Err(CallError::DeadlineExceeded(limits.deadline)),
            Ok(Ok(CallToolResponse::Complete(result))) => convert::tool_output(result, limits),
            Ok(Ok(_)) => Err(CallError::Failed(format!(
                "{name} asked for input or started a long-running task, which the node does not \
                 support for attached servers"
            ))),
            Ok(Err(ServiceError::McpError(error))) => {
                let message = crate::text::one_line(&error.message, 4096);
                Err(if error.code == ErrorCode::INVALID_PARAMS {
                    CallError::InvalidArguments(message)
                } else {
                    CallError::Failed(format!("{name} refused the call: {message}"))
                })
            }
            Ok(Err(error)) => {
                let reason = if session.watched {
                    link.broken(&session).await
                } else {
                    let why = match &error {
                        ServiceError::TransportSend(e) => root_cause(&*e.error),
                        other => other.to_string(),
                    };
                    format!(
                        "{name} could not be reached: {}",
                        crate::text::one_line(&why, 400)
                    )
                };
                link.failed(&session, reason.clone());
                Err(CallError::Unavailable(reason))
            }
        }
    }

    /// The link of `record`, made on first use.
    fn link(&self, record: &AgentRecord, limits: &Limits) -> Result<Arc<Link>, CallError> {
        let Some(attachment) = &record.attached else {
            return Err(CallError::Host(format!(
                "{} is not an attached server",
                record.card.name
            )));
        };
        let mut links = self.links.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(link) = links.get(&record.id)
            && link.attachment() == attachment
        {
            return Ok(link.clone());
        }
        if !self
            .sweeping
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            Self::sweep(self.catalog.clone(), Arc::downgrade(&self.links));
        }
        let link = Link::new(
            record.card.name.clone(),
            attachment.clone(),
            limits.max_message(),
            self.relister(record),
        );
        links.insert(record.id, link.clone());
        Ok(link)
    }

    /// What runs when the server of `record` says its tools changed: list
    /// them again and, if they are valid, write them to its record (a list
    /// that breaks the contract is refused and the old one kept).
    fn relister(&self, record: &AgentRecord) -> ToolsChanged {
        let catalog = self.catalog.clone();
        let id = record.id;
        let name = record.card.name.clone();
        Arc::new(move |peer: Peer<RoleClient>| {
            let catalog = catalog.clone();
            let name = name.clone();
            tokio::spawn(async move {
                let Ok(Some(mut record)) = catalog.get(&id) else {
                    return;
                };
                let Some(attachment) = record.attached.clone() else {
                    return;
                };
                let listed = tokio::time::timeout(RELIST_TIMEOUT, list_tools(&name, &peer)).await;
                let tools = match listed {
                    Ok(Ok(tools)) => tools,
                    Ok(Err(e)) => {
                        return tracing::warn!(agent = %name, "keeping the old tools: {e}");
                    }
                    Err(_) => return tracing::warn!(agent = %name, "listing tools timed out"),
                };
                match describe(&name, &attachment, peer.peer_info().as_deref(), tools) {
                    Ok((_, tools)) if tools != record.tools => {
                        record.tools = tools;
                        match catalog.put(&record) {
                            Ok(()) => tracing::info!(agent = %name, "tool list changed"),
                            Err(e) => tracing::warn!(agent = %name, "cannot save tools: {e}"),
                        }
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!("keeping the old tool list: {e}"),
                }
            });
        })
    }

    /// Stops the server of the agent `id` and forgets it.
    pub fn detach(&self, id: &AgentId) {
        self.a2a_slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        let link = self
            .links
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        if let Some(link) = link {
            link.close();
        }
    }
}
