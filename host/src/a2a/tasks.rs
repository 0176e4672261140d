//! The tasks A2A clients started on this node, as they stand, with the
//! events of each for the clients streaming it. Bounded: at most
//! [`MAX_TASKS`] are kept, the oldest finished ones making room for new
//! ones; a node whose every kept task still runs turns new ones away.

use super::wire::{Artifact, Message, Role, StreamResponse, Task, TaskArtifactUpdateEvent};
use super::wire::{TaskState, TaskStatus, TaskStatusUpdateEvent, new_id, now};
use crate::AgentId;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

/// Tasks kept at most.
pub const MAX_TASKS: usize = 1000;
/// Messages a task's history keeps at most: the first (what was asked)
/// and the newest.
const MAX_HISTORY: usize = 32;
/// Events a streaming client may fall behind by before it is sent the
/// whole task again instead.
const EVENTS: usize = 64;

/// Whose task it is: the node's (a goal) or one agent's (a tool call).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Node,
    Agent(AgentId),
}

/// One task and its followers.
pub struct TaskEntry {
    pub scope: Scope,
    task: Mutex<Task>,
    /// The milliseconds of its last change, for listing newest first.
    updated: Mutex<u64>,
    events: broadcast::Sender<StreamResponse>,
    state: watch::Sender<TaskState>,
    /// Stops its work.
    pub cancel: CancellationToken,
    /// For a goal's task: whether its messages are being followed, and the
    /// last one seen (where following resumes).
    pub following: AtomicBool,
    pub seen: AtomicU64,
}

impl TaskEntry {
    fn lock(&self) -> MutexGuard<'_, Task> {
        self.task.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn id(&self) -> String {
        self.lock().id.clone()
    }

    pub fn context_id(&self) -> String {
        self.lock().context_id.clone()
    }

    pub fn state(&self) -> TaskState {
        *self.state.borrow()
    }

    fn updated(&self) -> u64 {
        *self.updated.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The task as a client reads it, with at most `history` messages of
    /// its history (all when `None`) and its artifacts when asked for.
    pub fn snapshot(&self, history: Option<usize>, artifacts: bool) -> Task {
        let mut task = self.lock().clone();
        if let Some(keep) = history {
            let cut = task.history.len().saturating_sub(keep);
            task.history.drain(..cut);
        }
        if !artifacts {
            task.artifacts.clear();
        }
        task
    }

    /// Follows the task: events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<StreamResponse> {
        self.events.subscribe()
    }

    /// Wakes on each change of state.
    pub fn watch(&self) -> watch::Receiver<TaskState> {
        self.state.subscribe()
    }

    /// A message of the agent, for the task's status or history.
    pub fn agent_message(&self, text: impl Into<String>) -> Message {
        let task = self.lock();
        Message {
            message_id: new_id(),
            context_id: task.context_id.clone(),
            task_id: task.id.clone(),
            role: Role::Agent,
            parts: vec![super::wire::Part::text(text)],
            ..Default::default()
        }
    }

    /// Adds a message of the client to the history.
    pub fn record(&self, message: Message) {
        let mut task = self.lock();
        push_history(&mut task.history, message);
    }

    /// Moves the task to `state`, saying `message`; a task that has ended
    /// stays as it ended. Returns whether it moved.
    pub fn set_status(&self, state: TaskState, message: Option<Message>) -> bool {
        let event = {
            let mut task = self.lock();
            if task.status.state.is_terminal() {
                return false;
            }
            task.status = TaskStatus {
                state,
                message: message.clone(),
                timestamp: Some(now()),
            };
            // The history keeps what the agent said at the end or when it
            // waits for the client; progress goes to the stream only.
            if let Some(message) = message
                && (state.is_terminal() || state.is_interrupted())
            {
                push_history(&mut task.history, message);
            }
            TaskStatusUpdateEvent {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                status: task.status.clone(),
                metadata: None,
            }
        };
        self.touch();
        let _ = self.events.send(StreamResponse::StatusUpdate(event));
        self.state.send_replace(state);
        true
    }

    /// Adds what the task produced.
    pub fn add_artifact(&self, artifact: Artifact) {
        let event = {
            let mut task = self.lock();
            if task.status.state.is_terminal() {
                return;
            }
            task.artifacts.push(artifact.clone());
            TaskArtifactUpdateEvent {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                artifact,
                append: false,
                last_chunk: true,
            }
        };
        self.touch();
        let _ = self.events.send(StreamResponse::ArtifactUpdate(event));
    }

    fn touch(&self) {
        *self.updated.lock().unwrap_or_else(PoisonError::into_inner) =
            crate::goals::message::unix_millis();
    }
}

fn push_history(history: &mut Vec<Message>, message: Message) {
    if history.len() >= MAX_HISTORY {
        // The first message is what was asked: it stays.
        history.remove(1);
    }
    history.push(message);
}

/// Why a task could not be kept.
#[derive(Debug, thiserror::Error)]
#[error(
    "this node keeps {MAX_TASKS} A2A tasks and all of them are still running; try again when some have ended"
)]
pub struct Full;

/// The node's A2A tasks.
#[derive(Default)]
pub struct Tasks {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<String, Arc<TaskEntry>>,
    /// Ids, oldest first.
    order: VecDeque<String>,
}

impl Tasks {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new task of `scope` in context `context_id` (a new context when
    /// empty), with id `id` (a new one when `None`), submitted with the
    /// client's `message`.
    pub fn create(
        &self,
        scope: Scope,
        id: Option<String>,
        context_id: &str,
        message: Message,
    ) -> Result<Arc<TaskEntry>, Full> {
        let id = id.unwrap_or_else(new_id);
        let context_id = if context_id.is_empty() {
            new_id()
        } else {
            context_id.to_owned()
        };
        let mut message = message;
        message.task_id = id.clone();
        message.context_id = context_id.clone();
        let task = Task {
            id: id.clone(),
            context_id,
            status: TaskStatus {
                state: TaskState::Submitted,
                message: None,
                timestamp: Some(now()),
            },
            artifacts: Vec::new(),
            history: vec![message],
            metadata: None,
        };
        let entry = Arc::new(TaskEntry {
            scope,
            task: Mutex::new(task),
            updated: Mutex::new(crate::goals::message::unix_millis()),
            events: broadcast::channel(EVENTS).0,
            state: watch::channel(TaskState::Submitted).0,
            cancel: CancellationToken::new(),
            following: AtomicBool::new(false),
            seen: AtomicU64::new(0),
        });
        let mut inner = self.lock();
        if inner.by_id.len() >= MAX_TASKS {
            let finished = inner.order.iter().position(|id| {
                inner
                    .by_id
                    .get(id)
                    .is_none_or(|entry| entry.state().is_terminal())
            });
            let Some(at) = finished else {
                return Err(Full);
            };
            if let Some(old) = inner.order.remove(at) {
                inner.by_id.remove(&old);
            }
        }
        inner.order.push_back(id.clone());
        inner.by_id.insert(id, entry.clone());
        Ok(entry)
    }

    pub fn get(&self, scope: Scope, id: &str) -> Option<Arc<TaskEntry>> {
        self.lock()
            .by_id
            .get(id)
            .filter(|entry| entry.scope == scope)
            .cloned()
    }

    /// The tasks of `scope` that `keep` lets through, most recently
    /// changed first.
    pub fn list(&self, scope: Scope, keep: impl Fn(&TaskEntry) -> bool) -> Vec<Arc<TaskEntry>> {
        let mut tasks: Vec<Arc<TaskEntry>> = self
            .lock()
            .by_id
            .values()
            .filter(|entry| entry.scope == scope && keep(entry))
            .cloned()
            .collect();
        tasks.sort_by_key(|entry| std::cmp::Reverse(entry.updated()));
        tasks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked() -> Message {
        Message {
            message_id: "m".into(),
            role: Role::User,
            parts: vec![super::super::wire::Part::text("hi")],
            ..Default::default()
        }
    }

    #[test]
    fn a_task_moves_until_it_ends_and_then_stays() {
        let tasks = Tasks::default();
        let entry = tasks.create(Scope::Node, None, "", asked()).unwrap();
        let mut events = entry.subscribe();
        assert!(entry.set_status(TaskState::Working, None));
        entry.add_artifact(Artifact {
            artifact_id: "a".into(),
            parts: vec![super::super::wire::Part::text("5")],
            ..Default::default()
        });
        let done = entry.agent_message("done");
        assert!(entry.set_status(TaskState::Completed, Some(done)));
        assert!(!entry.set_status(TaskState::Working, None));
        let task = entry.snapshot(None, true);
        assert_eq!(task.status.state, TaskState::Completed);
        assert_eq!(task.history.len(), 2);
        assert_eq!(task.history[0].task_id, task.id);
        assert_eq!(entry.snapshot(Some(1), false).history.len(), 1);
        assert!(entry.snapshot(None, false).artifacts.is_empty());
        assert!(matches!(
            events.try_recv(),
            Ok(StreamResponse::StatusUpdate(_))
        ));
        assert!(matches!(
            events.try_recv(),
            Ok(StreamResponse::ArtifactUpdate(_))
        ));
        assert!(
            matches!(events.try_recv(), Ok(StreamResponse::StatusUpdate(e)) if e.status.state == TaskState::Completed)
        );
        assert!(
            tasks
                .get(Scope::Agent(AgentId::of(b"x")), &task.id)
                .is_none()
        );
        assert!(tasks.get(Scope::Node, &task.id).is_some());
    }

    #[test]
    fn finished_tasks_make_room_and_running_ones_do_not() {
        let tasks = Tasks::default();
        let first = tasks.create(Scope::Node, None, "", asked()).unwrap();
        for _ in 1..MAX_TASKS {
            tasks.create(Scope::Node, None, "", asked()).unwrap();
        }
        assert!(tasks.create(Scope::Node, None, "", asked()).is_err());
        first.set_status(TaskState::Completed, None);
        tasks.create(Scope::Node, None, "", asked()).unwrap();
        assert!(tasks.get(Scope::Node, &first.id()).is_none());
        assert_eq!(tasks.list(Scope::Node, |_| true).len(), MAX_TASKS);
    }
}
