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

pub struct Index {
    agents: HashMap<AgentId, Known>,
    clock: u64,
    capacity: usize,
}

impl Default for Index {
    fn default() -> Self {
        Index::with_capacity(CAPACITY)
    }
}

impl Index {
    /// An index that remembers at most `capacity` agents.
    pub fn with_capacity(capacity: usize) -> Self {
        Index {
            agents: HashMap::new(),
            clock: 0,
            capacity,
        }
    }

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
        if self.agents.len() > self.capacity
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::AgentRecord;
    use crate::store::manifest::Manifest;
    use crate::tool::{AgentCard, ToolAnnotations, ToolSpec};
    use libp2p::identity::Keypair;

    /// A signed manifest of an agent called `name` with `tags`, whose one
    /// tool is described by `about`.
    fn agent(name: &str, tags: &[&str], about: &str) -> SignedManifest {
        let bytes = name.as_bytes().to_vec();
        let record = AgentRecord {
            id: AgentId::of(&bytes),
            card: AgentCard {
                name: name.into(),
                version: "1.0.0".into(),
                description: format!("{name} does things"),
                tags: tags.iter().map(|t| t.to_string()).collect(),
                homepage: None,
            },
            tools: vec![ToolSpec {
                name: "run".into(),
                title: None,
                description: about.into(),
                input_schema: serde_json::json!({"type": "object"}),
                output_schema: None,
                annotations: ToolAnnotations::default(),
            }],
            imports: Vec::new(),
            size: bytes.len() as u64,
            origin: crate::policy::Origin::Local,
            added_at: 0,
        };
        let key = Keypair::generate_ed25519();
        SignedManifest::sign(Manifest::describe(&record, &bytes, &key.public()), &key).unwrap()
    }

    fn names(hits: &[(u32, &Known)]) -> Vec<String> {
        hits.iter()
            .map(|(_, k)| k.manifest.manifest().card.name.clone())
            .collect()
    }

    #[test]
    fn names_rank_above_tags_above_parts_of_words_above_descriptions() {
        let mut index = Index::default();
        let host = PeerId::random();
        index.insert(agent("weather", &["forecast"], "today's sky"), host);
        index.insert(agent("sky-reader", &["weather"], "reads"), host);
        index.insert(agent("almanac", &["weathervane"], "dates"), host);
        index.insert(agent("diary", &["notes"], "notes on the weather"), host);
        index.insert(agent("calculator", &["math"], "adds"), host);
        let hits = index.search(&["weather".into()]);
        assert_eq!(
            names(&hits),
            ["weather", "sky-reader", "almanac", "diary"],
            "{hits:?}"
        );
        assert_eq!(
            hits.iter().map(|(score, _)| *score).collect::<Vec<_>>(),
            [8, 4, 2, 1]
        );
    }

    #[test]
    fn every_word_must_match_and_more_hosts_rank_first() {
        let mut index = Index::default();
        let (one, two) = (PeerId::random(), PeerId::random());
        index.insert(agent("b-weather", &["sky"], "x"), one);
        index.insert(agent("a-weather", &["sky"], "x"), one);
        index.insert(agent("c-weather", &["sky"], "x"), one);
        index.insert(agent("c-weather", &["sky"], "x"), two);
        index.insert(agent("rain", &["weather"], "x"), one);
        let hits = index.search(&["weather".into(), "sky".into()]);
        // Equal scores: the agent with two hosts first, then by name.
        assert_eq!(names(&hits), ["c-weather", "a-weather", "b-weather"]);
        assert!(index.search(&["weather".into(), "snow".into()]).is_empty());
    }

    #[test]
    fn when_full_the_agent_heard_of_longest_ago_goes() {
        let mut index = Index::with_capacity(3);
        let host = PeerId::random();
        let agents: Vec<SignedManifest> = ["a", "b", "c", "d"]
            .iter()
            .map(|name| agent(name, &[], "x"))
            .collect();
        for manifest in &agents[..3] {
            index.insert(manifest.clone(), host);
        }
        // Hearing of "a" again makes it recent; "b" is now the oldest.
        index.insert(agents[0].clone(), PeerId::random());
        index.insert(agents[3].clone(), host);
        assert!(index.get(&agents[1].id()).is_none());
        for kept in [&agents[0], &agents[2], &agents[3]] {
            assert!(index.get(&kept.id()).is_some());
        }
        assert_eq!(index.get(&agents[0].id()).unwrap().hosts.len(), 2);
        index.forget_host(&host);
        assert_eq!(index.get(&agents[0].id()).unwrap().hosts.len(), 1);
    }
}
