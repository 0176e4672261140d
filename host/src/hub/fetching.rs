//! Fetching an agent by hash: its manifest and hosts from the index or the
//! DHT, its chunks from the hosts in parallel (each checked), the whole
//! checked against the hash and installed.

use super::{Found, Hub, HubError, direct};
use crate::AgentId;
use crate::net::fetch::{self, DownloadReport};
use crate::net::{PeerId, dht};
use crate::store::manifest::SignedManifest;
use crate::store::{AgentRecord, Origin};
use serde::Serialize;

/// What a fetch did.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Fetched {
    pub record: AgentRecord,
    /// False when the agent was already installed and nothing moved.
    pub downloaded: bool,
    /// Providers that sent chunks that were kept.
    pub providers_used: usize,
    /// Providers caught sending corrupt chunks (now blocked).
    pub liars: Vec<String>,
}

/// Progress of a fetch, for a progress bar.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum FetchProgress {
    Started { size: u64, providers: usize },
    Bytes { done: u64, size: u64 },
    Verified,
}

impl Hub {
    /// The agent `id` as the network knows it (its signed manifest, from
    /// this node's index or the DHT) and other nodes that host it.
    pub async fn lookup(&self, id: AgentId) -> Result<(Found, Vec<PeerId>), HubError> {
        let manifest = self.manifest(id).await?;
        let hosts = self.providers(id, 3).await?;
        Ok((Found::from_manifest(&manifest, hosts.len()), hosts))
    }

    /// The signed manifest of `id`: from the index, else from the DHT.
    pub(super) async fn manifest(&self, id: AgentId) -> Result<SignedManifest, HubError> {
        if let Some(known) = self.shared.index().get(&id) {
            return Ok(known.manifest.clone());
        }
        Ok(self.network.manifest(id).await?)
    }

    /// Hosts of `id` other than this node, from the DHT and the index.
    pub(super) async fn providers(
        &self,
        id: AgentId,
        want: usize,
    ) -> Result<Vec<PeerId>, HubError> {
        let me = self.peer_id();
        let mut providers: Vec<PeerId> = self
            .network
            .providers(dht::agent_key(&id), want)
            .await?
            .providers;
        if let Some(known) = self.shared.index().get(&id) {
            providers.extend(known.hosts.iter().copied());
        }
        providers.sort();
        providers.dedup();
        providers.retain(|p| *p != me);
        Ok(providers)
    }

    /// Fetches the agent `id` from the network: manifest, hosts, chunks in
    /// parallel (each checked), the whole checked against the id, then
    /// installed (compiled and validated) like `agentsite add`.
    pub async fn fetch(
        &self,
        id: AgentId,
        progress: &(dyn Fn(FetchProgress) + Send + Sync),
    ) -> Result<Fetched, HubError> {
        let node = &self.shared.node;
        if let Ok(record) = node.resolve(&id.to_string())
            && (record.is_attached() || node.blobs().verify(&id).is_ok())
        {
            return Ok(Fetched {
                record,
                downloaded: false,
                providers_used: 0,
                liars: Vec::new(),
            });
        }
        let manifest = self.manifest(id).await?;
        if let Some(kind) = &manifest.manifest().service {
            return Err(HubError::NotFetchable {
                name: manifest.manifest().card.name.clone(),
                id,
                kind: crate::text::one_line(kind, 64),
            });
        }
        let origin = Origin::Network {
            publisher: manifest.publisher_id(),
        };
        // An agent the policy would not run is not downloaded either.
        let name = &manifest.manifest().card.name;
        node.policy().current().grant_for(&id, name, &origin)?;
        let providers = self.providers(id, 8).await?;
        if providers.is_empty() {
            return Err(HubError::NoProvider(id));
        }
        let size = manifest.manifest().size;
        progress(FetchProgress::Started {
            size,
            providers: providers.len(),
        });
        let providers = direct::providers_for(&self.network, size, providers).await;
        let on_bytes = |done: u64| progress(FetchProgress::Bytes { done, size });
        let (bytes, report) =
            fetch::download(&self.network, &manifest, &providers, &on_bytes).await?;
        let DownloadReport { chunks_from, liars } = report;
        for liar in &liars {
            self.shared.index().forget_host(liar);
        }
        progress(FetchProgress::Verified);
        // A component of plain functions is named as its publisher named it.
        let name = manifest.manifest().card.name.clone();
        let record = node.add_named(&bytes, origin, Some(&name)).await?;
        if self.seed_fetched {
            self.shared.offer(manifest.clone());
            let _ = self.save_published(&manifest);
            let network = self.network.clone();
            tokio::spawn(async move {
                if let Err(e) = network.publish(manifest).await {
                    tracing::warn!("cannot announce a fetched agent: {e}");
                }
            });
        }
        Ok(Fetched {
            record,
            downloaded: true,
            providers_used: chunks_from.len(),
            liars: liars.iter().map(ToString::to_string).collect(),
        })
    }
}
