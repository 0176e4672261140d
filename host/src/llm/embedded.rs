//! A GGUF model of a family the engine runs (llama, qwen2, qwen3, gemma3),
//! run inside the node (agentsite-llama).
//!
//! The file is read once, on first use, into weights every request shares;
//! each request gets its own key-value cache, sized for what it may fill,
//! and runs on the model's thread pool, sending text as it is generated. The tokenizer and the
//! chat template come from the file's own metadata: a GGUF file needs
//! nothing beside it.
//!
//! With no model configured, a node runs SmolLM2-135M-Instruct
//! ([`DEFAULT_FILE`]), which the set-up scripts put in [`models_dir`].

use super::{ChatModel, ChatRequest, Completion, DeltaSink, LlmFailure, ModelStatus};
pub use engine::{FileFacts, inspect as inspect_file, inspect_partial};
use engine::{Loaded, generate, read_model};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

// A build without the `embedded-model` feature (the fuzz targets', which
// never run a model) leaves the engine, candle and the tokenizer out.
#[cfg(feature = "embedded-model")]
mod call_grammar;
#[cfg(feature = "embedded-model")]
mod constraint;
#[cfg(feature = "embedded-model")]
mod engine;
#[cfg(not(feature = "embedded-model"))]
#[path = "embedded/without_engine.rs"]
mod engine;
#[cfg(feature = "embedded-model")]
mod schema_lark;
#[cfg(feature = "embedded-model")]
mod vocabulary;

/// The embedded default model's file name.
pub const DEFAULT_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// Its sha256, checked when the set-up scripts obtain it and when it loads.
pub const DEFAULT_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
/// The name the default model goes by.
pub const DEFAULT_NAME: &str = "local";

/// Tokens of context a request may fill unless configured otherwise: the
/// cache grows with it, so it bounds a request's memory.
pub const DEFAULT_CONTEXT: usize = 2048;

/// Where the node looks for model files it was not told about:
/// `$AGENTSITE_MODELS`, else `~/.cache/agentsite/models`.
pub fn models_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("AGENTSITE_MODELS") {
        return PathBuf::from(dir);
    }
    directories::BaseDirs::new()
        .map(|dirs| dirs.cache_dir().join("agentsite").join("models"))
        .unwrap_or_else(|| PathBuf::from(".agentsite-models"))
}

/// A GGUF model run in the node.
pub struct EmbeddedModel {
    name: String,
    path: PathBuf,
    /// The file's sha256, when it must be one particular file.
    expected_sha256: Option<&'static str>,
    context: usize,
    /// Read on first use; two first requests load it once.
    loaded: tokio::sync::OnceCell<Arc<Loaded>>,
}

impl EmbeddedModel {
    /// The model in the GGUF file at `path`, called `name`, filling at most
    /// `context` tokens per request.
    pub fn new(name: impl Into<String>, path: impl Into<PathBuf>, context: usize) -> Self {
        EmbeddedModel {
            name: name.into(),
            path: path.into(),
            expected_sha256: None,
            context,
            loaded: tokio::sync::OnceCell::new(),
        }
    }

    /// The embedded default model (SmolLM2-135M-Instruct) from [`models_dir`].
    pub fn default_model() -> Self {
        let mut model = EmbeddedModel::new(
            DEFAULT_NAME,
            models_dir().join(DEFAULT_FILE),
            DEFAULT_CONTEXT,
        );
        model.expected_sha256 = Some(DEFAULT_SHA256);
        model
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the model is in memory.
    pub fn is_loaded(&self) -> bool {
        self.loaded.initialized()
    }

    /// The model in memory, reading it first if needed.
    async fn load(&self) -> Result<Arc<Loaded>, LlmFailure> {
        self.loaded
            .get_or_try_init(|| async {
                let path = self.path.clone();
                let expected = self.expected_sha256;
                let context = self.context;
                let loaded =
                    tokio::task::spawn_blocking(move || read_model(&path, expected, context))
                        .await
                        .map_err(|e| {
                            LlmFailure::Unavailable(format!("loading the model failed: {e}"))
                        })?
                        .map_err(|reason| {
                            LlmFailure::Unavailable(format!("model {:?}: {reason}", self.name))
                        })?;
                Ok(Arc::new(loaded))
            })
            .await
            .cloned()
    }
}

#[async_trait::async_trait]
impl ChatModel for EmbeddedModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn grounds(&self) -> bool {
        true
    }

    fn context_window(&self) -> Option<usize> {
        Some(self.context)
    }

    async fn complete(
        &self,
        request: ChatRequest,
        deadline: Instant,
        sink: DeltaSink,
    ) -> Result<Completion, LlmFailure> {
        let started = Instant::now();
        let loaded = self.load().await?;
        let name = self.name.clone();
        // A requester that stops waiting (a client gone, a call cancelled)
        // drops this future; the flag then stops generation at the next
        // token, so an abandoned request does not hold a core.
        let abandoned = Arc::new(AtomicBool::new(false));
        let _abandon_on_drop = super::on_drop({
            let abandoned = abandoned.clone();
            move || abandoned.store(true, Ordering::Relaxed)
        });
        tokio::task::spawn_blocking(move || {
            generate(&loaded, &name, request, started, deadline, sink, &abandoned)
        })
        .await
        .map_err(|e| LlmFailure::Unavailable(format!("generation failed: {e}")))?
    }

    async fn prepare(&self) -> Result<(), LlmFailure> {
        self.load().await.map(drop)
    }

    async fn status(&self) -> ModelStatus {
        let size = std::fs::metadata(&self.path).ok().map(|m| m.len());
        let state = match (self.is_loaded(), size) {
            (true, _) => "loaded".to_owned(),
            (false, Some(_)) => "not loaded (loads on first use)".to_owned(),
            (false, None) => format!("missing: no file at {}", self.path.display()),
        };
        ModelStatus {
            name: self.name.clone(),
            kind: "gguf".into(),
            location: self.path.display().to_string(),
            state,
            size,
            default: false,
        }
    }
}
