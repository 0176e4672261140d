//! The configuration file: each domain's section, read in one place and
//! handed to the domains by the server builder and the command line.
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

use crate::config::{Limits, humantime_serde_compat};
use crate::goals::GoalsConfig;
use crate::llm::LlmConfig;
use crate::node::NodeConfig;
use crate::web::site::WebConfig;
use anyhow::Context as _;
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
    pub llm: LlmConfig,
    /// Goals carried out by teams of agents.
    #[serde(default)]
    pub goals: GoalsConfig,
    /// The node's web pages.
    #[serde(default)]
    pub web: WebConfig,
    /// The policy file, when not `<data-dir>/policy.toml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PathBuf>,
    /// The file this configuration was read from; `None` when there was none.
    #[serde(skip)]
    pub source: Option<PathBuf>,
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
    /// Relay for nodes behind NAT: "auto" (once this node is found public),
    /// "on" or "off".
    pub relay_service: crate::net::reach::RelayService,
    /// What relaying grants each peer.
    pub relay_limits: crate::net::reach::RelayLimits,
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
            relay_service: Default::default(),
            relay_limits: Default::default(),
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
    /// Time a response may wait on a client that reads none of it.
    #[serde(with = "humantime_serde_compat")]
    pub response_write_idle_timeout: Duration,
    /// Time an MCP session idles, with no request open, before it is put
    /// to sleep: its tasks end and the next request wakes it.
    #[serde(with = "humantime_serde_compat")]
    pub mcp_session_dormant_after: Duration,
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
            response_write_idle_timeout: connections.write_idle_timeout,
            mcp_session_dormant_after: crate::mcp::sessions::DORMANT_AFTER,
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
            write_idle_timeout: self.response_write_idle_timeout,
        }
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
        let mut config: Config = toml::from_str(&text).map_err(|e| {
            let place = e
                .span()
                .map(|span| crate::config::where_in_toml(&text, span.start))
                .unwrap_or_default();
            anyhow::anyhow!(
                "invalid config {}{place}: {}",
                path.display(),
                e.message().trim()
            )
        })?;
        config
            .limits
            .validate()
            .and_then(|()| config.llm.validate())
            .and_then(|()| config.goals.validate())
            .with_context(|| format!("invalid config {}", path.display()))?;
        config.source = Some(path.to_owned());
        Ok(config)
    }

    /// The sections the node itself reads.
    pub fn node(&self) -> NodeConfig {
        NodeConfig {
            limits: self.limits,
            llm: self.llm.clone(),
            policy: self.policy.clone(),
            config_file: self.source.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytesize::ByteSize;

    fn load_error(text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        let error = Config::load(&path, true).unwrap_err().to_string();
        error.replace(&path.display().to_string(), "FILE")
    }

    #[test]
    fn a_bad_value_is_named_by_its_key_and_line() {
        assert_eq!(
            load_error("# limits\n[limits]\ndeadline = \"ten seconds\"\n"),
            "invalid config FILE, line 3 (limits.deadline): expected a duration such as \"10s\", \"500ms\" or \"1m 30s\", got \"ten seconds\""
        );
        assert_eq!(
            load_error("[serve]\nlisten = 5\n"),
            "invalid config FILE, line 2 (serve.listen): invalid type: integer `5`, expected socket address"
        );
        assert!(
            load_error("[limits]\nmemroy = \"12MiB\"\n")
                .starts_with("invalid config FILE, line 2 (limits.memroy): unknown field `memroy`"),
        );
        assert_eq!(
            load_error("[limits\n"),
            "invalid config FILE, line 1: unclosed table, expected `]`"
        );
    }

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
