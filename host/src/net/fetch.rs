//! Moving agents between nodes: the request-response protocol a node answers
//! from its store, and the download that pulls an agent's chunks from several
//! providers at once.
//!
//! Every chunk is checked against the signed manifest as it arrives, and the
//! whole against the agent id at the end. A provider that sends a chunk that
//! does not match is a liar: it is dropped from this download and blocked,
//! and its chunk is asked of another provider. Bad bytes are never kept.

use super::Network;
use crate::AgentId;
use crate::store::manifest::{Manifest, SignedManifest};
use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use libp2p::{PeerId, StreamProtocol, request_response};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

pub(super) const PROTOCOL: StreamProtocol = StreamProtocol::new("/agentsite/fetch/1.0.0");

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
    Chunk(#[serde(with = "serde_bytes")] Vec<u8>),
    Matching(Vec<serde_bytes::ByteBuf>),
    /// The node does not host that agent (or chunk).
    NotFound,
}

pub(super) type Behaviour = request_response::cbor::Behaviour<FetchRequest, FetchResponse>;

pub(super) fn behaviour() -> Behaviour {
    let config = request_response::Config::default()
        .with_request_timeout(Duration::from_secs(30))
        .with_max_concurrent_streams(512);
    request_response::cbor::Behaviour::with_codec(
        request_response::cbor::codec::Codec::default()
            .set_request_size_maximum(4 * 1024)
            .set_response_size_maximum(
                (MAX_MATCHES * crate::store::manifest::MAX_MANIFEST_BYTES + 64 * 1024) as u64,
            ),
        [(PROTOCOL, request_response::ProtocolSupport::Full)],
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
/// each at once, checking every chunk. Calls `progress` with the number of
/// verified bytes so far.
pub async fn download(
    network: &Network,
    signed: &SignedManifest,
    providers: &[PeerId],
    progress: &(dyn Fn(u64) + Send + Sync),
) -> Result<(Vec<u8>, DownloadReport), FetchError> {
    let manifest = signed.manifest();
    let id = manifest.id;
    let mut bytes = vec![0u8; manifest.size as usize];
    let mut waiting: VecDeque<usize> = (0..manifest.chunk_count()).collect();
    let mut usable: Vec<PeerId> = providers.to_vec();
    usable.dedup();
    let mut in_flight: HashMap<PeerId, usize> = HashMap::new();
    let mut failures: HashMap<PeerId, u32> = HashMap::new();
    let mut report = DownloadReport::default();
    let mut failed = Vec::new();
    let mut done = 0u64;
    let mut requests = FuturesUnordered::new();
    let mut next_provider = 0usize;
    let mut whole = InOrderHash::new(manifest.chunk_count());

    loop {
        // Hand waiting chunks to the providers with room, in turn.
        while !usable.is_empty() && !waiting.is_empty() {
            let start = next_provider % usable.len();
            let Some(provider) = (0..usable.len())
                .map(|i| usable[(start + i) % usable.len()])
                .find(|p| in_flight.get(p).copied().unwrap_or(0) < IN_FLIGHT_PER_PROVIDER)
            else {
                break;
            };
            next_provider = next_provider.wrapping_add(1);
            let Some(index) = waiting.pop_front() else {
                break;
            };
            *in_flight.entry(provider).or_default() += 1;
            let network = network.clone();
            requests.push(async move {
                let request = FetchRequest::Chunk {
                    id,
                    index: index as u32,
                };
                (provider, index, network.request(provider, request).await)
            });
        }
        if waiting.is_empty() && requests.is_empty() {
            break;
        }
        let Some((provider, index, answer)) = requests.next().await else {
            // Chunks wait but nobody is left to ask.
            return Err(FetchError::NoProvider {
                id,
                lied: report.liars,
                failed,
            });
        };
        *in_flight.entry(provider).or_default() -= 1;
        match answer {
            Ok(FetchResponse::Chunk(chunk)) if manifest.chunk_matches(index, &chunk) => {
                bytes[manifest.chunk_range(index)].copy_from_slice(&chunk);
                whole.arrived(index, &bytes, manifest);
                *report.chunks_from.entry(provider).or_default() += 1;
                done += chunk.len() as u64;
                progress(done);
            }
            Ok(FetchResponse::Chunk(_)) => {
                // Its other chunks in flight may be bad too: each is checked
                // as it comes, but the liar is reported once.
                if !report.liars.contains(&provider) {
                    tracing::warn!(%provider, %id, index, "provider sent a corrupt chunk; blocking it");
                    network.penalise(
                        provider,
                        "sent a chunk that does not match the signed manifest",
                    );
                    usable.retain(|p| *p != provider);
                    report.liars.push(provider);
                }
                waiting.push_back(index);
            }
            other => {
                let reason = match other {
                    Ok(FetchResponse::NotFound) => "does not have it".to_owned(),
                    Ok(_) => "answered with something other than a chunk".to_owned(),
                    Err(e) => e.to_string(),
                };
                tracing::debug!(%provider, %id, index, "chunk request failed: {reason}");
                let count = failures.entry(provider).or_default();
                *count += 1;
                if *count >= MAX_FAILURES_PER_PROVIDER && usable.contains(&provider) {
                    usable.retain(|p| *p != provider);
                    failed.push(provider);
                }
                waiting.push_back(index);
            }
        }
        if usable.is_empty() && !waiting.is_empty() && requests.is_empty() {
            return Err(FetchError::NoProvider {
                id,
                lied: report.liars,
                failed,
            });
        }
    }
    if whole.finish() != id {
        return Err(FetchError::WrongWhole(id));
    }
    Ok((bytes, report))
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
