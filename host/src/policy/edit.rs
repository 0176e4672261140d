//! Edits of the operator's policy: adding and revoking grant items in a
//! subject's table, and trusting publishers. Each capability reads its own
//! items (see [`crate::capabilities::grant`]). The command line
//! (`agentsite grant`, `revoke`, `trust`) and the agent pages use the same
//! edits; each is one atomic write of the policy file, picked up by a
//! running node at its next call.
//!
//! A grant is written as `name=value` items:
//!
//! | item                         | grants                                       |
//! |------------------------------|----------------------------------------------|
//! | `fs=/srv/data:/data[:rw]`    | a host folder at a guest path (read-only unless `:rw`) |
//! | `http=https://api.example.com` | outgoing HTTP to an origin pattern         |
//! | `env=API_KEY`                | one environment variable of the node         |
//! | `kv=1MiB`                    | a key-value store with this quota            |
//! | `peers`, `peers=DEPTH/FANOUT`| calling other agents                         |
//! | `llm`, `llm=local,gpt`, `llm=default:20000tokens/call:500000tokens/day` | the node's default model, or these models, within token budgets |
//! | `llm-route=node`             | where `llm` requests go: `client-first` (the default), `node` or `client` |
//! | `memory=128MiB`, `deadline=30s`, `concurrency=4` | limits              |

use crate::AgentId;
use crate::agent::key::AgentKey;
use crate::capabilities::wasi::exposure::{self, NodeSelf};
use crate::policy::{Grant, Policy, PolicyFile};
use crate::store::AgentRecord;
use anyhow::Context as _;
use libp2p::PeerId;

/// Whose grant table an edit changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Agent(AgentKey),
    Publisher(PeerId),
    Defaults,
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::Agent(key) => write!(f, "agent {key}"),
            Subject::Publisher(key) => write!(f, "publisher {key}"),
            Subject::Defaults => f.write_str("the defaults"),
        }
    }
}

/// The table a grant to the installed agent `record`, named `asked`, goes
/// to: its name's for an agent the operator installed, so that it holds
/// for the next build too, unless `asked` is the build's full id.
pub fn subject_of(record: &AgentRecord, asked: &str) -> Subject {
    if asked == record.id.to_string() {
        return Subject::Agent(AgentKey::Id(record.id));
    }
    Subject::Agent(record.key())
}

/// When the build `old` of the agent `name` gives way to another: its
/// table by id, if it has one, becomes the name's (unless the name has a
/// table already, which then decides), so that what the operator granted
/// that build holds for the next.
pub fn follow_name(file: &PolicyFile, old: AgentId, name: &str) -> anyhow::Result<()> {
    if !file.current().agents.contains_key(&AgentKey::Id(old)) {
        return Ok(());
    }
    file.update(|policy| {
        if let Some(grant) = policy.agents.remove(&AgentKey::Id(old)) {
            policy
                .agents
                .entry(AgentKey::Name(name.to_owned()))
                .or_insert(grant);
        }
        Ok(())
    })
}

/// Removes the tables of `keys`; the ones there were.
pub fn forget(file: &PolicyFile, keys: &[AgentKey]) -> anyhow::Result<Vec<AgentKey>> {
    let current = file.current();
    if !keys.iter().any(|key| current.agents.contains_key(key)) {
        return Ok(Vec::new());
    }
    file.update(|policy| {
        Ok(keys
            .iter()
            .filter(|key| policy.agents.remove(key).is_some())
            .cloned()
            .collect())
    })
}

pub fn parse_publisher(key: &str) -> anyhow::Result<PeerId> {
    if key.starts_with("did:") {
        return crate::did::peer_of(key).map_err(|e| anyhow::anyhow!("{e}"));
    }
    key.parse().map_err(|_| {
        anyhow::anyhow!(
            "{key:?} is not a publisher key: use the peer id (12D3KooW...) or the did:key (did:key:z6Mk...) that `agentsite id` or `agentsite keygen` prints"
        )
    })
}

fn table<'a>(policy: &'a mut Policy, subject: &Subject) -> &'a mut Grant {
    match subject {
        Subject::Agent(key) => policy.agents.entry(key.clone()).or_default(),
        Subject::Publisher(key) => policy.publishers.entry(*key).or_default(),
        Subject::Defaults => &mut policy.defaults,
    }
}

/// Applies `name=value` grant items to `grant`.
pub fn apply_grants(grant: &mut Grant, items: &[String]) -> anyhow::Result<()> {
    for item in items {
        grant
            .apply(item)
            .with_context(|| format!("cannot grant {item:?}"))?;
        // What the item set is checked now, so that the error names it
        // rather than the policy table it would be written to.
        grant
            .validate()
            .map_err(|e| anyhow::anyhow!("cannot grant {item:?}: {e}"))?;
    }
    Ok(())
}

/// Removes grant items (`kv`, `fs`, `fs=/guest`, `http=pattern`, `env=NAME`,
/// ..., or `all`) from `grant`, so a less specific table decides them again.
pub fn apply_revokes(grant: &mut Grant, items: &[String]) -> anyhow::Result<()> {
    for item in items {
        grant.revoke(item)?;
    }
    Ok(())
}

/// Whether an edit may grant what reaches the node itself (see
/// [`crate::capabilities::wasi::exposure`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeAccess {
    /// Refused with the reason: what every edit gets unless the operator
    /// names the flag.
    Refused,
    /// Granted, and written into the table as deliberate
    /// (`--dangerously-allow-node-access`).
    Allowed,
}

/// Grants `items` to `subject` in `file`; the subject's table as it is now.
/// Nothing is written when any item reaches the node and `access` does not
/// allow it.
pub fn add_grants(
    file: &PolicyFile,
    subject: &Subject,
    items: &[String],
    node: &NodeSelf,
    access: NodeAccess,
) -> anyhow::Result<Grant> {
    anyhow::ensure!(
        !items.is_empty(),
        "name what to grant, such as kv=1MiB or llm"
    );
    file.update(|policy| {
        let grant = table(policy, subject);
        apply_grants(grant, items)?;
        let mut refused = node.refused(grant);
        if access == NodeAccess::Allowed {
            // The flag allows what this edit names, not what the table
            // held before it.
            let mut asked = Grant::default();
            apply_grants(&mut asked, items)?;
            let asked = exposure::entries(&asked);
            for reach in refused.iter().filter(|reach| asked.contains(&reach.entry)) {
                grant.node_access.push(reach.entry.clone());
            }
            refused.retain(|reach| !asked.contains(&reach.entry));
        }
        if !refused.is_empty() {
            let reaches: Vec<String> = refused.iter().map(ToString::to_string).collect();
            anyhow::bail!(
                "cannot grant it to {subject}, nothing was granted: {} (if the agent is meant to reach the node itself, grant it with --dangerously-allow-node-access)",
                reaches.join("; ")
            );
        }
        Ok(grant.clone())
    })
}

/// Revokes `items` from `subject` in `file`; what the subject's table
/// still grants.
pub fn remove_grants(
    file: &PolicyFile,
    subject: &Subject,
    items: &[String],
) -> anyhow::Result<Grant> {
    anyhow::ensure!(
        !items.is_empty(),
        "name what to revoke, such as kv, fs=/data or all"
    );
    file.update(|policy| {
        let grant = table(policy, subject);
        apply_revokes(grant, items)?;
        let left = grant.clone();
        // An agent's empty table says nothing: drop it. A publisher's empty
        // table still says "trusted"; `untrust` removes it.
        if let Subject::Agent(key) = subject
            && left.is_empty()
        {
            policy.agents.remove(key);
        }
        Ok(left)
    })
}

/// Trusts the publisher `key` in `file`, or no longer.
pub fn set_trust(file: &PolicyFile, key: PeerId, trusted: bool) -> anyhow::Result<()> {
    file.update(|policy| {
        if trusted {
            policy.publishers.entry(key).or_default();
        } else {
            anyhow::ensure!(
                policy.publishers.remove(&key).is_some(),
                "publisher {key} is not trusted here"
            );
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::llm::grant::LlmSetting;
    use crate::capabilities::peers::grant::PeersGrant;
    use crate::capabilities::wasi::grant::Access;
    use bytesize::ByteSize;

    fn items(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn grant_items_build_a_grant_and_revokes_take_it_apart() {
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().to_str().unwrap();
        let mut grant = Grant::default();
        apply_grants(
            &mut grant,
            &items(&[
                &format!("fs={host}:/data:rw"),
                "http=https://api.example.com",
                "http=https://api.example.com",
                "env=API_KEY",
                "kv=1MiB",
                "peers=3/4",
                "llm",
                "deadline=30s",
                "concurrency=2",
            ]),
        )
        .unwrap();
        grant.validate().unwrap();
        assert_eq!(grant.fs.as_ref().unwrap()[0].access, Access::ReadWrite);
        assert_eq!(grant.http.as_ref().unwrap().len(), 1, "no duplicates");
        assert_eq!(grant.kv, Some(ByteSize::mib(1)));
        assert_eq!(
            grant.peers,
            Some(PeersGrant {
                depth: 3,
                fanout: 4
            })
        );
        assert_eq!(grant.llm, Some(LlmSetting::Switch(true)));
        apply_revokes(
            &mut grant,
            &items(&["fs=/data", "env=API_KEY", "kv", "llm"]),
        )
        .unwrap();
        assert_eq!((grant.fs.clone(), grant.env.clone()), (None, None));
        assert_eq!((grant.kv, grant.llm.clone()), (None, None));
        assert!(grant.http.is_some());
        apply_revokes(&mut grant, &items(&["all"])).unwrap();
        assert!(grant.is_empty());
    }

    #[test]
    fn bad_items_say_what_to_write() {
        for (item, reason) in [
            ("kv", "kv=QUOTA"),
            ("kv=lots", "not a size"),
            ("fs=/nonexistent-agentsite-folder:/d", "nonexistent"),
            ("fs=/tmp", "fs=/host/folder:/guest/path"),
            ("peers=2", "DEPTH/FANOUT"),
            (
                "peers=2/x",
                "the fan-out \"x\" is not a whole number, such as peers=2/8",
            ),
            (
                "memory=lots",
                "\"lots\" is not a size such as 1MiB, 512KiB or 2GB",
            ),
            (
                "deadline=soon",
                "\"soon\" is not a duration such as 30s, 2m or 500ms",
            ),
            (
                "concurrency=many",
                "\"many\" is not a whole number of calls, such as 4",
            ),
            ("http=example.com", "scheme://host"),
            ("network", "unknown grant"),
            // Values that parse but cannot be: said of the item, not of
            // the policy table it would be written to.
            (
                "peers=99/8",
                "cannot grant \"peers=99/8\": the depth of calls through peers must be 1 to 8",
            ),
            (
                "concurrency=0",
                "cannot grant \"concurrency=0\": the number of concurrent calls must be at least 1",
            ),
            (
                "memory=1KiB",
                "cannot grant \"memory=1KiB\": the memory limit must be at least 64 KiB",
            ),
            (
                "deadline=0s",
                "cannot grant \"deadline=0s\": the deadline must be above zero",
            ),
        ] {
            let error = apply_grants(&mut Grant::default(), &items(&[item])).unwrap_err();
            let error = format!("{error:#}");
            assert!(error.contains(reason), "{item}: {error}");
            // In the user's words: no parser's own text after the reason.
            for library in [
                "[agents",
                "limits.",
                "ByteSize",
                "invalid digit",
                "expected number",
                "cannot parse",
            ] {
                assert!(!error.contains(library), "{item}: {error}");
            }
        }
        let error = apply_revokes(&mut Grant::default(), &items(&["env=HOME"])).unwrap_err();
        assert!(error.to_string().contains("not granted"), "{error}");
    }
}
