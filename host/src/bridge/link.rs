//! One attached server as the node holds it: connected on the first call,
//! watched while it runs, and started again with backoff when it stops
//! (a crash, a broken pipe, an unreachable URL), while calls wait for it
//! no longer than their deadline.

use super::{Attachment, Client, Connected, Session, ToolsChanged, connect_with};
use crate::runtime::{CallError, CallSlots};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// The first wait before a restart; each failure in a row doubles it.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The longest wait between restarts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A session that lasted this long counts as healthy: the next failure
/// starts the backoff over.
const HEALTHY: Duration = Duration::from_secs(30);
/// How long starting may take: spawning and the MCP handshake, or the
/// first exchange with a URL.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a link is.
enum Phase {
    /// Not started yet.
    Idle,
    /// Being started; calls wait for the outcome.
    Starting,
    Up(Arc<Session>),
    /// Stopped for `reason`; the next start is at `retry_at`.
    Down {
        reason: String,
        retry_at: Instant,
    },
    /// Detached: nothing starts it again.
    Closed,
}

/// The server attached as one agent.
pub struct Link {
    name: String,
    attachment: Attachment,
    /// Bytes one message from the server may take.
    max_message: usize,
    /// What runs when the server says its tools changed.
    tools_changed: ToolsChanged,
    phase: watch::Sender<Phase>,
    /// Failures in a row, for the backoff.
    failures: Mutex<u32>,
    slots: CallSlots,
}

impl Link {
    pub fn new(
        name: String,
        attachment: Attachment,
        max_message: usize,
        tools_changed: ToolsChanged,
    ) -> Arc<Link> {
        Arc::new(Link {
            name,
            attachment,
            max_message,
            tools_changed,
            phase: watch::Sender::new(Phase::Idle),
            failures: Mutex::new(0),
            // Sized by the first call's limits.
            slots: CallSlots::new(0),
        })
    }

    pub fn attachment(&self) -> &Attachment {
        &self.attachment
    }

    /// The agent's call slots.
    pub fn slots(&self) -> &CallSlots {
        &self.slots
    }

    /// The running session, started if it is not, waited for until
    /// `deadline`. A server that is down and will not be started again
    /// before then, or that failed to start while this call waited, is an
    /// error at once, saying why it is down.
    pub async fn session(self: &Arc<Self>, deadline: Instant) -> Result<Arc<Session>, CallError> {
        let mut phase = self.phase.subscribe();
        let mut saw_a_start = false;
        loop {
            let start = {
                let now = Instant::now();
                match &*phase.borrow_and_update() {
                    Phase::Up(session) => return Ok(session.clone()),
                    Phase::Closed => {
                        return Err(CallError::Unavailable(format!(
                            "{} has been detached",
                            self.name
                        )));
                    }
                    Phase::Idle => true,
                    Phase::Down { reason, retry_at } if saw_a_start || *retry_at > deadline => {
                        return Err(CallError::Unavailable(format!(
                            "{reason}; it is started again in {}",
                            seconds(*retry_at - now)
                        )));
                    }
                    Phase::Down { retry_at, .. } => *retry_at <= now,
                    Phase::Starting => {
                        saw_a_start = true;
                        false
                    }
                }
            };
            if start {
                self.start();
                saw_a_start = true;
            }
            if tokio::time::timeout_at(deadline, phase.changed())
                .await
                .is_err()
            {
                let waiting_for = match &*phase.borrow() {
                    Phase::Down { reason, .. } => format!("{reason}; it is being started again"),
                    _ => format!("{} is still starting", self.name),
                };
                return Err(CallError::Unavailable(format!(
                    "{waiting_for}, past the call's deadline"
                )));
            }
        }
    }

    /// Starts the server unless another call or the restart timer already
    /// does. The start runs on its own task: a call that gives up waiting
    /// does not cancel it.
    fn start(self: &Arc<Self>) {
        let now = Instant::now();
        let claimed = self.phase.send_if_modified(|phase| match phase {
            Phase::Idle => {
                *phase = Phase::Starting;
                true
            }
            Phase::Down { retry_at, .. } if *retry_at <= now => {
                *phase = Phase::Starting;
                true
            }
            _ => false,
        });
        if !claimed {
            return;
        }
        let link = self.clone();
        tokio::spawn(async move {
            let outcome = tokio::time::timeout(
                START_TIMEOUT,
                connect_with(
                    &link.name,
                    &link.attachment,
                    link.max_message,
                    Client {
                        tools_changed: Some(link.tools_changed.clone()),
                    },
                ),
            )
            .await;
            match outcome {
                Ok(Ok(connected)) => link.up(connected),
                Ok(Err(reason)) => link.down(reason, starting),
                Err(_) => link.down(
                    format!(
                        "{} did not finish starting within {}",
                        link.name,
                        seconds(START_TIMEOUT)
                    ),
                    starting,
                ),
            }
        });
    }

    fn up(self: &Arc<Self>, connected: Connected) {
        let Connected { session, ended } = connected;
        let session = Arc::new(session);
        let installed = self.phase.send_if_modified(|phase| match phase {
            Phase::Starting => {
                *phase = Phase::Up(session.clone());
                true
            }
            // Detached while it started: dropping the session stops it.
            _ => false,
        });
        if !installed {
            return;
        }
        tracing::info!(agent = %self.name, "attached server is running");
        let link = Arc::downgrade(self);
        let started = Instant::now();
        let session = Arc::downgrade(&session);
        tokio::spawn(async move {
            let reason = ended.await;
            let Some(link) = link.upgrade() else { return };
            if started.elapsed() >= HEALTHY {
                *link.failures.lock().unwrap_or_else(PoisonError::into_inner) = 0;
            }
            if let Some(session) = session.upgrade() {
                link.failed(&session, reason);
            }
        });
    }

    /// The session `session` ended, or a call found its connection broken,
    /// for `reason`: the link goes down (if that session is still the
    /// current one) and a restart is scheduled.
    pub fn failed(self: &Arc<Self>, session: &Arc<Session>, reason: String) {
        let _ = session.ended.set(reason.clone());
        self.down(
            reason,
            |phase| matches!(phase, Phase::Up(up) if Arc::ptr_eq(up, session)),
        );
    }

    /// Marks the link down for `reason` (when its phase is one `from`
    /// accepts) and starts it again after the backoff.
    fn down(self: &Arc<Self>, reason: String, from: impl Fn(&Phase) -> bool) {
        let backoff = {
            let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
            *failures = failures.saturating_add(1);
            FIRST_BACKOFF
                .saturating_mul(1 << (*failures - 1).min(16))
                .min(MAX_BACKOFF)
        };
        let retry_at = Instant::now() + backoff;
        tracing::warn!(agent = %self.name, "{reason}; starting it again in {}", seconds(backoff));
        let marked = self.phase.send_if_modified(|phase| {
            if !from(phase) {
                return false;
            }
            *phase = Phase::Down {
                reason: reason.clone(),
                retry_at,
            };
            true
        });
        if !marked {
            return;
        }
        let link = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep_until(retry_at).await;
            if let Some(link) = link.upgrade() {
                link.start();
            }
        });
    }

    /// The connection of `session` broke during a call: why, once the
    /// link has noticed (a moment later, as the server's exit is seen).
    pub async fn broken(&self, session: &Arc<Session>) -> String {
        let mut phase = self.phase.subscribe();
        let noticed = phase.wait_for(|_| session.ended.get().is_some());
        let _ = tokio::time::timeout(Duration::from_secs(2), noticed).await;
        match session.ended.get() {
            Some(reason) => reason.clone(),
            None => format!("the connection to {} broke during the call", self.name),
        }
    }

    /// Detaches: the server is stopped once no call uses it, and never
    /// started again.
    pub fn close(&self) {
        self.phase.send_replace(Phase::Closed);
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.close();
    }
}

fn starting(phase: &Phase) -> bool {
    matches!(phase, Phase::Starting)
}

fn seconds(duration: Duration) -> String {
    format!("{:.1} s", duration.as_secs_f64())
}
