//! What the pages show of an agent, gathered from where the node knows it:
//! installed here ([`AgentRecord`]), known from the network ([`Found`]), or
//! both.

use super::Site;
use crate::AgentId;
use crate::agent::tool::{AgentCard, ToolSpec};
use crate::hub::Found;
use crate::store::AgentRecord;
use crate::store::Origin;
use serde::Serialize;
use std::collections::HashMap;

/// One agent as a card shows it.
#[derive(Debug, Clone, Serialize)]
pub struct AgentView {
    pub id: String,
    pub name: String,
    pub version: String,
    pub description: String,
    pub tags: Vec<String>,
    pub homepage: Option<String>,
    pub tools: Vec<String>,
    /// Other nodes known to host it.
    pub providers: usize,
    pub publisher: Option<PublisherView>,
    pub size: u64,
    pub installed: bool,
    /// This node offers it to the network.
    pub published: bool,
    /// Other nodes offer it, or this one does.
    pub on_network: bool,
    /// What its imports ask a host to grant.
    pub asks_for: Vec<&'static str>,
    /// For an attached server (here, or a service of another node), what
    /// kind: not sandboxed by the node that runs it, not fetchable.
    pub attached: Option<String>,
}

/// Who signed an agent's manifest, and what this node makes of them.
#[derive(Debug, Clone, Serialize)]
pub struct PublisherView {
    pub id: String,
    /// The same key as a did:key, when the id carries its key.
    pub did: Option<String>,
    /// `this node`, `trusted` or `untrusted`.
    pub trust: &'static str,
}

impl AgentView {
    pub fn trusted(&self) -> bool {
        self.publisher
            .as_ref()
            .is_some_and(|p| p.trust != "untrusted")
    }

    fn new(
        id: AgentId,
        card: &AgentCard,
        tools: &[ToolSpec],
        size: u64,
        imports: &[String],
    ) -> Self {
        AgentView {
            id: id.to_string(),
            name: card.name.clone(),
            version: card.version.clone(),
            description: card.description.clone(),
            tags: card.tags.clone(),
            homepage: card
                .homepage
                .clone()
                .filter(|h| h.starts_with("https://") || h.starts_with("http://")),
            tools: tools.iter().map(|t| t.name.clone()).collect(),
            providers: 0,
            publisher: None,
            size,
            installed: false,
            published: false,
            on_network: false,
            asks_for: crate::capabilities::grant::asked_for(imports),
            attached: None,
        }
    }
}

/// Which agents a list shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Show {
    #[default]
    All,
    Installed,
    Network,
    Trusted,
}

impl Show {
    pub fn admits(self, agent: &AgentView) -> bool {
        match self {
            Show::All => true,
            Show::Installed => agent.installed,
            Show::Network => agent.on_network,
            Show::Trusted => agent.trusted(),
        }
    }
}

/// Who this node trusts, read once for a list of agents rather than once
/// per card (the policy's freshness check is a file's stat, this node's
/// key in text an encoding).
pub struct Trust {
    own: Option<String>,
    trusted: std::collections::HashSet<String>,
}

impl Trust {
    /// How this node regards the publisher `id`.
    fn of(&self, id: &str) -> PublisherView {
        PublisherView {
            id: id.to_owned(),
            did: crate::did::of_peer_text(id),
            trust: if self.own.as_deref() == Some(id) {
                "this node"
            } else if self.trusted.contains(id) {
                "trusted"
            } else {
                "untrusted"
            },
        }
    }
}

impl Site {
    pub fn trust(&self) -> Trust {
        Trust {
            own: self.hub.as_ref().map(|hub| hub.publisher_id().to_string()),
            trusted: self
                .node
                .policy()
                .current()
                .publishers
                .keys()
                .map(ToString::to_string)
                .collect(),
        }
    }

    /// An installed agent's view, completed by what the network says of it.
    pub fn installed_view(
        &self,
        record: &AgentRecord,
        found: Option<&Found>,
        trust: &Trust,
    ) -> AgentView {
        self.installed_seen(
            record,
            self.other_hosts(&record.id),
            found.map(|f| f.publisher.as_str()),
            trust,
        )
    }

    /// An installed agent's view, with `providers` and the `publisher` the
    /// network knows it by (its own record says who, when it came from
    /// the network).
    fn installed_seen(
        &self,
        record: &AgentRecord,
        providers: usize,
        publisher: Option<&str>,
        trust: &Trust,
    ) -> AgentView {
        let mut view = AgentView::new(
            record.id,
            &record.card,
            &record.tools,
            record.size,
            &record.imports,
        );
        view.installed = true;
        view.publisher = match &record.origin {
            Origin::Network { publisher }
            | Origin::Registry {
                signer: Some(publisher),
                ..
            } => Some(trust.of(&publisher.to_string())),
            Origin::Local | Origin::Registry { .. } | Origin::Attached => {
                publisher.map(|p| trust.of(p))
            }
        };
        view.attached = record.attached.as_ref().map(|a| a.kind().to_owned());
        self.complete(&mut view, record.id, providers);
        view
    }

    /// The view of an agent known from the network only.
    pub fn found_view(&self, found: &Found, trust: &Trust) -> AgentView {
        let mut view = AgentView::new(
            found.id,
            &found.card,
            &found.tools,
            found.size,
            &found.capabilities,
        );
        view.publisher = Some(trust.of(&found.publisher));
        view.attached = found.service.clone();
        self.complete(&mut view, found.id, self.other_hosts(&found.id));
        view
    }

    /// Fills in what the network knows of `id`: `providers` other nodes
    /// host it (this one left out), and whether this node published it (a
    /// copy it fetched and serves is on the network, not its own).
    fn complete(&self, view: &mut AgentView, id: AgentId, providers: usize) {
        view.providers = providers;
        let offered = self.hub.as_ref().is_some_and(|hub| hub.is_offered(&id));
        view.published = self
            .hub
            .as_ref()
            .is_some_and(|hub| hub.is_published_here(&id));
        view.on_network = view.providers > 0 || offered;
    }

    /// How many other nodes host `id`, from the hub's index.
    fn other_hosts(&self, id: &AgentId) -> usize {
        self.hub.as_ref().map_or(0, |hub| hub.other_hosts(id))
    }

    /// Every agent this node knows: installed ones first, then the
    /// network's, each by name. Built from the hub's index in place: a
    /// node may know thousands, and a page shows sixty.
    pub fn all_agents(&self) -> Vec<AgentView> {
        let trust = self.trust();
        let mut installed = self.node.list().unwrap_or_else(|e| {
            tracing::warn!("cannot list the installed agents: {e}");
            Vec::new()
        });
        installed.sort_by(|a, b| a.card.name.cmp(&b.card.name));
        let installed_ids: std::collections::HashSet<AgentId> =
            installed.iter().map(|r| r.id).collect();
        let mut network: Vec<(AgentId, usize, AgentView)> = Vec::new();
        let mut providers: HashMap<AgentId, (usize, String)> = HashMap::new();
        if let Some(hub) = &self.hub {
            let own = hub.peer_id();
            hub.with_known(|known| {
                for agent in known {
                    let signed = &agent.manifest;
                    let manifest = signed.manifest();
                    let publisher = signed.publisher_id().to_string();
                    let others = agent.hosts.iter().filter(|host| **host != own).count();
                    if installed_ids.contains(&manifest.id) {
                        providers.insert(manifest.id, (others, publisher));
                        continue;
                    }
                    let mut view = AgentView::new(
                        manifest.id,
                        &manifest.card,
                        &manifest.tools,
                        manifest.size,
                        &manifest.capabilities,
                    );
                    view.publisher = Some(trust.of(&publisher));
                    network.push((manifest.id, others, view));
                }
            });
        }
        // Outside the index's lock: the published set has its own.
        let mut network: Vec<AgentView> = network
            .into_iter()
            .map(|(id, providers, mut view)| {
                self.complete(&mut view, id, providers);
                view
            })
            .collect();
        network.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.id.cmp(&b.id)));
        let mut views: Vec<AgentView> = installed
            .iter()
            .map(|record| {
                let (hosts, publisher) = providers.remove(&record.id).unzip();
                self.installed_seen(record, hosts.unwrap_or(0), publisher.as_deref(), &trust)
            })
            .collect();
        views.append(&mut network);
        views
    }

    /// The installed agents matching `words`, best first, with the
    /// network's view of each where there is one.
    pub fn installed_matching(&self, words: &[String]) -> Vec<AgentView> {
        let trust = self.trust();
        let installed = self.node.list().unwrap_or_default();
        let scores = crate::hub::rank(
            installed.iter().map(|r| (&r.card, r.tools.as_slice())),
            words,
        );
        let mut hits: Vec<(f32, &AgentRecord)> = scores
            .into_iter()
            .zip(&installed)
            .filter(|(score, _)| *score > 0.0)
            .collect();
        hits.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.card.name.cmp(&b.1.card.name)));
        hits.into_iter()
            .map(|(_, record)| {
                let found = self
                    .hub
                    .as_ref()
                    .and_then(|hub| hub.known_agent(&record.id));
                self.installed_view(record, found.as_ref(), &trust)
            })
            .collect()
    }
}
