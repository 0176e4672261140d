//! Searching the network for agents: this node's index first, then a
//! provider lookup per search word and the matches its hosts return.

use super::{ASK_TIMEOUT, Found, Hub, HubError, index};
use crate::net::PeerId;
use crate::net::dht;
use crate::net::fetch::{FetchRequest, FetchResponse};
use crate::store::manifest::SignedManifest;

/// Words of one search sent to the DHT at most.
const MAX_SEARCH_WORDS: usize = 8;
/// Hosts asked for their matches per keyword.
const HOSTS_ASKED_PER_WORD: usize = 8;

/// The distinct search terms of `query`, at most [`MAX_SEARCH_WORDS`].
fn search_words(query: &str) -> Vec<String> {
    let mut words: Vec<String> = crate::store::terms::terms(query).collect();
    // The same word twice would be looked up twice.
    let mut seen = std::collections::HashSet::new();
    words.retain(|word| seen.insert(word.clone()));
    words.truncate(MAX_SEARCH_WORDS);
    words
}

impl Hub {
    /// Agents matching `query`, best first: any of its terms (words, stemmed,
    /// without common ones) found in this node's index, completed by a DHT
    /// provider lookup per term and the matches those hosts return.
    pub async fn search(&self, query: &str, limit: usize) -> Result<Vec<Found>, HubError> {
        let words = search_words(query);
        let lookups = words.iter().map(|word| self.search_network(word));
        futures::future::join_all(lookups).await;
        Ok(self.ranked(&words, limit, &self.signals()).0)
    }

    /// [`Hub::search`] as it goes: `found` gets the ranking of what the
    /// index holds at once, then again each time the network's answers for
    /// one word have come in. Each ranking is the best `limit` of all hits
    /// so far, with how many there are in all.
    pub async fn search_live(
        &self,
        query: &str,
        limit: usize,
        found: &(dyn Fn(Vec<Found>, usize) + Send + Sync),
    ) {
        use futures::StreamExt as _;
        let words = search_words(query);
        if words.is_empty() {
            return found(Vec::new(), 0);
        }
        // What the node knows of agents is read once for the whole search.
        let signals = self.signals();
        let (ranked, total) = self.ranked(&words, limit, &signals);
        found(ranked, total);
        let mut lookups: futures::stream::FuturesUnordered<_> =
            words.iter().map(|word| self.search_network(word)).collect();
        while lookups.next().await.is_some() {
            let (ranked, total) = self.ranked(&words, limit, &signals);
            found(ranked, total);
        }
    }

    /// The best `limit` agents of the index for `query`, without asking
    /// the network, and how many match.
    pub fn search_index(&self, query: &str, limit: usize) -> (Vec<Found>, usize) {
        self.ranked(&search_words(query), limit, &self.signals())
    }

    /// The best `limit` agents of the index for `words` by what `signals`
    /// add to their terms, and how many match.
    fn ranked(
        &self,
        words: &[String],
        limit: usize,
        signals: &index::Signals,
    ) -> (Vec<Found>, usize) {
        let index = self.shared.index();
        let hits = index.search(words, signals);
        let total = hits.len();
        let best = hits
            .into_iter()
            .take(limit)
            .map(|hit| Found {
                also: hit.also,
                ..Found::from_known(hit.known)
            })
            .collect();
        (best, total)
    }

    /// What this node knows of agents besides what their publishers say,
    /// for the rank: the publishers its operator trusts (and its own), and
    /// the agents installed here.
    fn signals(&self) -> index::Signals {
        let node = &self.shared.node;
        let mut trusted: std::collections::HashSet<PeerId> =
            node.policy().current().publishers.keys().copied().collect();
        trusted.insert(self.publisher_id());
        let installed = node
            .list()
            .map(|records| records.iter().map(|r| r.id).collect())
            .unwrap_or_default();
        index::Signals { trusted, installed }
    }

    /// Finds the hosts of `word` and asks each for its matching manifests,
    /// which go into the index.
    async fn search_network(&self, word: &str) {
        let lookup = match self
            .network
            .providers(dht::keyword_key(word), HOSTS_ASKED_PER_WORD)
            .await
        {
            Ok(lookup) => lookup,
            Err(e) => {
                tracing::debug!("keyword lookup for {word:?} failed: {e}");
                return;
            }
        };
        let me = self.peer_id();
        let asks = lookup
            .providers
            .into_iter()
            .filter(|host| *host != me)
            .take(HOSTS_ASKED_PER_WORD)
            .map(|host| async move {
                let request = FetchRequest::Matching {
                    keyword: word.to_owned(),
                };
                let answer =
                    tokio::time::timeout(ASK_TIMEOUT, self.network.request(host, request)).await;
                (host, answer)
            });
        for (host, answer) in futures::future::join_all(asks).await {
            let Ok(Ok(FetchResponse::Matching(manifests))) = answer else {
                continue;
            };
            for bytes in manifests {
                match SignedManifest::decode(&bytes) {
                    Ok(manifest) if manifest.keywords().iter().any(|k| k == word) => {
                        self.shared.remember(manifest, host)
                    }
                    Ok(_) => {}
                    Err(e) => {
                        self.network
                            .penalise(host, &format!("answered a search with a bad manifest: {e}"));
                        self.shared.index().forget_host(&host);
                        break;
                    }
                }
            }
        }
    }
}
