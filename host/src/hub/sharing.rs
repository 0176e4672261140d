//! Language models across the network: the hub provides the DHT keys of the
//! models this node shares, and reaches the models other nodes share for
//! the node's `kind = "network"` models (see [`crate::llm::share`]).

use super::{ASK_TIMEOUT, Hub};
use crate::llm::LlmFailure;
use crate::llm::share::{ModelNetwork, SharedModel};
use crate::net::rpc::{ChatRelay, MAX_REMOTE_DEADLINE, RpcError, code};
use crate::net::{PeerId, dht};
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Instant;

/// Sharers asked for their models by `models --network`.
const SHARERS_LISTED: usize = 20;

impl Hub {
    /// Makes this node a provider of the models it shares.
    pub(super) async fn provide_shared_models(&self, names: &[String]) {
        if names.is_empty() {
            return;
        }
        let keys = names
            .iter()
            .map(|name| dht::model_key(name))
            .chain(std::iter::once(dht::model_sharers_key()))
            .collect();
        match self.network.provide(keys).await {
            Ok(report) => tracing::info!(
                models = names.len(),
                unconfirmed = report.provider_keys_unconfirmed,
                "sharing language models"
            ),
            Err(e) => tracing::warn!("cannot announce the shared models: {e}"),
        }
    }

    /// Other nodes that provide `key`, at most `want` (one lookup).
    async fn other_providers(
        &self,
        key: libp2p::kad::RecordKey,
        want: usize,
    ) -> Result<Vec<PeerId>, crate::net::NetError> {
        let lookup = self.network.providers(key, want).await?;
        let me = self.peer_id();
        Ok(lookup
            .providers
            .into_iter()
            .filter(|peer| *peer != me)
            .collect())
    }

    /// The models other nodes share, as far as one lookup finds them.
    pub async fn shared_models(&self) -> Result<Vec<SharedModel>, String> {
        let sharers = self
            .other_providers(dht::model_sharers_key(), SHARERS_LISTED)
            .await
            .map_err(|e| e.to_string())?;
        let asks = sharers.into_iter().map(|peer| async move {
            let answer = self.network.shared_models(peer, ASK_TIMEOUT).await;
            (peer, answer)
        });
        let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (peer, answer) in futures::future::join_all(asks).await {
            let Ok(Ok(answer)) = answer else {
                continue;
            };
            let names = answer["models"].as_array().cloned().unwrap_or_default();
            // A peer's list is untrusted: bounded, and names only.
            for name in names.iter().filter_map(|n| n.as_str()).take(64) {
                if crate::llm::config::valid_model_name(name).is_ok() {
                    by_name
                        .entry(name.to_owned())
                        .or_default()
                        .push(peer.to_string());
                }
            }
        }
        Ok(by_name
            .into_iter()
            .map(|(name, sharers)| SharedModel { name, sharers })
            .collect())
    }
}

/// The node's borrowed models' way to the network.
pub(super) struct ModelLink(pub(super) Weak<Hub>);

impl ModelLink {
    fn hub(&self) -> Result<Arc<Hub>, LlmFailure> {
        self.0
            .upgrade()
            .ok_or_else(|| LlmFailure::Unavailable("the node is leaving the network".into()))
    }
}

#[async_trait::async_trait]
impl ModelNetwork for ModelLink {
    async fn sharers(&self, model: &str, want: usize) -> Result<Vec<String>, LlmFailure> {
        let sharers = self
            .hub()?
            .other_providers(dht::model_key(model), want)
            .await
            .map_err(|e| LlmFailure::Unavailable(format!("cannot look up model {model:?}: {e}")))?;
        Ok(sharers.iter().map(PeerId::to_string).collect())
    }

    async fn chat(
        &self,
        peer: &str,
        model: &str,
        request: serde_json::Value,
        deadline: Instant,
    ) -> Result<serde_json::Value, LlmFailure> {
        let hub = self.hub()?;
        let peer_id: PeerId = peer
            .parse()
            .map_err(|e| LlmFailure::Unavailable(format!("bad peer id {peer}: {e}")))?;
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(LlmFailure::DeadlineExceeded(
                "the deadline passed before the model was asked".into(),
            ));
        }
        let relay = ChatRelay {
            model: model.to_owned(),
            request,
            deadline: remaining.min(MAX_REMOTE_DEADLINE),
        };
        match hub.network.chat(peer_id, relay, remaining).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(refusal)) => Err(failure_from_wire(peer, refusal)),
            Err(e) => Err(LlmFailure::Unavailable(format!(
                "node {peer} did not answer: {e}"
            ))),
        }
    }

    async fn shared(&self) -> Result<Vec<SharedModel>, String> {
        self.hub().map_err(|e| e.to_string())?.shared_models().await
    }
}

/// A failure of a shared model as the asking node hears it.
pub(super) fn failure_to_wire(failure: LlmFailure) -> RpcError {
    let code = match &failure {
        LlmFailure::NotGranted(_) => code::NOT_SHARED,
        LlmFailure::InvalidRequest(_) | LlmFailure::Refused(_) => code::INVALID_PARAMS,
        LlmFailure::Busy(_) | LlmFailure::BudgetExceeded(_) => code::BUSY,
        LlmFailure::DeadlineExceeded(_) => code::DEADLINE_EXCEEDED,
        LlmFailure::Unavailable(_) => code::INTERNAL,
    };
    RpcError {
        code,
        message: failure.to_string(),
    }
}

/// Another node's refusal, naming the node: its message is its own words.
fn failure_from_wire(peer: &str, refusal: RpcError) -> LlmFailure {
    let message = format!(
        "node {peer}: {}",
        crate::text::one_line(&refusal.message, 300)
    );
    match refusal.code {
        code::NOT_SHARED => LlmFailure::Unavailable(message),
        code::INVALID_PARAMS => LlmFailure::InvalidRequest(message),
        code::BUSY => LlmFailure::Busy(message),
        code::DEADLINE_EXCEEDED => LlmFailure::DeadlineExceeded(message),
        _ => LlmFailure::Unavailable(message),
    }
}
