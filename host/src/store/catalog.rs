//! The catalog of installed agents: one JSON record per agent, holding what
//! was learned when it was added (card, tools, imports, size), so that
//! listing and resolving names never has to run WebAssembly.

use super::Origin;
use super::{StoreError, remove_if_present, write_atomic};
use crate::AgentId;
use crate::agent::key::AgentKey;
use crate::agent::tool::{AgentCard, ToolSpec};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What the node knows about an installed agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRecord {
    pub id: AgentId,
    pub card: AgentCard,
    pub tools: Vec<ToolSpec>,
    /// The interfaces the component imports, such as `agentsite:agent/kv@0.1.0`.
    pub imports: Vec<String>,
    /// Size of the component in bytes.
    pub size: u64,
    /// Where it came from: decides which grants and trust apply.
    /// Records written before origins were kept are local.
    #[serde(default = "local")]
    pub origin: Origin,
    /// When the agent was added, in seconds since the Unix epoch.
    pub added_at: u64,
    /// For an attached server (not a component), how the node reaches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached: Option<super::attachment::Attachment>,
}

fn local() -> Origin {
    Origin::Local
}

impl AgentRecord {
    /// Whether the agent is an attached server rather than a component:
    /// not sandboxed by the node and never fetchable by hash.
    pub fn is_attached(&self) -> bool {
        self.attached.is_some()
    }

    /// Whose grants and data it has: its name when the operator installed
    /// it (a file, a registry, an attached server), so that they follow
    /// the agent from one build to the next; its id when it came from the
    /// network, so that another publisher's agent of the same name gets
    /// nothing of them.
    pub fn key(&self) -> AgentKey {
        match self.origin {
            Origin::Network { .. } => AgentKey::Id(self.id),
            Origin::Local | Origin::Registry { .. } | Origin::Attached => {
                AgentKey::Name(self.card.name.clone())
            }
        }
    }

    /// Whether the agent asks for an import from `interface` (such as `agentsite:agent/kv`).
    pub fn imports_interface(&self, interface: &str) -> bool {
        self.imports
            .iter()
            .any(|name| name.split('@').next() == Some(interface))
    }
}

/// Why a name did not resolve to exactly one agent.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("no installed agent matches {query:?}; {hint}")]
    NotFound { query: String, hint: String },
    #[error("{query:?} matches {} agents ({}); use a longer id prefix", candidates.len(), candidates.join(", "))]
    Ambiguous {
        query: String,
        candidates: Vec<String>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ResolveError {
    /// `query` matched none of `records`: the name it was likely meant to
    /// be, or where else to look.
    fn not_found(query: &str, records: &[AgentRecord]) -> Self {
        let names = records.iter().map(|r| r.card.name.as_str());
        let hint = match crate::text::closest(query, names) {
            Some(name) => format!("did you mean {:?}?", crate::text::terminal_safe(name)),
            None => "`agentsite ls` lists the agents installed here; `agentsite search WORDS` finds agents on the network, to call there with `call --remote` or install with `fetch`".into(),
        };
        ResolveError::NotFound {
            query: query.to_owned(),
            hint,
        }
    }
}

/// Records of installed agents, one file each.
#[derive(Debug, Clone)]
pub struct Catalog {
    dir: PathBuf,
}

/// Shortest id prefix accepted, so that a short word is not taken for an id.
const MIN_PREFIX: usize = 4;

impl Catalog {
    pub fn new(dir: PathBuf) -> Self {
        Catalog { dir }
    }

    fn path(&self, id: &AgentId) -> PathBuf {
        self.dir.join(format!("{}.json", id.hex()))
    }

    /// Writes `record`, making the agent installed.
    pub fn put(&self, record: &AgentRecord) -> Result<(), StoreError> {
        let json = serde_json::to_vec_pretty(record)
            .map_err(|e| StoreError::io("cannot encode agent record", e.into()))?;
        write_atomic(&self.path(&record.id), &json)
    }

    /// The record of `id`, if installed.
    pub fn get(&self, id: &AgentId) -> Result<Option<AgentRecord>, StoreError> {
        let path = self.path(id);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                StoreError::io(format!("damaged agent record {}", path.display()), e.into())
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::io(format!("cannot read {}", path.display()), e)),
        }
    }

    /// Every installed agent, by name then id. A damaged record is skipped
    /// with a warning rather than hiding every other agent.
    pub fn list(&self) -> Result<Vec<AgentRecord>, StoreError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(StoreError::io(
                    format!("cannot list {}", self.dir.display()),
                    e,
                ));
            }
        };
        let mut records = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(hex) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            let Ok(id) = hex.parse::<AgentId>() else {
                continue;
            };
            match self.get(&id) {
                Ok(Some(record)) => records.push(record),
                Ok(None) => {}
                Err(e) => tracing::warn!("skipping agent {id}: {e}"),
            }
        }
        records.sort_by(|a, b| a.card.name.cmp(&b.card.name).then(a.id.cmp(&b.id)));
        Ok(records)
    }

    /// Removes the record of `id`, uninstalling the agent.
    pub fn remove(&self, id: &AgentId) -> Result<(), StoreError> {
        remove_if_present(&self.path(id))
    }

    /// Finds the agent meant by `query`: a full id, a card name, or a unique
    /// prefix of the id (with or without `sha256:`, at least 4 hex digits).
    pub fn resolve(&self, query: &str) -> Result<AgentRecord, ResolveError> {
        if let Ok(id) = query.parse::<AgentId>() {
            return self
                .get(&id)?
                .ok_or_else(|| ResolveError::not_found(query, &[]));
        }
        resolve_in(&self.list()?, query).cloned()
    }
}

/// The agent among `records` meant by `query`: a full id, a card name or a
/// unique id prefix of at least [`MIN_PREFIX`] hex digits.
pub fn resolve_in<'a>(
    records: &'a [AgentRecord],
    query: &str,
) -> Result<&'a AgentRecord, ResolveError> {
    if let Ok(id) = query.parse::<AgentId>() {
        return records
            .iter()
            .find(|r| r.id == id)
            .ok_or_else(|| ResolveError::not_found(query, records));
    }
    let by_name: Vec<&AgentRecord> = records.iter().filter(|r| r.card.name == query).collect();
    let matches = if by_name.is_empty() {
        let prefix = query.strip_prefix("sha256:").unwrap_or(query);
        let is_prefix = prefix.len() >= MIN_PREFIX
            && prefix
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !is_prefix {
            return Err(ResolveError::not_found(query, records));
        }
        records
            .iter()
            .filter(|r| r.id.hex().starts_with(prefix))
            .collect()
    } else {
        by_name
    };
    match matches.as_slice() {
        [] => Err(ResolveError::not_found(query, records)),
        [one] => Ok(*one),
        many => Err(ResolveError::Ambiguous {
            query: query.to_owned(),
            candidates: many
                .iter()
                .map(|r| format!("{} {}", r.card.name, r.id.short()))
                .collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, bytes: &[u8]) -> AgentRecord {
        AgentRecord {
            id: AgentId::of(bytes),
            card: AgentCard {
                name: name.into(),
                version: "1.0.0".into(),
                description: String::new(),
                tags: vec![],
                homepage: None,
            },
            tools: vec![],
            imports: vec!["agentsite:agent/kv@0.1.0".into()],
            size: bytes.len() as u64,
            origin: Origin::Local,
            added_at: 0,
            attached: None,
        }
    }

    #[test]
    fn agents_resolve_by_id_name_and_unique_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::new(dir.path().to_owned());
        let calc = record("calculator", b"calc");
        let notes = record("notes", b"notes");
        catalog.put(&calc).unwrap();
        catalog.put(&notes).unwrap();

        assert_eq!(catalog.resolve(&calc.id.to_string()).unwrap(), calc);
        assert_eq!(catalog.resolve("notes").unwrap(), notes);
        assert_eq!(catalog.resolve(&calc.id.hex()[..8]).unwrap(), calc);
        assert_eq!(
            catalog
                .resolve(&format!("sha256:{}", &notes.id.hex()[..6]))
                .unwrap(),
            notes
        );
        assert!(matches!(
            catalog.resolve("nothing"),
            Err(ResolveError::NotFound { .. })
        ));
        assert!(matches!(
            catalog.resolve("abc"),
            Err(ResolveError::NotFound { .. })
        ));
        assert!(calc.imports_interface("agentsite:agent/kv"));
    }

    #[test]
    fn a_name_shared_by_two_agents_is_ambiguous() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::new(dir.path().to_owned());
        catalog.put(&record("calculator", b"v1")).unwrap();
        catalog.put(&record("calculator", b"v2")).unwrap();
        let error = catalog.resolve("calculator").unwrap_err();
        assert!(matches!(error, ResolveError::Ambiguous { .. }), "{error}");
        assert!(error.to_string().contains("longer id prefix"));
    }

    #[test]
    fn removed_agents_are_no_longer_listed() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::new(dir.path().to_owned());
        let calc = record("calculator", b"calc");
        catalog.put(&calc).unwrap();
        assert_eq!(catalog.list().unwrap().len(), 1);
        catalog.remove(&calc.id).unwrap();
        assert!(catalog.list().unwrap().is_empty());
        assert!(catalog.get(&calc.id).unwrap().is_none());
    }
}
