//! Goals kept in the node's database (`<data-dir>/goals.redb`), written as
//! they happen: a record per goal and its messages in order.
//!
//! Writes go to one writer thread that commits whatever has queued up in a
//! single durable transaction, so a turn never waits for the disk and a
//! burst of messages costs one sync. Readers flush first: what a caller
//! appended is there when it reads. When the node opens the store, goals
//! that were running are marked interrupted.
//!
//! The store keeps at most [`SHARES`]`.total` goals, shared among those who
//! give them as [`crate::requester`] says: a goal that cannot be kept is
//! refused when it is given ([`GoalStore::admit`]), and the goal that makes
//! room for it goes in the same write.

use super::message::{Body, GoalId, GoalRecord, GoalState, Message, Speaker, unix_millis};
use crate::requester::{Kept, Refused, Requester, Room, Shares, make_room};
use redb::{ReadableDatabase as _, ReadableTable as _, TableDefinition};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError, mpsc};
use std::time::Duration;
use tokio::sync::oneshot;

const GOALS: TableDefinition<&str, &[u8]> = TableDefinition::new("goals");
const MESSAGES: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("messages");

/// Goals kept at most, and each requester's share of them.
pub const SHARES: Shares = Shares {
    total: 1000,
    per_requester: 250,
    min_age: Duration::from_secs(24 * 3600),
    what: "goals",
};

/// Why the store failed. The node goes on; the goal's record says so.
#[derive(Debug, thiserror::Error)]
#[error("goal storage: {0}")]
pub struct StoreError(String);

fn failed(context: &str, error: impl std::fmt::Display) -> StoreError {
    StoreError(format!("{context}: {error}"))
}

enum Write {
    Goal(GoalRecord),
    Message(GoalId, Message),
    /// A goal and its messages go.
    Remove(GoalId),
    Flush(oneshot::Sender<()>),
}

/// What the store knows of each kept goal to share its room.
struct Indexed {
    requester: Requester,
    changed: u64,
    finished: bool,
}

impl Indexed {
    fn of(record: &GoalRecord) -> Indexed {
        Indexed {
            requester: record.requester.clone(),
            changed: record.updated_at,
            finished: !record.state.is_active(),
        }
    }
}

/// The node's goals on disk.
pub struct GoalStore {
    db: std::sync::Arc<redb::Database>,
    /// The kept goals, by id.
    index: Mutex<HashMap<GoalId, Indexed>>,
    /// `None` only while the store is dropped.
    writes: Option<mpsc::Sender<Write>>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Drop for GoalStore {
    /// Lets the writer commit what is queued and close the database, so
    /// that the file can be opened again at once.
    fn drop(&mut self) {
        self.writes.take();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

impl GoalStore {
    /// Opens (or creates) the store at `path` and marks goals that were
    /// running when the node stopped as interrupted.
    pub fn open(path: &Path) -> Result<GoalStore, StoreError> {
        let db = crate::store::open_database(path, "goals").map_err(StoreError)?;
        // Both tables exist from here on: readers never find one missing.
        let write = db.begin_write().map_err(|e| failed("cannot write", e))?;
        write
            .open_table(GOALS)
            .map_err(|e| failed("cannot write", e))?;
        write
            .open_table(MESSAGES)
            .map_err(|e| failed("cannot write", e))?;
        write.commit().map_err(|e| failed("cannot commit", e))?;
        let db = std::sync::Arc::new(db);
        interrupt_running(&db)?;
        let read = db.begin_read().map_err(|e| failed("cannot read", e))?;
        let index = all_goals(&read)?
            .iter()
            .map(|record| (record.id.clone(), Indexed::of(record)))
            .collect();
        drop(read);
        let (writes, queue) = mpsc::channel();
        let writer_db = db.clone();
        let writer = std::thread::Builder::new()
            .name("goal-store".into())
            .spawn(move || write_loop(&writer_db, queue))
            .map_err(|e| failed("cannot start its writer", e))?;
        Ok(GoalStore {
            db,
            index: Mutex::new(index),
            writes: Some(writes),
            writer: Some(writer),
        })
    }

    fn index(&self) -> std::sync::MutexGuard<'_, HashMap<GoalId, Indexed>> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a place for the new goal `record` among the kept goals,
    /// removing the goal that makes room for it, or says why it cannot be
    /// kept.
    pub fn admit(&self, record: &GoalRecord) -> Result<(), Refused> {
        let mut index = self.index();
        let room = {
            let kept: Vec<Kept<'_, &str>> = index
                .iter()
                .map(|(id, goal)| Kept {
                    id: id.as_str(),
                    requester: &goal.requester,
                    changed: goal.changed,
                    finished: goal.finished,
                })
                .collect();
            make_room(&kept, &record.requester, &SHARES, unix_millis())?.map_id(str::to_owned)
        };
        if let Room::Drop(old) = room {
            tracing::info!(goal = %old, "a kept goal goes to make room for {}'s", record.requester);
            index.remove(&old);
            self.send(Write::Remove(old));
        }
        index.insert(record.id.clone(), Indexed::of(record));
        Ok(())
    }

    /// Gives up the place [`GoalStore::admit`] took for goal `id`, which
    /// did not start.
    pub fn forget(&self, id: &str) {
        self.index().remove(id);
        self.send(Write::Remove(id.to_owned()));
    }

    /// Saves `record` (replacing the goal's earlier record).
    pub fn save(&self, record: &GoalRecord) {
        self.index().insert(record.id.clone(), Indexed::of(record));
        self.send(Write::Goal(record.clone()));
    }

    /// Appends `message` to the goal `id`.
    pub fn append(&self, id: &str, message: &Message) {
        self.send(Write::Message(id.to_owned(), message.clone()));
    }

    /// Waits until everything saved and appended so far is on disk.
    pub async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        self.send(Write::Flush(done));
        let _ = flushed.await;
    }

    fn send(&self, write: Write) {
        if let Some(writes) = &self.writes {
            let _ = writes.send(write);
        }
    }

    /// The goal `id`, if stored.
    pub async fn goal(&self, id: &str) -> Result<Option<GoalRecord>, StoreError> {
        self.flush().await;
        let read = self.db.begin_read().map_err(|e| failed("cannot read", e))?;
        let table = read
            .open_table(GOALS)
            .map_err(|e| failed("cannot read", e))?;
        let Some(bytes) = table.get(id).map_err(|e| failed("cannot read", e))? else {
            return Ok(None);
        };
        decode(bytes.value()).map(Some)
    }

    /// Stored goals, newest first, at most `limit`.
    pub async fn goals(&self, limit: usize) -> Result<Vec<GoalRecord>, StoreError> {
        self.flush().await;
        let read = self.db.begin_read().map_err(|e| failed("cannot read", e))?;
        let mut goals = all_goals(&read)?;
        goals.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
        goals.truncate(limit);
        Ok(goals)
    }

    /// The messages of goal `id` after `after`, in order, at most `limit`.
    pub async fn messages(
        &self,
        id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Message>, StoreError> {
        self.flush().await;
        let read = self.db.begin_read().map_err(|e| failed("cannot read", e))?;
        read_messages(&read, id, after, limit)
    }
}

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| failed("a stored goal is unreadable", e))
}

fn all_goals(read: &redb::ReadTransaction) -> Result<Vec<GoalRecord>, StoreError> {
    let table = read
        .open_table(GOALS)
        .map_err(|e| failed("cannot read", e))?;
    let mut goals = Vec::new();
    for entry in table.iter().map_err(|e| failed("cannot read", e))? {
        let (_, bytes) = entry.map_err(|e| failed("cannot read", e))?;
        match decode::<GoalRecord>(bytes.value()) {
            Ok(goal) => goals.push(goal),
            Err(e) => tracing::warn!("{e}"),
        }
    }
    Ok(goals)
}

fn read_messages(
    read: &redb::ReadTransaction,
    id: &str,
    after: u64,
    limit: usize,
) -> Result<Vec<Message>, StoreError> {
    let table = read
        .open_table(MESSAGES)
        .map_err(|e| failed("cannot read", e))?;
    let start = after.saturating_add(1);
    let mut messages = Vec::new();
    for entry in table
        .range((id, start)..=(id, u64::MAX))
        .map_err(|e| failed("cannot read", e))?
        .take(limit)
    {
        let (_, bytes) = entry.map_err(|e| failed("cannot read", e))?;
        messages.push(decode(bytes.value())?);
    }
    Ok(messages)
}

/// The writer thread: commits queued writes in batches until the store
/// is dropped.
fn write_loop(db: &redb::Database, queue: mpsc::Receiver<Write>) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        batch.extend(queue.try_iter());
        let mut flushed = Vec::new();
        if let Err(e) = commit(db, batch, &mut flushed) {
            tracing::error!("{e}");
        }
        for done in flushed {
            let _ = done.send(());
        }
    }
}

fn commit(
    db: &redb::Database,
    batch: Vec<Write>,
    flushed: &mut Vec<oneshot::Sender<()>>,
) -> Result<(), StoreError> {
    let write = db.begin_write().map_err(|e| failed("cannot write", e))?;
    {
        let mut goals = write
            .open_table(GOALS)
            .map_err(|e| failed("cannot write", e))?;
        let mut messages = write
            .open_table(MESSAGES)
            .map_err(|e| failed("cannot write", e))?;
        for item in batch {
            match item {
                Write::Goal(record) => {
                    let bytes =
                        serde_json::to_vec(&record).map_err(|e| failed("cannot encode", e))?;
                    goals
                        .insert(record.id.as_str(), bytes.as_slice())
                        .map_err(|e| failed("cannot write", e))?;
                }
                Write::Message(id, message) => {
                    let bytes =
                        serde_json::to_vec(&message).map_err(|e| failed("cannot encode", e))?;
                    messages
                        .insert((id.as_str(), message.seq), bytes.as_slice())
                        .map_err(|e| failed("cannot write", e))?;
                }
                Write::Remove(id) => {
                    goals
                        .remove(id.as_str())
                        .map_err(|e| failed("cannot write", e))?;
                    messages
                        .retain_in((id.as_str(), 0)..=(id.as_str(), u64::MAX), |_, _| false)
                        .map_err(|e| failed("cannot write", e))?;
                }
                Write::Flush(done) => flushed.push(done),
            }
        }
    }
    write.commit().map_err(|e| failed("cannot commit", e))
}

/// Marks goals left running by a node that stopped as interrupted, with a
/// note in their conversation.
fn interrupt_running(db: &redb::Database) -> Result<(), StoreError> {
    let read = db.begin_read().map_err(|e| failed("cannot read", e))?;
    let running: Vec<GoalRecord> = all_goals(&read)?
        .into_iter()
        .filter(|goal| goal.state.is_active())
        .collect();
    let last_seqs = running
        .iter()
        .map(|goal| last_seq(&read, &goal.id))
        .collect::<Result<Vec<_>, _>>()?;
    drop(read);
    if running.is_empty() {
        return Ok(());
    }
    let now = unix_millis();
    let mut writes = Vec::new();
    for (mut goal, last) in running.into_iter().zip(last_seqs) {
        let reason = "the node stopped while the goal ran";
        let note = Message {
            seq: last + 1,
            at: now,
            team: None,
            speaker: Speaker::Node,
            body: Body::Notice {
                text: format!(
                    "{reason}; `agentsite goal say {} \"...\"` resumes it",
                    goal.id
                ),
            },
            next: None,
        };
        goal.state = GoalState::Interrupted;
        goal.reason = Some(reason.into());
        goal.updated_at = now;
        writes.push(Write::Message(goal.id.clone(), note));
        writes.push(Write::Goal(goal));
    }
    commit(db, writes, &mut Vec::new())
}

/// The number of the last message of goal `id` (0 when it has none).
fn last_seq(read: &redb::ReadTransaction, id: &str) -> Result<u64, StoreError> {
    let table = read
        .open_table(MESSAGES)
        .map_err(|e| failed("cannot read", e))?;
    let last = table
        .range((id, 0)..=(id, u64::MAX))
        .map_err(|e| failed("cannot read", e))?
        .next_back();
    match last {
        Some(entry) => Ok(entry.map_err(|e| failed("cannot read", e))?.0.value().1),
        None => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::goals::config::GoalsConfig;
    use crate::goals::message::GoalUsage;

    fn record(id: &str, state: GoalState, created_at: u64) -> GoalRecord {
        GoalRecord {
            id: id.into(),
            text: "find the revenue".into(),
            state,
            created_at,
            updated_at: created_at,
            team: vec!["text".into()],
            model: "m".into(),
            limits: GoalsConfig::default().limits(&Default::default()).unwrap(),
            usage: GoalUsage::default(),
            conclusion: None,
            reason: None,
            requester: Requester::default(),
            verify: Default::default(),
        }
    }

    fn say(seq: u64, text: &str) -> Message {
        Message {
            seq,
            at: seq,
            team: None,
            speaker: Speaker::Person,
            body: Body::Say { text: text.into() },
            next: None,
        }
    }

    #[tokio::test]
    async fn goals_and_messages_survive_a_restart_and_running_ones_are_interrupted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("goals.redb");
        {
            let store = GoalStore::open(&path).unwrap();
            store.save(&record("ga", GoalState::Concluded, 1));
            store.save(&record("gb", GoalState::Running, 2));
            for seq in 1..=3 {
                store.append("ga", &say(seq, &format!("a{seq}")));
                store.append("gb", &say(seq, &format!("b{seq}")));
            }
            assert_eq!(store.messages("ga", 1, 10).await.unwrap().len(), 2);
            let listed = store.goals(10).await.unwrap();
            assert_eq!(listed[0].id, "gb", "newest first");
        }
        let store = GoalStore::open(&path).unwrap();
        let a = store.goal("ga").await.unwrap().unwrap();
        assert_eq!(a.state, GoalState::Concluded);
        let b = store.goal("gb").await.unwrap().unwrap();
        assert_eq!(b.state, GoalState::Interrupted);
        let messages = store.messages("gb", 0, 100).await.unwrap();
        assert_eq!(messages.len(), 4);
        assert_eq!(messages[3].seq, 4);
        assert!(matches!(&messages[3].body, Body::Notice { text } if text.contains("goal say gb")));
        assert_eq!(store.messages("ga", 0, 100).await.unwrap().len(), 3);
        assert!(store.goal("gc").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_requester_past_its_share_makes_room_with_its_own_oldest_goal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("goals.redb");
        let operator = Requester::new("http", Some("127.0.0.1".parse().unwrap()));
        let flood = Requester::new("a2a", Some("10.0.0.9".parse().unwrap()));
        let store = GoalStore::open(&path).unwrap();
        let mut theirs = record("g-operator", GoalState::Concluded, 1);
        theirs.requester = operator;
        store.admit(&theirs).unwrap();
        store.save(&theirs);
        store.append("g-flood-00000", &say(1, "x"));
        for n in 0..SHARES.per_requester as u64 + 5 {
            let mut goal = record(&format!("g-flood-{n:05}"), GoalState::Running, n + 2);
            goal.requester = flood.clone();
            if n == SHARES.per_requester as u64 {
                // At its share with every goal running: refused.
                let refused = store.admit(&goal).unwrap_err();
                assert!(refused.0.contains("none of them has ended"), "{refused}");
                for m in 0..5 {
                    let mut ended = record(&format!("g-flood-{m:05}"), GoalState::Concluded, m + 2);
                    ended.requester = flood.clone();
                    store.save(&ended);
                }
            }
            store.admit(&goal).unwrap();
            store.save(&goal);
        }
        drop(store);
        // What was decided is what is on disk, also after a restart.
        let store = GoalStore::open(&path).unwrap();
        let goals = store.goals(usize::MAX).await.unwrap();
        assert_eq!(goals.len(), SHARES.per_requester + 1);
        assert!(
            goals.iter().any(|g| g.id == "g-operator"),
            "another's goal stays"
        );
        assert!(
            !goals.iter().any(|g| g.id == "g-flood-00000"),
            "its own oldest went"
        );
        assert!(
            store
                .messages("g-flood-00000", 0, 10)
                .await
                .unwrap()
                .is_empty()
        );
        let mut next = record("g-next", GoalState::Running, 999);
        next.requester = flood;
        assert!(store.admit(&next).is_ok(), "the index is read back on open");
    }
}
