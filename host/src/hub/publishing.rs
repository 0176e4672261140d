//! What this node offers the network: the agents it publishes (signed,
//! kept on disk for its next start) and the rounds of publishing again
//! each time peers come back after it had none.

use super::{Found, Hub, HubError};
use crate::net::PublishReport;
use crate::store::manifest::{Manifest, SignedManifest};
use crate::store::{AgentRecord, StoreError};
use std::sync::Arc;

/// How often, and how many times, an agent that no peer heard announced
/// is announced again once the node has peers: at each of gossipsub's
/// heartbeats (at which its mesh forms), for 10 s.
const REANNOUNCE_EVERY: std::time::Duration = crate::net::gossip::HEARTBEAT;
const REANNOUNCE_ATTEMPTS: usize =
    crate::net::gossip::heartbeats(std::time::Duration::from_secs(10));
/// The shortest time between two rounds of publishing on peers' return.
const REPUBLISH_FLOOR: std::time::Duration = std::time::Duration::from_secs(30);

impl Hub {
    /// Publishes what this node offers each time it has peers again after
    /// having none (at start, too: the first node of a network has none
    /// until another joins), once its routing table has them. A publication
    /// made alone reaches nobody; this one is what makes it known.
    pub(super) fn announce_when_peers_come(self: &Arc<Self>) {
        let mut peers = self.shared.peers.subscribe();
        let hub = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut last_round: Option<tokio::time::Instant> = None;
            loop {
                // The first round waits only for peers: the node may have
                // connected to its bootstrap peers before this task began,
                // and waiting for a first "none" would skip publishing
                // after a restart until the node happened to lose them all.
                if last_round.is_some() && peers.wait_for(|n| *n == 0).await.is_err() {
                    return;
                }
                if peers.wait_for(|n| *n > 0).await.is_err() {
                    return;
                }
                // A peer that keeps connecting and leaving gets a round at
                // most every REPUBLISH_FLOOR, not one per connection.
                if let Some(last) = last_round {
                    tokio::time::sleep_until(last + REPUBLISH_FLOOR).await;
                    if *peers.borrow() == 0 {
                        continue;
                    }
                }
                last_round = Some(tokio::time::Instant::now());
                let Some(hub) = hub.upgrade() else { return };
                if hub.network.joined().await.is_err() {
                    return;
                }
                let mut unheard = Vec::new();
                for manifest in hub.shared.offers() {
                    match hub.network.publish(manifest.clone()).await {
                        Ok(report) if report.gossip_peers == 0 => unheard.push(manifest),
                        Ok(_) => {}
                        Err(e) => tracing::warn!("cannot announce a published agent: {e}"),
                    }
                }
                // Gossip reaches only the peers of the node's mesh, which
                // forms at gossipsub's heartbeats after the first peer
                // connects: what no peer heard is announced again, a
                // heartbeat apart, until someone does.
                for _ in 0..REANNOUNCE_ATTEMPTS {
                    if unheard.is_empty() || *peers.borrow() == 0 {
                        break;
                    }
                    tokio::time::sleep(REANNOUNCE_EVERY).await;
                    let mut still = Vec::new();
                    for manifest in unheard {
                        if matches!(hub.network.announce(manifest.clone()).await, Ok(0)) {
                            still.push(manifest);
                        }
                    }
                    unheard = still;
                }
            }
        });
    }

    /// The agents this node offers the network, by name.
    pub fn published(&self) -> Vec<Found> {
        let mut offers: Vec<Found> = self
            .shared
            .offers()
            .iter()
            .map(|manifest| Found::from_manifest(manifest, 1))
            .collect();
        offers.sort_by(|a, b| a.card.name.cmp(&b.card.name));
        offers
    }

    /// Publishes the installed agent meant by `query`: signs its manifest,
    /// offers it, and announces it on the network.
    pub async fn publish(&self, query: &str) -> Result<(SignedManifest, PublishReport), HubError> {
        let record = self.shared.node.resolve(query)?;
        let signed = self.sign_and_offer(&record)?;
        let report = self.network.publish(signed.clone()).await?;
        Ok((signed, report))
    }

    pub(super) fn sign_and_offer(&self, record: &AgentRecord) -> Result<SignedManifest, HubError> {
        let publisher = self.publisher.public();
        let manifest = match &record.attached {
            // A service: reached here by remote call, never fetched.
            Some(attachment) => Manifest::service(record, attachment.kind(), &publisher),
            None => {
                let bytes = self.shared.node.blobs().get(&record.id)?;
                Manifest::describe(record, &bytes, &publisher)
            }
        };
        let signed = SignedManifest::sign(manifest, &self.publisher)?;
        self.save_published(&signed)?;
        self.shared.offer(signed.clone());
        Ok(signed)
    }

    pub(super) fn save_published(&self, signed: &SignedManifest) -> Result<(), StoreError> {
        let path = self.published_dir.join(signed.id().hex());
        crate::store::write_atomic(&path, signed.encoded())
    }

    /// Manifests this node offered before it last stopped, still backed by
    /// an installed agent.
    pub(super) fn load_published(&self) -> Vec<SignedManifest> {
        let Ok(entries) = std::fs::read_dir(&self.published_dir) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let bytes = std::fs::read(entry.path()).ok()?;
                match SignedManifest::decode(&bytes) {
                    Ok(manifest) if self.still_here(&manifest) => Some(manifest),
                    Ok(_) => None,
                    Err(e) => {
                        tracing::warn!("ignoring {}: {e}", entry.path().display());
                        None
                    }
                }
            })
            .collect()
    }

    /// Whether the agent of a manifest this node published is still here:
    /// its bytes, or for a service its attached server.
    fn still_here(&self, manifest: &SignedManifest) -> bool {
        let node = &self.shared.node;
        if manifest.manifest().is_service() {
            return node
                .resolve(&manifest.id().to_string())
                .is_ok_and(|record| record.is_attached());
        }
        node.blobs().verify(&manifest.id()).is_ok()
    }
}
