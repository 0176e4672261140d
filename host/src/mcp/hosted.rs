//! What every MCP endpoint of a node shares: the node, and the current set of
//! installed agents, kept fresh while serving.
//!
//! Agents can be added or removed by another `agentsite` process while a node
//! serves, so the catalog folder is watched; each change is published on a
//! `watch` channel, from which sessions send `notifications/tools/list_changed`.

use super::exposed::{Exposed, Scope};
use super::listing::Listings;
use crate::agent::prompt::PromptSpec;
use crate::agent::resource::ResourceCatalog;
use crate::capabilities::grant::Grants;
use crate::store::AgentRecord;
use crate::{Node, NodeCallError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::watch;

/// How often the catalog folder is checked for added or removed agents.
pub const CATALOG_POLL: Duration = Duration::from_millis(200);

/// The installed agents at one moment.
pub type Records = Arc<Vec<AgentRecord>>;

pub struct Hosted {
    node: Arc<Node>,
    records: watch::Sender<Records>,
    /// What each agent lists, shared by every session and endpoint.
    pub(super) resources: Listings<ResourceCatalog>,
    pub(super) prompts: Listings<Vec<PromptSpec>>,
    /// The node's goals, offered as the `goal` tool on `/mcp` once set.
    goals: std::sync::OnceLock<Arc<crate::goals::Goals>>,
}

impl Hosted {
    /// Shares `node`, reading its catalog once now.
    pub fn new(node: Arc<Node>) -> anyhow::Result<Arc<Hosted>> {
        let records = Arc::new(node.list()?);
        let (records, _) = watch::channel(records);
        Ok(Arc::new(Hosted {
            node,
            records,
            resources: Listings::new("resources"),
            prompts: Listings::new("prompts"),
            goals: std::sync::OnceLock::new(),
        }))
    }

    pub fn node(&self) -> &Arc<Node> {
        &self.node
    }

    /// Offers `goals` as the `goal` tool of the endpoint for all agents
    /// (set once, before serving).
    pub fn offer_goals(&self, goals: Arc<crate::goals::Goals>) {
        let _ = self.goals.set(goals);
    }

    pub fn goals(&self) -> Option<&Arc<crate::goals::Goals>> {
        self.goals.get()
    }

    /// The installed agents now.
    pub fn records(&self) -> Records {
        self.records.borrow().clone()
    }

    /// A receiver that wakes on every change to the installed agents.
    pub fn subscribe(&self) -> watch::Receiver<Records> {
        self.records.subscribe()
    }

    /// Asks every installed agent that was never asked for its resources
    /// and prompts, in the background (see [`super::listing`]).
    pub fn warm(&self) {
        let records = self.records();
        let node = &self.node;
        self.resources.warm(node, &records, |record, grants| {
            resources_of(node.clone(), record, grants)
        });
        self.prompts.warm(node, &records, |record, grants| {
            prompts_of(node.clone(), record, grants)
        });
    }

    /// [`Hosted::warm`] off the runtime's threads: an agent asked for the
    /// first time is loaded first, which may take a while.
    fn warm_in_background(self: &Arc<Self>) {
        let hosted = self.clone();
        tokio::task::spawn_blocking(move || hosted.warm());
    }

    /// Re-reads the catalog and publishes it if the set of agents changed.
    pub fn refresh(&self) {
        let records = match self.node.list() {
            Ok(records) => records,
            Err(e) => {
                tracing::warn!("cannot re-read the installed agents: {e}");
                return;
            }
        };
        let ids = |records: &[AgentRecord]| -> Vec<_> { records.iter().map(|r| r.id).collect() };
        self.records.send_if_modified(|current| {
            if ids(current) == ids(&records) {
                return false;
            }
            tracing::info!(agents = records.len(), "installed agents changed");
            self.resources.keep_only(&records);
            self.prompts.keep_only(&records);
            *current = Arc::new(records);
            true
        });
    }

    /// Watches the catalog folder until `stop` is cancelled.
    pub async fn watch(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        self.warm_in_background();
        let folder = self.node.data_dir().agents();
        let mut seen = folder_listing(&folder);
        let mut tick = tokio::time::interval(CATALOG_POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let listing = folder_listing(&folder);
            if listing != seen {
                seen = listing;
                self.refresh();
                self.warm_in_background();
            }
        }
    }
}

/// What `record` offers to read, under `grants`.
pub(super) async fn resources_of(
    node: Arc<Node>,
    record: Arc<AgentRecord>,
    grants: Grants,
) -> Result<ResourceCatalog, NodeCallError> {
    node.resources(&record, grants).await
}

/// The prompts `record` offers, under `grants`.
pub(super) async fn prompts_of(
    node: Arc<Node>,
    record: Arc<AgentRecord>,
    grants: Grants,
) -> Result<Vec<PromptSpec>, NodeCallError> {
    node.prompts(&record, grants).await
}

/// The names and modification times in `folder`: changes when a record is
/// added, replaced or removed.
fn folder_listing(
    folder: &std::path::Path,
) -> Vec<(std::ffi::OsString, Option<std::time::SystemTime>)> {
    let mut listing: Vec<_> = std::fs::read_dir(folder)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| {
                    let modified = e.metadata().and_then(|m| m.modified()).ok();
                    (e.file_name(), modified)
                })
                .collect()
        })
        .unwrap_or_default();
    listing.sort();
    listing
}

/// The tools of one scope, rebuilt only when the installed agents change.
pub struct ScopedTools {
    scope: Scope,
    cache: Mutex<Option<(Records, Arc<Exposed>)>>,
}

impl ScopedTools {
    pub fn new(scope: Scope) -> Self {
        ScopedTools {
            scope,
            cache: Mutex::new(None),
        }
    }

    /// Whether the node's own tools (`goal`) are served beside the agents'
    /// ones: on the endpoint for all agents only.
    pub fn with_node_tools(&self) -> bool {
        self.scope == Scope::All
    }

    /// The exposed tools for `records`.
    pub fn get(&self, records: Records) -> Arc<Exposed> {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((built_from, exposed)) = cache.as_ref()
            && Arc::ptr_eq(built_from, &records)
        {
            return exposed.clone();
        }
        let exposed = Arc::new(Exposed::build(&records, &self.scope));
        *cache = Some((records, exposed.clone()));
        exposed
    }
}
