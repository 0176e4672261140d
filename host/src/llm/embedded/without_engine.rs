//! A build without the `embedded-model` feature: GGUF files are refused
//! with a line that says why, and nothing of candle is compiled.

use super::super::{ChatRequest, Completion, DeltaSink, LlmFailure};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// No model can be read into memory in this build.
pub enum Loaded {}

/// What a GGUF file holds (see the engine's).
pub struct FileFacts {
    pub parameters: u64,
    pub trained_context: Option<usize>,
}

pub fn inspect(path: &Path) -> Result<FileFacts, String> {
    read_model(path, None, 0).map(|loaded| match loaded {})
}

pub fn inspect_partial(path: &Path, _called: &str) -> Option<Result<FileFacts, String>> {
    Some(inspect(path))
}

pub fn read_model(
    path: &Path,
    _expected_sha256: Option<&str>,
    _context: usize,
) -> Result<Loaded, String> {
    Err(format!(
        "cannot run {}: this agentsite was built without embedded models (the embedded-model feature)",
        path.display()
    ))
}

pub fn generate(
    loaded: &Loaded,
    _model_name: &str,
    _request: ChatRequest,
    _started: Instant,
    _deadline: Instant,
    _sink: DeltaSink,
    _abandoned: &AtomicBool,
) -> Result<Completion, LlmFailure> {
    match *loaded {}
}
