//! What an operator grants an agent, capability by capability, and what one
//! call of it then runs with.
//!
//! Each capability says in its own folder how it is granted ([`Capability`]):
//! the type a policy table holds, the command line's item (`kv=1MiB`), the
//! checks, what a call gets, and how `inspect` and the pages describe it.
//! The list at the foot of this file gathers them into one policy table
//! ([`Grant`]) and what a call runs under ([`Grants`]); a new capability is
//! a folder and one line of that list. The limits a table may set (memory,
//! deadline, concurrency) are no capability and are written out here.

use super::kv::grant::Kv;
use super::llm::grant::Llm;
use super::peers::grant::Peers;
use super::wasi::grant::{Env, Fs, Http};
use crate::config::Limits;
use anyhow::Context as _;
use bytesize::ByteSize;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One capability, as an operator grants it.
pub trait Capability {
    /// The interfaces of the agent world whose import asks for it, such as
    /// `agentsite:agent/kv` (no version).
    const IMPORTS: &'static [&'static str] = &[];
    /// Command-line items it answers besides its own name (`llm-route`).
    const ALSO: &'static [&'static str] = &[];
    /// For a list, how `revoke` names one of its entries (`fs=/guest`).
    const ENTRY: Option<&'static str> = None;
    /// What a policy table holds.
    type Grant: Clone + PartialEq + std::fmt::Debug + Serialize + DeserializeOwned;
    /// What one call runs with; the default is nothing granted.
    type Granted: Clone + PartialEq + std::fmt::Debug + Default;

    /// Checks what can be checked without touching the host.
    fn validate(_grant: &Self::Grant) -> Result<(), String> {
        Ok(())
    }

    /// The command line's `item` (its name, or one of [`Self::ALSO`]) with
    /// its value, over what the table holds now.
    fn parse(
        item: &str,
        value: Option<&str>,
        now: Option<&Self::Grant>,
    ) -> anyhow::Result<Self::Grant>;

    /// Takes the entries that `entry` names out of a list; whether any was.
    fn revoke_entry(_grant: &mut Self::Grant, _entry: &str) -> bool {
        false
    }

    /// Whether a list has no entry left (a table then says nothing of it).
    fn is_empty(_grant: &Self::Grant) -> bool {
        false
    }

    /// What a call gets from what the table holds.
    fn resolve(grant: &Self::Grant) -> Self::Granted;

    /// One line per thing granted, as `inspect` and the pages show it.
    fn describe(granted: &Self::Granted) -> Vec<String>;

    /// What a table grants, each with the command line's item that revokes
    /// it (the pages' list of an agent's own grants).
    fn revocable(grant: &Self::Grant) -> Vec<(String, String)>;
}

/// The command line's items for the limits a table may set.
const LIMIT_ITEMS: [&str; 3] = ["memory", "deadline", "concurrency"];

/// Why a grant cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct GrantError(pub String);

/// The value of the command line's `item=value`, or how to write it.
pub(crate) fn value_of<'a>(
    item: &str,
    value: Option<&'a str>,
    what: &str,
) -> anyhow::Result<&'a str> {
    value.with_context(|| format!("write it as {item}={what}"))
}

pub(crate) fn parse_size(text: &str) -> anyhow::Result<ByteSize> {
    text.parse()
        .map_err(|_| anyhow::anyhow!("{text:?} is not a size such as 1MiB, 512KiB or 2GB"))
}

pub(crate) fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    humantime::parse_duration(text)
        .map_err(|_| anyhow::anyhow!("{text:?} is not a duration such as 30s, 2m or 500ms"))
}

pub(crate) fn parse_bool(text: &str) -> anyhow::Result<bool> {
    match text {
        "true" | "yes" | "on" => Ok(true),
        "false" | "no" | "off" => Ok(false),
        _ => anyhow::bail!("{text:?} is neither true nor false"),
    }
}

/// Takes `entry` out of a list capability's grant, dropping the grant once
/// it is empty, or says it was not granted.
fn revoke_entry<C: Capability>(
    grant: &mut Option<C::Grant>,
    item: &str,
    entry: &str,
) -> anyhow::Result<()> {
    let removed = grant.as_mut().is_some_and(|g| C::revoke_entry(g, entry));
    anyhow::ensure!(removed, "{item:?} is not granted here");
    if grant.as_ref().is_some_and(C::is_empty) {
        *grant = None;
    }
    Ok(())
}

/// Gathers the capabilities of the list below into the policy table
/// ([`Grant`]) and a call's [`Grants`], with what reads them field by
/// field: merging tables, checking, resolving, the command line's items
/// and the description.
macro_rules! capabilities {
    ($($name:ident: $capability:ty),* $(,)?) => {
        /// One table of grants, as written in the policy file. A field left
        /// out says nothing, so a less specific table decides it.
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct Grant {
            $(
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $name: Option<<$capability as Capability>::Grant>,
            )*
            /// Linear memory one instance may grow to.
            #[serde(
                default,
                skip_serializing_if = "Option::is_none",
                with = "optional_size"
            )]
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
            /// The entries of this table that reach the node itself (its
            /// data, `/proc`, its secrets, every host), which the operator
            /// granted deliberately with `--dangerously-allow-node-access`:
            /// `fs /proc`, `env NAME`, `http PATTERN` (see
            /// [`crate::capabilities::wasi::exposure`]).
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub node_access: Vec<String>,
        }

        /// Everything one call of an agent may reach, and its limits.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Grants {
            $(pub $name: <$capability as Capability>::Granted,)*
            pub limits: Limits,
        }

        /// The capabilities by the names policy tables and the command line
        /// give them, with the imports that ask for each.
        const CAPABILITIES: &[(&str, &[&str])] =
            &[$((stringify!($name), <$capability as Capability>::IMPORTS)),*];

        impl Grant {
            /// Each field from `self` where set, otherwise from `fallback`.
            pub fn or(&self, fallback: &Grant) -> Grant {
                Grant {
                    $($name: self.$name.clone().or_else(|| fallback.$name.clone()),)*
                    memory: self.memory.or(fallback.memory),
                    deadline: self.deadline.or(fallback.deadline),
                    max_concurrent_calls: self.max_concurrent_calls.or(fallback.max_concurrent_calls),
                    node_access: self
                        .node_access
                        .iter()
                        .chain(fallback.node_access.iter().filter(|e| !self.node_access.contains(e)))
                        .cloned()
                        .collect(),
                }
            }

            fn validate_capabilities(&self) -> Result<(), GrantError> {
                $(
                    if let Some(grant) = &self.$name {
                        <$capability>::validate(grant).map_err(GrantError)?;
                    }
                )*
                Ok(())
            }

            /// What a call runs under with this grant over the node's `limits`.
            pub fn resolve(&self, limits: Limits) -> Grants {
                Grants {
                    $(
                        $name: self
                            .$name
                            .as_ref()
                            .map(<$capability>::resolve)
                            .unwrap_or_default(),
                    )*
                    limits: self.limits_over(limits),
                }
            }

            /// Applies the command line's capability item; `None` when no
            /// capability answers to `item`.
            fn apply_capability(&mut self, item: &str, value: Option<&str>) -> Option<anyhow::Result<()>> {
                $(
                    if item == stringify!($name) || <$capability>::ALSO.contains(&item) {
                        let parsed = <$capability>::parse(item, value, self.$name.as_ref());
                        return Some(parsed.map(|grant| self.$name = Some(grant)));
                    }
                )*
                None
            }

            fn revocable_capabilities(&self) -> Vec<(String, String)> {
                let mut items = Vec::new();
                $(items.extend(self.$name.as_ref().map(<$capability>::revocable).unwrap_or_default());)*
                items
            }

            /// Revokes the command line's `name` or `name=entry`; `None`
            /// when no capability answers to it.
            fn revoke_capability(&mut self, item: &str, name: &str, entry: Option<&str>) -> Option<anyhow::Result<()>> {
                $(
                    if name == stringify!($name) {
                        return match entry {
                            None => {
                                self.$name = None;
                                Some(Ok(()))
                            }
                            Some(entry) if <$capability>::ENTRY.is_some() => {
                                Some(revoke_entry::<$capability>(&mut self.$name, item, entry))
                            }
                            Some(_) => None,
                        };
                    }
                )*
                None
            }
        }

        impl Grants {
            /// One line per capability granted, then the limits.
            pub fn describe(&self) -> Vec<String> {
                let mut lines = self.capabilities();
                let limits = &self.limits;
                lines.push(format!(
                    "limits   memory {}, deadline {}, {} concurrent calls",
                    limits.memory,
                    humantime::format_duration(limits.deadline),
                    limits.max_concurrent_calls
                ));
                lines
            }
        }

        impl Grants {
            /// One line per capability granted (what a receipt names as
            /// the grants in force); nothing for a pure call.
            pub fn capabilities(&self) -> Vec<String> {
                let mut lines = Vec::new();
                $(lines.extend(<$capability>::describe(&self.$name));)*
                lines
            }
        }

        /// The command line's items: the capabilities' and the limits'.
        fn items() -> Vec<&'static str> {
            let mut items = Vec::new();
            $(
                items.push(stringify!($name));
                items.extend(<$capability>::ALSO);
            )*
            items.extend(LIMIT_ITEMS);
            items
        }

        /// How `revoke` names one entry of each list capability.
        fn entries() -> Vec<&'static str> {
            [$(<$capability>::ENTRY),*].into_iter().flatten().collect()
        }
    };
}

// The list: a policy table's key for each capability, and its folder's type.
capabilities! {
    fs: Fs,
    http: Http,
    env: Env,
    kv: Kv,
    peers: Peers,
    llm: Llm,
}

impl Grant {
    /// Checks what can be checked without touching the host.
    pub fn validate(&self) -> Result<(), GrantError> {
        self.validate_capabilities()?;
        // Said in words that fit the command line's items and the policy
        // file's keys alike.
        if let Some(why) = self.memory.and_then(crate::config::memory_refused) {
            return Err(GrantError(format!(
                "the memory limit {why}, such as memory=128MiB"
            )));
        }
        if self.deadline.is_some_and(|d| d.is_zero()) {
            return Err(GrantError(
                "the deadline must be above zero, such as deadline=30s".into(),
            ));
        }
        if self.max_concurrent_calls == Some(0) {
            return Err(GrantError(
                "the number of concurrent calls must be at least 1, such as concurrency=4".into(),
            ));
        }
        Ok(())
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

    /// Whether this table grants nothing and sets no limit.
    pub fn is_empty(&self) -> bool {
        *self == Grant::default()
    }

    /// What this table grants, each with the command line's item that
    /// revokes it.
    pub fn revocable(&self) -> Vec<(String, String)> {
        let mut items = self.revocable_capabilities();
        if let Some(memory) = self.memory {
            items.push((format!("memory {memory}"), "memory".into()));
        }
        if let Some(deadline) = self.deadline {
            items.push((
                format!("deadline {}", humantime::format_duration(deadline)),
                "deadline".into(),
            ));
        }
        if let Some(calls) = self.max_concurrent_calls {
            items.push((format!("{calls} concurrent calls"), "concurrency".into()));
        }
        items
    }

    /// Applies the command line's `name=value` item (`kv=1MiB`, `llm`,
    /// `deadline=30s`).
    pub fn apply(&mut self, item: &str) -> anyhow::Result<()> {
        let (name, value) = match item.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (item, None),
        };
        if let Some(applied) = self.apply_capability(name, value) {
            return applied;
        }
        match name {
            "memory" => {
                self.memory = Some(parse_size(value_of(name, value, "SIZE, such as 128MiB")?)?)
            }
            "deadline" => {
                let text = value_of(name, value, "DURATION, such as 30s")?;
                self.deadline = Some(parse_duration(text)?)
            }
            "concurrency" => {
                let text = value_of(name, value, "N")?;
                self.max_concurrent_calls = Some(text.parse().map_err(|_| {
                    anyhow::anyhow!("{text:?} is not a whole number of calls, such as 4")
                })?)
            }
            other => anyhow::bail!(
                "unknown grant {other:?}: grants are {}",
                listed(&items(), "and")
            ),
        }
        Ok(())
    }

    /// Revokes the command line's item: a grant's name, one entry of a
    /// list (`fs=/guest`, `http=PATTERN`, `env=NAME`), or `all`; a less
    /// specific table decides it again.
    pub fn revoke(&mut self, item: &str) -> anyhow::Result<()> {
        let (name, entry) = match item.split_once('=') {
            Some((name, entry)) => (name, Some(entry)),
            None => (item, None),
        };
        if let Some(revoked) = self.revoke_capability(item, name, entry) {
            revoked?;
            // What was allowed to reach the node goes with its entry: the
            // same entry granted again is judged again.
            let entries = crate::capabilities::wasi::exposure::entries(self);
            self.node_access.retain(|entry| entries.contains(entry));
            return Ok(());
        }
        match (name, entry) {
            ("all", None) => *self = Grant::default(),
            ("memory", None) => self.memory = None,
            ("deadline", None) => self.deadline = None,
            ("concurrency", None) => self.max_concurrent_calls = None,
            _ => {
                let mut names: Vec<&str> = CAPABILITIES.iter().map(|(name, _)| *name).collect();
                names.extend(LIMIT_ITEMS);
                anyhow::bail!(
                    "cannot revoke {item:?}: name a grant ({}), one entry of a list ({}), or all",
                    names.join(", "),
                    entries().join(", ")
                )
            }
        }
        Ok(())
    }
}

impl Grants {
    /// Pure computation under `limits`: what an agent gets with no grant.
    pub fn pure(limits: Limits) -> Self {
        Grant::default().resolve(limits)
    }
}

/// `a, b and c`.
fn listed(items: &[&str], last: &str) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., end] => format!("{} {last} {end}", rest.join(", ")),
    }
}

/// The grants an agent importing `imports` (interface names such as
/// `agentsite:agent/kv@0.1.0`) asks for, by their names in `agentsite grant`.
/// Files and environment variables are left out: every program built for
/// WASI links those interfaces, whether it uses them or not.
pub fn asked_for(imports: &[String]) -> Vec<&'static str> {
    let imports_interface = |interface: &str| {
        imports
            .iter()
            .any(|name| name.split('@').next() == Some(interface))
    };
    CAPABILITIES
        .iter()
        .filter(|(_, asking)| asking.iter().any(|interface| imports_interface(interface)))
        .map(|(name, _)| *name)
        .collect()
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
        super::parse_duration(&text)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }
}

/// A size in the policy file, read as the command line reads one.
mod optional_size {
    use bytesize::ByteSize;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(value: &Option<ByteSize>, s: S) -> Result<S::Ok, S::Error> {
        value.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ByteSize>, D::Error> {
        // A number of bytes, as bytesize also writes one, or a text.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Bytes(u64),
            Text(String),
        }
        match Written::deserialize(d)? {
            Written::Bytes(bytes) => Ok(Some(ByteSize::b(bytes))),
            Written::Text(text) => super::parse_size(&text)
                .map(Some)
                .map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::llm::grant::LlmGrant;
    use crate::capabilities::wasi::grant::Access;

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
            (
                "peers = { depth = 0, fanout = 1 }",
                "depth of calls through peers",
            ),
            (
                "peers = { depth = 1, fanout = 0 }",
                "fan-out of calls through peers",
            ),
            (
                "max_concurrent_calls = 0",
                "concurrent calls must be at least 1",
            ),
            (
                r#"memory = "1 KiB""#,
                "memory limit must be at least 64 KiB",
            ),
            (r#"deadline = "0s""#, "deadline must be above zero"),
        ] {
            let error = grant(text).validate().unwrap_err().to_string();
            assert!(error.contains(reason), "{text}: {error}");
        }
        let error = toml::from_str::<Grant>("network = true").unwrap_err();
        assert!(error.to_string().contains("unknown field"), "{error}");
    }
}
