//! A model's gate: how many requests it runs at once, how many may wait,
//! and who goes next when a slot frees — each caller in turn, so that one
//! caller's many requests (a goal's steps, a client's burst) do not keep
//! another caller's one request waiting behind them all.
//!
//! ```text
//!   waiting, by caller:  goal-1: r1 r2 r3    chat-7: r1    agent-x: r1 r2
//!   a slot frees ──▶ goal-1 r1, then chat-7 r1, then agent-x r1, then goal-1 r2 …
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use tokio::sync::oneshot;

/// Why a request got no slot.
#[derive(Debug, Clone, PartialEq)]
pub enum Refused {
    /// As many requests wait as may.
    Full,
    /// The request's deadline passed while it waited.
    Deadline,
}

/// The gate of one model.
pub struct FairGate {
    state: Arc<Mutex<State>>,
    running_max: u32,
    queue: u32,
}

#[derive(Default)]
struct State {
    running: u32,
    /// Each caller's waiting requests, oldest first.
    waiting: HashMap<String, VecDeque<oneshot::Sender<Slot>>>,
    /// Callers with waiting requests, in the order their turns come.
    turns: VecDeque<String>,
}

impl State {
    /// Requests waiting whose callers still wait.
    fn waiting(&mut self) -> u32 {
        let mut count = 0;
        for queue in self.waiting.values_mut() {
            queue.retain(|sender| !sender.is_closed());
            count += queue.len() as u32;
        }
        count
    }
}

/// A running request's slot; the next caller's turn comes when it drops.
pub struct Slot {
    state: Arc<Mutex<State>>,
    /// Handed on (to a waiter) rather than freed.
    handed: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.handed {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        // The caller whose turn it is, skipping requests that gave up.
        while let Some(caller) = state.turns.pop_front() {
            let Some(queue) = state.waiting.get_mut(&caller) else {
                continue;
            };
            let next = queue.pop_front();
            if queue.is_empty() {
                state.waiting.remove(&caller);
            } else {
                state.turns.push_back(caller.clone());
            }
            let Some(sender) = next else {
                continue;
            };
            let slot = Slot {
                state: self.state.clone(),
                handed: false,
            };
            match sender.send(slot) {
                Ok(()) => return,
                // Gave up meanwhile: the slot it was sent comes back here
                // as a drop; mark it so it frees nothing.
                Err(mut slot) => slot.handed = true,
            }
        }
        state.running -= 1;
    }
}

impl FairGate {
    pub fn new(running_max: u32, queue: u32) -> FairGate {
        FairGate {
            state: Arc::new(Mutex::new(State::default())),
            running_max: running_max.max(1),
            queue,
        }
    }

    /// A slot for a request of `caller`, once one is free and it is the
    /// caller's turn, waiting no later than `deadline`.
    pub async fn enter(&self, caller: &str, deadline: Instant) -> Result<Slot, Refused> {
        let receiver = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if state.running < self.running_max && state.waiting() == 0 {
                state.running += 1;
                return Ok(Slot {
                    state: self.state.clone(),
                    handed: false,
                });
            }
            if state.waiting() >= self.queue {
                return Err(Refused::Full);
            }
            let (sender, receiver) = oneshot::channel();
            let queue = state.waiting.entry(caller.to_owned()).or_default();
            queue.push_back(sender);
            if queue.len() == 1 && !state.turns.iter().any(|c| c == caller) {
                state.turns.push_back(caller.to_owned());
            }
            receiver
        };
        match tokio::time::timeout_at(deadline.into(), receiver).await {
            Ok(Ok(slot)) => Ok(slot),
            // The gate went away, or the deadline passed: the sender left
            // in the queue is closed now and is skipped.
            Ok(Err(_)) | Err(_) => Err(Refused::Deadline),
        }
    }

    /// Requests running now.
    #[cfg(test)]
    pub fn running(&self) -> u32 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .running
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    #[tokio::test]
    async fn one_callers_many_requests_do_not_keep_anothers_waiting() {
        let gate = Arc::new(FairGate::new(1, 64));
        let order = Arc::new(Mutex::new(Vec::new()));
        let first = gate.enter("busy", later()).await.unwrap();
        let mut tasks = Vec::new();
        // Ten requests of one caller queue up, then one of another.
        for i in 0..10 {
            let (gate, order) = (gate.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _slot = gate.enter("busy", later()).await.unwrap();
                order.lock().unwrap().push(format!("busy {i}"));
            }));
            tokio::task::yield_now().await;
        }
        let (g, o) = (gate.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let _slot = g.enter("quiet", later()).await.unwrap();
            o.lock().unwrap().push("quiet".to_owned());
        }));
        tokio::task::yield_now().await;
        drop(first);
        for task in tasks {
            task.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        assert_eq!(order[0], "busy 0");
        assert_eq!(order[1], "quiet", "{order:?}");
        assert_eq!(order.len(), 11);
        assert_eq!(gate.running(), 0);
    }

    #[tokio::test]
    async fn the_queue_is_bounded_and_a_waiter_that_gives_up_frees_its_place() {
        let gate = FairGate::new(1, 1);
        let slot = gate.enter("a", later()).await.unwrap();
        let soon = Instant::now() + Duration::from_millis(20);
        assert_eq!(gate.enter("b", soon).await.err(), Some(Refused::Deadline));
        // The one who gave up holds no place: another may wait, and no
        // more than one.
        let waiting = {
            let gate = &gate;
            async move { gate.enter("c", later()).await }
        };
        tokio::pin!(waiting);
        assert!(
            tokio::time::timeout(Duration::from_millis(20), &mut waiting)
                .await
                .is_err()
        );
        assert_eq!(gate.enter("d", later()).await.err(), Some(Refused::Full));
        drop(slot);
        let next = waiting.await.unwrap();
        assert_eq!(gate.running(), 1);
        drop(next);
        assert_eq!(gate.running(), 0);
    }
}
