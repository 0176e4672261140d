//! The one wasmtime `Engine` of a node, and the clock that enforces deadlines.
//!
//! The engine uses the pooling allocator, which hands each fresh instance
//! pre-reserved memory and stack slots: this is what makes an instance per
//! call cost microseconds. The pool reserves address space up front (slots ×
//! (reservation + guard)); where the machine refuses that (a low `ulimit -v`,
//! for example) the engine falls back to on-demand allocation.
//!
//! Deadlines use epoch interruption: a background thread advances the epoch
//! every [`EPOCH_TICK`], and each store checks its own deadline when the
//! epoch moves. Compiled code only pays for a counter comparison.

use anyhow::Context as _;
use std::hash::{Hash as _, Hasher as _};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances: the granularity of deadlines, and how often
/// a running guest yields to the async executor.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Instances the pool holds at once, across all agents.
const POOL_INSTANCES: u32 = 1000;

/// The engine configuration every agentsite node uses. Public so that the
/// benchmark's bare-wasmtime baseline runs on exactly the same settings.
pub fn engine_config(pooling: bool) -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config.cranelift_opt_level(wasmtime::OptLevel::Speed);
    if pooling {
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(POOL_INSTANCES);
        // A Rust component is a handful of core instances (the program and
        // the small shims that wire its imports), with one or two memories.
        pool.total_core_instances(POOL_INSTANCES * 8);
        pool.total_memories(POOL_INSTANCES * 2);
        pool.total_tables(POOL_INSTANCES * 4);
        pool.total_stacks(POOL_INSTANCES);
        // Keep the first pages of each slot resident between calls: resetting
        // them with a memset is cheaper than returning them to the kernel.
        pool.linear_memory_keep_resident(0);
        pool.table_keep_resident(0);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

/// Builds the node's engine: pooled if the machine allows it, on-demand
/// otherwise. Returns whether pooling is in use.
pub fn build_engine() -> anyhow::Result<(Engine, bool)> {
    match Engine::new(&engine_config(true)) {
        Ok(engine) => Ok((engine, true)),
        Err(error) => {
            tracing::warn!(
                "pooling allocator unavailable ({error:#}); falling back to on-demand allocation"
            );
            let engine = Engine::new(&engine_config(false))
                .map_err(|e| anyhow::anyhow!("cannot create the WebAssembly engine: {e:#}"))?;
            Ok((engine, false))
        }
    }
}

/// A short hex fingerprint of everything that makes compiled code of one
/// engine unusable by another (wasmtime version, target, settings).
pub fn fingerprint(engine: &Engine) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until dropped.
pub struct EpochTicker {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    pub fn start(engine: &Engine) -> anyhow::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let weak = engine.weak();
        let thread = std::thread::Builder::new()
            .name("agentsite-epoch".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(EPOCH_TICK) {
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => return,
                    }
                }
            })
            .context("cannot start the deadline clock thread")?;
        Ok(EpochTicker {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        // Dropping the sender wakes the thread at once.
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
