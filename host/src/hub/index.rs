//! The hub's index: every agent this node has heard of, from its own
//! publications, gossip announcements and search answers, with the nodes
//! known to host each.
//!
//! It answers searches without touching the network, ranking agents by
//! BM25 over the terms of their cards and tools (names weigh more than
//! descriptions). Entries are bounded; when full, the agent heard of
//! longest ago goes first.
//!
//! What a publisher says of its own agent is not to be trusted, so the rank
//! does not take it whole: a term counts once in each part of a card however
//! often it is repeated, only the first tags and tools are read, agents with
//! the same card and tools are one result (with each of their ids), one
//! publisher has at most [`PER_PUBLISHER`] results before everyone else's,
//! and what the node knows itself weighs in: publishers the operator
//! trusts, agents installed here, and (up to a point) how many nodes host
//! an agent.

use crate::AgentId;
use crate::agent::tool::{AgentCard, ToolSpec};
use crate::store::manifest::{Manifest, SignedManifest};
use crate::store::terms::terms;
use libp2p::PeerId;
use std::collections::{HashMap, HashSet};

/// Agents remembered at most.
const CAPACITY: usize = 10_000;
/// Tags and tools of a card that are read for its terms, at most.
const INDEXED_TAGS: usize = 8;
const INDEXED_TOOLS: usize = 32;
/// Results of one publisher (other than a trusted one) ranked before the
/// results of every other publisher, at most.
pub const PER_PUBLISHER: usize = 2;
/// Hosts counted in an agent's rank at most: more can be one operator's
/// many peers.
const COUNTED_HOSTS: usize = 8;

/// An agent the node has heard of.
#[derive(Debug, Clone)]
pub struct Known {
    pub manifest: SignedManifest,
    pub hosts: HashSet<PeerId>,
    /// A counter value: larger is more recent.
    heard: u64,
    document: Document,
    /// Equal for agents with the same card and tools.
    likeness: u64,
}

/// What the node knows of agents besides what their publishers say.
#[derive(Debug, Clone, Default)]
pub struct Signals {
    /// Publishers the operator trusts, and this node's own.
    pub trusted: HashSet<PeerId>,
    /// Agents installed on this node.
    pub installed: HashSet<AgentId>,
}

impl Signals {
    /// How much more than its terms' score an agent ranks by what the
    /// node knows of it.
    fn boost(&self, known: &Known) -> f32 {
        let mut boost = 1.0;
        if self.trusted.contains(&known.manifest.publisher_id()) {
            boost += 0.5;
        }
        if self.installed.contains(&known.manifest.id()) {
            boost += 0.25;
        }
        let hosts = known.hosts.len().clamp(1, COUNTED_HOSTS) as f32;
        boost + 0.1 * hosts.ln()
    }
}

/// One result of a search: an agent and the ids of agents
/// with the same card and tools that rank with it.
#[derive(Debug)]
pub struct Hit<'a> {
    pub known: &'a Known,
    pub also: Vec<AgentId>,
}

/// BM25's saturation of repeated terms.
const K1: f32 = 1.2;
/// BM25's normalisation by length.
const B: f32 = 0.75;
/// The weighted length of a card written as authors write them (a name,
/// a few tags, a paragraph, a few tools): the typical length of what a
/// search ranks when what it holds is longer.
const TYPICAL_LENGTH: f32 = 64.0;

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

    /// A term weighs its part's weight once per part of the card (name,
    /// tags, description, tool names, tool descriptions), however often
    /// it is repeated there; the length counts every repetition, so that
    /// a card stuffed with words ranks lower for each of them.
    fn describe(card: &AgentCard, tools: &[ToolSpec]) -> Self {
        let mut document = Document::default();
        let mut part = |texts: &mut dyn Iterator<Item = &str>, weight: f32| {
            let mut seen = HashSet::new();
            for text in texts {
                for term in terms(text) {
                    document.length += weight;
                    if seen.insert(term.clone()) {
                        *document.weights.entry(term).or_default() += weight;
                    }
                }
            }
        };
        let tools = &tools[..tools.len().min(INDEXED_TOOLS)];
        part(&mut std::iter::once(card.name.as_str()), 3.0);
        part(
            &mut card.tags.iter().take(INDEXED_TAGS).map(String::as_str),
            2.0,
        );
        part(&mut std::iter::once(card.description.as_str()), 1.0);
        part(&mut tools.iter().map(|t| t.name.as_str()), 2.0);
        part(&mut tools.iter().map(|t| t.description.as_str()), 1.0);
        document
    }
}

/// A value equal for manifests with the same card and tools (whatever
/// their ids, versions or publishers).
fn likeness(manifest: &Manifest) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let card = &manifest.card;
    (&card.name, &card.description, &card.tags).hash(&mut hasher);
    for tool in &manifest.tools {
        (&tool.name, &tool.description, tool.input_schema.to_string()).hash(&mut hasher);
    }
    hasher.finish()
}

/// The BM25 score of each of `documents` for `terms` (0: no term matches).
fn scores(documents: &[&Document], terms: &[String]) -> Vec<f32> {
    let count = documents.len() as f32;
    if count == 0.0 {
        return Vec::new();
    }
    // The typical length is the median, and at most what an honest card
    // weighs: what a searching node holds is what came back for the query,
    // which stuffed cards can be most of, and measured against them a card
    // of a thousand words would look ordinary.
    let mut lengths: Vec<f32> = documents.iter().map(|d| d.length).collect();
    lengths.sort_by(f32::total_cmp);
    let average_length = lengths[lengths.len() / 2].min(TYPICAL_LENGTH);
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
            likeness: likeness(manifest.manifest()),
            manifest: manifest.clone(),
            hosts: HashSet::new(),
            heard,
        });
        // A newer signature from the same publisher replaces the old one.
        if manifest.publisher() == known.manifest.publisher()
            && manifest.manifest().published_at > known.manifest.manifest().published_at
        {
            known.document = Document::of(manifest.manifest());
            known.likeness = likeness(manifest.manifest());
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
    /// first: by BM25 times what `signals` add; ties go to the agent with
    /// more hosts, then by name. Agents with the same card and tools are
    /// one hit; a publisher's hits past [`PER_PUBLISHER`] (unless it is
    /// trusted) come after everyone else's.
    pub fn search(&self, terms: &[String], signals: &Signals) -> Vec<Hit<'_>> {
        // Copies (the same card and tools) are one document, so that they
        // neither fill the results nor weigh in the terms' rarity and the
        // typical length; the copy the node knows best stands for them.
        let mut groups: HashMap<u64, Vec<&Known>> = HashMap::new();
        for known in self.agents.values() {
            groups.entry(known.likeness).or_default().push(known);
        }
        let mut groups: Vec<Vec<&Known>> = groups.into_values().collect();
        for group in &mut groups {
            group.sort_by(|a, b| {
                signals
                    .boost(b)
                    .total_cmp(&signals.boost(a))
                    .then(a.manifest.id().cmp(&b.manifest.id()))
            });
        }
        let documents: Vec<&Document> = groups.iter().map(|g| &g[0].document).collect();
        let mut hits: Vec<(f32, Vec<&Known>)> = scores(&documents, terms)
            .into_iter()
            .zip(groups)
            .filter(|(score, _)| *score > 0.0)
            .map(|(score, group)| (score * signals.boost(group[0]), group))
            .collect();
        hits.sort_by(|(a_score, a), (b_score, b)| {
            let (a, b) = (a[0], b[0]);
            b_score
                .total_cmp(a_score)
                .then(b.hosts.len().cmp(&a.hosts.len()))
                .then(
                    a.manifest
                        .manifest()
                        .card
                        .name
                        .cmp(&b.manifest.manifest().card.name),
                )
                .then(a.manifest.id().cmp(&b.manifest.id()))
        });
        let collapsed = hits.into_iter().map(|(_, group)| Hit {
            known: group[0],
            also: group[1..].iter().map(|k| k.manifest.id()).collect(),
        });
        // One publisher's hits past its few go after everyone else's.
        let mut shown: HashMap<PeerId, usize> = HashMap::new();
        let (first, later): (Vec<Hit<'_>>, Vec<Hit<'_>>) = collapsed.into_iter().partition(|hit| {
            let publisher = hit.known.manifest.publisher_id();
            if signals.trusted.contains(&publisher) {
                return true;
            }
            let count = shown.entry(publisher).or_default();
            *count += 1;
            *count <= PER_PUBLISHER
        });
        first.into_iter().chain(later).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tool::{AgentCard, ToolAnnotations, ToolSpec};
    use crate::store::AgentRecord;
    use crate::store::manifest::Manifest;
    use libp2p::identity::Keypair;

    /// A signed manifest of an agent called `name` with `tags`, whose one
    /// tool is described by `about`.
    fn agent(name: &str, tags: &[&str], about: &str) -> SignedManifest {
        let key = Keypair::generate_ed25519();
        let description = format!("{name} does things");
        published(
            &key,
            name.as_bytes(),
            name,
            &description,
            tags,
            &[("run", about)],
        )
    }

    fn names(hits: &[Hit<'_>]) -> Vec<String> {
        hits.iter()
            .map(|hit| hit.known.manifest.manifest().card.name.clone())
            .collect()
    }

    fn search(index: &Index, query: &str) -> Vec<String> {
        let terms: Vec<String> = terms(query).collect();
        names(&index.search(&terms, &Signals::default()))
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
        let hits = index.search(&["weather".into()], &Signals::default());
        assert_eq!(names(&hits), ["weather", "sky-reader", "diary"], "{hits:?}");
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

    /// A manifest of `publisher` with the given card and tools, for the
    /// component `bytes`.
    fn published(
        publisher: &Keypair,
        bytes: &[u8],
        name: &str,
        description: &str,
        tags: &[&str],
        tools: &[(&str, &str)],
    ) -> SignedManifest {
        let record = AgentRecord {
            id: AgentId::of(bytes),
            card: AgentCard {
                name: name.into(),
                version: "1.0.0".into(),
                description: description.into(),
                tags: tags.iter().map(|t| t.to_string()).collect(),
                homepage: None,
            },
            tools: tools
                .iter()
                .map(|(name, description)| ToolSpec {
                    name: (*name).into(),
                    title: None,
                    description: (*description).into(),
                    input_schema: serde_json::json!({"type": "object"}),
                    output_schema: None,
                    annotations: ToolAnnotations::default(),
                    app: None,
                })
                .collect(),
            imports: Vec::new(),
            size: bytes.len() as u64,
            origin: crate::store::Origin::Local,
            added_at: 0,
            attached: None,
        };
        let manifest = Manifest::describe(&record, bytes, &publisher.public());
        SignedManifest::sign(manifest, publisher).unwrap()
    }

    /// Search poisoning (issue 41, class 7): one publisher stuffs common
    /// words into its card, tags and tool names and publishes the same
    /// component under many ids, and a few variants of it. It gets one
    /// result per card and at most its share of the top; the honest agents
    /// that answer the queries stay in the top three.
    #[test]
    fn a_publisher_stuffing_words_and_copies_does_not_take_the_top() {
        let mut index = Index::default();
        let honest = [
            (
                "weather",
                "Forecasts for any city: rain, wind, temperature",
                &["forecast", "rain"][..],
                &[("forecast", "the weather of a city for the next days")][..],
            ),
            (
                "calculator",
                "Adds, subtracts, multiplies and divides numbers",
                &["math", "arithmetic"][..],
                &[
                    ("add", "adds two numbers"),
                    ("multiply", "multiplies two numbers"),
                ][..],
            ),
            (
                "text",
                "Counts the words of a text and changes its case",
                &["strings", "words"][..],
                &[
                    ("word_count", "counts the words of a text"),
                    ("upper", "the text in upper case"),
                ][..],
            ),
            (
                "currency",
                "Converts money between currencies at today's rates",
                &["money", "exchange"][..],
                &[("convert", "converts an amount of money")][..],
            ),
        ];
        for (name, description, tags, tools) in honest {
            let key = Keypair::generate_ed25519();
            index.insert(
                published(&key, name.as_bytes(), name, description, tags, tools),
                PeerId::random(),
            );
        }
        let common = "weather forecast rain city math add numbers multiply count words text case money convert currency rates";
        let stuffed_tags: Vec<&str> = common.split(' ').collect();
        let stuffed_tools: Vec<(&str, &str)> = stuffed_tags.iter().map(|w| (*w, common)).collect();
        let spammer = Keypair::generate_ed25519();
        for copy in 0..30u8 {
            let mut bytes = b"spam".to_vec();
            bytes.push(copy);
            let manifest = published(
                &spammer,
                &bytes,
                "best-agent",
                &common.repeat(5),
                &stuffed_tags,
                &stuffed_tools,
            );
            index.insert(manifest, PeerId::random());
        }
        for variant in 0..8u8 {
            let name = format!("best-agent-{variant}");
            let manifest = published(
                &spammer,
                name.as_bytes(),
                &name,
                common,
                &stuffed_tags,
                &stuffed_tools,
            );
            index.insert(manifest, PeerId::random());
        }
        for (query, expected) in [
            ("will it rain in the city", "weather"),
            ("multiply two numbers", "calculator"),
            ("count the words of a text", "text"),
            ("convert money", "currency"),
        ] {
            let terms: Vec<String> = terms(query).collect();
            let hits = index.search(&terms, &Signals::default());
            let top: Vec<String> = names(&hits[..hits.len().min(10)]);
            assert!(
                top[..3].iter().any(|name| name == expected),
                "{query:?}: {expected} is not in the top three: {top:?}"
            );
            // Every other agent that matches ranks before the spammer's
            // results past its few.
            let all = names(&hits);
            let past_its_few = all
                .iter()
                .enumerate()
                .filter(|(_, name)| name.starts_with("best-agent"))
                .nth(PER_PUBLISHER)
                .map(|(at, _)| at);
            let last_honest = all.iter().rposition(|name| !name.starts_with("best-agent"));
            assert!(
                past_its_few > last_honest,
                "{query:?}: the spammer has more than {PER_PUBLISHER} results before others': {top:?}"
            );
            let copies = hits
                .iter()
                .find(|hit| hit.known.manifest.manifest().card.name == "best-agent");
            if let Some(copies) = copies {
                assert_eq!(copies.also.len(), 29, "the copies are one result");
            }
        }
        // What the node knows weighs in: an agent of a trusted publisher
        // ranks first among equal cards.
        let mut index = Index::default();
        let (a, b) = (Keypair::generate_ed25519(), Keypair::generate_ed25519());
        index.insert(
            published(&a, b"a", "a-notes", "keeps notes", &["notes"], &[]),
            PeerId::random(),
        );
        index.insert(
            published(&b, b"b", "b-notes", "keeps notes", &["notes"], &[]),
            PeerId::random(),
        );
        let signals = Signals {
            trusted: [b.public().to_peer_id()].into(),
            installed: HashSet::new(),
        };
        let hits = index.search(&terms("notes").collect::<Vec<_>>(), &signals);
        assert_eq!(names(&hits), ["b-notes", "a-notes"]);
    }
}
