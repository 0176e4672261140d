//! The slots that bound an agent's concurrent calls, for components and
//! attached servers alike.

use super::CallError;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// At most `count` calls of one agent at once. A policy change of the
/// agent's concurrency swaps in a new semaphore; calls holding a slot of
/// the old one finish on it.
pub struct CallSlots(Mutex<(u32, Arc<Semaphore>)>);

impl CallSlots {
    pub fn new(count: u32) -> Self {
        CallSlots(Mutex::new((
            count,
            Arc::new(Semaphore::new(count as usize)),
        )))
    }

    /// One of `count` slots, waited for until `deadline`; past it, the
    /// call is refused as busy.
    pub async fn take(
        &self,
        count: u32,
        deadline: tokio::time::Instant,
    ) -> Result<OwnedSemaphorePermit, CallError> {
        let semaphore = {
            let mut slots = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if slots.0 != count {
                *slots = (count, Arc::new(Semaphore::new(count as usize)));
            }
            slots.1.clone()
        };
        // A free slot is taken at once, without arming a timer.
        if let Ok(permit) = semaphore.clone().try_acquire_owned() {
            return Ok(permit);
        }
        tokio::time::timeout_at(deadline, semaphore.acquire_owned())
            .await
            .map_err(|_| CallError::Busy(count))?
            .map_err(|_| CallError::Host("agent slots closed".into()))
    }

    /// How many calls hold a slot now.
    pub fn taken(&self) -> usize {
        let slots = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (slots.0 as usize).saturating_sub(slots.1.available_permits())
    }
}
