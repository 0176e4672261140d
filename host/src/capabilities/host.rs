//! The `host` import: logging, progress reports and resource updates.

use super::caller::{CallerLink, Progress};
use super::guest_log::{GuestLog, Level};
use super::{CallContext, CallPart, CallState};
use crate::AgentId;
use crate::capabilities::bindings::agentsite::agent::host::{self, LogLevel};
use tokio::sync::broadcast;
use wasmtime::component::{HasSelf, Linker};

/// Progress reports kept per call; an agent reporting in a tight loop is
/// throttled rather than flooding its caller. Each also costs its message
/// and framing against the call's log budget.
const MAX_PROGRESS_REPORTS: u32 = 10_000;

/// Longest progress message passed on; a longer one is cut at a character
/// boundary. A progress message is a status line, not a payload.
pub const MAX_PROGRESS_MESSAGE: usize = 1024;

/// Resource updates kept per call, for the same reason.
const MAX_RESOURCE_UPDATES: u32 = 100;

/// An agent said one of its resources changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceUpdate {
    pub agent: AgentId,
    pub uri: String,
}

/// Per-call state of the `host` import.
pub struct HostState {
    pub(crate) log: GuestLog,
    agent: AgentId,
    caller: CallerLink,
    updates: broadcast::Sender<ResourceUpdate>,
    reports: u32,
    announced: u32,
}

impl HostState {
    pub(crate) fn new(
        log: GuestLog,
        agent: AgentId,
        caller: CallerLink,
        updates: broadcast::Sender<ResourceUpdate>,
    ) -> Self {
        HostState {
            log,
            agent,
            caller,
            updates,
            reports: 0,
            announced: 0,
        }
    }
}

impl host::Host for HostState {
    fn log(&mut self, level: LogLevel, message: String) -> wasmtime::Result<()> {
        let level = match level {
            LogLevel::Trace => Level::Trace,
            LogLevel::Debug => Level::Debug,
            LogLevel::Info => Level::Info,
            LogLevel::Warn => Level::Warn,
            LogLevel::Error => Level::Error,
        };
        if self.log.message(level, &message)
            && let Some(caller) = &self.caller.caller
        {
            caller.log(self.log.agent(), level, &message);
        }
        Ok(())
    }

    fn progress(
        &mut self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> wasmtime::Result<()> {
        self.reports += 1;
        let Some(caller) = &self.caller.caller else {
            return Ok(());
        };
        let message = message.map(|m| crate::text::truncated(m, MAX_PROGRESS_MESSAGE));
        let size = message.as_ref().map_or(0, String::len);
        if self.reports <= MAX_PROGRESS_REPORTS && progress.is_finite() && self.log.charge(size) {
            caller.progress(Progress {
                progress,
                total: total.filter(|t| t.is_finite()),
                message,
            });
        }
        Ok(())
    }

    fn resource_updated(&mut self, uri: String) -> wasmtime::Result<()> {
        self.announced += 1;
        if self.announced <= MAX_RESOURCE_UPDATES && crate::agent::resource::check_uri(&uri).is_ok()
        {
            // Nobody listening is fine: no client has subscribed.
            let _ = self.updates.send(ResourceUpdate {
                agent: self.agent,
                uri,
            });
        }
        Ok(())
    }
}

impl CallPart for HostState {
    fn for_call(call: &CallContext<'_>) -> anyhow::Result<HostState> {
        let updates = call.services.updates.clone();
        Ok(HostState::new(
            call.log.clone(),
            call.agent,
            call.caller.clone(),
            updates,
        ))
    }

    fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        host::add_to_linker::<CallState, HasSelf<HostState>>(linker, |state| &mut state.host)
    }
}
