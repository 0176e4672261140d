//! The operator's policy: what each agent may reach, and which publishers'
//! agents run at all.
//!
//! Everything is denied unless granted. The policy lives in a TOML file
//! (`<data-dir>/policy.toml`, or the file given with `--policy`) that
//! `agentsite grant` and `revoke` edit and a serving node reads again when
//! it changes, so a change applies to the next call without a restart:
//!
//! ```toml
//! [defaults]                  # every agent with nothing more specific
//! memory = "64 MiB"
//!
//! [trust]
//! unknown_publisher = "pure"  # agents fetched from untrusted publishers: "pure" or "refuse"
//! registry_signature = "required"  # `add oci://…` only with a trusted key's cosign signature
//!
//! [publishers."12D3KooW..."]  # trusted publisher key, with what its agents get
//! llm = true
//!
//! [agents.notes]              # the agent installed as notes here, every build of it
//! fs = [{ host = "/srv/notes", guest = "/notes", access = "read-write" }]
//! http = ["https://api.example.com", "http://127.0.0.1:*"]
//! env = ["API_KEY"]
//! kv = "10 MiB"
//! peers = { depth = 2, fanout = 4 }
//! deadline = "30s"
//! max_concurrent_calls = 4
//!
//! [agents."sha256:..."]       # one build, by content id (as for an agent from the network)
//! deadline = "5s"
//! ```

pub mod edit;
pub mod wassette;

pub use crate::capabilities::grant::{Grant, GrantError, Grants};

use crate::AgentId;
use crate::agent::key::AgentKey;
use crate::store::Origin;
use anyhow::Context as _;
use libp2p::PeerId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

/// The whole policy file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// What every admitted agent gets unless a more specific table says otherwise.
    #[serde(default, skip_serializing_if = "Grant::is_empty")]
    pub defaults: Grant,
    #[serde(default)]
    pub trust: Trust,
    /// Trusted publishers (by key, in peer-id form or as a did:key) and
    /// what their agents get.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "publisher_keys"
    )]
    pub publishers: BTreeMap<PeerId, Grant>,
    /// Grants to single agents: by name for the agents the operator
    /// installs (every build of one), by content id for one build.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agents: BTreeMap<AgentKey, Grant>,
}

/// The publishers' tables, keyed by peer id or did:key (both name the
/// same ed25519 key; the file is written back with peer ids).
fn publisher_keys<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<PeerId, Grant>, D::Error> {
    let tables = BTreeMap::<String, Grant>::deserialize(deserializer)?;
    tables
        .into_iter()
        .map(|(key, grant)| {
            edit::parse_publisher(&key)
                .map(|peer| (peer, grant))
                .map_err(serde::de::Error::custom)
        })
        .collect()
}

/// What agents from publishers the operator has not listed get.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trust {
    #[serde(default)]
    pub unknown_publisher: Admission,
    #[serde(default)]
    pub registry_signature: RegistrySignature,
}

/// Whether a component pulled from an OCI registry must carry a cosign
/// signature of its manifest by a trusted key (a `[publishers]` key or the
/// node's own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RegistrySignature {
    /// Signatures are checked and the signer recorded; a component without
    /// one is added all the same.
    #[default]
    Optional,
    /// A component without one is refused, saying why.
    Required,
}

/// Whether an agent from an untrusted source runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Admission {
    /// It runs as pure computation: no capability at all, the node's limits.
    #[default]
    Pure,
    /// It does not run (and is not fetched).
    Refuse,
}

/// Why an agent may not run here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "refused by policy: {agent} comes from publisher {publisher}, which is not trusted here \
     (`agentsite trust {publisher}` trusts it, `agentsite grant {agent} ...` admits this agent alone)"
)]
pub struct Refused {
    pub agent: AgentId,
    pub publisher: PeerId,
}

/// The most specific table a grant was assembled from, for the audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Agent,
    Publisher,
    Defaults,
    Untrusted,
}

impl Policy {
    /// Parses and checks a policy file's text.
    pub fn parse(text: &str) -> anyhow::Result<Policy> {
        let policy: Policy = toml::from_str(text).map_err(|e| {
            // The line and key it is at, as the config's errors say them;
            // the message without the TOML parser's rendering of the line.
            match e.span() {
                Some(span) => {
                    let place = crate::config::where_in_toml(text, span.start);
                    let place = place.trim_start_matches(", ");
                    anyhow::anyhow!("{place}: {}", e.message().trim())
                }
                None => anyhow::anyhow!("{}", e.message().trim()),
            }
        })?;
        policy.validate()?;
        Ok(policy)
    }

    fn validate(&self) -> anyhow::Result<()> {
        self.defaults.validate().context("[defaults]")?;
        for (publisher, grant) in &self.publishers {
            grant
                .validate()
                .with_context(|| format!("[publishers.\"{publisher}\"]"))?;
        }
        for (agent, grant) in &self.agents {
            grant
                .validate()
                .with_context(|| format!("[agents.\"{agent}\"]"))?;
        }
        Ok(())
    }

    /// Whether a component from a registry whose signatures say `verdict`
    /// may be added; the trusted key that signed it, if one did.
    pub fn admit_from_registry(
        &self,
        verdict: &crate::oci::signature::Verdict,
    ) -> Result<Option<PeerId>, String> {
        use crate::oci::signature::Verdict;
        match (verdict, self.trust.registry_signature) {
            (Verdict::Signed { by }, _) => Ok(Some(*by)),
            (_, RegistrySignature::Optional) => Ok(None),
            (refused, RegistrySignature::Required) => Err(format!(
                "refused by policy: {}; [trust] registry_signature = \"required\" admits only \
                 components a trusted key signed",
                refused.describe()
            )),
        }
    }

    /// The table of the agent itself: its build's (by id) if there is
    /// one, else, for an agent the operator installed, its name's. An
    /// agent from the network never gets a name's table: another
    /// publisher's agent of the same name is not the operator's.
    pub fn own(&self, agent: &AgentId, name: &str, origin: &Origin) -> Option<&Grant> {
        self.agents
            .get(&AgentKey::Id(*agent))
            .or_else(|| match origin {
                Origin::Network { .. } => None,
                Origin::Local | Origin::Registry { .. } | Origin::Attached => {
                    self.agents.get(&AgentKey::Name(name.to_owned()))
                }
            })
    }

    /// The grant table that applies to `agent` from `origin`, and which
    /// tables it was assembled from, or why it may not run.
    pub fn grant_for(
        &self,
        agent: &AgentId,
        name: &str,
        origin: &Origin,
    ) -> Result<(Grant, Source), Refused> {
        let own = self.own(agent, name, origin);
        let (base, source) = match origin {
            // A component a trusted publisher signed gets that publisher's
            // table wherever the operator pulled it from.
            Origin::Registry {
                signer: Some(signer),
                ..
            } if self.publishers.contains_key(signer) => (
                self.publishers[signer].or(&self.defaults),
                Source::Publisher,
            ),
            Origin::Local | Origin::Registry { .. } | Origin::Attached => {
                (self.defaults.clone(), Source::Defaults)
            }
            Origin::Network { publisher } => match self.publishers.get(publisher) {
                Some(trusted) => (trusted.or(&self.defaults), Source::Publisher),
                // An agent granted by id was vetted by the operator as these
                // exact bytes, whoever published them.
                None if own.is_some() => (Grant::default(), Source::Untrusted),
                None => match self.trust.unknown_publisher {
                    Admission::Pure => (Grant::default(), Source::Untrusted),
                    Admission::Refuse => {
                        return Err(Refused {
                            agent: *agent,
                            publisher: *publisher,
                        });
                    }
                },
            },
        };
        let (grant, source) = match own {
            Some(own) => (own.or(&base), Source::Agent),
            None => (base, source),
        };
        // What runs outside the sandbox cannot be given capabilities.
        Ok(match origin {
            Origin::Attached => (grant.limits_only(), source),
            _ => (grant, source),
        })
    }
}

/// A policy file, read again whenever it changes on disk.
pub struct PolicyFile {
    path: PathBuf,
    current: Mutex<Loaded>,
}

struct Loaded {
    policy: Arc<Policy>,
    /// Modification time and length of the file it was read from.
    stamp: Option<(SystemTime, u64)>,
}

impl PolicyFile {
    /// Reads the policy at `path`; a missing file is the empty policy
    /// (everything denied) unless `required`.
    pub fn open(path: PathBuf, required: bool) -> anyhow::Result<PolicyFile> {
        if required && !path.exists() {
            anyhow::bail!("policy file {} does not exist", path.display());
        }
        let (policy, stamp) = read(&path)?;
        Ok(PolicyFile {
            path,
            current: Mutex::new(Loaded {
                policy: Arc::new(policy),
                stamp,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The policy as it is on disk now. A file that became invalid since it
    /// was last read keeps the last valid policy in force (and says so in
    /// the log), so a typo cannot widen or drop every grant at once.
    pub fn current(&self) -> Arc<Policy> {
        let mut loaded = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        let stamp = stamp(&self.path);
        if stamp != loaded.stamp {
            match read(&self.path) {
                Ok((policy, stamp)) => {
                    tracing::info!(path = %self.path.display(), "policy reloaded");
                    loaded.policy = Arc::new(policy);
                    loaded.stamp = stamp;
                }
                Err(e) => {
                    tracing::error!(path = %self.path.display(), "policy not reloaded, the last valid one stays in force: {e:#}");
                    loaded.stamp = stamp;
                }
            }
        }
        loaded.policy.clone()
    }

    /// Changes the policy with `edit` and writes it back atomically. The
    /// edited policy is checked before anything is written.
    pub fn update<T>(
        &self,
        edit: impl FnOnce(&mut Policy) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let (mut policy, _) = read(&self.path)?;
        let outcome = edit(&mut policy)?;
        policy.validate()?;
        write(&self.path, &policy)?;
        let mut loaded = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        loaded.stamp = stamp(&self.path);
        loaded.policy = Arc::new(policy);
        Ok(outcome)
    }
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

fn read(path: &Path) -> anyhow::Result<(Policy, Option<(SystemTime, u64)>)> {
    let stamp = stamp(path);
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Policy::default(), None)),
        Err(e) => return Err(e).with_context(|| format!("cannot read policy {}", path.display())),
    };
    let policy =
        Policy::parse(&text).with_context(|| format!("invalid policy {}", path.display()))?;
    Ok((policy, stamp))
}

fn write(path: &Path, policy: &Policy) -> anyhow::Result<()> {
    let text = toml::to_string_pretty(policy).context("cannot encode the policy")?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write to {}", dir.display()))?;
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    file.as_file().sync_all()?;
    file.persist(path)
        .map_err(|e| anyhow::anyhow!("cannot replace {}: {}", path.display(), e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::llm::grant::LlmSetting;

    /// A policy with defaults (kv), one trusted publisher (llm) and one
    /// agent's own table (fs-free, kv of its own), as an operator writes it.
    fn policy(publisher: &PeerId, agent: &AgentId, unknown: &str) -> Policy {
        Policy::parse(&format!(
            r#"
            [defaults]
            kv = "64 KiB"

            [publishers."{publisher}"]
            llm = true

            [agents."{agent}"]
            kv = "1 MiB"

            [trust]
            unknown_publisher = "{unknown}"
            "#
        ))
        .unwrap()
    }

    #[test]
    fn a_bad_policy_file_is_said_with_its_line_and_key_in_the_users_words() {
        let error = Policy::parse("[agents.notes]\nkv = \"1MiB\"\nmemory = \"lots\"\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "line 3 (agents.notes.memory): \"lots\" is not a size such as 1MiB, 512KiB or 2GB"
        );
        let error = format!(
            "{:#}",
            Policy::parse("[agents.notes]\nmax_concurrent_calls = 0\n").unwrap_err()
        );
        assert!(
            error.contains("the number of concurrent calls must be at least 1"),
            "{error}"
        );
        // A size written as a number of bytes, as older files have it, still reads.
        let policy = Policy::parse("[agents.notes]\nmemory = 134217728\n").unwrap();
        let notes = AgentKey::Name("notes".into());
        assert_eq!(
            policy.agents[&notes].memory,
            Some(bytesize::ByteSize::mib(128))
        );
    }

    #[test]
    fn each_origin_gets_the_tables_that_apply_to_it() {
        let (trusted, stranger) = (PeerId::random(), PeerId::random());
        let (own, other) = (AgentId::of(b"own"), AgentId::of(b"other"));
        let policy = policy(&trusted, &own, "pure");
        let kib = |n| Some(bytesize::ByteSize::kib(n));

        // Added here: the defaults.
        let (grant, source) = policy.grant_for(&other, "x", &Origin::Local).unwrap();
        assert_eq!(
            (grant.kv, grant.llm.clone(), source),
            (kib(64), None, Source::Defaults)
        );
        // From a trusted publisher: its table over the defaults.
        let from_trusted = Origin::Network { publisher: trusted };
        let (grant, source) = policy.grant_for(&other, "x", &from_trusted).unwrap();
        assert_eq!(
            (grant.kv, grant.llm.clone(), source),
            (kib(64), Some(LlmSetting::Switch(true)), Source::Publisher)
        );
        // From a stranger: pure computation, not even the defaults.
        let from_stranger = Origin::Network {
            publisher: stranger,
        };
        let (grant, source) = policy.grant_for(&other, "x", &from_stranger).unwrap();
        assert_eq!((grant, source), (Grant::default(), Source::Untrusted));
        // The agent's own table wins field by field, wherever it came from;
        // from a stranger it stands alone.
        let (grant, source) = policy.grant_for(&own, "x", &from_trusted).unwrap();
        assert_eq!(
            (grant.kv, grant.llm.clone(), source),
            (kib(1024), Some(LlmSetting::Switch(true)), Source::Agent)
        );
        let (grant, _) = policy.grant_for(&own, "x", &from_stranger).unwrap();
        assert_eq!((grant.kv, grant.llm), (kib(1024), None));
    }

    #[test]
    fn a_name_table_follows_the_operators_builds_and_no_strangers() {
        let policy = Policy::parse(
            r#"
            [agents.notes]
            kv = "1 MiB"
            deadline = "5s"
            "#,
        )
        .unwrap();
        let kib = |n| Some(bytesize::ByteSize::kib(n));
        for origin in [
            Origin::Local,
            Origin::Registry {
                reference: "ghcr.io/me/notes:1".into(),
                manifest: "sha256:00".into(),
                signer: None,
            },
        ] {
            let (grant, source) = policy
                .grant_for(&AgentId::of(b"any build"), "notes", &origin)
                .unwrap();
            assert_eq!((grant.kv, source), (kib(1024), Source::Agent), "{origin:?}");
        }
        let from_network = Origin::Network {
            publisher: PeerId::random(),
        };
        let (grant, _) = policy
            .grant_for(&AgentId::of(b"theirs"), "notes", &from_network)
            .unwrap();
        assert_eq!(grant, Grant::default());
        // The file keeps the name as written.
        let written = toml::to_string(&policy).unwrap();
        assert!(written.contains("[agents.notes]"), "{written}");
    }

    #[test]
    fn a_registry_component_signed_by_a_trusted_key_gets_its_table_and_unsigned_ones_are_refused_on_demand()
     {
        use crate::oci::signature::Verdict;
        let publisher = libp2p::identity::Keypair::generate_ed25519()
            .public()
            .to_peer_id();
        let text = format!(
            "[trust]\nregistry_signature = \"required\"\n[publishers.\"{publisher}\"]\nkv = \"1 MiB\"\n"
        );
        let policy = Policy::parse(&text).unwrap();
        let signed = Verdict::Signed { by: publisher };
        assert_eq!(policy.admit_from_registry(&signed), Ok(Some(publisher)));
        for refused in [
            Verdict::Unsigned,
            Verdict::Untrusted {
                why: "by no key this node trusts".into(),
            },
        ] {
            let error = policy.admit_from_registry(&refused).unwrap_err();
            assert!(
                error.contains(&refused.describe()) && error.contains("registry_signature"),
                "{error}"
            );
        }
        let lenient = Policy::default();
        assert_eq!(lenient.admit_from_registry(&Verdict::Unsigned), Ok(None));

        let origin = |signer| Origin::Registry {
            reference: "ghcr.io/me/notes:1".into(),
            manifest: "sha256:00".into(),
            signer,
        };
        let (grant, source) = policy
            .grant_for(&AgentId::of(b"x"), "x", &origin(Some(publisher)))
            .unwrap();
        assert_eq!(
            (grant.kv, source),
            (Some(bytesize::ByteSize::kib(1024)), Source::Publisher)
        );
        let (grant, source) = policy
            .grant_for(&AgentId::of(b"x"), "x", &origin(None))
            .unwrap();
        assert_eq!((grant.kv, source), (None, Source::Defaults));
    }

    #[test]
    fn strangers_agents_are_refused_when_the_operator_says_so() {
        let (trusted, stranger) = (PeerId::random(), PeerId::random());
        let (own, other) = (AgentId::of(b"own"), AgentId::of(b"other"));
        let policy = policy(&trusted, &own, "refuse");
        let from_stranger = Origin::Network {
            publisher: stranger,
        };
        assert_eq!(
            policy.grant_for(&other, "x", &from_stranger),
            Err(Refused {
                agent: other,
                publisher: stranger
            })
        );
        // An agent the operator granted by id was vetted as these bytes.
        assert!(policy.grant_for(&own, "x", &from_stranger).is_ok());
        assert!(policy.grant_for(&other, "x", &Origin::Local).is_ok());
    }
}
