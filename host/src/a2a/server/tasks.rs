//! The tasks A2A clients started on this node, as they stand, with the
//! events of each for the clients streaming it.
//!
//! Bounded by count and by bytes. At most [`SHARES`]`.total` tasks are kept,
//! shared among requesters as [`crate::requester`] says (each its own share,
//! its own oldest finished tasks going first, another's only when old
//! enough); past it, a newcomer is refused. What the kept tasks hold (what
//! was asked, what came back) is at most [`MAX_KEPT_BYTES`]: past it, the
//! results and large messages of the oldest finished tasks of whoever holds
//! the most are dropped, each with a marker that says so.

use crate::AgentId;
use crate::a2a::wire::{self, Artifact, Message, Part, Role, StreamResponse, Task};
use crate::a2a::wire::{TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent};
use crate::requester::{Kept, Refused, Requester, Room, Shares, make_room};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, SystemTime};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

/// Tasks kept at most, and each requester's share of them.
pub const SHARES: Shares = Shares {
    total: 1000,
    per_requester: 250,
    min_age: Duration::from_secs(3600),
    what: "A2A tasks",
};
/// The bytes kept tasks hold at most (as their JSON).
pub const MAX_KEPT_BYTES: usize = 64 << 20;
/// A message of a task whose results were dropped keeps its parts when it
/// is at most this big.
const KEPT_MESSAGE: usize = 4 << 10;
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
    /// Who started it.
    pub requester: Requester,
    task: Mutex<Task>,
    /// The bytes of the task as JSON, as of its last change.
    bytes: AtomicUsize,
    /// Whether its results were dropped: done once, so that each marker
    /// keeps the size of what it stands for.
    shed: AtomicBool,
    /// The store, told when the task ends so that it can keep to its bytes.
    kept: Weak<Mutex<Inner>>,
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
        self.state.borrow().clone()
    }

    fn updated(&self) -> u64 {
        *self.updated.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The task as a client reads it, with at most `history` messages of
    /// its history (all when `None`) and its artifacts when asked for.
    pub fn snapshot(&self, history: Option<usize>, artifacts: bool) -> Task {
        let mut task = self.lock().clone();
        if let (Some(keep), Some(messages)) = (history, &mut task.history) {
            let cut = messages.len().saturating_sub(keep);
            messages.drain(..cut);
        }
        if !artifacts {
            task.artifacts = None;
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
        let mut message = Message::new(Role::Agent, vec![Part::text(text)]);
        message.context_id = Some(task.context_id.clone());
        message.task_id = Some(task.id.clone());
        message
    }

    /// Adds a message of the client to the history.
    pub fn record(&self, message: Message) {
        let mut task = self.lock();
        push_history(&mut task, message);
        self.weigh(&task);
    }

    /// The bytes the task holds, as of its last change.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    fn weigh(&self, task: &Task) {
        self.bytes
            .store(crate::text::json_size(task), Ordering::Relaxed);
    }

    /// Drops the task's results and its large messages, leaving a marker
    /// in each place; returns the bytes it holds now.
    fn shed(&self) -> usize {
        let mut task = self.lock();
        self.shed.store(true, Ordering::Relaxed);
        let budget = MAX_KEPT_BYTES >> 20;
        for artifact in task.artifacts.iter_mut().flatten() {
            let size = crate::text::json_size(&artifact.parts);
            artifact.parts = vec![Part::text(format!(
                "[this result of {size} bytes was dropped: the node keeps at most {budget} MiB of A2A tasks; run the task again to see it]"
            ))];
            artifact
                .metadata
                .get_or_insert_default()
                .insert("droppedBytes".into(), size.into());
        }
        for message in task.history.iter_mut().flatten() {
            let size = crate::text::json_size(&message.parts);
            if size > KEPT_MESSAGE {
                message.parts = vec![Part::text(format!(
                    "[this message of {size} bytes was dropped: the node keeps at most {budget} MiB of A2A tasks]"
                ))];
            }
        }
        self.weigh(&task);
        self.bytes()
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
                state: state.clone(),
                message: message.clone(),
                timestamp: Some(SystemTime::now().into()),
            };
            // The history keeps what the agent said at the end or when it
            // waits for the client; progress goes to the stream only.
            if let Some(message) = message
                && wire::is_settled(&state)
            {
                push_history(&mut task, message);
            }
            self.weigh(&task);
            TaskStatusUpdateEvent {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                status: task.status.clone(),
                metadata: None,
            }
        };
        self.touch();
        let _ = self.events.send(StreamResponse::StatusUpdate(event));
        let ended = state.is_terminal();
        self.state.send_replace(state);
        if ended && let Some(kept) = self.kept.upgrade() {
            keep_to_budget(&mut lock(&kept), 0);
        }
        true
    }

    /// Adds what the task produced.
    pub fn add_artifact(&self, artifact: Artifact) {
        let event = {
            let mut task = self.lock();
            if task.status.state.is_terminal() {
                return;
            }
            task.artifacts
                .get_or_insert_default()
                .push(artifact.clone());
            self.weigh(&task);
            TaskArtifactUpdateEvent {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                artifact,
                append: Some(false),
                last_chunk: Some(true),
                metadata: None,
            }
        };
        self.touch();
        let _ = self.events.send(StreamResponse::ArtifactUpdate(event));
    }

    fn touch(&self) {
        *self.updated.lock().unwrap_or_else(PoisonError::into_inner) = crate::clock::unix_millis();
    }
}

fn push_history(task: &mut Task, message: Message) {
    let history = task.history.get_or_insert_default();
    if history.len() >= MAX_HISTORY {
        // The first message is what was asked: it stays.
        history.remove(1);
    }
    history.push(message);
}

/// Why a task could not be kept: one line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Full(String);

impl From<Refused> for Full {
    fn from(refused: Refused) -> Full {
        Full(refused.0)
    }
}

fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    inner.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Drops the results of finished tasks, those of whoever holds the most
/// bytes first and the oldest of each first, until the kept tasks and
/// `coming` more bytes fit in [`MAX_KEPT_BYTES`]. Returns the bytes the
/// kept tasks hold then.
fn keep_to_budget(inner: &mut Inner, coming: usize) -> usize {
    let budget = MAX_KEPT_BYTES.saturating_sub(coming);
    let mut total: usize = inner.by_id.values().map(|e| e.bytes()).sum();
    if total <= budget {
        return total;
    }
    let mut held: HashMap<&Requester, usize> = HashMap::new();
    for entry in inner.by_id.values() {
        *held.entry(&entry.requester).or_default() += entry.bytes();
    }
    let mut finished: Vec<&Arc<TaskEntry>> = inner
        .by_id
        .values()
        .filter(|e| {
            e.state().is_terminal() && e.bytes() > KEPT_MESSAGE && !e.shed.load(Ordering::Relaxed)
        })
        .collect();
    finished.sort_by_key(|e| (std::cmp::Reverse(held[&e.requester]), e.updated()));
    for entry in finished {
        if total <= budget {
            break;
        }
        let before = entry.bytes();
        let after = entry.shed();
        total = total - before + after;
    }
    total
}

/// The node's A2A tasks.
#[derive(Default)]
pub struct Tasks {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<String, Arc<TaskEntry>>,
}

impl Tasks {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// A new task of `scope` for `requester` in context `context_id` (a
    /// new context when empty), with id `id` (a new one when `None`),
    /// submitted with the client's `message`.
    pub fn create(
        &self,
        scope: Scope,
        requester: &Requester,
        id: Option<String>,
        context_id: &str,
        message: Message,
    ) -> Result<Arc<TaskEntry>, Full> {
        let id = id.unwrap_or_else(wire::new_task_id);
        let context_id = if context_id.is_empty() {
            wire::new_context_id()
        } else {
            context_id.to_owned()
        };
        let mut message = message;
        message.task_id = Some(id.clone());
        message.context_id = Some(context_id.clone());
        let task = Task {
            id: id.clone(),
            context_id,
            status: TaskStatus {
                state: TaskState::Submitted,
                message: None,
                timestamp: Some(SystemTime::now().into()),
            },
            artifacts: None,
            history: Some(vec![message]),
            metadata: None,
        };
        let bytes = crate::text::json_size(&task);
        let entry = Arc::new(TaskEntry {
            scope,
            requester: requester.clone(),
            task: Mutex::new(task),
            bytes: AtomicUsize::new(bytes),
            shed: AtomicBool::new(false),
            kept: Arc::downgrade(&self.inner),
            updated: Mutex::new(crate::clock::unix_millis()),
            events: broadcast::channel(EVENTS).0,
            state: watch::channel(TaskState::Submitted).0,
            cancel: CancellationToken::new(),
            following: AtomicBool::new(false),
            seen: AtomicU64::new(0),
        });
        let mut inner = self.lock();
        let room = {
            let kept: Vec<Kept<'_, &str>> = inner
                .by_id
                .iter()
                .map(|(id, entry)| Kept {
                    id: id.as_str(),
                    requester: &entry.requester,
                    changed: entry.updated(),
                    finished: entry.state().is_terminal(),
                })
                .collect();
            let now = crate::clock::unix_millis();
            make_room(&kept, requester, &SHARES, now)?.map_id(str::to_owned)
        };
        if let Room::Drop(old) = room {
            inner.by_id.remove(&old);
        }
        let held = keep_to_budget(&mut inner, bytes);
        if held + bytes > MAX_KEPT_BYTES {
            return Err(Full(format!(
                "the A2A tasks this node keeps hold {} MiB in tasks that still run, its most; try again when some have ended",
                held >> 20
            )));
        }
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
        Message::new(Role::User, vec![Part::text("hi")])
    }

    fn artifact(text: String) -> Artifact {
        Artifact {
            artifact_id: "a".into(),
            name: None,
            description: None,
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: None,
        }
    }

    #[test]
    fn a_task_moves_until_it_ends_and_then_stays() {
        let tasks = Tasks::default();
        let entry = tasks.create(Scope::Node, &me(), None, "", asked()).unwrap();
        let mut events = entry.subscribe();
        assert!(entry.set_status(TaskState::Working, None));
        entry.add_artifact(artifact("5".into()));
        let done = entry.agent_message("done");
        assert!(entry.set_status(TaskState::Completed, Some(done)));
        assert!(!entry.set_status(TaskState::Working, None));
        let task = entry.snapshot(None, true);
        assert_eq!(task.status.state, TaskState::Completed);
        let history = task.history.as_ref().unwrap();
        assert_eq!(history.len(), 2);
        assert_eq!(history[0].task_id.as_ref(), Some(&task.id));
        assert_eq!(entry.snapshot(Some(1), false).history.unwrap().len(), 1);
        assert!(entry.snapshot(None, false).artifacts.is_none());
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

    fn me() -> Requester {
        Requester::new("a2a", Some("10.0.0.1".parse().unwrap()))
    }

    #[test]
    fn a_requester_at_its_share_makes_room_with_its_own_finished_tasks() {
        let tasks = Tasks::default();
        let other = Requester::new("a2a", Some("10.0.0.2".parse().unwrap()));
        let theirs = tasks
            .create(Scope::Node, &other, None, "", asked())
            .unwrap();
        theirs.set_status(TaskState::Completed, None);
        let first = tasks.create(Scope::Node, &me(), None, "", asked()).unwrap();
        for _ in 1..SHARES.per_requester {
            tasks.create(Scope::Node, &me(), None, "", asked()).unwrap();
        }
        let Err(refused) = tasks.create(Scope::Node, &me(), None, "", asked()) else {
            panic!("a requester past its share with every task running is refused");
        };
        assert!(
            refused.to_string().contains("none of them has ended"),
            "{refused}"
        );
        first.set_status(TaskState::Completed, None);
        tasks.create(Scope::Node, &me(), None, "", asked()).unwrap();
        assert!(tasks.get(Scope::Node, &first.id()).is_none());
        assert!(
            tasks.get(Scope::Node, &theirs.id()).is_some(),
            "another's stays"
        );
        assert_eq!(
            tasks.list(Scope::Node, |_| true).len(),
            SHARES.per_requester + 1
        );
    }

    #[test]
    fn past_the_byte_budget_the_results_of_finished_tasks_are_dropped_with_a_marker() {
        let tasks = Tasks::default();
        let result = "x".repeat(1 << 20);
        let mut ended = Vec::new();
        for _ in 0..(MAX_KEPT_BYTES >> 20) + 8 {
            let entry = tasks.create(Scope::Node, &me(), None, "", asked()).unwrap();
            entry.add_artifact(artifact(result.clone()));
            entry.set_status(TaskState::Completed, None);
            ended.push(entry);
        }
        let held: usize = ended.iter().map(|e| e.bytes()).sum();
        assert!(held <= MAX_KEPT_BYTES, "{held} bytes kept");
        let oldest = ended[0].snapshot(None, true);
        let oldest = &oldest.artifacts.unwrap()[0];
        let text = oldest.parts[0].as_text().unwrap();
        assert!(text.contains("was dropped"), "{text}");
        // Dropped once: the marker still tells the size of the result.
        let dropped = &oldest.metadata.as_ref().unwrap()["droppedBytes"];
        assert!(dropped.as_u64().unwrap() > 1 << 20, "{dropped}");
        let newest = ended.last().unwrap().snapshot(None, true);
        assert_eq!(
            newest.artifacts.unwrap()[0].parts[0].as_text(),
            Some(&*result)
        );
    }
}
