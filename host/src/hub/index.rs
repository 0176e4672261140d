//! The hub's index: every agent this node has heard of, from its own
//! publications, gossip announcements and search answers, with the nodes
//! known to host each.
//!
//! It answers searches without touching the network, ranking agents by
//! BM25 over the terms of their cards and tools (names weigh more than
//! descriptions). Entries are bounded; when full, the agent heard of
//! longest ago goes first.

use crate::AgentId;
use crate::store::manifest::{Manifest, SignedManifest};
use crate::store::terms::terms;
use crate::tool::{AgentCard, ToolSpec};
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
    document: Document,
}

/// BM25's saturation of repeated terms.
const K1: f32 = 1.2;
/// BM25's normalisation by length.
const B: f32 = 0.75;

/// A manifest's terms, each weighted by where it appears.
#[derive(Debug, Clone, Default)]
struct Document {
    weights: HashMap<String, f32>,
    length: f32,
}

impl Document {
    fn of(manifest: &Manifest) -> Self {
        Document::describe(&manifest.card, &manifest.tools)
    }

    fn describe(card: &AgentCard, tools: &[ToolSpec]) -> Self {
        let mut document = Document::default();
        let mut add = |text: &str, weight: f32| {
            for term in terms(text) {
                *document.weights.entry(term).or_default() += weight;
                document.length += weight;
            }
        };
        add(&card.name, 3.0);
        for tag in &card.tags {
            add(tag, 2.0);
        }
        add(&card.description, 1.0);
        for tool in tools {
            add(&tool.name, 2.0);
            add(&tool.description, 1.0);
        }
        document
    }
}

/// The BM25 score of each of `documents` for `terms` (0: no term matches).
fn scores(documents: &[&Document], terms: &[String]) -> Vec<f32> {
    let count = documents.len() as f32;
    if count == 0.0 {
        return Vec::new();
    }
    let average_length = documents.iter().map(|d| d.length).sum::<f32>() / count;
    let rarity: Vec<f32> = terms
        .iter()
        .map(|term| {
            let holders = documents
                .iter()
                .filter(|d| d.weights.contains_key(term))
                .count() as f32;
            ((count - holders + 0.5) / (holders + 0.5)).ln_1p()
        })
        .collect();
    documents
        .iter()
        .map(|document| {
            let length = document.length / average_length.max(f32::MIN_POSITIVE);
            terms
                .iter()
                .zip(&rarity)
                .filter_map(|(term, rarity)| {
                    let weight = document.weights.get(term)?;
                    Some(rarity * weight * (K1 + 1.0) / (weight + K1 * (1.0 - B + B * length)))
                })
                .sum()
        })
        .collect()
}

/// The BM25 score of each agent (card and tools) for `terms`, ranked among
/// themselves as the index ranks what it knows: for agents that are not in
/// the index, such as this node's unpublished ones.
pub fn rank<'a>(
    agents: impl Iterator<Item = (&'a AgentCard, &'a [ToolSpec])>,
    terms: &[String],
) -> Vec<f32> {
    let documents: Vec<Document> = agents
        .map(|(card, tools)| Document::describe(card, tools))
        .collect();
    scores(&documents.iter().collect::<Vec<_>>(), terms)
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
            document: Document::of(manifest.manifest()),
            manifest: manifest.clone(),
            hosts: HashSet::new(),
            heard,
        });
        // A newer signature from the same publisher replaces the old one.
        if manifest.publisher() == known.manifest.publisher()
            && manifest.manifest().published_at > known.manifest.manifest().published_at
        {
            known.document = Document::of(manifest.manifest());
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

    /// Every agent in the index.
    pub fn all(&self) -> impl Iterator<Item = &Known> {
        self.agents.values()
    }

    /// Agents matching any of `terms` (see [`crate::store::terms`]), best
    /// first by BM25; ties go to the agent with more hosts, then by name.
    pub fn search(&self, terms: &[String]) -> Vec<(f32, &Known)> {
        let known: Vec<&Known> = self.agents.values().collect();
        let documents: Vec<&Document> = known.iter().map(|k| &k.document).collect();
        let mut hits: Vec<(f32, &Known)> = scores(&documents, terms)
            .into_iter()
            .zip(known)
            .filter(|(score, _)| *score > 0.0)
            .collect();
        hits.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
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
            attached: None,
        };
        let key = Keypair::generate_ed25519();
        SignedManifest::sign(Manifest::describe(&record, &bytes, &key.public()), &key).unwrap()
    }

    fn names(hits: &[(f32, &Known)]) -> Vec<String> {
        hits.iter()
            .map(|(_, k)| k.manifest.manifest().card.name.clone())
            .collect()
    }

    fn search(index: &Index, query: &str) -> Vec<String> {
        names(&index.search(&terms(query).collect::<Vec<_>>()))
    }

    #[test]
    fn names_rank_above_tags_above_descriptions() {
        let mut index = Index::default();
        let host = PeerId::random();
        index.insert(agent("weather", &["forecast"], "today's sky"), host);
        index.insert(agent("sky-reader", &["weather"], "reads"), host);
        index.insert(agent("almanac", &["weathervane"], "dates"), host);
        index.insert(agent("diary", &["notes"], "notes on the weather"), host);
        index.insert(agent("calculator", &["math"], "adds"), host);
        let hits = index.search(&["weather".into()]);
        assert_eq!(names(&hits), ["weather", "sky-reader", "diary"], "{hits:?}");
        assert!(
            hits.windows(2).all(|pair| pair[0].0 > pair[1].0),
            "{hits:?}"
        );
    }

    #[test]
    fn any_word_matches_and_the_whole_query_ranks_first() {
        let mut index = Index::default();
        let host = PeerId::random();
        index.insert(
            agent("text", &["strings"], "Counts the words of a text"),
            host,
        );
        index.insert(
            agent("counter", &["tally"], "counts people at a door"),
            host,
        );
        index.insert(agent("calculator", &["math"], "adds numbers"), host);
        assert_eq!(search(&index, "count words"), ["text", "counter"]);
        assert_eq!(search(&index, "uppercase text"), ["text"]);
        assert_eq!(search(&index, "adding numbers"), ["calculator"]);
        assert!(search(&index, "snow").is_empty());
        assert!(search(&index, "the of a").is_empty());
    }

    #[test]
    fn equal_scores_go_to_more_hosts_then_by_name() {
        let mut index = Index::default();
        let (one, two) = (PeerId::random(), PeerId::random());
        index.insert(agent("b-weather", &["sky"], "x"), one);
        index.insert(agent("a-weather", &["sky"], "x"), one);
        index.insert(agent("c-weather", &["sky"], "x"), one);
        index.insert(agent("c-weather", &["sky"], "x"), two);
        index.insert(agent("rain", &["weather"], "x"), one);
        assert_eq!(
            search(&index, "weather sky"),
            ["c-weather", "a-weather", "b-weather", "rain"]
        );
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
