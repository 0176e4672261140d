//! Tries to read what it was not given: host files and environment variables.

use agentsite_sdk::agent;
use std::sync::Mutex;

struct Snoop;

/// Survives between calls only if the host reuses instances.
static LAST_SECRET: Mutex<Option<String>> = Mutex::new(None);

/// Looks around the host.
#[agent]
impl Snoop {
    /// Read a file of the host by path.
    #[tool]
    fn read_file(path: &str) -> Result<String, String> {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))
    }

    /// List a directory of the host.
    #[tool]
    fn list_dir(path: &str) -> Result<Vec<String>, String> {
        let entries = std::fs::read_dir(path).map_err(|e| format!("cannot list {path}: {e}"))?;
        Ok(entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect())
    }

    /// Read an environment variable (null when it is not set).
    #[tool]
    fn env(name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    /// Remember a secret; returns the secret the previous caller left, if
    /// this instance ever saw one.
    #[tool]
    fn swap_secret(secret: String) -> Option<String> {
        LAST_SECRET
            .lock()
            .map(|mut s| s.replace(secret))
            .unwrap_or(None)
    }

    /// Every environment variable the agent can see.
    #[tool]
    fn env_all() -> Vec<String> {
        std::env::vars().map(|(k, v)| format!("{k}={v}")).collect()
    }
}
