//! The `kv` import: a small persistent key-value store per agent.
//!
//! Only agents the policy grants a store (with a quota) have one; for the
//! others every operation answers `not-granted`. Each agent gets its own
//! redb database file (`<data>/kv/<id hex>.redb`), so agents cannot see each
//! other's keys and removing an agent's data is removing one file.
//! Databases are opened on first use and kept open for the life of the
//! node. Every `set` and `delete` is a committed (fsynced) transaction:
//! "durable when it returns". What an agent holds is counted in the same
//! transactions, so the quota holds across crashes: the bytes of each key
//! and value plus [`ENTRY_OVERHEAD`] per entry, since a database of many
//! empty values costs disk space too.

pub mod grant;

use super::{CallContext, CallPart, CallState};
use crate::AgentId;
use crate::agent::key::AgentKey;
use crate::audit::Denials;
use crate::capabilities::bindings::agentsite::agent::kv::{self, KvError};
use crate::capabilities::sources::Used;
use redb::{ReadableDatabase as _, ReadableTable as _, TableDefinition};
use std::collections::HashMap;
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use wasmtime::component::{HasSelf, Linker};

const TABLE: TableDefinition<&str, &[u8]> = TableDefinition::new("kv");
/// What [`TABLE`] holds against the quota, under the key [`USED`].
const USAGE: TableDefinition<&str, u64> = TableDefinition::new("usage");
/// Bytes with [`ENTRY_OVERHEAD`] counted. Databases written before it was
/// counted kept theirs under "bytes", which is left alone and recounted.
const USED: &str = "bytes+entries";

/// What each entry costs against the quota beyond its key and value: about
/// what the database spends on one (its place in a B-tree page, offsets,
/// page slack), so that a quota bounds the file however the agent splits
/// its data.
pub const ENTRY_OVERHEAD: u64 = 64;

/// What one entry costs against the quota.
fn entry_cost(key: &str, value_len: usize) -> u64 {
    (key.len() + value_len) as u64 + ENTRY_OVERHEAD
}

/// Longest key, in bytes.
pub const MAX_KEY: usize = 1024;
/// Largest value, in bytes.
pub const MAX_VALUE: usize = 1 << 20;
/// Most keys returned by one `list-keys`.
pub const MAX_LIST: u32 = 1000;

/// The key-value databases of all agents on a node: one per agent name
/// for the agents the operator installed (every build of an agent reads
/// the data the last one wrote), one per id for agents from the network.
pub struct KvStores {
    dir: PathBuf,
    open: Mutex<HashMap<AgentKey, Arc<redb::Database>>>,
}

impl KvStores {
    pub fn new(dir: PathBuf) -> Self {
        KvStores {
            dir,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The database file of `store`. Agent names are a-z 0-9 - _, and ids
    /// 64 hex digits: the two never name the same file.
    pub fn path(&self, store: &AgentKey) -> PathBuf {
        match store {
            AgentKey::Id(id) => self.dir.join(format!("{}.redb", id.hex())),
            AgentKey::Name(name) => self.dir.join(format!("name-{name}.redb")),
        }
    }

    /// Makes the data the build `build` kept under its id (before stores
    /// followed names) `store`'s, unless `store` has data of its own.
    pub fn adopt(&self, store: &AgentKey, build: &AgentId) -> Result<(), KvError> {
        let Some((from, to)) = self.build_data_to_move(store, build) else {
            return Ok(());
        };
        self.close(&AgentKey::Id(*build));
        std::fs::rename(&from, &to).map_err(|e| storage("cannot keep the agent's kv data", e))
    }

    /// Where the data `build` kept under its id is, and where it goes to be
    /// `store`'s: only when `store` is not that id and has no data yet.
    fn build_data_to_move(&self, store: &AgentKey, build: &AgentId) -> Option<(PathBuf, PathBuf)> {
        let from = self.path(&AgentKey::Id(*build));
        let to = self.path(store);
        (!matches!(store, AgentKey::Id(_)) && !to.exists() && from.exists()).then_some((from, to))
    }

    fn database(&self, store: &AgentKey, build: &AgentId) -> Result<Arc<redb::Database>, KvError> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(db) = open.get(store) {
            return Ok(db.clone());
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| storage("cannot create kv folder", e))?;
        // Data this build wrote under its id before stores followed names.
        if let Some((from, to)) = self.build_data_to_move(store, build) {
            std::fs::rename(&from, &to)
                .map_err(|e| storage("cannot keep the agent's kv data", e))?;
        }
        let path = self.path(store);
        let db = redb::Database::create(path).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => KvError::Storage(
                "the kv store is in use by another agentsite process; retry when it is done".into(),
            ),
            other => storage("cannot open kv store", other),
        })?;
        let db = Arc::new(db);
        open.insert(store.clone(), db.clone());
        Ok(db)
    }

    /// Closes the database of `store` (before its file is removed or moved).
    pub fn close(&self, store: &AgentKey) {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(store);
    }
}

fn storage(context: &str, error: impl std::fmt::Display) -> KvError {
    KvError::Storage(format!("{context}: {error}"))
}

fn check_key(key: &str) -> Result<(), KvError> {
    if key.is_empty() {
        return Err(KvError::Invalid("keys cannot be empty".into()));
    }
    if key.len() > MAX_KEY {
        return Err(KvError::Invalid(format!(
            "key of {} bytes is longer than the limit of {MAX_KEY}",
            key.len()
        )));
    }
    Ok(())
}

/// Per-call state of the `kv` import: the calling agent's database and
/// quota, when it has one.
pub struct KvState {
    stores: Arc<KvStores>,
    /// Whose database it is.
    store: AgentKey,
    /// The build that calls.
    build: AgentId,
    quota: Option<u64>,
    denials: Option<Denials>,
}

impl KvState {
    /// The build `build` using the database of `store`; `quota` is the
    /// bytes of keys and values the agent may hold, `None` when the policy
    /// grants it no store.
    pub(crate) fn new(
        stores: Arc<KvStores>,
        store: AgentKey,
        build: AgentId,
        quota: Option<u64>,
    ) -> Self {
        KvState {
            stores,
            store,
            build,
            quota,
            denials: None,
        }
    }

    /// Reports refusals (no store, quota used up) to `denials`.
    pub(crate) fn reporting(self, denials: Denials) -> Self {
        KvState {
            denials: Some(denials),
            ..self
        }
    }

    fn deny(&self, reason: &str) {
        if let Some(denials) = &self.denials {
            denials.record("kv", reason);
        }
    }

    fn database(&self) -> Result<Arc<redb::Database>, KvError> {
        if self.quota.is_none() {
            self.deny("no key-value store granted");
            return Err(KvError::NotGranted(
                "the operator has not granted this agent a key-value store \
                 (`agentsite grant <agent> kv=<quota>`)"
                    .into(),
            ));
        }
        self.stores.database(&self.store, &self.build)
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        check_key(key)?;
        let db = self.database()?;
        let read = db.begin_read().map_err(|e| storage("kv read failed", e))?;
        let table = match read.open_table(TABLE) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(storage("kv read failed", e)),
        };
        let value = table.get(key).map_err(|e| storage("kv read failed", e))?;
        Ok(value.map(|v| v.value().to_vec()))
    }

    fn set(&self, key: &str, value: &[u8]) -> Result<(), KvError> {
        check_key(key)?;
        if value.len() > MAX_VALUE {
            return Err(KvError::Invalid(format!(
                "value of {} bytes is larger than the limit of {MAX_VALUE}",
                value.len()
            )));
        }
        let db = self.database()?;
        let quota = self.quota.unwrap_or(0);
        let write = db
            .begin_write()
            .map_err(|e| storage("kv write failed", e))?;
        {
            let (mut table, mut usage) = open_for_write(&write)?;
            let used = used_bytes(&table, &usage)?;
            let old = table
                .get(key)
                .map_err(|e| storage("kv read failed", e))?
                .map_or(0, |v| entry_cost(key, v.value().len()));
            let new_used = used - old.min(used) + entry_cost(key, value.len());
            if new_used > quota && new_used > used {
                self.deny("quota exceeded");
                // Dropping the transaction discards it.
                return Err(KvError::QuotaExceeded(format!(
                    "storing {} bytes under {key:?} would hold {new_used} bytes, over this agent's quota of {quota}",
                    value.len()
                )));
            }
            table
                .insert(key, value)
                .map_err(|e| storage("kv write failed", e))?;
            usage
                .insert(USED, new_used)
                .map_err(|e| storage("kv write failed", e))?;
        }
        write.commit().map_err(|e| storage("kv commit failed", e))
    }

    fn delete(&self, key: &str) -> Result<bool, KvError> {
        check_key(key)?;
        let db = self.database()?;
        let write = db
            .begin_write()
            .map_err(|e| storage("kv write failed", e))?;
        let existed = {
            let (mut table, mut usage) = open_for_write(&write)?;
            let used = used_bytes(&table, &usage)?;
            let removed = table
                .remove(key)
                .map_err(|e| storage("kv write failed", e))?
                .map(|v| entry_cost(key, v.value().len()));
            if let Some(freed) = removed {
                usage
                    .insert(USED, used.saturating_sub(freed))
                    .map_err(|e| storage("kv write failed", e))?;
            }
            removed.is_some()
        };
        write.commit().map_err(|e| storage("kv commit failed", e))?;
        Ok(existed)
    }

    fn list_keys(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<String>, KvError> {
        let db = self.database()?;
        let read = db.begin_read().map_err(|e| storage("kv read failed", e))?;
        let table = match read.open_table(TABLE) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(storage("kv read failed", e)),
        };
        let lower = match after {
            Some(after) if after >= prefix => Bound::Excluded(after),
            _ => Bound::Included(prefix),
        };
        let range = table
            .range::<&str>((lower, Bound::Unbounded))
            .map_err(|e| storage("kv read failed", e))?;
        let mut keys = Vec::new();
        for entry in range {
            if keys.len() >= limit.min(MAX_LIST) as usize {
                break;
            }
            let (key, _) = entry.map_err(|e| storage("kv read failed", e))?;
            let key = key.value();
            if !key.starts_with(prefix) {
                break;
            }
            keys.push(key.to_owned());
        }
        Ok(keys)
    }
}

/// What `table` holds against the quota: as counted in `usage`, or counted
/// now for a database written before this way of counting.
/// [`TABLE`] and [`USAGE`] as a write transaction opens them.
type Entries<'t> = redb::Table<'t, &'static str, &'static [u8]>;
type Usage<'t> = redb::Table<'t, &'static str, u64>;

/// The entries and their usage count, in a write transaction.
fn open_for_write(write: &redb::WriteTransaction) -> Result<(Entries<'_>, Usage<'_>), KvError> {
    let table = write
        .open_table(TABLE)
        .map_err(|e| storage("kv write failed", e))?;
    let usage = write
        .open_table(USAGE)
        .map_err(|e| storage("kv write failed", e))?;
    Ok((table, usage))
}

fn used_bytes(
    table: &redb::Table<&str, &[u8]>,
    usage: &redb::Table<&str, u64>,
) -> Result<u64, KvError> {
    if let Some(used) = usage.get(USED).map_err(|e| storage("kv read failed", e))? {
        return Ok(used.value());
    }
    let mut used = 0;
    for entry in table.iter().map_err(|e| storage("kv read failed", e))? {
        let (key, value) = entry.map_err(|e| storage("kv read failed", e))?;
        used += entry_cost(key.value(), value.value().len());
    }
    Ok(used)
}

impl kv::Host for KvState {
    fn get(&mut self, key: String) -> wasmtime::Result<Result<Option<Vec<u8>>, KvError>> {
        Ok(KvState::get(self, &key))
    }

    fn set(&mut self, key: String, value: Vec<u8>) -> wasmtime::Result<Result<(), KvError>> {
        Ok(KvState::set(self, &key, &value))
    }

    fn delete(&mut self, key: String) -> wasmtime::Result<Result<bool, KvError>> {
        Ok(KvState::delete(self, &key))
    }

    fn list_keys(
        &mut self,
        prefix: String,
        after: Option<String>,
        limit: u32,
    ) -> wasmtime::Result<Result<Vec<String>, KvError>> {
        Ok(KvState::list_keys(self, &prefix, after.as_deref(), limit))
    }
}

impl CallPart for KvState {
    fn for_call(call: &CallContext<'_>) -> anyhow::Result<KvState> {
        let stores = call.services.kv.clone();
        Ok(
            KvState::new(stores, call.store.clone(), call.agent, call.grants.kv)
                .reporting(call.denials.clone()),
        )
    }

    fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        kv::add_to_linker::<CallState, HasSelf<KvState>>(linker, |state| {
            state.sources.record(Used::KV);
            &mut state.kv
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_build_of_a_named_agent_reads_the_data_the_last_one_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let stores = Arc::new(KvStores::new(dir.path().to_owned()));
        let name = AgentKey::Name("notes".into());
        let (first, second) = (AgentId::of(b"notes 1"), AgentId::of(b"notes 2"));
        // The first build wrote under its id, before stores followed names.
        let legacy = KvState::new(stores.clone(), AgentKey::Id(first), first, Some(1 << 20));
        legacy.set("greeting", b"hello").unwrap();
        stores.close(&AgentKey::Id(first));
        stores.adopt(&name, &first).unwrap();
        let next = KvState::new(stores.clone(), name.clone(), second, Some(1 << 20));
        assert_eq!(
            next.get("greeting").unwrap().as_deref(),
            Some(&b"hello"[..])
        );
        next.set("greeting", b"hi").unwrap();
        // A later build, in another process once this one has let the
        // database go, finds it too.
        drop(next);
        stores.close(&name);
        let later = KvState::new(
            Arc::new(KvStores::new(dir.path().to_owned())),
            name,
            AgentId::of(b"notes 3"),
            Some(1 << 20),
        );
        assert_eq!(later.get("greeting").unwrap().as_deref(), Some(&b"hi"[..]));
        // An agent from the network with the same name has a store of its own.
        let stranger = AgentId::of(b"someone else's notes");
        let theirs = KvState::new(stores, AgentKey::Id(stranger), stranger, Some(1 << 20));
        assert_eq!(theirs.get("greeting").unwrap(), None);
    }

    fn state(dir: &std::path::Path, agent: &[u8]) -> KvState {
        KvState::new(
            Arc::new(KvStores::new(dir.to_owned())),
            AgentKey::Id(AgentId::of(agent)),
            AgentId::of(agent),
            Some(1 << 20),
        )
    }

    #[test]
    fn values_persist_and_agents_are_isolated() {
        let dir = tempfile::tempdir().unwrap();
        let stores = Arc::new(KvStores::new(dir.path().to_owned()));
        let notes = KvState::new(
            stores.clone(),
            AgentKey::Id(AgentId::of(b"notes")),
            AgentId::of(b"notes"),
            Some(1 << 20),
        );
        let other = KvState::new(
            stores.clone(),
            AgentKey::Id(AgentId::of(b"other")),
            AgentId::of(b"other"),
            Some(1 << 20),
        );
        notes.set("a", b"1").unwrap();
        assert_eq!(notes.get("a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(other.get("a").unwrap(), None);
        assert!(notes.delete("a").unwrap());
        assert!(!notes.delete("a").unwrap());
        assert_eq!(notes.get("a").unwrap(), None);
    }

    #[test]
    fn keys_are_listed_by_prefix_in_pages() {
        let dir = tempfile::tempdir().unwrap();
        let kv = state(dir.path(), b"notes");
        for key in ["note/1", "note/2", "note/3", "other", "nota"] {
            kv.set(key, b"x").unwrap();
        }
        assert_eq!(
            kv.list_keys("note/", None, 10).unwrap(),
            ["note/1", "note/2", "note/3"]
        );
        assert_eq!(
            kv.list_keys("note/", None, 2).unwrap(),
            ["note/1", "note/2"]
        );
        assert_eq!(
            kv.list_keys("note/", Some("note/2"), 10).unwrap(),
            ["note/3"]
        );
        assert_eq!(kv.list_keys("", None, 10).unwrap().len(), 5);
    }

    #[test]
    fn bad_keys_and_values_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let kv = state(dir.path(), b"notes");
        assert!(matches!(kv.set("", b"x"), Err(KvError::Invalid(_))));
        assert!(matches!(
            kv.set(&"k".repeat(MAX_KEY + 1), b"x"),
            Err(KvError::Invalid(_))
        ));
        assert!(matches!(
            kv.set("k", &vec![0; MAX_VALUE + 1]),
            Err(KvError::Invalid(_))
        ));
    }

    #[test]
    fn the_quota_counts_keys_and_values_and_frees_on_delete() {
        let dir = tempfile::tempdir().unwrap();
        let stores = Arc::new(KvStores::new(dir.path().to_owned()));
        let quota = 100 + ENTRY_OVERHEAD;
        let kv = KvState::new(
            stores.clone(),
            AgentKey::Id(AgentId::of(b"notes")),
            AgentId::of(b"notes"),
            Some(quota),
        );
        kv.set("a", &[0; 60]).unwrap();
        // Replacing a value counts the difference only.
        kv.set("a", &[0; 90]).unwrap();
        let refused = kv.set("b", &[0; 8]).unwrap_err();
        assert!(matches!(refused, KvError::QuotaExceeded(_)), "{refused:?}");
        assert_eq!(kv.get("b").unwrap(), None, "a refused write stores nothing");
        assert!(kv.delete("a").unwrap());
        kv.set("b", &[0; 90]).unwrap();
        // A shrinking write is allowed even over a lowered quota.
        let lowered = KvState::new(
            stores,
            AgentKey::Id(AgentId::of(b"notes")),
            AgentId::of(b"notes"),
            Some(10),
        );
        lowered.set("b", &[0; 20]).unwrap();
        assert!(matches!(
            lowered.set("c", b"x"),
            Err(KvError::QuotaExceeded(_))
        ));
    }

    #[test]
    fn empty_values_cost_their_entries() {
        let dir = tempfile::tempdir().unwrap();
        let stores = Arc::new(KvStores::new(dir.path().to_owned()));
        let kv = KvState::new(
            stores,
            AgentKey::Id(AgentId::of(b"hoard")),
            AgentId::of(b"hoard"),
            Some(8 * 1024),
        );
        let mut stored = 0;
        while kv.set(&format!("{stored}"), b"").is_ok() {
            stored += 1;
        }
        // Each empty entry costs its key and the overhead: an 8 KiB quota
        // holds about a hundred of them, not thousands.
        assert!((100..=128).contains(&stored), "{stored} empty entries fit");
    }

    #[test]
    fn without_a_grant_there_is_no_store() {
        let dir = tempfile::tempdir().unwrap();
        let stores = Arc::new(KvStores::new(dir.path().to_owned()));
        let granted = KvState::new(
            stores.clone(),
            AgentKey::Id(AgentId::of(b"notes")),
            AgentId::of(b"notes"),
            Some(100),
        );
        granted.set("a", b"1").unwrap();
        let revoked = KvState::new(
            stores,
            AgentKey::Id(AgentId::of(b"notes")),
            AgentId::of(b"notes"),
            None,
        );
        assert!(matches!(revoked.get("a"), Err(KvError::NotGranted(_))));
        assert!(matches!(
            revoked.set("a", b"2"),
            Err(KvError::NotGranted(_))
        ));
        assert!(matches!(revoked.delete("a"), Err(KvError::NotGranted(_))));
        assert!(matches!(
            revoked.list_keys("", None, 10),
            Err(KvError::NotGranted(_))
        ));
    }
}
