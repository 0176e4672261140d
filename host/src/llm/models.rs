//! A node's models by name, each behind a gate that bounds how many
//! requests it runs at once and how many may wait, and takes the waiting
//! callers in turn (see [`super::fair`]).

use super::config::{Backend, LlmConfig, ModelConfig};
use super::embedded::{self, EmbeddedModel};
use super::fair::{FairGate, Refused};
use super::ledger::Ledger;
use super::openai::OpenAiModel;
use super::share::{ModelNetwork, NetworkModel, NetworkSlot};
use super::{ChatModel, ChatRequest, Completion, DeltaSink, LlmFailure, ModelStatus};
use crate::audit::Audit;
use crate::llm::metrics::{LlmOutcome, ModelMetrics};
use std::sync::Arc;
use std::time::Instant;

/// One model and its gate.
pub struct Gated {
    model: Arc<dyn ChatModel>,
    gate: FairGate,
    max_concurrent: u32,
    queue: u32,
}

impl Gated {
    pub fn new(model: Arc<dyn ChatModel>, max_concurrent: u32, queue: u32) -> Self {
        Gated {
            model,
            gate: FairGate::new(max_concurrent, queue),
            max_concurrent,
            queue,
        }
    }

    pub fn name(&self) -> &str {
        self.model.name()
    }

    pub fn context_window(&self) -> Option<usize> {
        self.model.context_window()
    }

    /// Whether the model keeps to a request's grounding while it writes.
    pub fn grounds(&self) -> bool {
        self.model.grounds()
    }

    /// Completes `request` once a slot is free, failing as busy if the
    /// queue is full or the deadline passes while waiting.
    pub async fn complete(
        &self,
        request: ChatRequest,
        deadline: Instant,
        sink: DeltaSink,
    ) -> Result<Completion, LlmFailure> {
        let busy = |why: &str| {
            LlmFailure::Busy(format!(
                "model {:?} is busy: it runs {} requests at once and {why}",
                self.name(),
                self.max_concurrent
            ))
        };
        // Each caller in turn (see [`FairGate`]): the request's own
        // caller, else all requests of one kind share a turn.
        let caller = request.caller.clone().unwrap_or_default();
        let permit = match self.gate.enter(&caller, deadline).await {
            Ok(slot) => slot,
            Err(Refused::Full) => return Err(busy(&format!("{} more are waiting", self.queue))),
            Err(Refused::Deadline) => {
                return Err(busy("the request's deadline passed while it waited"));
            }
        };
        let result = self.model.complete(request, deadline, sink).await;
        drop(permit);
        result
    }

    pub async fn status(&self) -> ModelStatus {
        self.model.status().await
    }

    /// Gets the model ready to answer (see [`ChatModel::prepare`]).
    pub async fn prepare(&self) -> Result<(), LlmFailure> {
        self.model.prepare().await
    }
}

/// The models of a node.
pub struct Models {
    models: Vec<Gated>,
    default: String,
    /// Where requests are counted.
    metrics: Arc<ModelMetrics>,
    /// Where each agent's tokens of the day are kept, for daily budgets.
    ledger: Option<Ledger>,
    /// Where models borrowed from the network reach it, once joined.
    network: NetworkSlot,
    /// The models offered to other nodes, and each peer's rate per minute.
    share: Vec<String>,
    share_rate: u32,
}

impl Models {
    /// The models `config` describes; the embedded default model when it
    /// describes none. Nothing is loaded or contacted yet.
    pub fn from_config(config: &LlmConfig, audit: Arc<Audit>) -> anyhow::Result<Models> {
        config.validate()?;
        let network = NetworkSlot::default();
        let (models, default) = if config.models.is_empty() {
            (
                vec![Gated::new(Arc::new(EmbeddedModel::default_model()), 1, 64)],
                embedded::DEFAULT_NAME.to_owned(),
            )
        } else {
            let models = config
                .models
                .iter()
                .map(|model| gated(model, &network))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let default = config
                .default
                .clone()
                .unwrap_or_else(|| config.models[0].name.clone());
            (models, default)
        };
        Ok(Models {
            models,
            default,
            metrics: audit.section(),
            ledger: None,
            network,
            share: config.share.clone(),
            share_rate: config.share_rate,
        })
    }

    /// The models a program made itself (a test's scripted model, an
    /// embedder's own backend), the first the default. Network sharing is
    /// off; nothing is loaded or contacted yet.
    pub fn with_models(models: Vec<Gated>, audit: Arc<Audit>) -> anyhow::Result<Models> {
        let default = models
            .first()
            .map(|gated| gated.name().to_owned())
            .ok_or_else(|| anyhow::anyhow!("a node needs at least one model"))?;
        Ok(Models {
            models,
            default,
            metrics: audit.section(),
            ledger: None,
            network: NetworkSlot::default(),
            share: Vec::new(),
            share_rate: 0,
        })
    }

    /// Lets the models borrowed from the network reach it; false if they
    /// already could.
    pub fn set_network(&self, network: Arc<dyn ModelNetwork>) -> bool {
        self.network.set(network).is_ok()
    }

    /// The models offered to other nodes, and the requests per minute each
    /// peer may send them.
    pub fn sharing(&self) -> (&[String], u32) {
        (&self.share, self.share_rate)
    }

    /// Keeps each agent's daily token usage in `dir`.
    pub fn with_ledger(mut self, dir: std::path::PathBuf) -> Models {
        self.ledger = Some(Ledger::new(dir));
        self
    }

    /// Where daily token usage is kept, if anywhere.
    pub fn ledger(&self) -> Option<&Ledger> {
        self.ledger.as_ref()
    }

    /// Completes `request` with the model named `model` (the default one
    /// when `None`) for `requester`, counting it in the node's metrics.
    pub async fn complete(
        &self,
        model: Option<&str>,
        request: ChatRequest,
        deadline: Instant,
        sink: DeltaSink,
        requester: &str,
    ) -> Result<Completion, LlmFailure> {
        let gated = self.get(model)?;
        let mut request = request;
        request.caller.get_or_insert_with(|| requester.to_owned());
        let result = gated.complete(request, deadline, sink).await;
        let outcome = match &result {
            Ok(completion) => LlmOutcome::Answered {
                prompt_tokens: completion.usage.prompt_tokens,
                completion_tokens: completion.usage.completion_tokens,
                first_token: completion.time_to_first_token,
            },
            Err(failure) => LlmOutcome::Failed {
                kind: failure.kind(),
                error: failure,
            },
        };
        self.metrics.request(gated.name(), requester, outcome);
        result
    }

    /// The model a request names, or the default one.
    pub fn get(&self, name: Option<&str>) -> Result<&Gated, LlmFailure> {
        let name = name.unwrap_or(&self.default);
        self.models
            .iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| {
                LlmFailure::InvalidRequest(format!(
                    "this node has no model {name:?}; it has {}",
                    self.names().join(", ")
                ))
            })
    }

    pub fn default_name(&self) -> &str {
        &self.default
    }

    pub fn names(&self) -> Vec<&str> {
        self.models.iter().map(Gated::name).collect()
    }

    /// Every model's state, checked now.
    pub async fn statuses(&self) -> Vec<ModelStatus> {
        let mut statuses = futures::future::join_all(self.models.iter().map(Gated::status)).await;
        for status in &mut statuses {
            status.default = status.name == self.default;
        }
        statuses
    }
}

fn gated(config: &ModelConfig, network: &NetworkSlot) -> anyhow::Result<Gated> {
    let model: Arc<dyn ChatModel> = match &config.backend {
        Backend::Network(borrowed) => Arc::new(NetworkModel::new(
            &config.name,
            &borrowed.model,
            network.clone(),
        )),
        Backend::Gguf(gguf) => Arc::new(EmbeddedModel::new(&config.name, &gguf.path, gguf.context)),
        Backend::Openai(openai) => Arc::new(
            OpenAiModel::new(&config.name, openai)
                .map_err(|e| anyhow::anyhow!("llm.models {:?}: {e}", config.name))?,
        ),
    };
    Ok(Gated::new(model, config.max_concurrent, config.queue))
}
