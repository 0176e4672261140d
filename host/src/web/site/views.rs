//! What the pages show of an agent, gathered from where the node knows it:
//! installed here ([`AgentRecord`]), known from the network ([`Found`]), or
//! both.

use super::Site;
use crate::AgentId;
use crate::hub::Found;
use crate::policy::Origin;
use crate::store::AgentRecord;
use crate::tool::{AgentCard, ToolSpec};
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
}

/// Who signed an agent's manifest, and what this node makes of them.
#[derive(Debug, Clone, Serialize)]
pub struct PublisherView {
    pub id: String,
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
            asks_for: crate::policy::asked_for(imports),
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

impl Site {
    /// How this node regards the publisher `id`.
    fn publisher(&self, id: &str) -> PublisherView {
        let own = self
            .hub
            .as_ref()
            .is_some_and(|hub| hub.publisher_id().to_string() == id);
        let trusted = id
            .parse()
            .is_ok_and(|key| self.node.policy().current().publishers.contains_key(&key));
        PublisherView {
            id: id.to_owned(),
            trust: if own {
                "this node"
            } else if trusted {
                "trusted"
            } else {
                "untrusted"
            },
        }
    }

    /// An installed agent's view, completed by what the network says of it.
    pub fn installed_view(&self, record: &AgentRecord, found: Option<&Found>) -> AgentView {
        let mut view = AgentView::new(
            record.id,
            &record.card,
            &record.tools,
            record.size,
            &record.imports,
        );
        view.installed = true;
        view.publisher = match record.origin {
            Origin::Network { publisher } => Some(self.publisher(&publisher.to_string())),
            Origin::Local => found.map(|f| self.publisher(&f.publisher)),
        };
        self.complete(&mut view, found);
        view
    }

    /// The view of an agent known from the network only.
    pub fn found_view(&self, found: &Found) -> AgentView {
        let mut view = AgentView::new(
            found.id,
            &found.card,
            &found.tools,
            found.size,
            &found.capabilities,
        );
        view.publisher = Some(self.publisher(&found.publisher));
        self.complete(&mut view, Some(found));
        view
    }

    fn complete(&self, view: &mut AgentView, found: Option<&Found>) {
        if let Some(found) = found {
            view.providers = found.providers;
        }
        if let (Some(hub), Ok(id)) = (&self.hub, view.id.parse::<AgentId>()) {
            view.published = hub.is_offered(&id);
        }
        view.on_network = view.providers > 0 || view.published;
    }

    /// Every agent this node knows: installed ones first, then the
    /// network's, each by name.
    pub fn all_agents(&self) -> Vec<AgentView> {
        let known = self.hub.as_ref().map(|hub| hub.known()).unwrap_or_default();
        let mut by_id: HashMap<AgentId, &Found> = known.iter().map(|f| (f.id, f)).collect();
        let mut installed = self.node.list().unwrap_or_else(|e| {
            tracing::warn!("cannot list the installed agents: {e}");
            Vec::new()
        });
        installed.sort_by(|a, b| a.card.name.cmp(&b.card.name));
        let mut views: Vec<AgentView> = installed
            .iter()
            .map(|record| self.installed_view(record, by_id.remove(&record.id)))
            .collect();
        views.extend(
            known
                .iter()
                .filter(|f| by_id.contains_key(&f.id))
                .map(|f| self.found_view(f)),
        );
        views
    }

    /// The installed agents matching `words`, best first, with the
    /// network's view of each where there is one.
    pub fn installed_matching(&self, words: &[String]) -> Vec<AgentView> {
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
                self.installed_view(record, found.as_ref())
            })
            .collect()
    }
}
