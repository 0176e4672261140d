//! Models across the planet: a node offers its models to other nodes
//! (`[llm] share`), and a node borrows a model another node shares
//! (`kind = "network"`).
//!
//! A sharing node provides two DHT keys per model (the model's name, and
//! one key of all sharers), and answers `llm/chat` requests in the OpenAI
//! format over the node-to-node protocol, under its own limits: its model's
//! queue, the caller's deadline (never more than the protocol's longest),
//! and a per-peer rate. A borrowing node finds sharers with one provider
//! lookup and asks them in turn until one answers.

use super::models::Models;
use super::wire;
use super::{ChatModel, ChatRequest, Completion, DeltaSink, LlmFailure, ModelStatus};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// Sharers a borrowing node asks for one request, one after another.
pub const SHARERS_TRIED: usize = 3;
/// Peers whose request rate a sharing node keeps track of at once.
const PEERS_TRACKED: usize = 4096;

/// A model shared on the network, as `agentsite models --network` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedModel {
    /// Its name on the nodes that share it.
    pub name: String,
    /// The peer ids of the nodes found sharing it.
    pub sharers: Vec<String>,
}

/// How a node reaches models on the network: the hub, once the node has
/// joined one.
#[async_trait::async_trait]
pub trait ModelNetwork: Send + Sync {
    /// Nodes that share `model`, at most `want`.
    async fn sharers(&self, model: &str, want: usize) -> Result<Vec<String>, LlmFailure>;

    /// Asks `peer` to complete `request` (OpenAI format) with its `model`
    /// before `deadline`; its answer in the same format.
    async fn chat(
        &self,
        peer: &str,
        model: &str,
        request: serde_json::Value,
        deadline: Instant,
    ) -> Result<serde_json::Value, LlmFailure>;

    /// The models shared on the network, as far as a lookup finds them.
    async fn shared(&self) -> Result<Vec<SharedModel>, String>;
}

/// Where a node's network-borrowed models find the network, once joined.
pub type NetworkSlot = Arc<OnceLock<Arc<dyn ModelNetwork>>>;

/// A model another node shares.
pub struct NetworkModel {
    name: String,
    /// Its name on the sharing nodes.
    model: String,
    network: NetworkSlot,
}

impl NetworkModel {
    pub fn new(name: &str, model: &str, network: NetworkSlot) -> Self {
        NetworkModel {
            name: name.to_owned(),
            model: model.to_owned(),
            network,
        }
    }

    fn network(&self) -> Result<&Arc<dyn ModelNetwork>, LlmFailure> {
        self.network.get().ok_or_else(|| {
            LlmFailure::Unavailable(format!(
                "model {:?} is borrowed from the network, and this node is not on one (`agentsite serve` joins it)",
                self.name
            ))
        })
    }
}

#[async_trait::async_trait]
impl ChatModel for NetworkModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn complete(
        &self,
        request: ChatRequest,
        deadline: Instant,
        sink: DeltaSink,
    ) -> Result<Completion, LlmFailure> {
        let network = self.network()?;
        let started = Instant::now();
        let sharers = network.sharers(&self.model, SHARERS_TRIED).await?;
        if sharers.is_empty() {
            return Err(LlmFailure::Unavailable(format!(
                "model {:?}: no node on the network shares a model called {:?}",
                self.name, self.model
            )));
        }
        let body = serde_json::to_value(wire::request_to_wire(&self.model, &request, false))
            .expect("a request serializes");
        let mut last = None;
        for peer in &sharers {
            match network
                .chat(peer, &self.model, body.clone(), deadline)
                .await
            {
                Ok(answer) => {
                    let bytes = serde_json::to_vec(&answer).expect("JSON serializes");
                    let mut completion =
                        wire::completion_from_wire(&bytes, &self.name).map_err(|why| {
                            LlmFailure::Unavailable(format!(
                                "model {:?}: node {peer} answered {why}",
                                self.name
                            ))
                        })?;
                    completion.model = self.name.clone();
                    completion.time_to_first_token = Some(started.elapsed());
                    if let Some(sink) = &sink {
                        super::send_whole(&completion, sink).await;
                    }
                    return Ok(completion);
                }
                // Another sharer may have room or be reachable.
                Err(failure @ (LlmFailure::Busy(_) | LlmFailure::Unavailable(_))) => {
                    last = Some(failure);
                }
                Err(failure) => return Err(failure),
            }
        }
        Err(last.expect("at least one sharer was asked"))
    }

    async fn status(&self) -> ModelStatus {
        ModelStatus {
            name: self.name.clone(),
            kind: "network".to_owned(),
            location: format!("network: {}", self.model),
            state: match self.network.get() {
                None => "borrowed from the network (when serving)".to_owned(),
                Some(network) => match network.sharers(&self.model, 1).await {
                    Ok(found) if !found.is_empty() => "shared on the network".to_owned(),
                    Ok(_) => "no node shares it".to_owned(),
                    Err(failure) => failure.to_string(),
                },
            },
            size: None,
            default: false,
        }
    }
}

/// The sharing side: answers other nodes' requests for the models this
/// node shares.
pub struct Sharing {
    models: Arc<Models>,
    shared: Vec<String>,
    rate: PeerRate,
}

impl Sharing {
    /// Shares `shared` of `models`, each peer at most `per_minute` requests.
    pub fn new(models: Arc<Models>, shared: Vec<String>, per_minute: u32) -> Self {
        Sharing {
            models,
            shared,
            rate: PeerRate::new(per_minute),
        }
    }

    /// The names of the shared models.
    pub fn shared(&self) -> &[String] {
        &self.shared
    }

    /// Answers `peer`'s request (OpenAI format) for the shared `model`.
    pub async fn answer(
        &self,
        peer: &str,
        model: &str,
        request: serde_json::Value,
        deadline: Duration,
    ) -> Result<serde_json::Value, LlmFailure> {
        if !self.shared.iter().any(|m| m == model) {
            return Err(LlmFailure::NotGranted(format!(
                "this node does not share a model called {model:?}"
            )));
        }
        if !self.rate.admit(peer) {
            return Err(LlmFailure::Busy(format!(
                "this node answers at most {} requests a minute from one peer",
                self.rate.per_minute
            )));
        }
        let request: wire::ChatCompletionRequest = serde_json::from_value(request)
            .map_err(|e| LlmFailure::InvalidRequest(format!("not a chat request: {e}")))?;
        let read = wire::request_from_wire(request).map_err(LlmFailure::InvalidRequest)?;
        let requester = format!("peer:{peer}");
        let completion = self
            .models
            .complete(
                Some(model),
                read.request,
                Instant::now() + deadline,
                None,
                &requester,
            )
            .await?;
        let answer = wire::completion_to_wire(
            &super::wire::completion_id(),
            crate::clock::unix_seconds(),
            &completion,
        );
        Ok(serde_json::to_value(answer).expect("an answer serializes"))
    }
}

/// Requests per minute per peer: a fixed one-minute window for each,
/// with at most [`PEERS_TRACKED`] peers remembered.
struct PeerRate {
    per_minute: u32,
    windows: Mutex<HashMap<String, (Instant, u32)>>,
}

impl PeerRate {
    fn new(per_minute: u32) -> Self {
        PeerRate {
            per_minute,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Counts a request of `peer`; false past its rate.
    fn admit(&self, peer: &str) -> bool {
        let now = Instant::now();
        let minute = Duration::from_secs(60);
        let mut windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        if windows.len() >= PEERS_TRACKED && !windows.contains_key(peer) {
            windows.retain(|_, (start, _)| now.duration_since(*start) < minute);
            if windows.len() >= PEERS_TRACKED {
                // Every tracked peer is active: new peers wait their turn.
                return false;
            }
        }
        let (start, count) = windows.entry(peer.to_owned()).or_insert((now, 0));
        if now.duration_since(*start) >= minute {
            *start = now;
            *count = 0;
        }
        if *count >= self.per_minute {
            return false;
        }
        *count += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_peer_gets_its_own_rate() {
        let rate = PeerRate::new(2);
        assert!(rate.admit("a") && rate.admit("a"));
        assert!(!rate.admit("a"));
        assert!(rate.admit("b"));
    }
}
