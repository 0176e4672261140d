//! The wasmtime engines of a node (one per [`Mode`]), and the clock that
//! enforces deadlines.
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

use super::mode::Mode;
use anyhow::Context as _;
use std::hash::{Hash as _, Hasher as _};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances: the granularity of deadlines, and how often
/// a running guest yields to the async executor.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// What a runtime is sized for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capacity {
    /// A command that makes a call or two and exits. Instances are allocated
    /// on demand: setting up a pool costs more (about 200 µs) than it could
    /// save on so few instances.
    OneShot,
    /// A node serving many calls: a pool holding this many instances at
    /// once, across all agents, which makes an instance per call cost
    /// microseconds.
    Pooled { instances: u32 },
}

impl Capacity {
    /// A node serving many clients at once.
    pub const SERVER: Capacity = Capacity::Pooled { instances: 1000 };
}

/// Dirty linear-memory bytes per pool slot reset in place rather than
/// released (bounds the pool's resident memory at slots in use × 1 MiB).
const MEMORY_KEEP_RESIDENT: usize = 1 << 20;

/// Table bytes per pool slot reset in place rather than released.
const TABLE_KEEP_RESIDENT: usize = 64 << 10;

/// The engine configuration every agentsite node uses for components of
/// `mode`, for `capacity`. Public so that the benchmark's bare-wasmtime
/// baseline runs on exactly the same settings. Pooled and on-demand engines
/// of one mode share one fingerprint, so an agent compiled by either runs
/// on both.
pub fn engine_config(capacity: Capacity, mode: Mode) -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config.cranelift_opt_level(wasmtime::OptLevel::Speed);
    // The same component and arguments give the same bytes on every node
    // (a replayable call can be checked by running it again elsewhere):
    // NaNs come out in one canonical form, whatever the CPU makes, and
    // relaxed SIMD gives the results its deterministic mode specifies.
    config.cranelift_nan_canonicalization(true);
    config.relaxed_simd_deterministic(true);
    match mode {
        // WASI 0.2 components call and return synchronously. With
        // concurrency support on, every `call_async` goes through the
        // component-model-async scheduler: extra state in each store, and a
        // guest's return delivered through a channel that wakes the calling
        // task from within its own poll, which tokio answers by requeueing
        // the task and waking another worker thread for it, on every call.
        Mode::Synchronous => {
            config.concurrency_support(false);
        }
        // WASI 0.3 components need the scheduler: their exports are async
        // functions, their imports return streams and futures.
        Mode::Concurrent => {
            config.concurrency_support(true);
            config.wasm_component_model_async(true);
        }
    }
    if let Capacity::Pooled { instances } = capacity {
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(instances);
        // A Rust component is a handful of core instances (the program and
        // the small shims that wire its imports), with one or two memories.
        pool.total_core_instances(instances * 8);
        pool.total_memories(instances * 2);
        pool.total_tables(instances * 4);
        pool.total_stacks(instances);
        // What one module may hold, spelled out because `add` refuses what
        // does not fit (see `complexity`): wasmtime's defaults.
        pool.max_tables_per_module(super::complexity::MAX_TABLES_PER_MODULE);
        pool.max_memories_per_module(super::complexity::MAX_MEMORIES_PER_MODULE);
        pool.table_elements(crate::capabilities::limits::MAX_TABLE_ELEMENTS);
        // Reusing a slot must reset it to the module's initial image. Giving
        // pages back to the kernel (madvise) costs a page fault on every
        // touch in the next call plus a TLB shootdown; rewriting them in
        // place is several times cheaper. With Linux's PAGEMAP_SCAN (6.7+)
        // wasmtime finds exactly the pages a call dirtied and rewrites up to
        // `MEMORY_KEEP_RESIDENT` bytes of them; without it, it would have to
        // rewrite the whole low region blindly, which costs more than it
        // saves, so memories are then released to the kernel as before.
        if PoolingAllocationConfig::is_pagemap_scan_available() {
            pool.pagemap_scan(Enabled::Yes);
            pool.linear_memory_keep_resident(MEMORY_KEEP_RESIDENT);
        } else {
            pool.linear_memory_keep_resident(0);
        }
        // Tables are small: rewriting them is always cheaper than a fault.
        pool.table_keep_resident(TABLE_KEEP_RESIDENT);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

/// Builds the node's engine for components of `mode`, for `capacity`,
/// falling back to on-demand allocation where the machine refuses the
/// pool. Returns whether pooling is in use.
pub fn build_engine(capacity: Capacity, mode: Mode) -> anyhow::Result<(Engine, bool)> {
    if capacity == Capacity::OneShot {
        return Ok((on_demand_engine(mode)?, false));
    }
    match Engine::new(&engine_config(capacity, mode)) {
        Ok(engine) => Ok((engine, true)),
        Err(error) => {
            tracing::warn!(
                "pooling allocator unavailable ({error:#}); falling back to on-demand allocation"
            );
            Ok((on_demand_engine(mode)?, false))
        }
    }
}

/// The fingerprint of this build's engine for `mode`, without building a
/// pool: what names compiled artifacts on disk.
pub fn engine_fingerprint(mode: Mode) -> anyhow::Result<String> {
    Ok(fingerprint(&on_demand_engine(mode)?))
}

/// An engine for `mode` that allocates instances on demand.
pub(super) fn on_demand_engine(mode: Mode) -> anyhow::Result<Engine> {
    Engine::new(&engine_config(Capacity::OneShot, mode))
        .map_err(|e| anyhow::anyhow!("cannot create the WebAssembly engine: {e:#}"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_and_on_demand_engines_share_compiled_code() {
        for mode in Mode::ALL {
            let pooled = Engine::new(&engine_config(Capacity::SERVER, mode)).unwrap();
            assert_eq!(fingerprint(&pooled), engine_fingerprint(mode).unwrap());
        }
    }

    #[test]
    fn the_two_modes_compile_code_the_other_cannot_load() {
        assert_ne!(
            engine_fingerprint(Mode::Synchronous).unwrap(),
            engine_fingerprint(Mode::Concurrent).unwrap()
        );
    }
}
