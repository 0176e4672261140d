//! Node configuration: where data lives and the limits every call runs under.
//!
//! Everything has a default, so a node runs with no configuration at all. An
//! operator overrides defaults in a TOML file (`<data-dir>/config.toml`, or
//! the file given with `--config`):
//!
//! ```toml
//! [limits]
//! deadline = "10s"          # wall-clock time a call may run
//! memory = "64 MiB"         # linear memory an instance may grow to
//! max_output = "1 MiB"      # size of a tool result
//! max_concurrent_calls = 16 # calls of one agent running at once
//! max_log = "64 KiB"        # log and stdout/stderr text kept per call
//!
//! [serve]
//! listen = "127.0.0.1:7777"  # address of `agentsite serve`
//! token = "..."              # bearer token; required off loopback
//! allowed_hosts = []         # extra Host names, e.g. "agents.example.com"
//! allowed_origins = []       # extra browser origins, e.g. "https://app.example.com:443"
//!
//! [p2p]
//! enabled = true             # join the network of nodes when serving
//! listen = ["/ip4/0.0.0.0/tcp/4077", "/ip4/0.0.0.0/udp/4077/quic-v1"]
//! bootstrap = []             # e.g. "/ip4/203.0.113.7/tcp/4077/p2p/12D3Koo..."
//! mdns = false               # find peers on the LAN
//! public = []                # agents published at start, e.g. "calculator"
//! seed_fetched = true        # offer fetched agents to other nodes too
//! ```

use anyhow::Context as _;
use bytesize::ByteSize;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The whole configuration file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Limits applied to every call.
    #[serde(default)]
    pub limits: Limits,
    /// How `agentsite serve` listens.
    #[serde(default)]
    pub serve: ServeConfig,
    /// How `agentsite serve` joins the network of nodes.
    #[serde(default)]
    pub p2p: P2pConfig,
    /// The node's language models.
    #[serde(default)]
    pub llm: crate::llm::LlmConfig,
    /// Goals carried out by teams of agents.
    #[serde(default)]
    pub goals: crate::goals::GoalsConfig,
    /// The node's web pages.
    #[serde(default)]
    pub web: crate::web::site::WebConfig,
    /// The policy file, when not `<data-dir>/policy.toml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PathBuf>,
}

/// How a serving node joins the network (command-line flags override these).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct P2pConfig {
    /// Whether `agentsite serve` joins the network at all.
    pub enabled: bool,
    /// libp2p addresses to listen on.
    pub listen: Vec<String>,
    /// Peers to join through, such as `/ip4/203.0.113.7/tcp/4077/p2p/12D3Koo...`.
    pub bootstrap: Vec<String>,
    /// Also find peers on the local network by mDNS.
    pub mdns: bool,
    /// Agents (name or id) published whenever the node starts.
    pub public: Vec<String>,
    /// Offer agents fetched from the network to other nodes in turn.
    pub seed_fetched: bool,
}

/// Where a node listens for other nodes unless told otherwise.
pub const DEFAULT_P2P_PORT: u16 = 4077;

impl Default for P2pConfig {
    fn default() -> Self {
        P2pConfig {
            enabled: true,
            listen: vec![
                format!("/ip4/0.0.0.0/tcp/{DEFAULT_P2P_PORT}"),
                format!("/ip4/0.0.0.0/udp/{DEFAULT_P2P_PORT}/quic-v1"),
            ],
            bootstrap: Vec::new(),
            mdns: false,
            public: Vec::new(),
            seed_fetched: true,
        }
    }
}

/// How `agentsite serve` listens (command-line flags override these).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    /// Address and port of the HTTP front end.
    pub listen: std::net::SocketAddr,
    /// Bearer token required on MCP endpoints; required to listen beyond loopback.
    pub token: Option<String>,
    /// Host names clients may use besides loopback and the listen address.
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed besides this machine's.
    pub allowed_origins: Vec<String>,
    /// HTTP connections open at once, in all.
    pub max_connections: usize,
    /// HTTP connections open at once from one address.
    pub max_connections_per_address: usize,
    /// Time a client has to send a request's line and headers (also how
    /// long an idle keep-alive connection is kept).
    #[serde(with = "humantime_serde_compat")]
    pub request_head_timeout: Duration,
    /// Time a request body may go without a byte arriving.
    #[serde(with = "humantime_serde_compat")]
    pub request_body_idle_timeout: Duration,
}

/// Where `agentsite serve` listens unless told otherwise.
pub const DEFAULT_LISTEN: std::net::SocketAddr = std::net::SocketAddr::V4(
    std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 7777),
);

impl Default for ServeConfig {
    fn default() -> Self {
        let connections = crate::http::connections::ConnectionLimits::default();
        ServeConfig {
            listen: DEFAULT_LISTEN,
            token: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_connections: connections.total,
            max_connections_per_address: connections.per_address,
            request_head_timeout: connections.head_timeout,
            request_body_idle_timeout: connections.body_idle_timeout,
        }
    }
}

impl ServeConfig {
    /// The bounds on the HTTP front end's connections.
    pub fn connections(&self) -> crate::http::connections::ConnectionLimits {
        crate::http::connections::ConnectionLimits {
            total: self.max_connections,
            per_address: self.max_connections_per_address,
            head_timeout: self.request_head_timeout,
            body_idle_timeout: self.request_body_idle_timeout,
        }
    }
}

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
    /// Checks that the limits make sense together.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.deadline.is_zero(),
            "limits.deadline must be above zero"
        );
        anyhow::ensure!(
            self.memory.as_u64() >= 64 * 1024,
            "limits.memory must be at least 64 KiB (one WebAssembly page)"
        );
        anyhow::ensure!(
            self.memory.as_u64() <= 4 * 1024 * 1024 * 1024,
            "limits.memory must be at most 4 GiB (the 32-bit address space)"
        );
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

impl Config {
    /// Reads `path`; a missing file means the defaults only when `required`
    /// is false.
    pub fn load(path: &Path, required: bool) -> anyhow::Result<Config> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
                return Ok(Config::default());
            }
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read config {}", path.display()));
            }
        };
        let config: Config = toml::from_str(&text).map_err(|e| {
            anyhow::anyhow!("invalid config {}: {}", path.display(), e.message().trim())
        })?;
        config
            .limits
            .validate()
            .and_then(|()| config.llm.validate())
            .and_then(|()| config.goals.validate())
            .with_context(|| format!("invalid config {}", path.display()))?;
        Ok(config)
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

    /// Goals and their conversations (a redb database).
    /// The conversations of the node's chat pages.
    pub fn chats(&self) -> PathBuf {
        self.root.join("chat.redb")
    }

    pub fn goals(&self) -> PathBuf {
        self.root.join("goals.redb")
    }

    /// Written by a running `agentsite serve`: where its control API is.
    pub fn node_file(&self) -> PathBuf {
        self.root.join("node.json")
    }

    /// The default config file.
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
        humantime::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_optional_config_gives_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::load(&dir.path().join("config.toml"), false).unwrap();
        assert_eq!(config.limits, Limits::default());
        assert!(Config::load(&dir.path().join("config.toml"), true).is_err());
    }

    #[test]
    fn limits_are_read_in_human_units() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(
            &path,
            "[limits]\ndeadline = \"250ms\"\nmemory = \"16 MiB\"\n",
        )
        .unwrap();
        let limits = Config::load(&path, true).unwrap().limits;
        assert_eq!(limits.deadline, Duration::from_millis(250));
        assert_eq!(limits.memory, ByteSize::mib(16));
        assert_eq!(limits.max_output, Limits::default().max_output);
    }

    #[test]
    fn bad_config_is_a_one_line_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "[limits]\nmemroy = \"16 MiB\"\n").unwrap();
        let error = format!("{:#}", Config::load(&path, true).unwrap_err());
        assert!(error.contains("memroy"), "{error}");
        assert!(!error.contains('\n'), "{error}");
        std::fs::write(&path, "[limits]\ndeadline = \"0s\"\n").unwrap();
        let error = format!("{:#}", Config::load(&path, true).unwrap_err());
        assert!(error.contains("deadline must be above zero"), "{error}");
    }
}
