//! Tells the time and waits: a tool that takes as long as it is asked to,
//! for schedules, for timeouts, and for measuring how work spreads over
//! members of a team (the goals benchmark uses it).

use agentsite_sdk::agent;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The longest wait one call may ask for, in milliseconds. The node's
/// deadline bounds every call anyway; this keeps a wait a wait.
const MAX_WAIT_MS: u64 = 10_000;

struct Timer;

/// Tells the time (milliseconds since the Unix epoch) and waits a given time.
#[agent(tags = ["time", "clock", "wait", "timer"])]
impl Timer {
    /// The current time, in milliseconds since 1970-01-01 UTC.
    #[tool(read_only)]
    fn now() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |t| t.as_millis() as u64)
    }

    /// Waits `millis` milliseconds (at most 10000), then says how long it waited.
    #[tool(read_only, idempotent)]
    fn wait(
        /// How long to wait, in milliseconds.
        millis: u64,
    ) -> Result<u64, String> {
        if millis > MAX_WAIT_MS {
            return Err(format!("a wait is at most {MAX_WAIT_MS} ms"));
        }
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(millis));
        Ok(started.elapsed().as_millis() as u64)
    }
}
