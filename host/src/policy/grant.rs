//! Grants: what an operator lets one agent (or every agent of one publisher,
//! or every agent) reach beyond pure computation.
//!
//! A [`Grant`] is one table of the policy file, with every field optional.
//! The grants that apply to an agent are read most specific first (its own
//! id, then its publisher, then the defaults) and each field is taken from
//! the first that sets it, giving the [`Grants`] a call runs under.

use super::http_allow::HttpPattern;
use super::llm_grant::{LlmGrant, LlmSetting};
use crate::config::Limits;
use bytesize::ByteSize;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// One table of grants, as written in the policy file. A field left out
/// says nothing, so a less specific table decides it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// Host folders the agent sees, each at a guest path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs: Option<Vec<FsGrant>>,
    /// Origins the agent may send HTTP requests to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Vec<HttpPattern>>,
    /// Environment variables of the node the agent may read, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<String>>,
    /// The agent's key-value store and its quota (`0 B` for none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv: Option<ByteSize>,
    /// Calling other agents, within these bounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peers: Option<PeersGrant>,
    /// Asking a language model: `true`, `false` or which models, where
    /// requests go, and token budgets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmSetting>,
    /// Linear memory one instance may grow to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<ByteSize>,
    /// Wall-clock time a call may run.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "optional_duration"
    )]
    pub deadline: Option<Duration>,
    /// Calls of the agent that may run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_calls: Option<u32>,
}

/// A host folder mounted into the agent's filesystem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsGrant {
    /// The folder on the host (absolute).
    pub host: PathBuf,
    /// Where the agent sees it, such as `/data`.
    pub guest: String,
    #[serde(default)]
    pub access: Access,
}

/// What an agent may do in a granted folder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    #[default]
    ReadOnly,
    ReadWrite,
}

/// The longest chain of agents calling agents, whatever a grant says: the
/// node refuses a call deeper than this from anyone, on this node or from
/// another.
pub const MAX_DEPTH: u32 = 8;

/// Bounds on an agent's calls to other agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeersGrant {
    /// How deep in a chain of agents calling agents this agent's calls may
    /// be: 1 lets it call others only when a client called it directly.
    pub depth: u32,
    /// How many calls to other agents one call of this agent may make.
    pub fanout: u32,
}

impl Default for PeersGrant {
    fn default() -> Self {
        PeersGrant {
            depth: 2,
            fanout: 8,
        }
    }
}

/// Why a grant cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    #[error("fs host folder {0:?} must be an absolute path")]
    RelativeHost(PathBuf),
    #[error("fs guest path {0:?} must be absolute (start with /) and contain no `..`")]
    BadGuestPath(String),
    #[error("fs guest path {0:?} is granted twice")]
    DuplicateGuestPath(String),
    #[error("env name {0:?} is not a variable name (letters, digits and _)")]
    BadEnvName(String),
    #[error("peers.depth must be 1 to {max}", max = MAX_DEPTH)]
    BadDepth,
    #[error("peers.fanout must be at least 1")]
    BadFanout,
    #[error("{0}")]
    Llm(String),
    #[error("{0}")]
    Limits(String),
}

impl Grant {
    /// Checks what can be checked without touching the host.
    pub fn validate(&self) -> Result<(), GrantError> {
        let mut guests = std::collections::HashSet::new();
        for fs in self.fs.iter().flatten() {
            if !fs.host.is_absolute() {
                return Err(GrantError::RelativeHost(fs.host.clone()));
            }
            if !fs.guest.starts_with('/') || fs.guest.split('/').any(|part| part == "..") {
                return Err(GrantError::BadGuestPath(fs.guest.clone()));
            }
            if !guests.insert(fs.guest.trim_end_matches('/')) {
                return Err(GrantError::DuplicateGuestPath(fs.guest.clone()));
            }
        }
        for name in self.env.iter().flatten() {
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(GrantError::BadEnvName(name.clone()));
            }
        }
        if let Some(peers) = self.peers {
            if peers.depth == 0 || peers.depth > MAX_DEPTH {
                return Err(GrantError::BadDepth);
            }
            if peers.fanout == 0 {
                return Err(GrantError::BadFanout);
            }
        }
        if let Some(grant) = self.llm.as_ref().and_then(LlmSetting::grant) {
            grant.validate().map_err(GrantError::Llm)?;
        }
        self.limits_over(Limits::default())
            .validate()
            .map_err(|e| GrantError::Limits(e.to_string()))
    }

    /// `base` with the limits this grant sets.
    fn limits_over(&self, base: Limits) -> Limits {
        Limits {
            memory: self.memory.unwrap_or(base.memory),
            deadline: self.deadline.unwrap_or(base.deadline),
            max_concurrent_calls: self
                .max_concurrent_calls
                .unwrap_or(base.max_concurrent_calls),
            ..base
        }
    }

    /// The limits this grant sets, without any capability: what applies
    /// to an agent outside the sandbox.
    pub fn limits_only(&self) -> Grant {
        Grant {
            deadline: self.deadline,
            max_concurrent_calls: self.max_concurrent_calls,
            ..Grant::default()
        }
    }

    /// Each field from `self` where set, otherwise from `fallback`.
    pub fn or(&self, fallback: &Grant) -> Grant {
        Grant {
            fs: self.fs.clone().or_else(|| fallback.fs.clone()),
            http: self.http.clone().or_else(|| fallback.http.clone()),
            env: self.env.clone().or_else(|| fallback.env.clone()),
            kv: self.kv.or(fallback.kv),
            peers: self.peers.or(fallback.peers),
            llm: self.llm.clone().or_else(|| fallback.llm.clone()),
            memory: self.memory.or(fallback.memory),
            deadline: self.deadline.or(fallback.deadline),
            max_concurrent_calls: self.max_concurrent_calls.or(fallback.max_concurrent_calls),
        }
    }

    /// Whether this table grants nothing and sets no limit.
    pub fn is_empty(&self) -> bool {
        *self == Grant::default()
    }

    /// What a call runs under with this grant over the node's `limits`.
    pub fn resolve(&self, limits: Limits) -> Grants {
        Grants {
            fs: self.fs.clone().unwrap_or_default(),
            http: self.http.clone().unwrap_or_default(),
            env: self.env.clone().unwrap_or_default(),
            kv: self.kv.map(|q| q.as_u64()).filter(|q| *q > 0),
            peers: self.peers,
            llm: self.llm.as_ref().and_then(LlmSetting::grant),
            limits: self.limits_over(limits),
        }
    }
}

/// Everything one call of an agent may reach, and its limits.
#[derive(Debug, Clone, PartialEq)]
pub struct Grants {
    pub fs: Vec<FsGrant>,
    pub http: Vec<HttpPattern>,
    pub env: Vec<String>,
    /// The kv quota in bytes; `None` when the agent has no store.
    pub kv: Option<u64>,
    pub peers: Option<PeersGrant>,
    /// The language models granted; `None` when none is.
    pub llm: Option<LlmGrant>,
    pub limits: Limits,
}

impl Grants {
    /// Pure computation under `limits`: what an agent gets with no grant.
    pub fn pure(limits: Limits) -> Self {
        Grant::default().resolve(limits)
    }
}

/// `Option<Duration>` written as a human duration such as "30s".
mod optional_duration {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(value: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => s.collect_str(&humantime::format_duration(*d)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(toml_text: &str) -> Grant {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn nothing_granted_is_pure_computation() {
        let grants = Grant::default().resolve(Limits::default());
        assert_eq!(grants, Grants::pure(Limits::default()));
        assert!(grants.fs.is_empty() && grants.http.is_empty() && grants.env.is_empty());
        assert_eq!((grants.kv, grants.peers, grants.llm), (None, None, None));
    }

    #[test]
    fn the_most_specific_table_decides_each_field() {
        let agent = grant("kv = \"1 MiB\"\nmemory = \"128 MiB\"");
        let publisher = grant("kv = \"4 MiB\"\nllm = true\ndeadline = \"30s\"");
        let defaults = grant("env = [\"LANG\"]");
        let grants = agent
            .or(&publisher)
            .or(&defaults)
            .resolve(Limits::default());
        assert_eq!(grants.kv, Some(1 << 20));
        assert_eq!(grants.llm, Some(LlmGrant::default()));
        assert_eq!(grants.env, ["LANG"]);
        assert_eq!(grants.limits.memory, ByteSize::mib(128));
        assert_eq!(grants.limits.deadline, Duration::from_secs(30));
        assert_eq!(
            grants.limits.max_output,
            Limits::default().max_output,
            "limits no grant sets come from the node"
        );
        // A zero quota withdraws a store a less specific table gives.
        let none = grant("kv = \"0 B\"")
            .or(&publisher)
            .resolve(Limits::default());
        assert_eq!(none.kv, None);
    }

    #[test]
    fn grants_round_trip_through_toml() {
        let text = r#"
fs = [{ host = "/srv/data", guest = "/data", access = "read-write" }]
http = ["https://api.example.com", "http://127.0.0.1:*"]
env = ["API_KEY"]
kv = "1 MiB"
peers = { depth = 2, fanout = 4 }
llm = true
deadline = "30s"
max_concurrent_calls = 4
"#;
        let parsed = grant(text);
        parsed.validate().unwrap();
        assert_eq!(parsed.fs.as_ref().unwrap()[0].access, Access::ReadWrite);
        let again: Grant = toml::from_str(&toml::to_string(&parsed).unwrap()).unwrap();
        assert_eq!(again, parsed);
    }

    #[test]
    fn bad_grants_are_refused_with_the_reason() {
        for (text, reason) in [
            (r#"fs = [{ host = "data", guest = "/d" }]"#, "absolute"),
            (r#"fs = [{ host = "/d", guest = "d" }]"#, "must be absolute"),
            (r#"fs = [{ host = "/d", guest = "/a/../b" }]"#, "`..`"),
            (
                r#"fs = [{ host = "/d", guest = "/a" }, { host = "/e", guest = "/a/" }]"#,
                "twice",
            ),
            (r#"env = ["A=B"]"#, "variable name"),
            ("peers = { depth = 0, fanout = 1 }", "peers.depth"),
            ("peers = { depth = 1, fanout = 0 }", "peers.fanout"),
            ("max_concurrent_calls = 0", "max_concurrent_calls"),
            (r#"memory = "1 KiB""#, "memory"),
        ] {
            let error = grant(text).validate().unwrap_err().to_string();
            assert!(error.contains(reason), "{text}: {error}");
        }
        let error = toml::from_str::<Grant>("network = true").unwrap_err();
        assert!(error.to_string().contains("unknown field"), "{error}");
    }
}
