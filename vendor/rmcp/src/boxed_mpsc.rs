//! Bounded channels whose messages travel boxed.
//!
//! tokio's `mpsc` allocates its first block of 32 slots when a channel is
//! made, each slot the size of the message. A JSON-RPC message is 360 to
//! 400 bytes, so each of the channels a session holds costs 12 KB before a
//! message is sent, and a server holding thousands of idle sessions pays
//! that for each. Boxed, a slot is a pointer: a block is 256 bytes, and a
//! message costs one allocation while it is in flight (a few tens of
//! nanoseconds, beside the microseconds of its serialization).
//!
//! The API is the part of tokio's that rmcp uses, with the same meaning.

use std::task::{Context, Poll};

pub use tokio::sync::mpsc::error::{SendError, TryRecvError, TrySendError};

/// Makes a bounded channel of `buffer` messages (see
/// [`tokio::sync::mpsc::channel`]).
pub fn channel<T>(buffer: usize) -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = tokio::sync::mpsc::channel(buffer);
    (Sender(tx), Receiver(rx))
}

pub struct Sender<T>(tokio::sync::mpsc::Sender<Box<T>>);

pub struct Receiver<T>(tokio::sync::mpsc::Receiver<Box<T>>);

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender(self.0.clone())
    }
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

fn unbox_send<T>(error: SendError<Box<T>>) -> SendError<T> {
    SendError(*error.0)
}

impl<T> Sender<T> {
    pub async fn send(&self, value: T) -> Result<(), SendError<T>> {
        self.0.send(Box::new(value)).await.map_err(unbox_send)
    }

    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        self.0.try_send(Box::new(value)).map_err(|error| match error {
            TrySendError::Full(value) => TrySendError::Full(*value),
            TrySendError::Closed(value) => TrySendError::Closed(*value),
        })
    }

    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }

    pub async fn closed(&self) {
        self.0.closed().await
    }

    pub fn same_channel(&self, other: &Self) -> bool {
        self.0.same_channel(&other.0)
    }

    pub fn capacity(&self) -> usize {
        self.0.capacity()
    }
}

impl<T> Receiver<T> {
    pub async fn recv(&mut self) -> Option<T> {
        self.0.recv().await.map(|value| *value)
    }

    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        self.0.try_recv().map(|value| *value)
    }

    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.0.poll_recv(cx).map(|value| value.map(|value| *value))
    }

    pub fn close(&mut self) {
        self.0.close()
    }

    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}
