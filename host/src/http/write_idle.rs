//! A connection whose client stops reading its response.
//!
//! hyper writes a response for as long as the client reads it; one that
//! never reads (a slow-read attack: 100 `/v1` streams left unread) holds
//! its connection, its task and its buffers for good, and with them a place
//! in its address's allowance. The front end wraps each connection in a
//! [`WriteIdle`]: a write that cannot go out for `timeout` fails, which ends
//! the connection, and while a write waits the connection says since when
//! ([`Stalled`]), so that a full allowance sheds the longest-stalled first.
//!
//! As with [`super::idle_body`], the timer is armed only while a write
//! waits: most responses go out whole into the socket's buffer.

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Since when a connection's writes have waited on its client, shared with
/// the table of open connections.
#[derive(Debug, Clone)]
pub struct Stalled {
    /// When the connection opened.
    opened: Instant,
    /// Milliseconds after `opened` at which the waiting write began, plus
    /// one; zero while no write waits.
    since: Arc<AtomicU64>,
}

impl Stalled {
    pub fn new() -> Stalled {
        Stalled {
            opened: Instant::now(),
            since: Arc::new(AtomicU64::new(0)),
        }
    }

    /// How long a write has waited on the client, if one does.
    pub fn for_how_long(&self) -> Option<Duration> {
        match self.since.load(Ordering::Relaxed) {
            0 => None,
            plus_one => {
                let began = self.opened + Duration::from_millis(plus_one - 1);
                Some(began.elapsed())
            }
        }
    }

    fn began(&self) {
        let at = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        self.since.store(at + 1, Ordering::Relaxed);
    }

    fn ended(&self) {
        self.since.store(0, Ordering::Relaxed);
    }
}

impl Default for Stalled {
    fn default() -> Self {
        Stalled::new()
    }
}

/// `stream`, whose writes fail once one has waited `timeout` on the client.
pub struct WriteIdle<S> {
    stream: S,
    timeout: Duration,
    stalled: Stalled,
    /// Running while a write waits.
    waiting: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteIdle<S> {
    pub fn new(stream: S, timeout: Duration, stalled: Stalled) -> WriteIdle<S> {
        WriteIdle {
            stream,
            timeout,
            stalled,
            waiting: None,
        }
    }

    /// What a write that did not go out gets: waiting, or its end once it
    /// has waited `timeout`.
    fn wait<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let timeout = self.timeout;
        let stalled = &self.stalled;
        let timer = self.waiting.get_or_insert_with(|| {
            stalled.began();
            Box::pin(tokio::time::sleep(timeout))
        });
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client read none of the response for {}",
                    humantime::format_duration(timeout)
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn went_out(&mut self) {
        if self.waiting.take().is_some() {
            self.stalled.ended();
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteIdle<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteIdle<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write(cx, buf) {
            Poll::Pending => self.wait(cx),
            ready => {
                self.went_out();
                ready
            }
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write_vectored(cx, bufs) {
            Poll::Pending => self.wait(cx),
            ready => {
                self.went_out();
                ready
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.stream).poll_flush(cx) {
            Poll::Pending => self.wait(cx),
            ready => {
                self.went_out();
                ready
            }
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt as _;

    #[tokio::test]
    async fn a_write_the_client_never_reads_fails_after_the_timeout() {
        // A pipe of 64 bytes whose reader never reads.
        let (writer, _reader) = tokio::io::duplex(64);
        let stalled = Stalled::new();
        let timeout = Duration::from_millis(200);
        let mut stream = WriteIdle::new(writer, timeout, stalled.clone());
        stream.write_all(&[1; 64]).await.unwrap();
        assert_eq!(stalled.for_how_long(), None);
        let started = Instant::now();
        let error = stream.write_all(&[2; 64]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= timeout);
        assert!(stalled.for_how_long().is_some());
    }
}
