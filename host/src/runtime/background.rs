//! A runtime built on another thread.
//!
//! Creating the engine and linking every host capability takes a few hundred
//! microseconds. A command like `agentsite call` spends about as long reading
//! and verifying the store before it needs the runtime, so the two overlap;
//! commands that never run WebAssembly (`ls`, `tools`) never wait for it.

use super::{Capacity, Runtime};
use crate::audit::Audit;
use crate::llm::models::Models;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;

pub struct BackgroundRuntime {
    building: Mutex<Option<JoinHandle<anyhow::Result<Runtime>>>>,
    ready: OnceLock<Result<Runtime, String>>,
}

impl BackgroundRuntime {
    /// Starts building a runtime for `capacity` whose agents keep their kv
    /// databases in `kv_dir`, ask `models`, and report denials to `audit`.
    pub fn start(
        kv_dir: PathBuf,
        capacity: Capacity,
        audit: Arc<Audit>,
        models: Arc<Models>,
    ) -> Self {
        let building = std::thread::Builder::new()
            .name("agentsite-runtime".into())
            .spawn(move || {
                let runtime = Runtime::new(kv_dir, capacity, audit)?;
                runtime.set_models(models);
                Ok(runtime)
            });
        let cell = BackgroundRuntime {
            building: Mutex::new(None),
            ready: OnceLock::new(),
        };
        match building {
            Ok(handle) => {
                *cell.building.lock().unwrap_or_else(PoisonError::into_inner) = Some(handle)
            }
            Err(e) => {
                let _ = cell
                    .ready
                    .set(Err(format!("cannot start a thread to build it: {e}")));
            }
        }
        cell
    }

    /// The runtime, waiting for it to be built if it is not yet.
    pub fn get(&self) -> Result<&Runtime, RuntimeUnavailable> {
        self.ready
            .get_or_init(|| {
                let handle = self
                    .building
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                match handle.map(JoinHandle::join) {
                    Some(Ok(Ok(runtime))) => Ok(runtime),
                    Some(Ok(Err(e))) => Err(format!("{e:#}")),
                    Some(Err(_)) => Err("building it panicked".into()),
                    None => Err("it was never started".into()),
                }
            })
            .as_ref()
            .map_err(|reason| RuntimeUnavailable(reason.clone()))
    }
}

impl Drop for BackgroundRuntime {
    fn drop(&mut self) {
        // Never leave the builder running past the node.
        if let Some(handle) = self.building.get_mut().ok().and_then(Option::take) {
            let _ = handle.join();
        }
    }
}

/// The WebAssembly runtime could not be created.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot start the WebAssembly runtime: {0}")]
pub struct RuntimeUnavailable(pub String);
