//! Calling an agent's tools on the node that hosts it, for people, goals
//! and agents (through the `peers` import, [`HubLink`]).

use super::{Hub, HubError, library};
use crate::AgentId;
use crate::agent::tool::ToolOutput;
use crate::capabilities::peers::{Discovered, Hop, PeerFailure, PeerNetwork};
use crate::net::PeerId;
use crate::net::rpc::{Answer, CallRequest, code};
use std::sync::{Arc, Weak};

impl Hub {
    /// Calls `tool` of the agent `id` on a node that hosts it, trying hosts
    /// in turn until one answers.
    pub async fn call_remote(
        &self,
        id: AgentId,
        tool: &str,
        arguments: serde_json::Value,
        hop: Hop,
    ) -> Result<ToolOutput, HubError> {
        Ok(self
            .call_remote_at(id, tool, arguments, hop)
            .await?
            .0
            .output)
    }

    /// [`Hub::call_remote`], also saying which node answered, with its
    /// receipt when it gave one.
    pub async fn call_remote_at(
        &self,
        id: AgentId,
        tool: &str,
        arguments: serde_json::Value,
        hop: Hop,
    ) -> Result<(Answer, PeerId), HubError> {
        let providers = self.providers(id, 3).await?;
        if providers.is_empty() {
            return Err(HubError::NoProvider(id));
        }
        let mut last_error = HubError::NoProvider(id);
        for provider in providers {
            let request = CallRequest {
                agent: id,
                tool: tool.to_owned(),
                arguments: arguments.clone(),
                depth: hop.depth,
                deadline: hop.remaining(),
            };
            match self.network.call(provider, request, hop.remaining()).await {
                Ok(Ok(answer)) => return Ok((answer, provider)),
                // That host no longer offers it, or answered with a receipt
                // that does not hold (it is blocked now): try the next.
                Ok(Err(error)) if [code::NOT_FOUND, code::BAD_RECEIPT].contains(&error.code) => {
                    last_error = error.into()
                }
                Ok(Err(error)) => return Err(error.into()),
                Err(error) => {
                    tracing::debug!(%provider, "remote call failed: {error}");
                    last_error = error.into();
                }
            }
        }
        Err(last_error)
    }

    /// Calls `tool` of the agent `agent` for an agent or a goal at `hop`:
    /// here if it is installed here (under this node's limits), else on a
    /// node that hosts it, whose answer comes with its receipt.
    pub async fn call_agent(
        &self,
        agent: AgentId,
        tool: &str,
        arguments: &str,
        hop: Hop,
    ) -> Result<RanAt, PeerFailure> {
        if let Ok(record) = self.shared.node.resolve(&agent.to_string()) {
            let output = self
                .shared
                .node
                .call_at_hop(&record, tool, arguments, hop)
                .await?;
            return Ok(RanAt::Here(output));
        }
        self.call_elsewhere(agent, tool, arguments, hop).await
    }

    /// Calls `tool` of the agent `agent` on a node that hosts it, even when
    /// a copy is installed here, as the agent's own refusals say.
    pub async fn call_elsewhere(
        &self,
        agent: AgentId,
        tool: &str,
        arguments: &str,
        hop: Hop,
    ) -> Result<RanAt, PeerFailure> {
        let arguments: serde_json::Value = serde_json::from_str(arguments)
            .map_err(|e| PeerFailure::InvalidArguments(format!("arguments are not JSON: {e}")))?;
        match self.call_remote_at(agent, tool, arguments, hop).await {
            Ok((answer, host)) => Ok(RanAt::Remote(Box::new(answer), host)),
            Err(HubError::NoProvider(id)) => {
                Err(PeerFailure::NotFound(format!("no node offers {id}")))
            }
            Err(HubError::Remote(error)) => Err(library::from_wire(error)),
            Err(e) => Err(PeerFailure::Unavailable(e.to_string())),
        }
    }
}

/// Where a call of an agent ran.
#[derive(Debug, Clone)]
pub enum RanAt {
    /// On this node.
    Here(ToolOutput),
    /// On the node `1`, which gave this answer.
    Remote(Box<Answer>, PeerId),
}

impl RanAt {
    /// The tool's output, wherever it ran.
    pub fn into_output(self) -> ToolOutput {
        match self {
            RanAt::Here(output) => output,
            RanAt::Remote(answer, _) => answer.output,
        }
    }
}

/// The hub as agents reach it through `peers`; weak, so that the runtime
/// holding it does not keep the hub alive.
pub(super) struct HubLink(pub(super) Weak<Hub>);

impl HubLink {
    fn hub(&self) -> Result<Arc<Hub>, PeerFailure> {
        self.0
            .upgrade()
            .ok_or_else(|| PeerFailure::Unavailable("the node is leaving the network".into()))
    }
}

#[async_trait::async_trait]
impl PeerNetwork for HubLink {
    async fn discover(&self, query: &str, limit: u32) -> Result<Vec<Discovered>, PeerFailure> {
        let hub = self.hub()?;
        let found = hub
            .search(query, limit as usize)
            .await
            .map_err(|e| PeerFailure::Unavailable(e.to_string()))?;
        Ok(found
            .into_iter()
            .map(|f| Discovered {
                id: f.id,
                card: f.card,
                tools: f.tools,
                providers: f.providers as u32,
            })
            .collect())
    }

    async fn call(
        &self,
        agent: AgentId,
        tool: &str,
        arguments: &str,
        hop: Hop,
    ) -> Result<ToolOutput, PeerFailure> {
        Ok(self
            .hub()?
            .call_agent(agent, tool, arguments, hop)
            .await?
            .into_output())
    }
}
