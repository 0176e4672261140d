//! The calling side of a call made over MCP: the client a request serves,
//! as the agent's imports reach it ([`crate::capabilities::caller`]).
//! Progress and log messages become notifications, `llm.chat` becomes
//! sampling and `user.elicit` becomes elicitation, each only when the
//! client supports it.

// Logging and sampling are deprecated by SEP-2577 for protocol 2026-07-28,
// but remain part of 2025-11-25, which most clients speak.
#![allow(deprecated)]

use crate::capabilities::caller::{Caller, ElicitAction, ElicitFailure, Elicitation, Progress};
use crate::capabilities::guest_log::Level;
use crate::llm::{ChatRequest, Completion, LlmFailure, Role, StopReason, Usage};
use rmcp::model::{
    CreateMessageRequestParams, ElicitRequestParams, ElicitationAction, ElicitationSchema,
    LoggingLevel, LoggingMessageNotificationParam, ModelHint, ModelPreferences,
    ProgressNotificationParam, ProgressToken, SamplingMessage,
};
use rmcp::service::{RequestContext, ServiceError};
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::mpsc;

/// Most tokens asked for when the agent does not say.
const DEFAULT_MAX_TOKENS: u32 = 1024;

/// What one MCP session remembers between requests.
pub struct Session {
    log_level: Mutex<LoggingLevel>,
    subscriptions: Mutex<HashSet<String>>,
}

impl Default for Session {
    fn default() -> Self {
        Session {
            // Until the client sets a level, info and above is sent: what a
            // person watching a tool run wants to see.
            log_level: Mutex::new(LoggingLevel::Info),
            subscriptions: Mutex::new(HashSet::new()),
        }
    }
}

impl Session {
    pub fn set_log_level(&self, level: LoggingLevel) {
        *self
            .log_level
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = level;
    }

    fn log_level(&self) -> LoggingLevel {
        *self
            .log_level
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn subscriptions(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub fn subscribe(&self, uri: String) {
        self.subscriptions().insert(uri);
    }

    pub fn unsubscribe(&self, uri: &str) {
        self.subscriptions().remove(uri);
    }

    pub fn is_subscribed(&self, uri: &str) -> bool {
        self.subscriptions().contains(uri)
    }
}

/// A notification of a running request, sent in order.
enum Notice {
    Progress(Progress),
    Log(LoggingMessageNotificationParam),
}

/// The queue of a request's notifications and the task sending them.
type Queue = (mpsc::Sender<Notice>, tokio::task::JoinHandle<()>);

/// Notifications of one request waiting to be sent. The call's log budget
/// bounds how many it makes; this bounds what the host holds when the
/// client reads them slower than the agent makes them (or the operator set
/// a large budget): past it they are dropped and counted.
pub const MAX_QUEUED_NOTICES: usize = 256;

/// The caller of one request. Notifications go through one ordered queue
/// that [`ClientCall::finish`] drains before the response is sent (rmcp
/// puts progress on the request's own stream, and other notifications of a
/// session on its standalone stream, so only progress is ordered with the
/// response on the wire); the queue
/// and its task are made on the first notification, so that the many calls
/// that send none cost no extra task (and no cross-thread wake-up).
pub struct ClientCall {
    caller: Arc<McpCaller>,
}

impl ClientCall {
    pub fn start(context: &RequestContext<RoleServer>, session: Arc<Session>) -> Self {
        let token = context.meta.get_progress_token();
        let caller = Arc::new(McpCaller {
            peer: context.peer.clone(),
            session,
            token,
            queue: Mutex::new(None),
            dropped: AtomicU64::new(0),
        });
        ClientCall { caller }
    }

    pub fn caller(&self) -> Arc<dyn Caller> {
        self.caller.clone()
    }

    /// Hands every queued notification to rmcp before the response.
    pub async fn finish(self) {
        let queue = self.caller.queue().take();
        if let Some((notices, task)) = queue {
            // The task ends once the queue is empty and this, its only sender, is gone.
            drop(notices);
            let _ = task.await;
        }
    }
}

/// Sends the queued notices until the request is over or the client is gone.
async fn forward(
    peer: Peer<RoleServer>,
    token: Option<ProgressToken>,
    mut queue: mpsc::Receiver<Notice>,
) {
    while let Some(notice) = queue.recv().await {
        let sent = match notice {
            Notice::Progress(report) => {
                let Some(token) = &token else { continue };
                let mut param = ProgressNotificationParam::new(token.clone(), report.progress);
                param.total = report.total;
                param.message = report.message;
                peer.notify_progress(param).await
            }
            Notice::Log(param) => peer.notify_logging_message(param).await,
        };
        if sent.is_err() {
            return;
        }
    }
}

struct McpCaller {
    peer: Peer<RoleServer>,
    session: Arc<Session>,
    /// Where progress goes, if the client asked for progress.
    token: Option<ProgressToken>,
    queue: Mutex<Option<Queue>>,
    /// Notifications dropped because the queue was full.
    dropped: AtomicU64,
}

impl McpCaller {
    fn client_offers(&self, offers: impl Fn(&rmcp::model::ClientCapabilities) -> bool) -> bool {
        self.peer
            .peer_info()
            .is_some_and(|info| offers(&info.capabilities))
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Option<Queue>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `notice`, starting the queue's task on first use.
    fn notify(&self, notice: Notice) {
        let mut queue = self.queue();
        let (notices, _) = queue.get_or_insert_with(|| {
            let (notices, receiver) = mpsc::channel(MAX_QUEUED_NOTICES);
            let task = tokio::spawn(forward(self.peer.clone(), self.token.clone(), receiver));
            (notices, task)
        });
        if let Err(mpsc::error::TrySendError::Full(_)) = notices.try_send(notice) {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed);
            if dropped == 0 {
                tracing::warn!(
                    "an agent's notifications come faster than its client reads them; \
                     dropping those past {MAX_QUEUED_NOTICES} queued"
                );
            }
        }
    }
}

#[async_trait::async_trait]
impl Caller for McpCaller {
    fn progress(&self, report: Progress) {
        if self.token.is_some() {
            self.notify(Notice::Progress(report));
        }
    }

    fn log(&self, agent: &str, level: Level, message: &str) {
        let level = logging_level(level);
        if rank(level) >= rank(self.session.log_level()) {
            let param =
                LoggingMessageNotificationParam::new(level, Value::String(message.to_owned()))
                    .with_logger(agent);
            self.notify(Notice::Log(param));
        }
    }

    async fn sample(
        &self,
        request: &ChatRequest,
        model_hint: Option<&str>,
    ) -> Option<Result<Completion, LlmFailure>> {
        if !self.client_offers(|c| c.sampling.is_some()) {
            return None;
        }
        // Sampling carries text conversations: tools, tool results and
        // schemas stay with the node's own models.
        let text_only = request.tools.is_empty()
            && request.response_schema.is_none()
            && request
                .messages
                .iter()
                .all(|m| m.role != Role::Tool && m.tool_calls.is_empty());
        if !text_only {
            return None;
        }
        let mut system = Vec::new();
        let mut messages = Vec::new();
        for message in &request.messages {
            let content = message.content.clone();
            match message.role {
                Role::System => system.push(content),
                Role::User => messages.push(SamplingMessage::user_text(content)),
                Role::Assistant => messages.push(SamplingMessage::assistant_text(content)),
                Role::Tool => unreachable!("text-only requests were checked above"),
            }
        }
        if messages.is_empty() {
            return Some(Err(LlmFailure::InvalidRequest(
                "a chat request needs a user message besides system messages".into(),
            )));
        }
        let mut params = CreateMessageRequestParams::new(
            messages,
            request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        );
        params.system_prompt = (!system.is_empty()).then(|| system.join("\n\n"));
        params.temperature = request.temperature;
        params.model_preferences =
            model_hint.map(|hint| ModelPreferences::new().with_hints(vec![ModelHint::new(hint)]));
        Some(match self.peer.create_message(params).await {
            Ok(result) => {
                let text: Vec<&str> = result
                    .message
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        rmcp::model::SamplingMessageContentBlock::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect();
                Ok(Completion {
                    content: text.join(""),
                    tool_calls: Vec::new(),
                    model: result.model,
                    stop_reason: match result.stop_reason.as_deref() {
                        Some("maxTokens") => StopReason::MaxTokens,
                        _ => StopReason::EndTurn,
                    },
                    // Sampling reports no token counts.
                    usage: Usage::default(),
                    time_to_first_token: None,
                })
            }
            Err(ServiceError::McpError(error)) => {
                Err(LlmFailure::Refused(error.message.to_string()))
            }
            Err(error) => Err(LlmFailure::Unavailable(format!(
                "the client's model did not answer: {error}"
            ))),
        })
    }

    async fn elicit(&self, message: String, schema: Value) -> Result<Elicitation, ElicitFailure> {
        if !self.client_offers(|c| c.elicitation.is_some()) {
            return Err(ElicitFailure::Unavailable(
                "the calling client does not support elicitation".into(),
            ));
        }
        let requested_schema: ElicitationSchema = serde_json::from_value(schema).map_err(|e| {
            ElicitFailure::InvalidRequest(format!("not an elicitation schema: {e}"))
        })?;
        let request = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema,
        };
        match self.peer.create_elicitation(request).await {
            Ok(result) => Ok(Elicitation {
                action: match result.action {
                    ElicitationAction::Accept => ElicitAction::Accept,
                    ElicitationAction::Decline => ElicitAction::Decline,
                    _ => ElicitAction::Cancel,
                },
                content: result.content,
            }),
            Err(error) => Err(ElicitFailure::Unavailable(format!(
                "the client did not answer: {error}"
            ))),
        }
    }
}

fn logging_level(level: Level) -> LoggingLevel {
    match level {
        Level::Trace | Level::Debug => LoggingLevel::Debug,
        Level::Info => LoggingLevel::Info,
        Level::Warn => LoggingLevel::Warning,
        Level::Error => LoggingLevel::Error,
    }
}

/// Severity order of MCP log levels (syslog's, least severe first).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}
