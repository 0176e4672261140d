//! The tokens each agent used of the node's models today, kept on disk so
//! that a daily budget holds across calls, restarts, and the processes
//! that share a data directory (a serving node and a command-line call).
//!
//! One small file per agent, `<agent>.json`, read and rewritten under an
//! exclusive file lock; a new day (UTC) starts from zero.

use crate::AgentId;
use serde::{Deserialize, Serialize};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::PathBuf;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Entry {
    /// Days since 1970-01-01 (UTC).
    day: u64,
    tokens: u64,
}

/// Where the day's usage is kept.
#[derive(Debug, Clone)]
pub struct Ledger {
    dir: PathBuf,
}

fn today() -> u64 {
    crate::clock::unix_seconds() / 86_400
}

impl Ledger {
    pub fn new(dir: PathBuf) -> Ledger {
        Ledger { dir }
    }

    /// Tokens `agent` used today.
    pub fn used_today(&self, agent: &AgentId) -> Result<u64, String> {
        self.update(agent, 0)
    }

    /// Counts `tokens` more for `agent` today; returns today's total.
    pub fn add(&self, agent: &AgentId, tokens: u64) -> Result<u64, String> {
        self.update(agent, tokens)
    }

    fn update(&self, agent: &AgentId, tokens: u64) -> Result<u64, String> {
        let failed = |e: std::io::Error| format!("cannot keep the day's token count: {e}");
        std::fs::create_dir_all(&self.dir).map_err(failed)?;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.dir.join(format!("{}.json", agent.hex())))
            .map_err(failed)?;
        // Held until the file is closed at the end of this function.
        file.lock().map_err(failed)?;
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(failed)?;
        // A damaged entry counts as nothing used: the budget is a limit the
        // operator set, and the file is the node's own.
        let mut entry: Entry = serde_json::from_str(&text).unwrap_or_default();
        let day = today();
        if entry.day != day {
            entry = Entry { day, tokens: 0 };
        }
        if tokens > 0 {
            entry.tokens = entry.tokens.saturating_add(tokens);
            let text = serde_json::to_vec(&entry).map_err(|e| e.to_string())?;
            file.set_len(0).map_err(failed)?;
            file.rewind().map_err(failed)?;
            file.write_all(&text).map_err(failed)?;
        }
        Ok(entry.tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_adds_up_per_agent_and_survives_a_new_ledger() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (AgentId::of(b"a"), AgentId::of(b"b"));
        let ledger = Ledger::new(dir.path().join("usage"));
        assert_eq!(ledger.used_today(&a).unwrap(), 0);
        assert_eq!(ledger.add(&a, 120).unwrap(), 120);
        assert_eq!(ledger.add(&a, 30).unwrap(), 150);
        assert_eq!(ledger.add(&b, 7).unwrap(), 7);
        let again = Ledger::new(dir.path().join("usage"));
        assert_eq!(again.used_today(&a).unwrap(), 150);

        // Yesterday's count is not today's.
        std::fs::write(
            dir.path().join("usage").join(format!("{}.json", a.hex())),
            format!("{{\"day\": {}, \"tokens\": 999}}", today() - 1),
        )
        .unwrap();
        assert_eq!(again.used_today(&a).unwrap(), 0);
    }
}
