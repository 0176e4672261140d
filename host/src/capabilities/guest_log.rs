//! Where a guest's words go: `host.log` messages and stdout/stderr text become
//! host log events tagged with the agent's name.
//!
//! Each call has a byte budget shared by all three and by progress reports;
//! past it, text is dropped and counted, so that a chatty or hostile agent
//! cannot flood the operator's logs, its MCP client or the host's memory.
//! Every message, line and report costs its text plus [`FRAMING`]: what it
//! costs to send even when empty (a log line's timestamp and fields, a
//! notification's JSON-RPC envelope), so empty messages are not free. The tail of stderr is kept for error reports:
//! when a Rust guest panics it writes the reason there just before trapping.

use std::sync::{Arc, Mutex, PoisonError};

/// Severity of a guest message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// A guest's output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// What each message, line or report costs beyond its text.
pub const FRAMING: usize = 96;

/// Longest line kept while waiting for its newline.
const MAX_LINE: usize = 4096;
/// How much of stderr is kept for error reports.
const STDERR_TAIL: usize = 2048;
/// Lines of stderr an error report quotes when there is no panic reason.
const LAST_WORDS_LINES: usize = 3;
/// Most bytes of stderr an error report quotes.
const LAST_WORDS_BYTES: usize = 400;

/// `lines` trimmed and joined by spaces, empty ones left out.
fn one_line<'a>(lines: impl Iterator<Item = &'a str>) -> String {
    lines
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The log of one call. Cheap to clone; clones share the budget.
#[derive(Clone)]
pub struct GuestLog {
    agent: Arc<str>,
    inner: Arc<Mutex<LogState>>,
}

struct LogState {
    agent: Arc<str>,
    remaining: usize,
    dropped: u64,
    dropped_messages: u64,
    partial: [Vec<u8>; 2],
    stderr_tail: Vec<u8>,
}

impl GuestLog {
    /// A log for a call of `agent` that may keep `budget` bytes.
    pub fn new(agent: Arc<str>, budget: u64) -> Self {
        GuestLog {
            agent: agent.clone(),
            inner: Arc::new(Mutex::new(LogState {
                agent,
                remaining: usize::try_from(budget).unwrap_or(usize::MAX),
                dropped: 0,
                dropped_messages: 0,
                partial: [Vec::new(), Vec::new()],
                stderr_tail: Vec::new(),
            })),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Logs a message the guest sent through `host.log`; false when it was
    /// dropped over the budget.
    pub fn message(&self, level: Level, text: &str) -> bool {
        let mut state = self.state();
        let kept = state.take_budget(text.len());
        if kept {
            emit(&state.agent, level, "log", text);
        }
        kept
    }

    /// Takes `len` bytes of a report that is not logged here (a progress
    /// report) and its framing from the budget; false when it is over.
    pub fn charge(&self, len: usize) -> bool {
        self.state().take_budget(len)
    }

    /// The name of the agent whose call this is.
    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// Takes bytes the guest wrote to stdout or stderr; complete lines are
    /// logged, the rest waits for its newline.
    pub fn write(&self, stream: Stream, bytes: &[u8]) {
        let mut state = self.state();
        if stream == Stream::Stderr {
            // Only the tail of one write can stay: a write of megabytes
            // (one WASI 0.3 stream write is as large as the guest makes
            // it) is never copied whole.
            let tail = &bytes[bytes.len().saturating_sub(STDERR_TAIL)..];
            state.stderr_tail.extend_from_slice(tail);
            let excess = state.stderr_tail.len().saturating_sub(STDERR_TAIL);
            state.stderr_tail.drain(..excess);
        }
        let index = stream as usize;
        let mut rest = bytes;
        while let Some(newline) = rest.iter().position(|&b| b == b'\n') {
            let mut line = std::mem::take(&mut state.partial[index]);
            line.extend_from_slice(&rest[..newline]);
            state.line(stream, &line);
            rest = &rest[newline + 1..];
        }
        let room = MAX_LINE.saturating_sub(state.partial[index].len());
        let kept = rest.len().min(room);
        state.partial[index].extend_from_slice(&rest[..kept]);
        state.dropped += (rest.len() - kept) as u64;
    }

    /// Logs unfinished lines and reports what was dropped. Call once, at the
    /// end of the call.
    pub fn finish(&self) {
        let mut state = self.state();
        for stream in [Stream::Stdout, Stream::Stderr] {
            let line = std::mem::take(&mut state.partial[stream as usize]);
            if !line.is_empty() {
                state.line(stream, &line);
            }
        }
        if state.dropped > 0 || state.dropped_messages > 0 {
            tracing::warn!(
                target: "agentsite::agent",
                agent = %state.agent,
                "dropped {} messages and {} bytes of agent output over the per-call log limit",
                state.dropped_messages,
                state.dropped
            );
        }
    }

    /// What the guest last said on stderr, as one line for an error
    /// report: the reason of a Rust panic (`panicked at src/lib.rs:12:5:
    /// boom`) when it printed one, else its last [`LAST_WORDS_LINES`]
    /// lines (a Python traceback's last is the exception), at most
    /// [`LAST_WORDS_BYTES`]. None when it said nothing there.
    pub fn last_words(&self) -> Option<String> {
        let state = self.state();
        let tail = String::from_utf8_lossy(&state.stderr_tail);
        let words = match tail.rfind("panicked at ") {
            Some(start) => {
                let report = &tail[start..];
                let report = report.split("\nnote:").next().unwrap_or(report);
                one_line(report.lines())
            }
            None => {
                let lines: Vec<&str> = tail.lines().filter(|l| !l.trim().is_empty()).collect();
                one_line(
                    lines[lines.len().saturating_sub(LAST_WORDS_LINES)..]
                        .iter()
                        .copied(),
                )
            }
        };
        (!words.is_empty()).then(|| crate::text::excerpt(&words, LAST_WORDS_BYTES).into_owned())
    }

    /// Bytes of text dropped so far (the node reports them once, when the
    /// call ends).
    #[cfg(test)]
    fn dropped(&self) -> u64 {
        self.state().dropped
    }

    /// Messages, lines and reports dropped so far.
    #[cfg(test)]
    fn dropped_messages(&self) -> u64 {
        self.state().dropped_messages
    }
}

impl LogState {
    /// Takes a message of `len` bytes and its framing from the budget, or
    /// counts it as dropped.
    fn take_budget(&mut self, len: usize) -> bool {
        let cost = len.saturating_add(FRAMING);
        if cost <= self.remaining {
            self.remaining -= cost;
            true
        } else {
            self.remaining = 0;
            self.dropped += len as u64;
            self.dropped_messages += 1;
            false
        }
    }

    fn line(&mut self, stream: Stream, line: &[u8]) {
        if self.take_budget(line.len()) {
            let text = String::from_utf8_lossy(line);
            if text.trim().is_empty() {
                return;
            }
            // What an agent prints is its own account, not the node's
            // warning: it shows with `-v` (info), and a failed call's error
            // carries the tail of stderr as the agent's last words.
            let name = match stream {
                Stream::Stdout => "stdout",
                Stream::Stderr => "stderr",
            };
            emit(&self.agent, Level::Info, name, &text);
        }
    }
}

fn emit(agent: &str, level: Level, source: &str, text: &str) {
    // The binary's log formatter makes control characters visible (see
    // `agentsite::text`), so the text goes as the agent wrote it.
    macro_rules! event {
        ($level:ident) => {
            tracing::$level!(target: "agentsite::agent", agent, source, "{text}")
        };
    }
    match level {
        Level::Trace => event!(trace),
        Level::Debug => event!(debug),
        Level::Info => event!(info),
        Level::Warn => event!(warn),
        Level::Error => event!(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_budget_is_dropped_and_counted() {
        let log = GuestLog::new("flood".into(), 10 * (10 + FRAMING as u64));
        for _ in 0..50 {
            log.write(Stream::Stdout, b"0123456789\n");
        }
        log.finish();
        // Lines are kept without their newline: 10 lines of 10 bytes and
        // their framing fill the budget and the other 40 are dropped.
        assert_eq!(log.dropped(), 40 * 10);
    }

    #[test]
    fn empty_messages_and_lines_are_not_free() {
        let log = GuestLog::new("flood".into(), 64 * 1024);
        let kept = (0..100_000)
            .filter(|_| log.message(Level::Warn, ""))
            .count();
        assert_eq!(kept, 64 * 1024 / FRAMING);
        let log = GuestLog::new("flood".into(), 64 * 1024);
        log.write(Stream::Stderr, &[b'\n'; 100_000]);
        assert_eq!(
            log.dropped_messages(),
            (100_000 - 64 * 1024 / FRAMING) as u64
        );
    }

    #[test]
    fn a_line_without_newline_is_bounded() {
        let log = GuestLog::new("flood".into(), u64::MAX);
        log.write(Stream::Stdout, &vec![b'x'; MAX_LINE * 3]);
        assert_eq!(log.dropped(), (MAX_LINE * 2) as u64);
    }

    #[test]
    fn a_rust_panic_message_is_recovered_from_stderr() {
        let log = GuestLog::new("trap".into(), 1 << 16);
        log.write(
            Stream::Stderr,
            b"\nthread '<unnamed>' panicked at src/lib.rs:12:5:\nboom halfway\nnote: run with `RUST_BACKTRACE=1`\n",
        );
        assert_eq!(
            log.last_words().as_deref(),
            Some("panicked at src/lib.rs:12:5: boom halfway")
        );
    }

    #[test]
    fn without_a_panic_the_last_lines_of_stderr_are_the_last_words() {
        let log = GuestLog::new("trap".into(), 1 << 16);
        assert_eq!(log.last_words(), None);
        log.write(
            Stream::Stderr,
            b"Traceback (most recent call last):\n  File \"app.py\", line 3, in add\n    return a + b\n\nTypeError: unsupported operand\n",
        );
        assert_eq!(
            log.last_words().as_deref(),
            Some("File \"app.py\", line 3, in add return a + b TypeError: unsupported operand")
        );
        log.write(Stream::Stderr, "x".repeat(3000).as_bytes());
        assert!(log.last_words().unwrap().len() < LAST_WORDS_BYTES + 64);
    }
}
