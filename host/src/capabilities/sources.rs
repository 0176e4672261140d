//! What a call read that the same agent, called with the same arguments on
//! another node, would not read the same: the clock, randomness, the
//! network, other agents, models, stored data, granted files and
//! variables, the person at the client.
//!
//! Everything else a call computes is a function of the component's bytes
//! and its arguments: the engine canonicalizes NaNs and runs relaxed SIMD
//! in its deterministic mode (`runtime::engine`), and the one seed a
//! guest's runtime takes without asking for randomness (WASI's
//! `insecure-seed`, which Rust's `HashMap` reads for its keys) is derived
//! from the agent's id. A call that used none of these sources is
//! *replayable*: any node that runs it again gets the same bytes, which is
//! what lets a stranger's answer be checked (see `crate::receipt`).
//!
//! Each capability records its source when the guest reaches it, granted
//! or not (an import refused here might be granted on the node that runs
//! the check), so a call is never called replayable when it touched one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

bitflags::bitflags! {
    /// Sources of a call's result besides its component and arguments.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct Used: u16 {
        /// Wall-clock or monotonic time (also sleeping and timeouts).
        const CLOCK = 1 << 0;
        /// Secure or insecure random numbers.
        const RANDOM = 1 << 1;
        /// Outgoing HTTP.
        const HTTP = 1 << 2;
        /// Other agents, through `peers`.
        const PEERS = 1 << 3;
        /// Language models, through `llm`.
        const MODELS = 1 << 4;
        /// The agent's stored data, through `kv`.
        const KV = 1 << 5;
        /// Folders granted to it.
        const FILES = 1 << 6;
        /// Environment variables granted to it.
        const ENVIRONMENT = 1 << 7;
        /// The person at the calling client (elicitation, sampling).
        const PERSON = 1 << 8;
        /// Code outside the sandbox: an attached MCP or A2A agent.
        const OUTSIDE = 1 << 9;
    }
}

/// Each source's name in receipts and on pages.
const NAMES: [(Used, &str); 10] = [
    (Used::CLOCK, "clock"),
    (Used::RANDOM, "random"),
    (Used::HTTP, "http"),
    (Used::PEERS, "peers"),
    (Used::MODELS, "models"),
    (Used::KV, "kv"),
    (Used::FILES, "files"),
    (Used::ENVIRONMENT, "environment"),
    (Used::PERSON, "person"),
    (Used::OUTSIDE, "outside the sandbox"),
];

impl Used {
    /// Whether a call that used these gives the same result on every node.
    pub fn replayable(self) -> bool {
        self.is_empty()
    }

    /// The sources' names, in a fixed order.
    pub fn names(self) -> Vec<&'static str> {
        NAMES
            .iter()
            .filter(|(source, _)| self.contains(*source))
            .map(|(_, name)| *name)
            .collect()
    }

    /// The sources named (by [`Used::names`]); `None` for a name this node
    /// does not know.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<Used> {
        names.into_iter().try_fold(Used::empty(), |used, name| {
            let (source, _) = NAMES.iter().find(|(_, known)| *known == name)?;
            Some(used | *source)
        })
    }
}

/// Where one call's capabilities record the sources its guest reached;
/// shared by the call's state and the WASI context's clocks and random
/// generators, and read by whoever started the call once it has ended.
#[derive(Debug, Clone, Default)]
pub struct Sources(Arc<AtomicU16>);

impl Sources {
    pub(crate) fn record(&self, used: Used) {
        self.0.fetch_or(used.bits(), Ordering::Relaxed);
    }

    /// What the call has used so far.
    pub fn used(&self) -> Used {
        Used::from_bits_truncate(self.0.load(Ordering::Relaxed))
    }
}

/// The seed WASI's `insecure-seed` gives every call of `agent`: the same on
/// every node, so that a guest's hash tables (Rust's `HashMap` seeds its
/// keys from it) order their entries alike wherever it runs. The interface
/// promises no secrecy; a caller who knows the seed can make an agent's
/// hash table slow, which costs the call its own deadline and no more.
pub(crate) fn insecure_seed(agent: &crate::AgentId) -> u128 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new()
        .chain_update(b"agentsite insecure-seed\n")
        .chain_update(agent.to_string())
        .finalize();
    u128::from_le_bytes(digest[..16].try_into().expect("16 of 32 bytes"))
}

/// A clock or random generator that records its use before answering.
pub(crate) struct Watched<T> {
    inner: T,
    sources: Sources,
    used: Used,
}

impl<T> Watched<T> {
    pub(crate) fn new(inner: T, sources: &Sources, used: Used) -> Self {
        Watched {
            inner,
            sources: sources.clone(),
            used,
        }
    }
}

impl<T: wasmtime_wasi::HostWallClock> wasmtime_wasi::HostWallClock for Watched<T> {
    fn resolution(&self) -> std::time::Duration {
        self.inner.resolution()
    }
    fn now(&self) -> std::time::Duration {
        self.sources.record(self.used);
        self.inner.now()
    }
}

impl<T: wasmtime_wasi::HostMonotonicClock> wasmtime_wasi::HostMonotonicClock for Watched<T> {
    fn resolution(&self) -> u64 {
        self.inner.resolution()
    }
    fn now(&self) -> u64 {
        self.sources.record(self.used);
        self.inner.now()
    }
}

impl rand_core::TryRng for Watched<Box<dyn wasmtime_wasi::Rng + Send>> {
    type Error = std::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        self.sources.record(self.used);
        Ok(self.inner.next_u32())
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        self.sources.record(self.used);
        Ok(self.inner.next_u64())
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), Self::Error> {
        self.sources.record(self.used);
        self.inner.fill_bytes(dest);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_read_back_by_name() {
        let used = Used::CLOCK | Used::KV | Used::OUTSIDE;
        assert_eq!(used.names(), ["clock", "kv", "outside the sandbox"]);
        assert_eq!(Used::from_names(used.names()), Some(used));
        assert_eq!(Used::from_names(["clock", "teleport"]), None);
        assert!(Used::empty().replayable());
        assert!(!used.replayable());
        assert_eq!(NAMES.len(), Used::all().iter().count());
    }

    #[test]
    fn a_recorder_is_shared_by_its_clones() {
        let sources = Sources::default();
        let clock = Watched::new(
            wasmtime_wasi::clocks::WallClock::new(),
            &sources,
            Used::CLOCK,
        );
        assert!(sources.used().replayable());
        let _ = wasmtime_wasi::HostWallClock::resolution(&clock);
        assert!(
            sources.used().replayable(),
            "asking the resolution is not reading the time"
        );
        let _ = wasmtime_wasi::HostWallClock::now(&clock);
        assert_eq!(sources.used(), Used::CLOCK);
    }

    #[test]
    fn a_random_generator_records_its_use() {
        use rand_core::Rng as _;
        let sources = Sources::default();
        let mut random = Watched::new(wasmtime_wasi::thread_rng(), &sources, Used::RANDOM);
        assert!(sources.used().replayable());
        let mut bytes = [0u8; 16];
        random.fill_bytes(&mut bytes);
        assert_eq!(sources.used(), Used::RANDOM);
    }

    #[test]
    fn the_insecure_seed_is_the_agents_own() {
        let (a, b) = (crate::AgentId::of(b"a"), crate::AgentId::of(b"b"));
        assert_eq!(insecure_seed(&a), insecure_seed(&a));
        assert_ne!(insecure_seed(&a), insecure_seed(&b));
    }
}
