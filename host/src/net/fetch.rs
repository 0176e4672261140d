//! Moving agents between nodes: the request-response protocol a node answers
//! from its store, and the download that pulls an agent's chunks from several
//! providers at once.
//!
//! The whole is checked against the agent id as chunks arrive; when it does
//! not match, each chunk is checked against the signed manifest. A provider
//! that sent a chunk that does not match is a liar: it is dropped from this
//! download and blocked, and its chunks are asked of another provider. Bad
//! bytes are never kept: nothing leaves the download unverified.

use super::Network;
use super::fetch_codec::{FetchCodec, PROTOCOL, PROTOCOL_CBOR};
use crate::AgentId;
use crate::store::manifest::{Manifest, SignedManifest};
use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use libp2p::{PeerId, request_response};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// Chunks asked of one provider at a time.
const IN_FLIGHT_PER_PROVIDER: usize = 16;
/// Failures (not lies) after which a provider is left out of a download.
const MAX_FAILURES_PER_PROVIDER: u32 = 3;
/// The most manifests one node returns for a keyword.
pub const MAX_MATCHES: usize = 32;

/// What one node asks another's store.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum FetchRequest {
    /// The signed manifest of an agent the node hosts.
    Manifest { id: AgentId },
    /// Chunk `index` of an agent the node hosts.
    Chunk { id: AgentId, index: u32 },
    /// Manifests of the agents the node hosts that have `keyword`.
    Matching { keyword: String },
}

/// The answer of a node's store.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum FetchResponse {
    Manifest(#[serde(with = "serde_bytes")] Vec<u8>),
    /// A chunk's bytes: shared with the provider's cache of served
    /// chunks, not copied. Serialized as a CBOR byte string, as in 1.0.0.
    Chunk(bytes::Bytes),
    Matching(Vec<serde_bytes::ByteBuf>),
    /// The node does not host that agent (or chunk).
    NotFound,
}

pub(super) type Behaviour = request_response::Behaviour<FetchCodec>;

pub(super) fn behaviour() -> Behaviour {
    let config = request_response::Config::default()
        .with_request_timeout(Duration::from_secs(30))
        .with_max_concurrent_streams(512);
    let codec = FetchCodec::new(
        4 * 1024,
        (MAX_MATCHES * crate::store::manifest::MAX_MANIFEST_BYTES + 64 * 1024) as u64,
    );
    // Asked in the current version only (see fetch_codec), answered in both.
    request_response::Behaviour::with_codec(
        codec,
        [
            (PROTOCOL, request_response::ProtocolSupport::Full),
            (PROTOCOL_CBOR, request_response::ProtocolSupport::Inbound),
        ],
        config,
    )
}

/// Why a download did not produce the agent.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("no provider of {id} answered{}", detail(.lied, .failed))]
    NoProvider {
        id: AgentId,
        lied: Vec<PeerId>,
        failed: Vec<PeerId>,
    },
    #[error(
        "the chunks match the manifest but the whole does not hash to {0}: the manifest is forged"
    )]
    WrongWhole(AgentId),
}

fn detail(lied: &[PeerId], failed: &[PeerId]) -> String {
    let mut parts = Vec::new();
    if !lied.is_empty() {
        parts.push(format!(
            "{} sent corrupt chunks and were blocked",
            lied.len()
        ));
    }
    if !failed.is_empty() {
        parts.push(format!("{} failed", failed.len()));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" with valid data ({})", parts.join(", "))
    }
}

/// What a download did, for people and benchmarks.
#[derive(Debug, Clone, Default)]
pub struct DownloadReport {
    /// Chunks received from each provider that were kept.
    pub chunks_from: HashMap<PeerId, usize>,
    /// Providers that sent bytes that did not match the manifest.
    pub liars: Vec<PeerId>,
}

/// Downloads the agent of `signed` from `providers`, several chunks from
/// each at once. Calls `progress` with the number of bytes received so far.
///
/// Each byte is hashed once when every provider is honest: the whole agent,
/// in order as chunks arrive, against its id. Only when the whole does not
/// match is each chunk checked against the signed manifest, to find who
/// lied; the liars are blocked, their chunks asked of others and, from then
/// on, every chunk is checked as it arrives.
pub async fn download(
    network: &Network,
    signed: &SignedManifest,
    providers: &[PeerId],
    progress: &(dyn Fn(u64) + Send + Sync),
) -> Result<(Vec<u8>, DownloadReport), FetchError> {
    let manifest = signed.manifest();
    let id = manifest.id;
    let mut download = Download::new(manifest, providers);
    let mut whole = InOrderHash::new(manifest.chunk_count());
    let mut received = 0u64;
    download
        .run(network, |index, bytes| {
            whole.arrived(index, bytes, manifest);
            received += manifest.chunk_range(index).len() as u64;
            progress(received);
        })
        .await?;
    if whole.finish() == id {
        return Ok(download.finish());
    }
    // Someone lied. Find the chunks that do not match the manifest, block
    // whoever sent them and ask others, checking each chunk from now on.
    let bad = download.drop_bad_chunks(network);
    if bad == 0 {
        return Err(FetchError::WrongWhole(id));
    }
    download.check_each = true;
    download.run(network, |_, _| {}).await?;
    if AgentId::of(&download.bytes) != id {
        return Err(FetchError::WrongWhole(id));
    }
    Ok(download.finish())
}

/// The state of one download: the bytes so far, who sent each chunk, and
/// which providers are still asked.
struct Download<'a> {
    manifest: &'a Manifest,
    bytes: Vec<u8>,
    /// Who sent each chunk now in `bytes`.
    sender: Vec<Option<PeerId>>,
    waiting: VecDeque<usize>,
    usable: Vec<PeerId>,
    failures: HashMap<PeerId, u32>,
    failed: Vec<PeerId>,
    liars: Vec<PeerId>,
    /// Whether each chunk is checked against the manifest as it arrives
    /// (once a liar has been seen).
    check_each: bool,
}

impl<'a> Download<'a> {
    fn new(manifest: &'a Manifest, providers: &[PeerId]) -> Self {
        let mut usable = providers.to_vec();
        usable.dedup();
        Download {
            manifest,
            bytes: vec![0u8; manifest.size as usize],
            sender: vec![None; manifest.chunk_count()],
            waiting: (0..manifest.chunk_count()).collect(),
            usable,
            failures: HashMap::new(),
            failed: Vec::new(),
            liars: Vec::new(),
            check_each: false,
        }
    }

    /// Asks the providers for every waiting chunk, several of each at once,
    /// until all are in `bytes`; `arrived` hears of each chunk kept.
    async fn run(
        &mut self,
        network: &Network,
        mut arrived: impl FnMut(usize, &[u8]),
    ) -> Result<(), FetchError> {
        let id = self.manifest.id;
        let mut in_flight: HashMap<PeerId, usize> = HashMap::new();
        // Requests are numbered as sent. A failure counts against its
        // provider only if the request was sent after the provider's last
        // counted failure: a closed connection fails every request in flight
        // on it at once, which is one failure, not sixteen.
        let mut sent = 0u64;
        let mut counted_up_to: HashMap<PeerId, u64> = HashMap::new();
        let mut requests = FuturesUnordered::new();
        let mut next_provider = 0usize;
        loop {
            // Hand waiting chunks to the providers with room, in turn.
            while !self.usable.is_empty() && !self.waiting.is_empty() {
                let usable = &self.usable;
                let start = next_provider % usable.len();
                let Some(provider) = (0..usable.len())
                    .map(|i| usable[(start + i) % usable.len()])
                    .find(|p| in_flight.get(p).copied().unwrap_or(0) < IN_FLIGHT_PER_PROVIDER)
                else {
                    break;
                };
                next_provider = next_provider.wrapping_add(1);
                let Some(index) = self.waiting.pop_front() else {
                    break;
                };
                *in_flight.entry(provider).or_default() += 1;
                let network = network.clone();
                let number = sent;
                sent += 1;
                requests.push(async move {
                    let request = FetchRequest::Chunk {
                        id,
                        index: index as u32,
                    };
                    let answer = network.request(provider, request).await;
                    (provider, index, number, answer)
                });
            }
            if self.waiting.is_empty() && requests.is_empty() {
                return Ok(());
            }
            let Some((provider, index, number, answer)) = requests.next().await else {
                // Chunks wait but nobody is left to ask.
                return Err(self.no_provider());
            };
            *in_flight.entry(provider).or_default() -= 1;
            match answer {
                Ok(FetchResponse::Chunk(chunk)) if self.plausible(index, &chunk) => {
                    let range = self.manifest.chunk_range(index);
                    self.bytes[range].copy_from_slice(&chunk);
                    self.sender[index] = Some(provider);
                    arrived(index, &self.bytes);
                }
                Ok(FetchResponse::Chunk(_)) => {
                    // Its other chunks in flight may be bad too: each is
                    // checked as it comes, but the liar is reported once.
                    self.block(network, provider);
                    self.waiting.push_back(index);
                }
                other => {
                    let reason = match other {
                        Ok(FetchResponse::NotFound) => "does not have it".to_owned(),
                        Ok(_) => "answered with something other than a chunk".to_owned(),
                        Err(e) => e.to_string(),
                    };
                    tracing::debug!(%provider, %id, index, "chunk request failed: {reason}");
                    self.waiting.push_back(index);
                    if counted_up_to
                        .get(&provider)
                        .is_some_and(|up_to| number < *up_to)
                    {
                        continue;
                    }
                    counted_up_to.insert(provider, sent);
                    let count = self.failures.entry(provider).or_default();
                    *count += 1;
                    if *count >= MAX_FAILURES_PER_PROVIDER && self.usable.contains(&provider) {
                        self.usable.retain(|p| *p != provider);
                        self.failed.push(provider);
                    }
                }
            }
            if self.usable.is_empty() && !self.waiting.is_empty() && requests.is_empty() {
                return Err(self.no_provider());
            }
        }
    }

    /// Whether `chunk` may be chunk `index`: its length always, its hash
    /// once a liar has been seen (before that, the whole is checked at the
    /// end instead).
    fn plausible(&self, index: usize, chunk: &[u8]) -> bool {
        match self.check_each {
            true => self.manifest.chunk_matches(index, chunk),
            false => chunk.len() == self.manifest.chunk_range(index).len(),
        }
    }

    /// Checks every chunk against the manifest; each that does not match is
    /// asked again, and its sender blocked. Returns how many did not match.
    fn drop_bad_chunks(&mut self, network: &Network) -> usize {
        let mut bad = 0;
        for index in 0..self.sender.len() {
            let chunk = &self.bytes[self.manifest.chunk_range(index)];
            if self.manifest.chunk_matches(index, chunk) {
                continue;
            }
            bad += 1;
            if let Some(liar) = self.sender[index].take() {
                self.block(network, liar);
            }
            self.waiting.push_back(index);
        }
        bad
    }

    /// Blocks `provider` for sending bytes that do not match the signed
    /// manifest, once.
    fn block(&mut self, network: &Network, provider: PeerId) {
        if self.liars.contains(&provider) {
            return;
        }
        let id = self.manifest.id;
        tracing::warn!(%provider, %id, "provider sent a corrupt chunk; blocking it");
        network.penalise(
            provider,
            "sent a chunk that does not match the signed manifest",
        );
        self.usable.retain(|p| *p != provider);
        self.liars.push(provider);
    }

    fn no_provider(&self) -> FetchError {
        FetchError::NoProvider {
            id: self.manifest.id,
            lied: self.liars.clone(),
            failed: self.failed.clone(),
        }
    }

    fn finish(self) -> (Vec<u8>, DownloadReport) {
        let mut chunks_from: HashMap<PeerId, usize> = HashMap::new();
        for sender in self.sender.into_iter().flatten() {
            *chunks_from.entry(sender).or_default() += 1;
        }
        let report = DownloadReport {
            chunks_from,
            liars: self.liars,
        };
        (self.bytes, report)
    }
}

/// The sha256 of the whole agent, computed while chunks arrive (in any
/// order) rather than in one pass at the end: the hashing overlaps the wait
/// for the next chunks.
struct InOrderHash {
    hasher: Sha256,
    arrived: Vec<bool>,
    /// The first chunk not yet hashed.
    next: usize,
}

impl InOrderHash {
    fn new(chunks: usize) -> Self {
        InOrderHash {
            hasher: Sha256::new(),
            arrived: vec![false; chunks],
            next: 0,
        }
    }

    /// Chunk `index` is in `bytes`: hashes every chunk now in sequence.
    fn arrived(&mut self, index: usize, bytes: &[u8], manifest: &Manifest) {
        self.arrived[index] = true;
        while self.arrived.get(self.next) == Some(&true) {
            self.hasher.update(&bytes[manifest.chunk_range(self.next)]);
            self.next += 1;
        }
    }

    fn finish(self) -> AgentId {
        debug_assert_eq!(self.next, self.arrived.len(), "every chunk arrived");
        AgentId::from_digest(self.hasher.finalize().into())
    }
}
