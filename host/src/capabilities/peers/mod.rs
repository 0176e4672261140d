//! The `peers` import: an agent finds other agents on the network and calls
//! their tools, on this node if the agent is installed here and otherwise
//! where it is hosted.
//!
//! Only agents the policy grants `peers` may use it, and within the grant's
//! bounds: a call of the agent may make at most `fanout` calls to other
//! agents, and only while the chain is less than `depth` hops deep. The
//! host hands the runtime a [`PeerNetwork`] when the node joins a network;
//! without one, every call answers "not granted". Every call an agent makes
//! carries its hop count plus one and what is left of its own deadline, so
//! that chains of agents calling agents end: past [`MAX_DEPTH`] hops (or the
//! grant's depth) a call is refused, and no callee outlives its caller. So
//! an agent calling itself stops at its depth, and one call of agents
//! granted on this node causes at most fanout^depth others.

pub mod grant;

use super::caller::CallerLink;
use super::{CallContext, CallPart, CallState};
use crate::AgentId;
use crate::agent::tool::{AgentCard, Content, ResourceBody, ToolOutput, ToolSpec};
use crate::audit::Denials;
use crate::capabilities::bindings::agentsite::agent::peers::{self, AgentRef, PeerError};
use crate::capabilities::bindings::types::{self, ToolResult};
use crate::capabilities::sources::Used;
use grant::{MAX_DEPTH, PeersGrant};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::component::{HasSelf, Linker};

/// The most agents one `discover` returns.
pub const MAX_DISCOVER: u32 = 50;

/// An agent found on the network.
#[derive(Debug, Clone)]
pub struct Discovered {
    pub id: AgentId,
    pub card: AgentCard,
    pub tools: Vec<ToolSpec>,
    pub providers: u32,
}

/// Why a peers operation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PeerFailure {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    DepthExceeded(String),
    #[error("{0}")]
    DeadlineExceeded(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("unknown tool {0:?}")]
    UnknownTool(String),
    #[error("{0}")]
    InvalidArguments(String),
}

/// One hop of a call chain: how deep it is and when its caller stops waiting.
#[derive(Debug, Clone, Copy)]
pub struct Hop {
    pub depth: u32,
    pub deadline: Instant,
}

impl Hop {
    /// Time left before the deadline.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// The network as agents see it. Implemented by the node's hub.
#[async_trait::async_trait]
pub trait PeerNetwork: Send + Sync {
    /// Agents matching `query` (words), best first, at most `limit`.
    async fn discover(&self, query: &str, limit: u32) -> Result<Vec<Discovered>, PeerFailure>;
    /// Calls `tool` of the agent `agent` at hop `hop`.
    async fn call(
        &self,
        agent: AgentId,
        tool: &str,
        arguments: &str,
        hop: Hop,
    ) -> Result<ToolOutput, PeerFailure>;
}

/// Per-call state of the `peers` import.
pub struct PeersState {
    network: Option<Arc<dyn PeerNetwork>>,
    link: CallerLink,
    grant: Option<PeersGrant>,
    /// Calls to other agents this call has made.
    calls: u32,
    denials: Denials,
}

impl PeersState {
    pub(crate) fn new(
        network: Option<Arc<dyn PeerNetwork>>,
        link: CallerLink,
        grant: Option<PeersGrant>,
        denials: Denials,
    ) -> Self {
        PeersState {
            network,
            link,
            grant,
            calls: 0,
            denials,
        }
    }

    fn network(&self) -> Result<&Arc<dyn PeerNetwork>, PeerError> {
        if self.grant.is_none() {
            self.denials
                .record("peers", "no access to other agents granted");
            return Err(PeerError::NotGranted(
                "the operator has not granted this agent access to other agents \
                 (`agentsite grant <agent> peers`)"
                    .into(),
            ));
        }
        self.network.as_ref().ok_or_else(|| {
            PeerError::NotGranted(
                "this node is not on a network: start it with `agentsite serve`".into(),
            )
        })
    }

    /// Runs `future` until the call's deadline.
    async fn in_time<T>(
        &self,
        future: impl std::future::Future<Output = Result<T, PeerFailure>>,
    ) -> Result<T, PeerError> {
        match self.link.until_deadline(future).await {
            Some(outcome) => outcome.map_err(to_wit),
            None => Err(PeerError::DeadlineExceeded(
                "the call's deadline passed while waiting for another agent".into(),
            )),
        }
    }
}

fn to_wit(failure: PeerFailure) -> PeerError {
    match failure {
        PeerFailure::NotFound(m) => PeerError::NotFound(m),
        PeerFailure::DepthExceeded(m) => PeerError::DepthExceeded(m),
        PeerFailure::DeadlineExceeded(m) => PeerError::DeadlineExceeded(m),
        PeerFailure::Unavailable(m) => PeerError::Unavailable(m),
        PeerFailure::UnknownTool(m) => PeerError::Tool(types::ToolError::UnknownTool(m)),
        PeerFailure::InvalidArguments(m) => PeerError::Tool(types::ToolError::InvalidArguments(m)),
    }
}

impl peers::Host for PeersState {
    async fn discover(
        &mut self,
        query: String,
        limit: u32,
    ) -> wasmtime::Result<Result<Vec<AgentRef>, PeerError>> {
        let network = match self.network() {
            Ok(network) => network.clone(),
            Err(e) => return Ok(Err(e)),
        };
        let limit = limit.clamp(1, MAX_DISCOVER);
        let found = self.in_time(network.discover(&query, limit)).await;
        Ok(found.map(|agents| agents.into_iter().map(agent_ref).collect()))
    }

    async fn call(
        &mut self,
        agent_id: String,
        tool: String,
        arguments: String,
    ) -> wasmtime::Result<Result<ToolResult, PeerError>> {
        let network = match self.network() {
            Ok(network) => network.clone(),
            Err(e) => return Ok(Err(e)),
        };
        let agent: AgentId = match agent_id.parse() {
            Ok(id) => id,
            Err(e) => return Ok(Err(PeerError::NotFound(format!("{e}")))),
        };
        let grant = self.grant.unwrap_or_default();
        if self.calls >= grant.fanout {
            self.denials.record("peers", "fan-out used up");
            return Ok(Err(PeerError::NotGranted(format!(
                "this agent may make at most {} calls to other agents per call",
                grant.fanout
            ))));
        }
        let depth = self.link.depth() + 1;
        if depth > MAX_DEPTH.min(grant.depth) {
            self.denials.record("peers", "too deep in a chain");
            return Ok(Err(PeerError::DepthExceeded(format!(
                "this agent may call other agents at most {} deep in a chain (this call would be hop {depth})",
                MAX_DEPTH.min(grant.depth)
            ))));
        }
        self.calls += 1;
        let hop = Hop {
            depth,
            deadline: self.link.deadline,
        };
        let output = self
            .in_time(network.call(agent, &tool, &arguments, hop))
            .await;
        Ok(output.map(tool_result))
    }
}

fn agent_ref(found: Discovered) -> AgentRef {
    AgentRef {
        id: found.id.to_string(),
        card: types::AgentCard {
            name: found.card.name,
            version: found.card.version,
            description: found.card.description,
            tags: found.card.tags,
            homepage: found.card.homepage,
        },
        tools: found.tools.iter().map(wit_tool).collect(),
        providers: found.providers,
    }
}

fn wit_tool(tool: &ToolSpec) -> types::Tool {
    let hints = &tool.annotations;
    types::Tool {
        name: tool.name.clone(),
        title: tool.title.clone(),
        description: tool.description.clone(),
        input_schema: tool.input_schema.to_string(),
        output_schema: tool.output_schema.as_ref().map(|s| s.to_string()),
        annotations: types::ToolAnnotations {
            read_only: hints.read_only_hint,
            destructive: hints.destructive_hint,
            idempotent: hints.idempotent_hint,
            open_world: hints.open_world_hint,
        },
    }
}

fn tool_result(output: ToolOutput) -> ToolResult {
    ToolResult {
        content: output.content.into_iter().map(wit_content).collect(),
        structured_content: output.structured_content.map(|s| s.as_str().to_owned()),
        is_error: output.is_error,
    }
}

fn wit_content(content: Content) -> types::Content {
    match content {
        Content::Text { text } => types::Content::Text(text),
        Content::Image { data, mime_type } => types::Content::Image(media(&data, mime_type)),
        Content::Audio { data, mime_type } => types::Content::Audio(media(&data, mime_type)),
        Content::Resource { resource } => types::Content::Resource(types::EmbeddedResource {
            uri: resource.uri,
            mime_type: resource.mime_type,
            body: match resource.body {
                ResourceBody::Text { text } => types::ResourceBody::Text(text),
                ResourceBody::Blob { blob } => types::ResourceBody::Blob(decode(&blob)),
            },
        }),
    }
}

fn media(data: &str, mime_type: String) -> types::Media {
    types::Media {
        data: decode(data),
        mime_type,
    }
}

/// Base64 from another node's result; what does not decode arrives empty.
fn decode(data: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap_or_default()
}

impl CallPart for PeersState {
    fn for_call(call: &CallContext<'_>) -> anyhow::Result<PeersState> {
        Ok(PeersState::new(
            call.services.peers.get().cloned(),
            call.caller.clone(),
            call.grants.peers,
            call.denials.clone(),
        ))
    }

    fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        peers::add_to_linker::<CallState, HasSelf<PeersState>>(linker, |state| {
            state.sources.record(Used::PEERS);
            &mut state.peers
        })
    }
}
