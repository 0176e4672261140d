//! What this node offers other nodes: the manifests and chunks of the agents
//! it publishes, keyword matches among them, and calls to their tools.
//!
//! Only agents this node offers (published, or fetched and seeded) are
//! served; other installed agents stay private. A remote call takes the
//! same path as an agent's call of an agent here ([`crate::Node::call_at_hop`]):
//! this node's own limits, never longer than the caller still waits,
//! refused past the maximum hop count.

use super::Shared;
use crate::capabilities::peers::{Hop, PeerFailure};
use crate::net::fetch::{FetchRequest, FetchResponse, MAX_MATCHES};
use crate::net::rpc::{CallRequest, RpcError, code};
use crate::receipt::Ran;
use crate::store::manifest::normalize_keyword;
use libp2p::PeerId;
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

pub(super) struct NodeLibrary {
    pub(super) shared: Arc<Shared>,
    /// This node: its own announcements are not news to it.
    pub(super) own: PeerId,
}

#[async_trait::async_trait]
impl crate::net::Library for NodeLibrary {
    fn answer_now(
        &self,
        _from: PeerId,
        request: FetchRequest,
    ) -> Result<FetchResponse, FetchRequest> {
        let shared = &self.shared;
        match request {
            FetchRequest::Manifest { id } => Ok(match shared.offered(&id) {
                Some(signed) => FetchResponse::Manifest(signed.encoded().to_vec()),
                None => FetchResponse::NotFound,
            }),
            FetchRequest::Chunk { id, index } => {
                if shared.offered(&id).is_none() {
                    return Ok(FetchResponse::NotFound);
                }
                match shared.served.get(&id, index) {
                    Some(chunk) => Ok(FetchResponse::Chunk(chunk)),
                    // Read from disk, on a blocking thread.
                    None => Err(request),
                }
            }
            FetchRequest::Matching { keyword } => {
                let keyword = normalize_keyword(&keyword);
                let matches = shared
                    .offers()
                    .into_iter()
                    .filter(|m| m.keywords().contains(&keyword))
                    .take(MAX_MATCHES)
                    .map(|m| serde_bytes::ByteBuf::from(m.encoded().to_vec()))
                    .collect();
                Ok(FetchResponse::Matching(matches))
            }
        }
    }

    fn answer(&self, from: PeerId, request: FetchRequest) -> FetchResponse {
        let shared = &self.shared;
        let FetchRequest::Chunk { id, index } = request else {
            return self
                .answer_now(from, request)
                .unwrap_or(FetchResponse::NotFound);
        };
        let Some(signed) = shared.offered(&id) else {
            return FetchResponse::NotFound;
        };
        let manifest = signed.manifest();
        let position = index as usize;
        if position >= manifest.chunk_count() {
            return FetchResponse::NotFound;
        }
        match shared
            .node
            .blobs()
            .read_range(&id, manifest.chunk_range(position))
        {
            // Never pass on bytes that went bad on our own disk.
            Ok(chunk) if manifest.chunk_matches(position, &chunk) => {
                let chunk = bytes::Bytes::from(chunk);
                shared.served.insert(id, index, chunk.clone());
                FetchResponse::Chunk(chunk)
            }
            Ok(_) => {
                tracing::error!(%id, index, "stored agent is corrupt; not serving it");
                FetchResponse::NotFound
            }
            Err(e) => {
                tracing::warn!(%id, "cannot read a chunk: {e}");
                FetchResponse::NotFound
            }
        }
    }

    async fn call(&self, from: PeerId, request: &CallRequest) -> Result<Ran, RpcError> {
        let shared = &self.shared;
        if shared.offered(&request.agent).is_none() {
            return Err(RpcError {
                code: code::NOT_FOUND,
                message: format!("this node does not offer {}", request.agent),
            });
        }
        let record = shared
            .node
            .resolve(&request.agent.to_string())
            .map_err(|e| to_wire(PeerFailure::NotFound(e.to_string())))?;
        tracing::info!(%from, agent = %record.card.name, tool = %request.tool, depth = request.depth, "remote call");
        let hop = Hop {
            depth: request.depth,
            deadline: Instant::now() + request.deadline,
        };
        let arguments = request.arguments.to_string();
        let running = shared.metrics.remote_call();
        let answer = shared
            .node
            .call_at_hop_recorded(&record, &request.tool, &arguments, hop)
            .await
            .map_err(to_wire);
        running.answered();
        answer
    }

    async fn chat(
        &self,
        from: PeerId,
        request: crate::net::rpc::ChatRelay,
    ) -> Result<Value, RpcError> {
        let Some(sharing) = &self.shared.sharing else {
            return Err(RpcError {
                code: code::NOT_SHARED,
                message: "this node shares no models".into(),
            });
        };
        tracing::info!(%from, model = %request.model, "shared model request");
        sharing
            .answer(
                &from.to_string(),
                &request.model,
                request.request,
                request.deadline,
            )
            .await
            .map_err(super::sharing::failure_to_wire)
    }

    fn shared_models(&self) -> Vec<String> {
        self.shared
            .sharing
            .as_ref()
            .map(|sharing| sharing.shared().to_vec())
            .unwrap_or_default()
    }

    fn announced(&self, manifest: crate::store::manifest::SignedManifest, host: PeerId) {
        let announced = super::Announced::of(&manifest, host);
        self.shared.remember(manifest, host);
        if host != self.own {
            self.shared.announcements.arrived(announced);
        }
    }

    fn connections_changed(&self, peers: usize) {
        self.shared.metrics.peers_connected(peers);
        self.shared.peers.send_replace(peers);
    }
}

/// A refusal as the calling node reads it back (see [`from_wire`]).
pub(super) fn to_wire(refusal: PeerFailure) -> RpcError {
    let (code, message) = match refusal {
        PeerFailure::UnknownTool(tool) => (code::UNKNOWN_TOOL, tool),
        PeerFailure::InvalidArguments(reason) => (code::INVALID_PARAMS, reason),
        PeerFailure::NotFound(message) => (code::NOT_FOUND, message),
        PeerFailure::DepthExceeded(message) => (code::DEPTH_EXCEEDED, message),
        PeerFailure::DeadlineExceeded(message) => (code::DEADLINE_EXCEEDED, message),
        PeerFailure::Unavailable(message) => (code::INTERNAL, message),
    };
    RpcError { code, message }
}

/// Another node's refusal, as the agent that called sees it.
pub(super) fn from_wire(error: RpcError) -> PeerFailure {
    let RpcError { code, message } = error;
    match code {
        code::UNKNOWN_TOOL => PeerFailure::UnknownTool(message),
        code::INVALID_PARAMS => PeerFailure::InvalidArguments(message),
        code::NOT_FOUND => PeerFailure::NotFound(message),
        code::DEPTH_EXCEEDED => PeerFailure::DepthExceeded(message),
        code::DEADLINE_EXCEEDED => PeerFailure::DeadlineExceeded(message),
        _ => PeerFailure::Unavailable(message),
    }
}

/// The caller of a call made by another agent, here or on another node: it
/// carries the hop count; there is no client to report to, lend a model or ask.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_reaches_the_calling_agent_as_it_was_made() {
        for refusal in [
            PeerFailure::UnknownTool("cube_root".into()),
            PeerFailure::InvalidArguments("missing field `a`".into()),
            PeerFailure::NotFound("this node does not offer it".into()),
            PeerFailure::DepthExceeded("at most 8 deep".into()),
            PeerFailure::DeadlineExceeded("the caller's deadline has already passed".into()),
            PeerFailure::Unavailable("the runtime stopped".into()),
        ] {
            assert_eq!(from_wire(to_wire(refusal.clone())), refusal);
        }
    }
}
