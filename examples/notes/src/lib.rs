//! Notes kept in the agent's key-value store: state that outlives a call,
//! even though every call runs in a fresh instance.

use agentsite_sdk::{agent, kv};

struct Notes;

const PREFIX: &str = "note/";

/// Keep short notes by title; they persist between calls.
#[agent(tags = ["notes", "memory", "storage"])]
impl Notes {
    /// Save a note under a title, replacing any note with that title.
    #[tool(idempotent, destructive)]
    fn put(
        /// The note's title.
        title: &str,
        /// The note's text.
        text: &str,
    ) -> Result<String, kv::KvError> {
        kv::set(&format!("{PREFIX}{title}"), text.as_bytes())?;
        Ok(format!("saved {title:?}"))
    }

    /// Read the note with a title.
    #[tool(read_only, idempotent)]
    fn get(
        /// The note's title.
        title: &str,
    ) -> Result<String, String> {
        match kv::get_string(&format!("{PREFIX}{title}")).map_err(|e| e.to_string())? {
            Some(text) => Ok(text),
            None => Err(format!("no note titled {title:?}")),
        }
    }

    /// List the titles of all notes, in order.
    #[tool(read_only, idempotent)]
    fn list() -> Result<Vec<String>, kv::KvError> {
        Ok(kv::keys_with_prefix(PREFIX)?
            .into_iter()
            .map(|key| key[PREFIX.len()..].to_owned())
            .collect())
    }

    /// Delete the note with a title; says whether it existed.
    #[tool(idempotent, destructive)]
    fn delete(title: &str) -> Result<bool, kv::KvError> {
        kv::delete(&format!("{PREFIX}{title}"))
    }
}
