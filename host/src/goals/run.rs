//! A goal while it runs: its budget, its log of messages, the model and
//! the agents its teams use, and the token that cancels it all.

use super::GoalEvent;
use super::ask::{Asker, GoalModel};
use super::budget::Budget;
use super::config::Verify;
use super::directory::Directory;
use super::message::{Body, GoalId, Message, Speaker, unix_millis};
use super::metrics::GoalMetrics;
use super::store::GoalStore;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// Messages one goal may hold; past it, only the conclusion is written.
pub const MAX_MESSAGES: usize = 5000;

/// The messages of a goal, written to the store and to listeners as they
/// are appended, numbered in order.
pub struct Log {
    goal: GoalId,
    store: Arc<GoalStore>,
    events: broadcast::Sender<GoalEvent>,
    messages: Mutex<Vec<Message>>,
}

impl Log {
    /// The log of goal `goal`, continuing after `earlier`.
    pub fn new(
        goal: GoalId,
        store: Arc<GoalStore>,
        events: broadcast::Sender<GoalEvent>,
        earlier: Vec<Message>,
    ) -> Log {
        Log {
            goal,
            store,
            events,
            messages: Mutex::new(earlier),
        }
    }

    /// Appends a message of the team of `team` (`None`: the main team).
    pub fn append(
        &self,
        team: Option<u32>,
        speaker: Speaker,
        body: Body,
        next: Option<String>,
    ) -> u64 {
        let mut messages = self.messages.lock().unwrap_or_else(PoisonError::into_inner);
        let full = messages.len() >= MAX_MESSAGES;
        if full && !matches!(body, Body::Conclusion { .. } | Body::Failure { .. }) {
            return messages.last().map_or(0, |m| m.seq);
        }
        let message = Message {
            seq: messages.last().map_or(1, |m| m.seq + 1),
            at: unix_millis(),
            team,
            speaker,
            body,
            next,
        };
        // Stored and sent under the lock: every listener sees the order
        // of the store.
        self.store.append(&self.goal, &message);
        let _ = self.events.send(GoalEvent::Message {
            goal: self.goal.clone(),
            message: Box::new(message.clone()),
        });
        let seq = message.seq;
        messages.push(message);
        seq
    }

    /// The values of the main team's successful calls, latest first: what
    /// a person's next message may refer to ("now double it").
    pub fn results(&self) -> Vec<crate::llm::grounding::Literal> {
        self.messages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .rev()
            .filter(|m| m.team.is_none())
            .filter_map(|m| match &m.body {
                Body::Progress {
                    call: Some(call), ..
                } if !call.is_error => Some(crate::answers::steps::values_of_text(&call.result)),
                _ => None,
            })
            .flatten()
            .take(8)
            .collect()
    }

    /// The team of the main conversation, from its last `Team` message.
    pub fn main_team(&self) -> Option<Vec<super::message::Member>> {
        self.messages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .rev()
            .find_map(|m| match (&m.body, m.team) {
                (Body::Team { members, .. }, None) => Some(members.clone()),
                _ => None,
            })
    }
}

/// What a running goal's teams share.
pub struct GoalRun {
    pub id: GoalId,
    pub model: Arc<dyn GoalModel>,
    pub model_name: Option<String>,
    pub directory: Arc<dyn Directory>,
    pub budget: Budget,
    pub log: Log,
    pub cancel: CancellationToken,
    pub metrics: Option<Arc<GoalMetrics>>,
    /// The last task number given out in this goal.
    tasks: AtomicU32,
    /// How answers from other nodes are checked.
    pub verify: Verify,
    /// Answers taken from each node so far, by its peer id (at most one
    /// entry per tool call the budget allows).
    answers_from: std::sync::Mutex<std::collections::HashMap<String, u32>>,
}

impl GoalRun {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: GoalId,
        model: Arc<dyn GoalModel>,
        model_name: Option<String>,
        directory: Arc<dyn Directory>,
        budget: Budget,
        log: Log,
        cancel: CancellationToken,
        metrics: Option<Arc<GoalMetrics>>,
        last_task: u32,
    ) -> GoalRun {
        GoalRun {
            id,
            model,
            model_name,
            directory,
            budget,
            log,
            cancel,
            metrics,
            tasks: AtomicU32::new(last_task),
            verify: Verify::default(),
            answers_from: Default::default(),
        }
    }

    /// The goal, checking answers from other nodes as `verify` says.
    pub fn verifying(mut self, verify: Verify) -> GoalRun {
        self.verify = verify;
        self
    }

    /// Counts an answer from `node` and says whether to check it.
    pub fn wants_check(&self, node: &str) -> bool {
        let mut answers = self
            .answers_from
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = answers.entry(node.to_owned()).or_insert(0);
        *count += 1;
        self.verify.checks(*count)
    }

    /// The model as this goal asks it.
    pub fn asker(&self) -> Asker<'_> {
        Asker {
            model: &*self.model,
            name: self.model_name.as_deref(),
            budget: &self.budget,
            goal: &self.id,
        }
    }

    /// A fresh task number.
    pub fn new_task(&self) -> u32 {
        self.budget.count_task();
        self.tasks.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Runs `future` unless the goal is cancelled first.
    pub async fn until_cancelled<T>(
        &self,
        future: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        tokio::select! {
            value = future => Some(value),
            _ = self.cancel.cancelled() => None,
        }
    }

    pub fn audit_turn(&self) {
        if let Some(metrics) = &self.metrics {
            metrics.turn();
        }
    }

    pub fn audit_task(&self, ok: bool) {
        if let Some(metrics) = &self.metrics {
            metrics.task(if ok { "done" } else { "failed" });
        }
    }
}
