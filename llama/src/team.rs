//! The threads a forward pass shares its products among: one per core, the
//! caller included, that keep spinning between products instead of going
//! to sleep.
//!
//! A decode step is a few hundred products of some tens of microseconds
//! each, with a little work on the caller's thread between them. Threads
//! that sleep in those gaps (as a rayon pool's do after a few dozen
//! yields) are woken for every product; on a virtual machine a sleeping
//! core is handed to another tenant and comes back late (measured on a
//! 2-core VM: decode at 0.45× llama.cpp, with 30% of the time stolen,
//! against 2% while llama.cpp's spinning threads ran). So, as llama.cpp's
//! own thread pool does, the workers spin for a while after each piece of
//! work ([`SPIN`]) and sleep only when the model is idle.
//!
//! One job runs at a time: requests that run at once take turns product by
//! product, in order, so they share the cores instead of oversubscribing
//! them, and neither waits on the other's whole answer.

use parking_lot::FairMutex;
use std::cell::UnsafeCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How long a worker waits for the next job, spinning, before it sleeps:
/// longer than the gaps between products of a step and between steps of a
/// generation, short enough that an idle model costs nothing.
const SPIN: Duration = Duration::from_millis(2);

/// The most pieces one job's ticket counts; a bigger job runs as several.
const MAX_PIECES: usize = 0xffff;

/// The team every forward pass uses.
pub fn team() -> &'static Team {
    static TEAM: OnceLock<Team> = OnceLock::new();
    TEAM.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Team::new(cores)
    })
}

/// A job: a function of a piece's number, borrowed from the caller's stack.
type Job = *const (dyn Fn(usize) + Sync);

pub struct Team {
    shared: Arc<Shared>,
    /// Held by the caller for a whole job, and handed on in the order
    /// callers asked: two requests at once alternate product by product,
    /// and neither starves the other.
    turn: FairMutex<()>,
    /// The workers, to wake when they sleep.
    workers: Vec<Thread>,
}

struct Shared {
    /// The job's generation (the high 32 bits), its piece count (the next
    /// 16) and its next unclaimed piece (the low 16), in one word: a worker
    /// claims a piece of the job it saw, or none.
    ticket: AtomicU64,
    /// Pieces run to the end (or to a panic).
    finished: AtomicUsize,
    panicked: AtomicBool,
    /// Workers that are asleep, or about to be.
    sleeping: AtomicUsize,
    job: JobSlot,
}

/// The current job's function, written by the caller only while no worker
/// can hold a claimed piece (between jobs, under `turn`).
struct JobSlot(UnsafeCell<Option<Job>>);

// SAFETY: the slot is written only between jobs (see `Team::run`), and read
// only by a worker that holds a claimed piece of the current job, which the
// caller waits for before it returns and the function is dropped.
unsafe impl Sync for JobSlot {}
unsafe impl Send for JobSlot {}

impl Team {
    /// A team for `cores` cores: the caller and `cores - 1` workers.
    pub fn new(cores: usize) -> Self {
        let shared = Arc::new(Shared {
            ticket: AtomicU64::new(0),
            finished: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            sleeping: AtomicUsize::new(0),
            job: JobSlot(UnsafeCell::new(None)),
        });
        let workers = (1..cores.max(1))
            .map(|n| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("agentsite-model-{n}"))
                    .spawn(move || work(&shared))
                    .expect("a model thread starts")
                    .thread()
                    .clone()
            })
            .collect();
        Team {
            shared,
            turn: FairMutex::new(()),
            workers,
        }
    }

    /// The threads a job is shared among, the caller's included.
    pub fn size(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `piece(0)` to `piece(pieces - 1)`, shared among the team and
    /// the calling thread, and returns when all have run. A piece must not
    /// start a job of its own (the team runs one job at a time).
    pub fn run(&self, pieces: usize, piece: &(dyn Fn(usize) + Sync)) {
        if pieces == 0 {
            return;
        }
        if self.workers.is_empty() || pieces == 1 {
            (0..pieces).for_each(piece);
            return;
        }
        if pieces > MAX_PIECES {
            for first in (0..pieces).step_by(MAX_PIECES) {
                let count = (pieces - first).min(MAX_PIECES);
                self.run(count, &|n| piece(first + n));
            }
            return;
        }
        let _turn = self.turn.lock();
        let shared = &*self.shared;
        // SAFETY: no worker holds a claimed piece between jobs, so none
        // reads the slot; the function outlives the job (we wait below).
        unsafe {
            let job: Job = std::mem::transmute::<&(dyn Fn(usize) + Sync), Job>(piece);
            *shared.job.0.get() = Some(job);
        }
        shared.finished.store(0, Ordering::Relaxed);
        shared.panicked.store(false, Ordering::Relaxed);
        // 32 bits of generation, wrapping (after days of jobs): a worker
        // only compares it with the one it saw last.
        let generation = ((shared.ticket.load(Ordering::Relaxed) >> 32) + 1) & 0xffff_ffff;
        // Publishes the slot and counts above with the new generation;
        // sequentially consistent with the check of `sleeping` below and a
        // worker's own pair (it counts itself asleep, then looks).
        shared
            .ticket
            .store(generation << 32 | (pieces as u64) << 16, Ordering::SeqCst);
        if shared.sleeping.load(Ordering::SeqCst) > 0 {
            self.workers.iter().for_each(Thread::unpark);
        }
        shared.run_pieces(generation);
        let mut spins = 0u32;
        while shared.finished.load(Ordering::Acquire) < pieces {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        // SAFETY: every piece has finished; no worker can claim another.
        unsafe { *shared.job.0.get() = None };
        if shared.panicked.load(Ordering::Relaxed) {
            panic!("a piece of a model's product panicked on a model thread");
        }
    }

    /// Calls `each(n, chunk)` for the `n`th chunk of `chunk_len` elements of
    /// `data` (the last may be shorter), shared out as [`Team::run`] does.
    pub fn for_each_chunk<T: Send>(
        &self,
        data: &mut [T],
        chunk_len: usize,
        each: impl Fn(usize, &mut [T]) + Sync,
    ) {
        assert!(chunk_len > 0, "chunks of no elements");
        let (start, len) = (Chunks(data.as_mut_ptr()), data.len());
        let start = &start;
        self.run(len.div_ceil(chunk_len), &|n| {
            let first = n * chunk_len;
            let count = (len - first).min(chunk_len);
            // SAFETY: chunk `n` is the elements from `first`, inside `data`
            // and apart from every other chunk; each runs once, and `data`
            // stays borrowed until all have run.
            let chunk = unsafe { std::slice::from_raw_parts_mut(start.0.add(first), count) };
            each(n, chunk);
        });
    }
}

/// An output the team's pieces write at once, each piece its own parts of
/// it, where a piece's parts are not one run of it (a product's rows of
/// every token, one attention block's heads).
pub struct Disjoint<'a> {
    at: *mut f32,
    len: usize,
    _out: std::marker::PhantomData<&'a mut [f32]>,
}

// SAFETY: the pieces write apart (see `slice`).
unsafe impl Sync for Disjoint<'_> {}

impl<'a> Disjoint<'a> {
    pub fn of(out: &'a mut [f32]) -> Self {
        Disjoint {
            at: out.as_mut_ptr(),
            len: out.len(),
            _out: std::marker::PhantomData,
        }
    }

    /// The `len` values from `start`.
    ///
    /// # Safety
    /// While the slice is in use, no other slice of those values is, on
    /// this thread or another.
    #[allow(clippy::mut_from_ref)] // Each slice is a piece's own part.
    pub unsafe fn slice(&self, start: usize, len: usize) -> &mut [f32] {
        assert!(start + len <= self.len, "a part outside the output");
        // SAFETY: within the output (checked), and this use's alone.
        unsafe { std::slice::from_raw_parts_mut(self.at.add(start), len) }
    }
}

/// The start of a slice whose disjoint chunks go to different threads.
struct Chunks<T>(*mut T);

// SAFETY: each thread gets chunks no other thread gets (see
// `for_each_chunk`), and `T: Send` moves elements' access across threads.
unsafe impl<T: Send> Sync for Chunks<T> {}

impl Shared {
    /// Claims and runs pieces of job `generation` until none is left.
    fn run_pieces(&self, generation: u64) {
        let mut ticket = self.ticket.load(Ordering::Acquire);
        loop {
            let (pieces, next) = (ticket >> 16 & 0xffff, ticket & 0xffff);
            if ticket >> 32 != generation || next >= pieces {
                return;
            }
            match self.ticket.compare_exchange_weak(
                ticket,
                ticket + 1,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // SAFETY: a claimed piece of this generation: the slot
                    // holds this job's function until it finishes.
                    let job = unsafe { (*self.job.0.get()).expect("a job with pieces") };
                    let ran = catch_unwind(AssertUnwindSafe(|| unsafe { (*job)(next as usize) }));
                    if ran.is_err() {
                        self.panicked.store(true, Ordering::Relaxed);
                    }
                    self.finished.fetch_add(1, Ordering::Release);
                    ticket = self.ticket.load(Ordering::Acquire);
                }
                Err(now) => ticket = now,
            }
        }
    }
}

/// A worker: waits for a job with pieces left, spinning for [`SPIN`] and
/// then asleep, and helps run it.
fn work(shared: &Shared) {
    let mut seen = 0u64;
    loop {
        let mut waited_since: Option<Instant> = None;
        let mut spins = 0u32;
        let generation = loop {
            let ticket = shared.ticket.load(Ordering::Acquire);
            let generation = ticket >> 32;
            if generation != seen {
                break generation;
            }
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(256) {
                std::hint::spin_loop();
                continue;
            }
            let since = *waited_since.get_or_insert_with(Instant::now);
            if since.elapsed() < SPIN {
                continue;
            }
            // Asleep until a job is published: say so first, then look
            // once more, so that a job published in between is not missed.
            shared.sleeping.fetch_add(1, Ordering::SeqCst);
            if shared.ticket.load(Ordering::SeqCst) >> 32 == seen {
                std::thread::park();
            }
            shared.sleeping.fetch_sub(1, Ordering::SeqCst);
            waited_since = None;
        };
        seen = generation;
        shared.run_pieces(generation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn every_piece_runs_once_across_many_jobs() {
        let team = Team::new(3);
        for pieces in [0, 1, 2, 7, 64, 1000] {
            let counts: Vec<AtomicU32> = (0..pieces).map(|_| AtomicU32::new(0)).collect();
            team.run(pieces, &|n| {
                counts[n].fetch_add(1, Ordering::Relaxed);
            });
            assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1));
        }
    }

    #[test]
    fn each_chunk_is_handed_out_once_with_its_number() {
        let team = Team::new(2);
        let mut data = vec![0usize; 1003];
        team.for_each_chunk(&mut data, 10, |n, chunk| {
            assert!(chunk.len() == 10 || (n == 100 && chunk.len() == 3));
            chunk.iter_mut().for_each(|x| *x += n + 1);
        });
        assert!(data.iter().enumerate().all(|(i, &x)| x == i / 10 + 1));
    }

    #[test]
    fn jobs_from_many_threads_take_turns() {
        let team = Arc::new(Team::new(2));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let team = Arc::clone(&team);
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let total = AtomicUsize::new(0);
                        team.run(16, &|n| {
                            total.fetch_add(n, Ordering::Relaxed);
                        });
                        assert_eq!(total.load(Ordering::Relaxed), 120);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
    }

    #[test]
    fn workers_that_slept_wake_for_the_next_job() {
        let team = Team::new(2);
        team.run(4, &|_| {});
        // Past the spin: the worker is asleep (or about to be).
        std::thread::sleep(SPIN * 5);
        let worker_ran = AtomicBool::new(false);
        let caller = std::thread::current().id();
        team.run(64, &|_| {
            if std::thread::current().id() != caller {
                worker_ran.store(true, Ordering::Relaxed);
                return;
            }
            // The caller's pieces wait for the worker to take one.
            let deadline = Instant::now() + Duration::from_secs(60);
            while !worker_ran.load(Ordering::Relaxed) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        assert!(worker_ran.load(Ordering::Relaxed), "the worker never woke");
    }

    #[test]
    fn the_generation_wraps_after_its_last_value() {
        let team = Team::new(2);
        team.shared
            .ticket
            .store(0xffff_ffff << 32, Ordering::SeqCst);
        for _ in 0..3 {
            let ran = AtomicUsize::new(0);
            team.run(32, &|_| {
                ran.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(ran.load(Ordering::Relaxed), 32);
        }
        assert_eq!(team.shared.ticket.load(Ordering::SeqCst) >> 32, 2);
    }

    #[test]
    fn a_job_of_more_pieces_than_a_ticket_counts_runs_whole() {
        let team = Team::new(2);
        let pieces = MAX_PIECES * 2 + 3;
        let ran = AtomicUsize::new(0);
        let last = AtomicUsize::new(0);
        team.run(pieces, &|n| {
            ran.fetch_add(1, Ordering::Relaxed);
            last.fetch_max(n, Ordering::Relaxed);
        });
        assert_eq!(ran.load(Ordering::Relaxed), pieces);
        assert_eq!(last.load(Ordering::Relaxed), pieces - 1);
    }

    #[test]
    #[should_panic(expected = "panicked on a model thread")]
    fn a_panicking_piece_fails_the_job_and_not_the_team() {
        let team = Team::new(2);
        team.run(8, &|n| assert!(n != 5, "piece 5"));
    }
}
