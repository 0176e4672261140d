//! How command-line invocations find and authenticate to the running node of
//! their data directory.
//!
//! `agentsite serve` writes `<data-dir>/node.json` (where its API listens,
//! its peer id and addresses) and a fresh random token in
//! `<data-dir>/control.token`, readable only by its owner. Whoever can read
//! the token can drive the node, exactly as whoever can write the data
//! directory can change its agents. Both files go when the node stops.
//!
//! One node serves a data directory at a time ([`claim`]): a second would
//! run with the same peer id, find its databases taken, and leave the
//! command line without the first node's files when it stopped.

use crate::config::DataDir;
use crate::store::{Existing, write_private};
use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What a running node says about itself in `node.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeFile {
    /// Base URL of the control API, such as `http://127.0.0.1:7777`.
    pub api: String,
    pub peer_id: String,
    /// libp2p addresses, each ending in `/p2p/<peer id>`.
    pub addresses: Vec<String>,
    pub pid: u32,
    /// The config file the node read, if it read one, as an absolute path.
    #[serde(default)]
    pub config: Option<PathBuf>,
    /// The policy file whose grants the node applies, as an absolute path.
    #[serde(default)]
    pub policy: Option<PathBuf>,
}

/// The files of a running node; removed on drop.
pub struct NodeFiles {
    node_file: PathBuf,
    token_file: PathBuf,
}

fn token_file(data: &DataDir) -> PathBuf {
    data.root().join("control.token")
}

impl NodeFiles {
    /// Writes `node` and a new control token; returns the token.
    pub fn write(data: &DataDir, node: &NodeFile) -> anyhow::Result<(NodeFiles, String)> {
        let token = new_token()?;
        let token_file = token_file(data);
        write_private(&token_file, token.as_bytes(), Existing::Replace)?;
        let node_file = data.node_file();
        write_private(
            &node_file,
            &serde_json::to_vec_pretty(node)?,
            Existing::Replace,
        )?;
        Ok((
            NodeFiles {
                node_file,
                token_file,
            },
            token,
        ))
    }
}

impl Drop for NodeFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.node_file);
        let _ = std::fs::remove_file(&self.token_file);
    }
}

/// The running node of `data`, if its files are there.
pub fn find(data: &DataDir) -> anyhow::Result<Option<(NodeFile, String)>> {
    let node = match std::fs::read(data.node_file()) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).context("cannot read node.json"),
    };
    let node: NodeFile = serde_json::from_slice(&node).context("node.json is damaged")?;
    // A node that was killed could not remove its files: they name a
    // process that is gone, and no node runs.
    if !process_exists(node.pid) {
        return Ok(None);
    }
    let token = std::fs::read_to_string(token_file(data))
        .context("cannot read the node's control token")?;
    Ok(Some((node, token.trim().to_owned())))
}

/// The claim of the one node serving a data directory: an exclusive lock
/// on `serve.lock`, which the operating system lets go when the process
/// ends, however it ends. Held for as long as the node serves.
pub struct Serving {
    _lock: std::fs::File,
}

/// Claims `data` for a node serving it, or says which node already does.
pub fn claim(data: &DataDir) -> anyhow::Result<Serving> {
    use std::io::{Read as _, Seek as _, Write as _};
    let path = data.serve_lock();
    std::fs::create_dir_all(data.root())
        .with_context(|| format!("cannot make {}", data.root().display()))?;
    let mut lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let _ = lock.read_to_string(&mut pid);
            anyhow::bail!("{}", already_served(data, pid.trim()));
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("cannot lock {}", path.display()));
        }
    }
    // The pid names this node to a second one before node.json exists.
    lock.set_len(0)?;
    lock.rewind()?;
    write!(lock, "{}", std::process::id())?;
    Ok(Serving { _lock: lock })
}

/// What a second node on `data` is told: the first one's pid and, once
/// it has written them, its addresses.
fn already_served(data: &DataDir, pid: &str) -> String {
    let running = find(data).ok().flatten().map(|(node, _)| node);
    let pid = match &running {
        Some(node) => node.pid.to_string(),
        None if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) => pid.to_owned(),
        None => "unknown".to_owned(),
    };
    let at = match &running {
        Some(node) if node.peer_id.is_empty() => format!(" at {}", node.api),
        Some(node) => format!(" at {} as peer {}", node.api, node.peer_id),
        // It is still starting.
        None => String::new(),
    };
    format!(
        "another agentsite node serves {} (pid {pid}){at}; stop it, or give this one another --data-dir",
        data.root().display()
    )
}

/// `path` as the node and the command line compare it: absolute, with
/// symbolic links resolved where the file exists.
pub fn absolute(path: &std::path::Path) -> PathBuf {
    std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_owned())
}

/// Whether a process `pid` exists (it may be another user's).
fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; kill only checks that `pid` exists
    // and may be signalled.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// 32 random bytes from the OS, as hex.
fn new_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness for a token: {e}"))?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_of_a_node_that_is_gone_name_no_running_node() {
        assert!(process_exists(std::process::id()));
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let pid = gone.id();
        gone.wait().unwrap();
        assert!(!process_exists(pid));

        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::new(dir.path().to_owned());
        let node = NodeFile {
            api: "http://127.0.0.1:1".into(),
            peer_id: String::new(),
            addresses: vec![],
            pid,
            config: None,
            policy: None,
        };
        let (files, _) = NodeFiles::write(&data, &node).unwrap();
        assert!(find(&data).unwrap().is_none());
        std::mem::forget(files);
        let alive = NodeFile {
            pid: std::process::id(),
            ..node
        };
        let (_files, token) = NodeFiles::write(&data, &alive).unwrap();
        assert_eq!(find(&data).unwrap().unwrap().1, token);
    }

    #[test]
    fn a_data_directory_is_served_by_one_node_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::new(dir.path().join("data"));
        let first = claim(&data).unwrap();
        // Before the first node has written node.json: its pid alone.
        let refused = claim(&data).err().unwrap().to_string();
        assert_eq!(
            refused,
            format!(
                "another agentsite node serves {} (pid {}); stop it, or give this one another --data-dir",
                data.root().display(),
                std::process::id()
            )
        );
        let node = NodeFile {
            api: "http://127.0.0.1:7777".into(),
            peer_id: "12D3KooWexample".into(),
            addresses: vec![],
            pid: std::process::id(),
            config: None,
            policy: None,
        };
        let (_files, _) = NodeFiles::write(&data, &node).unwrap();
        let refused = claim(&data).err().unwrap().to_string();
        assert!(
            refused.ends_with(&format!(
                "(pid {}) at http://127.0.0.1:7777 as peer 12D3KooWexample; stop it, or give this one another --data-dir",
                std::process::id()
            )),
            "{refused}"
        );
        // The claim ends with the node. A process another test spawns
        // holds a copy of every descriptor from its fork until its exec
        // closes them, the lock's among them: the claim is free again once
        // such a child has started.
        drop(first);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while let Err(e) = claim(&data) {
            assert!(std::time::Instant::now() < deadline, "{e}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}
