//! The hub's index: every agent this node has heard of, from its own
//! publications, gossip announcements and search answers, with the nodes
//! known to host each.
//!
//! It answers searches without touching the network. Entries are bounded;
//! when full, the agent heard of longest ago goes first.

use crate::AgentId;
use crate::store::manifest::{SignedManifest, normalize_keyword};
use libp2p::PeerId;
use std::collections::{HashMap, HashSet};

/// Agents remembered at most.
const CAPACITY: usize = 10_000;

/// An agent the node has heard of.
#[derive(Debug, Clone)]
pub struct Known {
    pub manifest: SignedManifest,
    pub hosts: HashSet<PeerId>,
    /// A counter value: larger is more recent.
    heard: u64,
}

#[derive(Default)]
pub struct Index {
    agents: HashMap<AgentId, Known>,
    clock: u64,
}

impl Index {
    /// Remembers that `host` hosts the agent of `manifest`.
    pub fn insert(&mut self, manifest: SignedManifest, host: PeerId) {
        self.clock += 1;
        let heard = self.clock;
        let known = self.agents.entry(manifest.id()).or_insert_with(|| Known {
            manifest: manifest.clone(),
            hosts: HashSet::new(),
            heard,
        });
        // A newer signature from the same publisher replaces the old one.
        if manifest.publisher() == known.manifest.publisher()
            && manifest.manifest().published_at > known.manifest.manifest().published_at
        {
            known.manifest = manifest;
        }
        known.hosts.insert(host);
        known.heard = heard;
        if self.agents.len() > CAPACITY
            && let Some(oldest) = self
                .agents
                .iter()
                .min_by_key(|(_, k)| k.heard)
                .map(|(id, _)| *id)
        {
            self.agents.remove(&oldest);
        }
    }

    pub fn get(&self, id: &AgentId) -> Option<&Known> {
        self.agents.get(id)
    }

    /// Forgets `host` (it was caught lying or is gone).
    pub fn forget_host(&mut self, host: &PeerId) {
        for known in self.agents.values_mut() {
            known.hosts.remove(host);
        }
    }

    /// Agents matching `words`, best first.
    pub fn search(&self, words: &[String]) -> Vec<(u32, &Known)> {
        let mut hits: Vec<(u32, &Known)> = self
            .agents
            .values()
            .filter_map(|known| {
                let score = relevance(known.manifest.manifest(), words);
                (score > 0).then_some((score, known))
            })
            .collect();
        hits.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then(b.1.hosts.len().cmp(&a.1.hosts.len()))
                .then(
                    a.1.manifest
                        .manifest()
                        .card
                        .name
                        .cmp(&b.1.manifest.manifest().card.name),
                )
        });
        hits
    }
}

/// How well a manifest matches the query words: every word must match
/// somewhere; names and tags count more than descriptions.
pub fn relevance(manifest: &crate::store::manifest::Manifest, words: &[String]) -> u32 {
    let keywords = manifest.keywords();
    let description = manifest.card.description.to_lowercase();
    let mut total = 0;
    for word in words {
        let word = normalize_keyword(word);
        let score = if manifest.card.name == word {
            8
        } else if keywords.contains(&word) {
            4
        } else if keywords.iter().any(|k| k.contains(&word)) {
            2
        } else if description.contains(&word)
            || manifest
                .tools
                .iter()
                .any(|t| t.description.to_lowercase().contains(&word))
        {
            1
        } else {
            return 0;
        };
        total += score;
    }
    total
}
