//! What an idle MCP session is reduced to: the client's `initialize`.
//!
//! A live session is a worker task, the session's handler (its serve loop)
//! and its notification task, and the channels between them: about 20 KiB
//! (BENCHMARKS.md, `mcp_sessions`), for a session that may see one request
//! an hour. After a while with no request open
//! ([`super::sessions`] decides when), the session's tasks end and only its
//! `initialize` parameters stay here, serialized (a few hundred bytes). The
//! next request for it finds no live session, and rmcp restores it from
//! this store: a new handler, the `initialize` handshake replayed with the
//! client's own parameters, then the request. Clients notice nothing.
//!
//! Each endpoint has its own store, so a session id is restored only where
//! it was opened, and its own [`Hibernating`] session manager: rmcp's local
//! one, which can also put a session to sleep.

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionId, SessionManager, SessionState, SessionStore,
    SessionStoreError,
};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

/// The largest `initialize` kept, serialized. Clients send a few hundred
/// bytes (a name, a version, a few capability flags); a session whose
/// parameters are larger is not kept dormant: it stays live until its idle
/// timeout ends it.
pub const MAX_KEPT: usize = 4096;

/// The sessions of one endpoint that can be restored.
#[derive(Default)]
pub struct Dormant {
    kept: Mutex<HashMap<String, Box<[u8]>>>,
}

#[derive(Debug, thiserror::Error)]
#[error("a session's initialize parameters take {0} bytes; at most {MAX_KEPT} are kept")]
struct TooLarge(usize);

impl Dormant {
    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<String, Box<[u8]>>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether session `id` can be restored.
    pub fn contains(&self, id: &str) -> bool {
        self.kept().contains_key(id)
    }

    /// Forgets session `id`: it cannot be restored any more.
    pub fn remove(&self, id: &str) {
        self.kept().remove(id);
    }
}

#[async_trait::async_trait]
impl SessionStore for Dormant {
    async fn load(&self, id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(kept) = self.kept().get(id).cloned() else {
            return Ok(None);
        };
        Ok(Some(serde_json::from_slice(&kept)?))
    }

    async fn store(&self, id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let serialized = serde_json::to_vec(state)?;
        if serialized.len() > MAX_KEPT {
            return Err(Box::new(TooLarge(serialized.len())));
        }
        self.kept()
            .insert(id.to_owned(), serialized.into_boxed_slice());
        Ok(())
    }

    async fn delete(&self, id: &str) -> Result<(), SessionStoreError> {
        self.remove(id);
        Ok(())
    }
}

/// rmcp's local session manager, whose sessions can sleep in [`Dormant`].
///
/// rmcp serves each session in a task that, when the session's worker
/// ends, closes the session by its id. A session put to sleep and woken by
/// the next request before that task got there would be closed by it: the
/// id is the same. So a session put to sleep here has that one close
/// coming, and it is let pass without effect.
pub struct Hibernating {
    local: LocalSessionManager,
    dormant: Arc<Dormant>,
    /// Sessions put to sleep whose serving task has yet to close them.
    close_coming: Mutex<HashSet<SessionId>>,
}

impl Hibernating {
    pub fn new(dormant: Arc<Dormant>) -> Self {
        Hibernating {
            local: LocalSessionManager::default(),
            dormant,
            close_coming: Mutex::new(HashSet::new()),
        }
    }

    pub fn dormant(&self) -> &Arc<Dormant> {
        &self.dormant
    }

    /// Ends session `id`'s tasks, keeping what restores it.
    pub async fn put_to_sleep(&self, id: &SessionId) {
        if !self.local.has_session(id).await.unwrap_or(false) {
            // Its worker ended already (and its serving task closed it).
            return;
        }
        self.close_coming
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone());
        let _ = self.local.close_session(id).await;
    }

    /// Ends session `id` for good.
    pub async fn end(&self, id: &SessionId) {
        self.dormant.remove(id);
        let _ = self.local.close_session(id).await;
    }
}

impl SessionManager for Hibernating {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.local.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.local.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.local.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let slept = self
            .close_coming
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        if slept {
            // The close of the session's serving task, after it was put to
            // sleep: the session may be awake again, served by a new task.
            return Ok(());
        }
        self.local.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.local.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.resume(id, last_event_id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.local.restore_session(id).await
    }
}
