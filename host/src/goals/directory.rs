//! The agents a goal can draw on: this node's own and the network's, found
//! by the keyword search and called where they live, through the same call
//! path as an agent's `peers.call` (hops, deadlines, grants and audit
//! apply unchanged).

use super::message::Member;
use crate::AgentId;
use crate::agent::tool::{ToolOutput, ToolSpec};
use crate::capabilities::peers::{Hop, PeerFailure};
use crate::hub::{Hub, RanAt, Verdict};
use crate::net::PeerId;
use crate::net::rpc::Answer;
use crate::store::AgentRecord;
use crate::{Node, store::terms::terms};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

/// An agent that could join a team.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub agent: AgentId,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    pub tools: Vec<ToolSpec>,
    /// Installed on this node.
    pub local: bool,
    /// A node known to host it (this node's peer id when local).
    pub node: String,
}

/// A tool call's result and the node that ran it.
#[derive(Debug, Clone)]
pub struct Answered {
    pub output: ToolOutput,
    pub node: String,
    /// Another node's answer, with its receipt, when another node ran it.
    pub remote: Option<(Box<Answer>, PeerId)>,
}

/// Where a goal finds and calls agents.
#[async_trait::async_trait]
pub trait Directory: Send + Sync {
    /// This node's peer id (or a name for it off the network).
    fn this_node(&self) -> String;

    /// Agents matching `query`, best first, at most `limit`: this node's
    /// and the network's.
    async fn search(&self, query: &str, limit: usize) -> Vec<Candidate>;

    /// The agent a person named: a name, an id, or search words.
    async fn resolve(&self, named: &str) -> Result<Candidate, String>;

    /// This node's own agents, at most `limit`: candidates for any goal,
    /// whether or not a search finds them (a search reads words; "7 times
    /// 7" names no agent, yet the calculator here can do it).
    async fn installed(&self, limit: usize) -> Vec<Candidate>;

    /// Calls `tool` of `member` at `hop`.
    async fn call(
        &self,
        member: &Member,
        tool: &str,
        arguments: &str,
        hop: Hop,
    ) -> Result<Answered, PeerFailure>;

    /// Checks another node's answer to the call of `tool` of `member` with
    /// `arguments` by running the call again, within `deadline`; `None`
    /// when nothing here can check (an answer of this node, or no network).
    async fn check(
        &self,
        _member: &Member,
        _tool: &str,
        _arguments: &Value,
        _answered: &Answered,
        _deadline: Instant,
    ) -> Option<Verdict> {
        None
    }
}

/// The node's own directory: its installed agents, and the network's
/// through the hub when the node is on one.
pub struct NodeDirectory {
    node: Arc<Node>,
    hub: Option<Arc<Hub>>,
    /// Fetch network members and run them here instead of calling them remotely.
    fetch_members: bool,
}

impl NodeDirectory {
    pub fn new(node: Arc<Node>, hub: Option<Arc<Hub>>, fetch_members: bool) -> Self {
        NodeDirectory {
            node,
            hub,
            fetch_members,
        }
    }

    fn local(&self, record: &AgentRecord) -> Candidate {
        Candidate {
            agent: record.id,
            name: record.card.name.clone(),
            description: record.card.description.clone(),
            tags: record.card.tags.clone(),
            tools: record.tools.clone(),
            local: true,
            node: self.this_node(),
        }
    }

    /// Installed agents matching any term of `query`, best first.
    fn search_local(&self, query: &str) -> Vec<Candidate> {
        let words: Vec<String> = terms(query).collect();
        let Ok(records) = self.node.list() else {
            return Vec::new();
        };
        let scores = crate::hub::rank(
            records.iter().map(|r| (&r.card, r.tools.as_slice())),
            &words,
        );
        let mut hits: Vec<(f32, &AgentRecord)> = scores
            .into_iter()
            .zip(&records)
            .filter(|(score, _)| *score > 0.0)
            .collect();
        hits.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.card.name.cmp(&b.1.card.name)));
        hits.into_iter().map(|(_, r)| self.local(r)).collect()
    }
}

/// An agent found on the network, hosted by `node`.
fn remote(found: crate::hub::Found, node: String) -> Candidate {
    Candidate {
        agent: found.id,
        name: found.card.name,
        description: found.card.description,
        tags: found.card.tags,
        tools: found.tools,
        local: false,
        node,
    }
}

#[async_trait::async_trait]
impl Directory for NodeDirectory {
    async fn installed(&self, limit: usize) -> Vec<Candidate> {
        let Ok(records) = self.node.list() else {
            return Vec::new();
        };
        records.iter().take(limit).map(|r| self.local(r)).collect()
    }

    fn this_node(&self) -> String {
        match &self.hub {
            Some(hub) => hub.peer_id().to_string(),
            None => "this node".into(),
        }
    }

    async fn search(&self, query: &str, limit: usize) -> Vec<Candidate> {
        let mut found = self.search_local(query);
        if let Some(hub) = &self.hub {
            match hub.search(query, limit).await {
                Ok(hits) => {
                    for agent in hits {
                        if found.iter().any(|c| c.agent == agent.id) {
                            continue;
                        }
                        let node = hub
                            .hosts_of(&agent.id)
                            .first()
                            .map(ToString::to_string)
                            .unwrap_or_default();
                        found.push(remote(agent, node));
                    }
                }
                Err(e) => tracing::debug!("network search for a goal failed: {e}"),
            }
        }
        found.truncate(limit);
        found
    }

    async fn resolve(&self, named: &str) -> Result<Candidate, String> {
        if let Ok(record) = self.node.resolve(named) {
            return Ok(self.local(&record));
        }
        if self.hub.is_none() {
            return Err(format!(
                "unknown team member {named:?}: no agent of that name or id is installed"
            ));
        }
        if let (Some(hub), Ok(id)) = (&self.hub, named.parse::<AgentId>()) {
            let (found, hosts) = hub
                .lookup(id)
                .await
                .map_err(|e| format!("unknown team member {named}: {e}"))?;
            let node = hosts.first().map(ToString::to_string).unwrap_or_default();
            return Ok(remote(found, node));
        }
        let found = self.search(named, 8).await;
        let exact = found
            .iter()
            .find(|c| c.name == named || c.agent.to_string() == named)
            .or(found.first());
        exact.cloned().ok_or_else(|| {
            format!("unknown team member {named:?}: no agent here or on the network matches it")
        })
    }

    async fn call(
        &self,
        member: &Member,
        tool: &str,
        arguments: &str,
        hop: Hop,
    ) -> Result<Answered, PeerFailure> {
        let Some(hub) = &self.hub else {
            let record = self
                .node
                .resolve(&member.agent.to_string())
                .map_err(|e| PeerFailure::NotFound(e.to_string()))?;
            let output = self.node.call_at_hop(&record, tool, arguments, hop).await?;
            return Ok(Answered {
                output,
                node: self.this_node(),
                remote: None,
            });
        };
        if self.fetch_members && !member.local {
            hub.fetch(member.agent, &|_| {}).await.map_err(|e| {
                PeerFailure::Unavailable(format!("cannot fetch {}: {e}", member.name))
            })?;
        }
        // A member found on the network is called where it lives, unless
        // members are fetched: a copy this node fetched to check one of its
        // answers does not move the work here.
        let ran = match member.local || self.fetch_members {
            true => hub.call_agent(member.agent, tool, arguments, hop).await?,
            false => {
                hub.call_elsewhere(member.agent, tool, arguments, hop)
                    .await?
            }
        };
        Ok(match ran {
            RanAt::Here(output) => Answered {
                output,
                node: self.this_node(),
                remote: None,
            },
            RanAt::Remote(answer, host) => Answered {
                output: answer.output.clone(),
                node: host.to_string(),
                remote: Some((answer, host)),
            },
        })
    }

    async fn check(
        &self,
        member: &Member,
        tool: &str,
        arguments: &Value,
        answered: &Answered,
        deadline: Instant,
    ) -> Option<Verdict> {
        let (hub, (answer, host)) = (self.hub.as_ref()?, answered.remote.as_ref()?);
        Some(
            hub.check_answer(member.agent, tool, arguments, answer, *host, deadline)
                .await,
        )
    }
}
