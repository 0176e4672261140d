//! An attached server the node runs: a child process in its own process
//! group, MCP over its stdin and stdout, its stderr kept as a short tail
//! for the reason it stopped. It is stopped as the MCP spec says (stdin
//! closed, then SIGTERM, then SIGKILL to its whole group) when detached,
//! and killed with its group when the node drops it.

use super::{Client, Connected, Session};
use rmcp::ServiceExt as _;
use rmcp::transport::async_rw::AsyncRwTransport;
use std::collections::VecDeque;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt as _, ReadBuf};
use tokio::process::{Child, Command};

/// Bytes of the server's stderr kept for the reason it stopped.
const STDERR_TAIL: usize = 2048;
/// How long after its stdout closes a server's exit is waited for, to
/// report its status.
const EXIT_NOTICED: Duration = Duration::from_millis(500);
/// How long a server has to exit after its stdin closes, and again after
/// SIGTERM, before its group is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

pub async fn connect(
    name: &str,
    command: &str,
    args: &[String],
    dir: &Path,
    max_message: usize,
    client: Client,
) -> Result<Connected, String> {
    let mut child = Command::new(command)
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        // Its own group, so that what it starts in turn (an `npx` or `uv
        // run` wrapper's server) is stopped with it.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start {name} ({command}): {e}"))?;
    let group = Group(child.id());
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(format!("cannot start {name}: its stdio is not piped"));
    };
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let mut tail_read = tokio::spawn(keep_tail(name.to_owned(), stderr, tail.clone()));
    let overflow = Arc::new(Mutex::new(None));
    let stdout = Bounded {
        inner: stdout,
        limit: max_message,
        line: 0,
        overflow: overflow.clone(),
    };
    // The guard above reports an oversized message first; the transport's
    // own bound only backs it up.
    let transport = AsyncRwTransport::new_client(stdout, stdin)
        .with_max_line_length(max_message.saturating_add(1));
    let running = match client.serve(transport).await {
        Ok(running) => running,
        Err(e) => {
            let exited = match tokio::time::timeout(EXIT_NOTICED, child.wait()).await {
                Ok(Ok(status)) => format!(" (it exited {})", exit(status)),
                _ => String::new(),
            };
            drop(group);
            last_words_read(&mut tail_read).await;
            return Err(format!(
                "{name} did not complete the MCP handshake{exited}: {}{}",
                crate::text::one_line(&e.to_string(), 300),
                said(&tail)
            ));
        }
    };
    let (session, stop) = Session::new(&running, true);
    let name = name.to_owned();
    let ended = async move {
        // Boxed, so that dropping it drops the service (and its stdin).
        let mut waiting = Box::pin(running.waiting());
        let reason = tokio::select! {
            status = child.wait() => match status {
                Ok(status) => format!("{name} exited {}", exit(status)),
                Err(e) => format!("{name} could not be waited for: {e}"),
            },
            _ = &mut waiting => {
                // A server that exits closes its stdout first: its exit
                // status, a moment later, says more.
                match tokio::time::timeout(EXIT_NOTICED, child.wait()).await {
                    Ok(Ok(status)) => format!("{name} exited {}", exit(status)),
                    _ => format!("{name} closed its connection"),
                }
            }
            _ = stop.cancelled() => {
                // Dropping the service closes the server's stdin: the
                // MCP way of asking a stdio server to exit.
                drop(waiting);
                stop_gracefully(&mut child, &group).await;
                return format!("{name} was detached");
            }
        };
        drop(group);
        last_words_read(&mut tail_read).await;
        let overflowed = overflow
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match overflowed {
            Some(overflow) => format!("{name} {overflow}; it was stopped"),
            None => format!("{reason}{}", said(&tail)),
        }
    };
    Ok(Connected {
        session,
        ended: Box::pin(ended),
    })
}

/// A process group, killed when dropped.
struct Group(Option<u32>);

impl Group {
    fn signal(&self, signal: libc::c_int) {
        if let Some(pid) = self.0.and_then(|pid| libc::pid_t::try_from(pid).ok()) {
            // SAFETY: kill(2) with a negative pid signals the group the
            // child leads (it was spawned with process_group(0)); it touches
            // no memory of this process.
            unsafe { libc::kill(-pid, signal) };
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
    }
}

/// Waits for `child` to exit after its stdin closed, then sends SIGTERM,
/// then kills its group (by dropping it).
async fn stop_gracefully(child: &mut Child, group: &Group) {
    if tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_ok() {
        return;
    }
    group.signal(libc::SIGTERM);
    let _ = tokio::time::timeout(EXIT_GRACE, child.wait()).await;
}

fn exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("with status {code}"),
        (None, Some(signal)) => format!("on signal {signal}"),
        _ => "for an unknown reason".to_owned(),
    }
}

/// The last line the server wrote to stderr, as a clause of an error.
fn said(tail: &Mutex<VecDeque<u8>>) -> String {
    let tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
    let bytes: Vec<u8> = tail.iter().copied().collect();
    let text = String::from_utf8_lossy(&bytes);
    match text.lines().rev().find(|line| !line.trim().is_empty()) {
        Some(line) => format!(
            " (its last words on stderr: {})",
            crate::text::one_line(line, 300)
        ),
        None => String::new(),
    }
}

/// Waits (briefly) for the server's stderr to be read to its end, once
/// it has exited and its group was killed: the exit is often noticed
/// before the reader has taken its last words from the pipe, and they
/// are what says why it stopped.
async fn last_words_read(reader: &mut tokio::task::JoinHandle<()>) {
    let _ = tokio::time::timeout(EXIT_NOTICED, reader).await;
}

/// Reads the server's stderr to its end (a server whose stderr is not
/// read blocks once the pipe fills), keeping the last [`STDERR_TAIL`]
/// bytes and logging each line at debug level.
async fn keep_tail(
    name: String,
    mut stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<u8>>>,
) {
    let mut chunk = vec![0u8; 8192];
    loop {
        let read = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        let bytes = &chunk[..read];
        for line in String::from_utf8_lossy(bytes).lines() {
            tracing::debug!(agent = %name, "stderr: {}", crate::text::one_line(line, 1024));
        }
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        tail.extend(bytes);
        let excess = tail.len().saturating_sub(STDERR_TAIL);
        tail.drain(..excess);
    }
}

/// The server's stdout, refusing a line longer than `limit`: the
/// connection ends with that reason instead of the node holding it.
struct Bounded<R> {
    inner: R,
    limit: usize,
    /// Bytes since the last newline.
    line: usize,
    overflow: Arc<Mutex<Option<String>>>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Bounded<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        std::task::ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        for &byte in &buf.filled()[before..] {
            if byte == b'\n' {
                this.line = 0;
            } else {
                this.line += 1;
            }
            if this.line > this.limit {
                let reason = format!(
                    "sent a message larger than {} (the most a result within the output limit needs)",
                    bytesize::ByteSize(this.limit as u64)
                );
                *this.overflow.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some(reason.clone());
                return Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    reason,
                )));
            }
        }
        Poll::Ready(Ok(()))
    }
}
