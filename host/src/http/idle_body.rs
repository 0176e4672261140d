//! A request body that ends its request when it stops arriving.
//!
//! A client that sends its headers and then a body slowly, or not at all,
//! holds the request's task and buffers for as long as it likes. The front
//! end wraps each request's body in an [`IdleBody`]: when no frame has come
//! for `timeout` while the handler waits for one, reading the body fails and
//! the request ends.
//!
//! The timer is armed only while the body keeps the handler waiting: most
//! bodies are in the connection's buffer with their headers, and a timer
//! armed and dropped at each frame (as tower-http's `RequestBodyTimeout`
//! does) is a measurable part of a small request's cost.

use hyper::body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// Why a body's reading failed: it stopped arriving.
#[derive(Debug, thiserror::Error)]
#[error("the request body stopped arriving for {}", humantime::format_duration(*.0))]
pub struct BodyStalled(Duration);

/// `body`, failing once no frame of it has come for `timeout` while it was
/// awaited.
pub struct IdleBody<B> {
    body: B,
    timeout: Duration,
    /// Running while the reader waits for a frame.
    waiting: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<B> IdleBody<B> {
    pub fn new(body: B, timeout: Duration) -> IdleBody<B> {
        IdleBody {
            body,
            timeout,
            waiting: None,
        }
    }
}

impl<B> Body for IdleBody<B>
where
    B: Body + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = B::Data;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.waiting = None;
                Poll::Ready(frame.map(|frame| frame.map_err(Into::into)))
            }
            Poll::Pending => {
                let timeout = this.timeout;
                let waiting = this
                    .waiting
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                match waiting.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyStalled(timeout))))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt as _, StreamBody};

    #[tokio::test]
    async fn a_body_that_stops_arriving_fails_and_one_that_arrives_does_not() {
        const TIMEOUT: Duration = Duration::from_secs(2);
        let (sender, frames) =
            tokio::sync::mpsc::channel::<Result<Frame<bytes::Bytes>, std::io::Error>>(4);
        let stream = Box::pin(futures::stream::unfold(frames, |mut frames| async move {
            frames.recv().await.map(|frame| (frame, frames))
        }));
        let mut body = IdleBody::new(StreamBody::new(stream), TIMEOUT);
        sender.send(Ok(Frame::data("a".into()))).await.unwrap();
        assert!(body.frame().await.unwrap().is_ok());
        // Slow but well within the timeout each time: read.
        for _ in 0..3 {
            let sender = sender.clone();
            tokio::spawn(async move {
                tokio::time::sleep(TIMEOUT / 10).await;
                sender.send(Ok(Frame::data("b".into()))).await.unwrap();
            });
            assert!(body.frame().await.unwrap().is_ok());
        }
        // Then nothing for longer than the timeout: the reading fails.
        let started = std::time::Instant::now();
        let failed = body.frame().await.unwrap().unwrap_err();
        assert!(started.elapsed() >= TIMEOUT);
        assert!(
            failed.to_string().contains("stopped arriving for 2s"),
            "{failed}"
        );
        drop(sender);
    }
}
