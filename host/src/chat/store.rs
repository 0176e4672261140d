//! Conversations kept in the node's database (`<data-dir>/chat.redb`): a
//! record per conversation and its entries in order. A chat writes a few
//! entries per message a person sends, so each is its own small durable
//! transaction, done on a blocking thread.

use super::{Conversation, Entry, EntryBody};
use redb::{
    ReadableDatabase as _, ReadableTable as _, ReadableTableMetadata as _, TableDefinition,
};
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
    /// Conversations kept at most ([`MAX_CONVERSATIONS`]).
    capacity: usize,
}

impl ChatStore {
    pub fn open(path: &Path) -> Result<ChatStore, StoreError> {
        let db = crate::store::open_database(path, "chat").map_err(StoreError)?;
        let write = db.begin_write().map_err(|e| failed("cannot write", e))?;
        write
            .open_table(CONVERSATIONS)
            .map_err(|e| failed("cannot write", e))?;
        write
            .open_table(ENTRIES)
            .map_err(|e| failed("cannot write", e))?;
        write.commit().map_err(|e| failed("cannot commit", e))?;
        Ok(ChatStore {
            db: Arc::new(db),
            capacity: MAX_CONVERSATIONS,
        })
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
        let capacity = self.capacity as u64;
        self.with_db(move |db| {
            let write = db.begin_write().map_err(|e| failed("cannot write", e))?;
            let (is_new, count) = {
                let table = write
                    .open_table(CONVERSATIONS)
                    .map_err(|e| failed("cannot write", e))?;
                let stored = table
                    .get(conversation.id.as_str())
                    .map_err(|e| failed("cannot read", e))?;
                let count = table.len().map_err(|e| failed("cannot read", e))?;
                (stored.is_none(), count)
            };
            if is_new && count >= capacity {
                let oldest = {
                    let table = write
                        .open_table(CONVERSATIONS)
                        .map_err(|e| failed("cannot write", e))?;
                    least_recently_used(&table)?
                };
                if let Some(oldest) = oldest {
                    remove_conversation(&write, &oldest)?;
                }
            }
            {
                let mut table = write
                    .open_table(CONVERSATIONS)
                    .map_err(|e| failed("cannot write", e))?;
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
            let existed = remove_conversation(&write, &id)?;
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

/// Removes conversation `id` and its entries within `write`; whether it
/// was there.
fn remove_conversation(write: &redb::WriteTransaction, id: &str) -> Result<bool, StoreError> {
    let mut table = write
        .open_table(CONVERSATIONS)
        .map_err(|e| failed("cannot write", e))?;
    let existed = table
        .remove(id)
        .map_err(|e| failed("cannot write", e))?
        .is_some();
    let mut entries = write
        .open_table(ENTRIES)
        .map_err(|e| failed("cannot write", e))?;
    entries
        .retain_in((id, 0)..=(id, u64::MAX), |_, _| false)
        .map_err(|e| failed("cannot write", e))?;
    Ok(existed)
}

/// The id of the conversation used longest ago.
fn least_recently_used(
    table: &impl redb::ReadableTable<&'static str, &'static [u8]>,
) -> Result<Option<String>, StoreError> {
    let mut oldest: Option<Conversation> = None;
    for item in table.iter().map_err(|e| failed("cannot read", e))? {
        let (_, bytes) = item.map_err(|e| failed("cannot read", e))?;
        let conversation: Conversation = decode(bytes.value())?;
        if oldest
            .as_ref()
            .is_none_or(|o| conversation.updated_at < o.updated_at)
        {
            oldest = Some(conversation);
        }
    }
    Ok(oldest.map(|c| c.id))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation(id: &str, updated_at: u64) -> Conversation {
        Conversation {
            id: id.into(),
            title: format!("about {id}"),
            created_at: updated_at,
            updated_at,
            agents: Vec::new(),
            goal: None,
            titled: true,
        }
    }

    fn said(text: &str) -> EntryBody {
        EntryBody::Person {
            text: text.into(),
            team_up: false,
        }
    }

    #[tokio::test]
    async fn conversations_and_entries_survive_a_reopen_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chat.redb");
        {
            let store = ChatStore::open(&path).unwrap();
            store.save(conversation("a", 1)).await.unwrap();
            for text in ["one", "two", "three"] {
                store.append("a", said(text)).await.unwrap();
            }
            // Another process cannot open it meanwhile, and says why.
            let busy = ChatStore::open(&path).err().unwrap().to_string();
            assert!(
                busy.contains("in use by another agentsite process"),
                "{busy}"
            );
        }
        let store = ChatStore::open(&path).unwrap();
        assert_eq!(
            store.conversation("a").await.unwrap().unwrap().title,
            "about a"
        );
        let after_one = store.entries("a", 1).await.unwrap();
        assert_eq!(
            after_one.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![2, 3]
        );
        assert_eq!(after_one[1].body, said("three"));
    }

    #[tokio::test]
    async fn deleting_takes_the_entries_and_the_least_recently_used_goes_when_full() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ChatStore::open(&dir.path().join("chat.redb")).unwrap();
        store.capacity = 3;
        for (id, used) in [("a", 30), ("b", 10), ("c", 20)] {
            store.save(conversation(id, used)).await.unwrap();
            store.append(id, said(id)).await.unwrap();
        }
        // Saving one that is there already drops nothing.
        store.save(conversation("a", 40)).await.unwrap();
        assert_eq!(store.conversations().await.unwrap().len(), 3);
        // A new one drops "b", used longest ago, with its entries.
        store.save(conversation("d", 50)).await.unwrap();
        let ids: Vec<String> = store
            .conversations()
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(ids, vec!["d", "a", "c"]);
        assert!(store.entries("b", 0).await.unwrap().is_empty());
        // A new "b" starts from its first entry again.
        store.save(conversation("b", 60)).await.unwrap();
        assert_eq!(store.append("b", said("again")).await.unwrap().seq, 1);

        assert!(store.delete("a").await.unwrap());
        assert!(!store.delete("a").await.unwrap());
        assert!(store.entries("a", 0).await.unwrap().is_empty());
    }
}
