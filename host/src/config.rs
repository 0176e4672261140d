//! What every floor of the node shares about its settings: where its data
//! lives ([`DataDir`]) and the limits every call runs under ([`Limits`]),
//! the `[limits]` section of the configuration file. The file as a whole,
//! with each domain's own section, is [`crate::server::config::Config`].

use anyhow::Context as _;
use bytesize::ByteSize;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Limits applied to every tool call. A call that hits one ends with a tool
/// error naming the limit; the node keeps serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Wall-clock time a call may take, enforced by epoch interruption.
    #[serde(with = "humantime_serde_compat")]
    pub deadline: Duration,
    /// Linear memory one instance may grow to.
    pub memory: ByteSize,
    /// Size of a tool result (text, media and structured content together).
    pub max_output: ByteSize,
    /// Calls of one agent that may run at the same time; further calls wait
    /// for a free slot until their deadline.
    pub max_concurrent_calls: u32,
    /// Bytes of log messages and stdout/stderr text kept per call; the rest
    /// is dropped and counted.
    pub max_log: ByteSize,
    /// How long an agent may take to list its resources or prompts when a
    /// client lists those of every agent: agents are asked at once, and one
    /// that has not answered by then is left out of the list.
    #[serde(with = "humantime_serde_compat")]
    pub listing_deadline: Duration,
    /// How long compiling an agent (when it is added, installed, or its
    /// cached compilation is rebuilt) may take before it is refused. The
    /// `agentsite` binary compiles in a child process that it kills at this
    /// deadline; a library embedding the node without one compiles on the
    /// calling thread, bounded by the static shape limits only.
    #[serde(with = "humantime_serde_compat")]
    pub compile_deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(10),
            memory: ByteSize::mib(64),
            max_output: ByteSize::mib(1),
            max_concurrent_calls: 16,
            max_log: ByteSize::kib(64),
            listing_deadline: Duration::from_secs(2),
            // A Python or JavaScript agent (an interpreter of 16-19 MB)
            // compiles in 5-8 s on one busy core of the machines measured.
            compile_deadline: Duration::from_secs(60),
        }
    }
}

impl Limits {
    /// The bytes one message from an agent outside the sandbox (an attached
    /// MCP server, an A2A agent) may take: a result at the output cap, with
    /// room for JSON's escapes and base64, and the framing.
    pub fn max_message(&self) -> usize {
        let cap = usize::try_from(self.max_output.as_u64()).unwrap_or(usize::MAX);
        cap.saturating_mul(4).saturating_add(1024 * 1024)
    }

    /// Checks that the limits make sense together.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.deadline.is_zero(),
            "limits.deadline must be above zero"
        );
        if let Some(why) = memory_refused(self.memory) {
            anyhow::bail!("limits.memory {why}");
        }
        anyhow::ensure!(
            self.max_concurrent_calls >= 1,
            "limits.max_concurrent_calls must be at least 1"
        );
        anyhow::ensure!(
            !self.listing_deadline.is_zero(),
            "limits.listing_deadline must be above zero"
        );
        anyhow::ensure!(
            !self.compile_deadline.is_zero(),
            "limits.compile_deadline must be above zero"
        );
        Ok(())
    }
}

/// Where byte `at` of a TOML `text` is, for an error: `, line 2
/// (limits.deadline)`, the key written as its table and name; just the
/// line where the line is not a key's (a table's header, say).
pub(crate) fn where_in_toml(text: &str, at: usize) -> String {
    let before = &text[..crate::text::floor_char_boundary(text, at)];
    let number = before.matches('\n').count() + 1;
    let line = text.lines().nth(number - 1).unwrap_or_default().trim();
    let table = before
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('[') && l.ends_with(']'))
        .map(|header| header.trim_matches(|c| c == '[' || c == ']').trim());
    let key = line
        .split_once('=')
        .map(|(key, _)| key.trim().trim_matches('"'))
        .filter(|key| !key.is_empty() && !line.starts_with('['));
    let key = match (table, key) {
        (_, None) => return format!(", line {number}"),
        (Some(table), Some(key)) => format!("{table}.{key}"),
        (None, Some(key)) => key.to_owned(),
    };
    format!(", line {number} ({})", crate::text::terminal_safe(&key))
}

/// Why `memory` cannot be what one instance may grow to, if it cannot.
pub(crate) fn memory_refused(memory: ByteSize) -> Option<&'static str> {
    if memory.as_u64() < 64 * 1024 {
        Some("must be at least 64 KiB (one WebAssembly page)")
    } else if memory.as_u64() > 4 * 1024 * 1024 * 1024 {
        Some("must be at most 4 GiB (the 32-bit address space)")
    } else {
        None
    }
}

/// The folders of a node's data directory.
#[derive(Debug, Clone)]
pub struct DataDir {
    root: PathBuf,
}

impl DataDir {
    /// A data directory at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DataDir { root: root.into() }
    }

    /// The platform's default: `$XDG_DATA_HOME/agentsite` on Linux,
    /// `~/Library/Application Support/agentsite` on macOS.
    pub fn platform_default() -> anyhow::Result<Self> {
        let dirs = directories::ProjectDirs::from("", "", "agentsite")
            .context("cannot find a home directory for the default data dir: pass --data-dir")?;
        Ok(DataDir::new(dirs.data_dir()))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Component bytes, by content id.
    pub fn blobs(&self) -> PathBuf {
        self.root.join("blobs").join("sha256")
    }

    /// Precompiled artifacts, by content id and engine fingerprint.
    pub fn compiled(&self) -> PathBuf {
        self.root.join("compiled")
    }

    /// One JSON record per installed agent (card, tools, imports).
    pub fn agents(&self) -> PathBuf {
        self.root.join("agents")
    }

    /// The operator's policy file (grants and trust).
    pub fn policy(&self) -> PathBuf {
        self.root.join("policy.toml")
    }

    /// The key that signs what this node publishes, when `agentsite keygen` made one.
    pub fn publisher_key(&self) -> PathBuf {
        self.root.join("publisher.key")
    }

    /// Key-value databases, one per agent.
    pub fn kv(&self) -> PathBuf {
        self.root.join("kv")
    }

    /// Tokens each agent used of the node's language models today.
    pub fn llm_usage(&self) -> PathBuf {
        self.root.join("llm-usage")
    }

    /// The node's ed25519 key: its peer id and publisher identity.
    pub fn identity(&self) -> PathBuf {
        self.root.join("identity.key")
    }

    /// Signed manifests of the agents this node offers the network.
    pub fn published(&self) -> PathBuf {
        self.root.join("published")
    }

    /// The conversations of the node's chat pages.
    pub fn chats(&self) -> PathBuf {
        self.root.join("chat.redb")
    }

    /// Goals and their conversations (a redb database).
    pub fn goals(&self) -> PathBuf {
        self.root.join("goals.redb")
    }

    /// The peers the node knew, to rejoin through after a restart.
    pub fn remembered_peers(&self) -> PathBuf {
        self.root.join("peers.json")
    }

    /// Written by a running `agentsite serve`: where its control API is.
    pub fn node_file(&self) -> PathBuf {
        self.root.join("node.json")
    }

    /// Held locked by the one `agentsite serve` of this directory, which
    /// writes its process id in it.
    pub fn serve_lock(&self) -> PathBuf {
        self.root.join("serve.lock")
    }

    /// The default config file.
    /// Model files `models add` downloaded.
    pub fn models(&self) -> PathBuf {
        self.root.join("models")
    }

    pub fn config_file(&self) -> PathBuf {
        self.root.join("config.toml")
    }
}

/// Durations written as humans write them ("10s", "1m 30s").
pub(crate) mod humantime_serde_compat {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&humantime::format_duration(*value))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(deserializer)?;
        humantime::parse_duration(&text).map_err(|_| {
            serde::de::Error::custom(format!(
                "expected a duration such as \"10s\", \"500ms\" or \"1m 30s\", got {text:?}"
            ))
        })
    }
}
