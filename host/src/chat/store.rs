//! Conversations kept in the node's database (`<data-dir>/chat.redb`): a
//! record per conversation and its entries in order. A chat writes a few
//! entries per message a person sends, so each is its own small durable
//! transaction, done on a blocking thread.

use super::{Conversation, Entry, EntryBody};
use redb::{ReadableDatabase as _, ReadableTable as _, TableDefinition};
use std::path::Path;
use std::sync::Arc;

const CONVERSATIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("conversations");
const ENTRIES: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("entries");

/// Conversations kept at most; a new one past it drops the one least
/// recently used.
pub const MAX_CONVERSATIONS: usize = 500;
/// Entries one conversation holds at most.
pub const MAX_ENTRIES: u64 = 2000;

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
#[error("chat storage: {0}")]
pub struct StoreError(String);

fn failed(context: &str, error: impl std::fmt::Display) -> StoreError {
    StoreError(format!("{context}: {error}"))
}

pub struct ChatStore {
    db: Arc<redb::Database>,
}

impl ChatStore {
    pub fn open(path: &Path) -> Result<ChatStore, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| failed("cannot create its folder", e))?;
        }
        let db = redb::Database::create(path).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => StoreError(format!(
                "{} is in use by another agentsite process",
                path.display()
            )),
            other => failed("cannot open the chat database", other),
        })?;
        let write = db.begin_write().map_err(|e| failed("cannot write", e))?;
        write
            .open_table(CONVERSATIONS)
            .map_err(|e| failed("cannot write", e))?;
        write
            .open_table(ENTRIES)
            .map_err(|e| failed("cannot write", e))?;
        write.commit().map_err(|e| failed("cannot commit", e))?;
        Ok(ChatStore { db: Arc::new(db) })
    }

    /// Runs `work` on the database on a blocking thread.
    async fn with_db<T: Send + 'static>(
        &self,
        work: impl FnOnce(&redb::Database) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || work(&db))
            .await
            .map_err(|e| failed("a storage task failed", e))?
    }

    /// Saves `conversation`, replacing its earlier record; past
    /// [`MAX_CONVERSATIONS`] the least recently used one goes.
    pub async fn save(&self, conversation: Conversation) -> Result<(), StoreError> {
        self.with_db(move |db| {
            let mut all = all_conversations(db)?;
            let write = db.begin_write().map_err(|e| failed("cannot write", e))?;
            {
                let mut table = write
                    .open_table(CONVERSATIONS)
                    .map_err(|e| failed("cannot write", e))?;
                let is_new = !all.iter().any(|c| c.id == conversation.id);
                if is_new && all.len() >= MAX_CONVERSATIONS {
                    all.sort_by_key(|c| c.updated_at);
                    let oldest = all[0].id.clone();
                    table
                        .remove(oldest.as_str())
                        .map_err(|e| failed("cannot write", e))?;
                    let mut entries = write
                        .open_table(ENTRIES)
                        .map_err(|e| failed("cannot write", e))?;
                    entries
                        .retain_in(
                            (oldest.as_str(), 0)..=(oldest.as_str(), u64::MAX),
                            |_, _| false,
                        )
                        .map_err(|e| failed("cannot write", e))?;
                }
                let bytes =
                    serde_json::to_vec(&conversation).map_err(|e| failed("cannot encode", e))?;
                table
                    .insert(conversation.id.as_str(), bytes.as_slice())
                    .map_err(|e| failed("cannot write", e))?;
            }
            write.commit().map_err(|e| failed("cannot commit", e))
        })
        .await
    }

    pub async fn conversation(&self, id: &str) -> Result<Option<Conversation>, StoreError> {
        let id = id.to_owned();
        self.with_db(move |db| {
            let read = db.begin_read().map_err(|e| failed("cannot read", e))?;
            let table = read
                .open_table(CONVERSATIONS)
                .map_err(|e| failed("cannot read", e))?;
            match table
                .get(id.as_str())
                .map_err(|e| failed("cannot read", e))?
            {
                Some(bytes) => decode(bytes.value()).map(Some),
                None => Ok(None),
            }
        })
        .await
    }

    /// Every conversation, most recently used first.
    pub async fn conversations(&self) -> Result<Vec<Conversation>, StoreError> {
        self.with_db(|db| {
            let mut all = all_conversations(db)?;
            all.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(a.id.cmp(&b.id)));
            Ok(all)
        })
        .await
    }

    /// Deletes the conversation `id` and its entries; whether it was there.
    pub async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.with_db(move |db| {
            let write = db.begin_write().map_err(|e| failed("cannot write", e))?;
            let existed = {
                let mut table = write
                    .open_table(CONVERSATIONS)
                    .map_err(|e| failed("cannot write", e))?;
                let existed = table
                    .remove(id.as_str())
                    .map_err(|e| failed("cannot write", e))?
                    .is_some();
                let mut entries = write
                    .open_table(ENTRIES)
                    .map_err(|e| failed("cannot write", e))?;
                entries
                    .retain_in((id.as_str(), 0)..=(id.as_str(), u64::MAX), |_, _| false)
                    .map_err(|e| failed("cannot write", e))?;
                existed
            };
            write.commit().map_err(|e| failed("cannot commit", e))?;
            Ok(existed)
        })
        .await
    }

    /// Appends `body` to the conversation `id`; the entry as stored.
    pub async fn append(&self, id: &str, body: EntryBody) -> Result<Entry, StoreError> {
        let id = id.to_owned();
        self.with_db(move |db| {
            let write = db.begin_write().map_err(|e| failed("cannot write", e))?;
            let entry = {
                let mut entries = write
                    .open_table(ENTRIES)
                    .map_err(|e| failed("cannot write", e))?;
                let last = entries
                    .range((id.as_str(), 0)..=(id.as_str(), u64::MAX))
                    .map_err(|e| failed("cannot read", e))?
                    .next_back()
                    .transpose()
                    .map_err(|e| failed("cannot read", e))?
                    .map(|(key, _)| key.value().1);
                let seq = last.map_or(1, |last| last + 1);
                if seq > MAX_ENTRIES {
                    return Err(StoreError(format!(
                        "this conversation holds its most, {MAX_ENTRIES} entries: start a new one"
                    )));
                }
                let entry = Entry {
                    seq,
                    at: super::unix_millis(),
                    body,
                };
                let bytes = serde_json::to_vec(&entry).map_err(|e| failed("cannot encode", e))?;
                entries
                    .insert((id.as_str(), seq), bytes.as_slice())
                    .map_err(|e| failed("cannot write", e))?;
                entry
            };
            write.commit().map_err(|e| failed("cannot commit", e))?;
            Ok(entry)
        })
        .await
    }

    /// The entries of `id` after `after`, in order.
    pub async fn entries(&self, id: &str, after: u64) -> Result<Vec<Entry>, StoreError> {
        let id = id.to_owned();
        self.with_db(move |db| {
            let read = db.begin_read().map_err(|e| failed("cannot read", e))?;
            let entries = read
                .open_table(ENTRIES)
                .map_err(|e| failed("cannot read", e))?;
            let mut out = Vec::new();
            for item in entries
                .range((id.as_str(), after.saturating_add(1))..=(id.as_str(), u64::MAX))
                .map_err(|e| failed("cannot read", e))?
            {
                let (_, bytes) = item.map_err(|e| failed("cannot read", e))?;
                out.push(decode(bytes.value())?);
            }
            Ok(out)
        })
        .await
    }
}

fn all_conversations(db: &redb::Database) -> Result<Vec<Conversation>, StoreError> {
    let read = db.begin_read().map_err(|e| failed("cannot read", e))?;
    let table = read
        .open_table(CONVERSATIONS)
        .map_err(|e| failed("cannot read", e))?;
    let mut all = Vec::new();
    for item in table.iter().map_err(|e| failed("cannot read", e))? {
        let (_, bytes) = item.map_err(|e| failed("cannot read", e))?;
        all.push(decode(bytes.value())?);
    }
    Ok(all)
}

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| failed("a stored record is damaged", e))
}
