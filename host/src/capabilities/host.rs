//! The `host` import: logging and progress reports.

use super::guest_log::{GuestLog, Level};
use crate::runtime::CallState;
use crate::runtime::bindings::agentsite::agent::host::{self, LogLevel};
use std::sync::Arc;
use wasmtime::component::{HasSelf, Linker};

/// A progress report from a running call.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Receives the progress reports of a call (for example to forward them as
/// MCP progress notifications).
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// Progress reports kept per call; an agent reporting in a tight loop is
/// throttled rather than flooding its caller.
const MAX_PROGRESS_REPORTS: u32 = 10_000;

/// Per-call state of the `host` import.
pub struct HostState {
    pub(crate) log: GuestLog,
    progress: Option<ProgressSink>,
    reports: u32,
}

impl HostState {
    pub(crate) fn new(log: GuestLog, progress: Option<ProgressSink>) -> Self {
        HostState {
            log,
            progress,
            reports: 0,
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
        self.log.message(level, &message);
        Ok(())
    }

    fn progress(
        &mut self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> wasmtime::Result<()> {
        self.reports += 1;
        if let Some(sink) = &self.progress
            && self.reports <= MAX_PROGRESS_REPORTS
            && progress.is_finite()
        {
            sink(Progress {
                progress,
                total: total.filter(|t| t.is_finite()),
                message,
            });
        }
        Ok(())
    }
}

pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    host::add_to_linker::<CallState, HasSelf<HostState>>(linker, |state| &mut state.host)
}
