//! Chunks this node served lately, kept in memory after they were read from
//! the store and checked against the signed manifest.
//!
//! A provider never passes on bytes that went bad on its own disk, so each
//! chunk read from the store is hashed before it is sent. Peers fetching a
//! popular agent ask for the same chunks over and over: kept here, each
//! chunk is read and hashed once while it is in demand rather than once per
//! peer, and is answered on the network's event loop without a hand-off to
//! a blocking thread (issue 20's fetch profile: the provider's hashing and
//! reading were half of its CPU per download).
//!
//! The memory is bounded ([`BUDGET`], least recently served out first) and
//! given back when a chunk has not been asked for in [`IDLE`]; the next
//! request reads and checks it from disk again.

use crate::AgentId;
use bytes::Bytes;
use hashlink::LruCache;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The most bytes of chunks kept at once.
pub(super) const BUDGET: usize = 64 << 20;
/// How long a chunk nobody asks for stays.
pub(super) const IDLE: Duration = Duration::from_secs(60);

/// Recently served chunks, by agent and index.
pub(super) struct ServedChunks {
    budget: usize,
    idle: Duration,
    inner: Mutex<Inner>,
}

struct Inner {
    /// Least recently served first.
    chunks: LruCache<(AgentId, u32), Served>,
    bytes: usize,
}

struct Served {
    bytes: Bytes,
    last: Instant,
}

impl Default for ServedChunks {
    fn default() -> Self {
        ServedChunks::new(BUDGET, IDLE)
    }
}

impl ServedChunks {
    pub(super) fn new(budget: usize, idle: Duration) -> Self {
        ServedChunks {
            budget,
            idle,
            inner: Mutex::new(Inner {
                chunks: LruCache::new_unbounded(),
                bytes: 0,
            }),
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Chunk `index` of `id`, if it was served lately.
    pub(super) fn get(&self, id: &AgentId, index: u32) -> Option<Bytes> {
        self.get_at(id, index, Instant::now())
    }

    fn get_at(&self, id: &AgentId, index: u32, now: Instant) -> Option<Bytes> {
        let mut inner = self.inner();
        let served = inner.chunks.get_mut(&(*id, index))?;
        served.last = now;
        Some(served.bytes.clone())
    }

    /// Keeps `bytes`, checked against the manifest, as chunk `index` of
    /// `id`, making room by dropping the chunks served longest ago.
    pub(super) fn insert(&self, id: AgentId, index: u32, bytes: Bytes) {
        self.insert_at(id, index, bytes, Instant::now());
    }

    fn insert_at(&self, id: AgentId, index: u32, bytes: Bytes, now: Instant) {
        if bytes.len() > self.budget {
            return;
        }
        let mut inner = self.inner();
        inner.bytes += bytes.len();
        let served = Served { bytes, last: now };
        if let Some(replaced) = inner.chunks.insert((id, index), served) {
            inner.bytes -= replaced.bytes.len();
        }
        while inner.bytes > self.budget {
            match inner.chunks.remove_lru() {
                Some((_, dropped)) => inner.bytes -= dropped.bytes.len(),
                None => break,
            }
        }
        Self::drop_idle(&mut inner, now, self.idle);
    }

    /// Gives back the memory of chunks nobody asked for in [`IDLE`].
    pub(super) fn sweep(&self) {
        self.sweep_at(Instant::now());
    }

    fn sweep_at(&self, now: Instant) {
        Self::drop_idle(&mut self.inner(), now, self.idle);
    }

    fn drop_idle(inner: &mut Inner, now: Instant, idle: Duration) {
        // Least recently served first: the idle ones are at the front.
        while let Some((_, oldest)) = inner.chunks.iter().next() {
            if now.duration_since(oldest.last) < idle {
                break;
            }
            if let Some((_, dropped)) = inner.chunks.remove_lru() {
                inner.bytes -= dropped.bytes.len();
            }
        }
    }

    /// How many bytes of chunks are kept now.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.inner().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(byte: u8, len: usize) -> Bytes {
        Bytes::from(vec![byte; len])
    }

    #[test]
    fn a_served_chunk_is_kept_and_shared() {
        let served = ServedChunks::new(1000, IDLE);
        let id = AgentId::of(b"agent");
        assert!(served.get(&id, 0).is_none());
        let bytes = chunk(1, 100);
        served.insert(id, 0, bytes.clone());
        let kept = served.get(&id, 0).unwrap();
        assert_eq!(kept, bytes);
        // The same memory, not a copy.
        assert_eq!(kept.as_ptr(), bytes.as_ptr());
        assert!(served.get(&id, 1).is_none());
        assert!(served.get(&AgentId::of(b"other"), 0).is_none());
    }

    #[test]
    fn the_budget_drops_the_chunks_served_longest_ago() {
        let served = ServedChunks::new(300, IDLE);
        let id = AgentId::of(b"agent");
        for index in 0..3 {
            served.insert(id, index, chunk(index as u8, 100));
        }
        // Chunk 0 is asked for again: chunk 1 is now the one served longest ago.
        assert!(served.get(&id, 0).is_some());
        served.insert(id, 3, chunk(3, 100));
        assert_eq!(served.bytes(), 300);
        assert!(served.get(&id, 1).is_none());
        for index in [0, 2, 3] {
            assert!(served.get(&id, index).is_some(), "chunk {index}");
        }
        // A chunk larger than the whole budget is served but not kept.
        served.insert(id, 9, chunk(9, 301));
        assert!(served.get(&id, 9).is_none());
        assert_eq!(served.bytes(), 300);
        // Inserting a chunk again replaces it and counts it once.
        served.insert(id, 0, chunk(7, 50));
        assert_eq!(served.get(&id, 0).unwrap(), chunk(7, 50));
        assert_eq!(served.bytes(), 250);
    }

    #[test]
    fn chunks_nobody_asks_for_are_given_back() {
        let served = ServedChunks::new(1000, IDLE);
        let id = AgentId::of(b"agent");
        let start = Instant::now();
        served.insert_at(id, 0, chunk(0, 100), start);
        served.insert_at(id, 1, chunk(1, 100), start);
        // Chunk 1 is asked for again before it idles out; chunk 0 is not.
        let later = start + IDLE - Duration::from_secs(1);
        assert!(served.get_at(&id, 1, later).is_some());
        served.sweep_at(start + IDLE);
        assert_eq!(served.bytes(), 100);
        assert!(served.get_at(&id, 0, start + IDLE).is_none());
        assert!(served.get_at(&id, 1, start + IDLE).is_some());
        // Every chunk idle: all memory given back, also on the next insert.
        served.insert_at(id, 2, chunk(2, 10), start + 3 * IDLE);
        assert_eq!(served.bytes(), 10);
        served.sweep_at(start + 5 * IDLE);
        assert_eq!(served.bytes(), 0);
    }
}
