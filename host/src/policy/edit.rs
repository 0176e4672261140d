//! Edits of the operator's policy: the grant grammar (`name=value` items),
//! adding and revoking them in a subject's table, trusting publishers, and
//! the lines that describe what a table grants. The command line
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
use crate::policy::llm_grant::{self, LlmGrant, LlmSetting};
use crate::policy::{Access, FsGrant, Grant, PeersGrant, Policy, PolicyFile};
use anyhow::Context as _;
use bytesize::ByteSize;
use libp2p::PeerId;
use std::path::PathBuf;

/// Whose grant table an edit changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Agent(AgentId),
    Publisher(PeerId),
    Defaults,
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::Agent(id) => write!(f, "agent {id}"),
            Subject::Publisher(key) => write!(f, "publisher {key}"),
            Subject::Defaults => f.write_str("the defaults"),
        }
    }
}

pub fn parse_publisher(key: &str) -> anyhow::Result<PeerId> {
    key.parse().map_err(|_| {
        anyhow::anyhow!(
            "{key:?} is not a publisher key: use the peer id form `agentsite id` or `agentsite keygen` prints (12D3KooW...)"
        )
    })
}

fn table<'a>(policy: &'a mut Policy, subject: &Subject) -> &'a mut Grant {
    match subject {
        Subject::Agent(id) => policy.agents.entry(*id).or_default(),
        Subject::Publisher(key) => policy.publishers.entry(*key).or_default(),
        Subject::Defaults => &mut policy.defaults,
    }
}

/// Applies `name=value` grant items to `grant`.
pub fn apply_grants(grant: &mut Grant, items: &[String]) -> anyhow::Result<()> {
    for item in items {
        apply_grant(grant, item).with_context(|| format!("cannot grant {item:?}"))?;
    }
    Ok(())
}

fn apply_grant(grant: &mut Grant, item: &str) -> anyhow::Result<()> {
    let (name, value) = match item.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (item, None),
    };
    let needs = |what: &str| value.with_context(|| format!("write it as {name}={what}"));
    match name {
        "fs" => {
            let fs = parse_fs(needs("/host/folder:/guest/path[:rw]")?)?;
            let list = grant.fs.get_or_insert_with(Vec::new);
            list.retain(|f| f.guest.trim_end_matches('/') != fs.guest.trim_end_matches('/'));
            list.push(fs);
        }
        "http" => {
            let pattern = needs("https://host[:port]")?.parse()?;
            let list = grant.http.get_or_insert_with(Vec::new);
            if !list.contains(&pattern) {
                list.push(pattern);
            }
        }
        "env" => {
            let name = needs("NAME")?.to_owned();
            let list = grant.env.get_or_insert_with(Vec::new);
            if !list.contains(&name) {
                list.push(name);
            }
        }
        "kv" => grant.kv = Some(parse_size(needs("QUOTA, such as 1MiB")?)?),
        "peers" => {
            grant.peers = Some(match value {
                None => PeersGrant::default(),
                Some(value) => {
                    let (depth, fanout) = value
                        .split_once('/')
                        .context("write it as peers=DEPTH/FANOUT, such as peers=2/8")?;
                    PeersGrant {
                        depth: depth.trim().parse().context("the depth is not a number")?,
                        fanout: fanout
                            .trim()
                            .parse()
                            .context("the fan-out is not a number")?,
                    }
                }
            })
        }
        "llm" => {
            grant.llm = Some(match value {
                None => LlmSetting::Switch(true),
                Some(value) => match parse_bool(value) {
                    Ok(switch) => LlmSetting::Switch(switch),
                    // The route set before stays.
                    Err(_) => {
                        let mut llm = llm_grant::parse_spec(value)?;
                        llm.route = current_llm(grant).route;
                        LlmSetting::of(llm)
                    }
                },
            })
        }
        "llm-route" => {
            let mut llm = current_llm(grant);
            llm.route = needs("client-first, node or client")?.parse()?;
            grant.llm = Some(LlmSetting::of(llm));
        }
        "memory" => grant.memory = Some(parse_size(needs("SIZE, such as 128MiB")?)?),
        "deadline" => {
            let text = needs("DURATION, such as 30s")?;
            grant.deadline = Some(
                humantime::parse_duration(text)
                    .map_err(|e| anyhow::anyhow!("{text:?} is not a duration: {e}"))?,
            )
        }
        "concurrency" => {
            grant.max_concurrent_calls = Some(needs("N")?.parse().context("not a number")?)
        }
        other => anyhow::bail!(
            "unknown grant {other:?}: grants are fs, http, env, kv, peers, llm, llm-route, memory, deadline and concurrency"
        ),
    }
    Ok(())
}

/// The language-model grant this table holds now (the default one if none).
fn current_llm(grant: &Grant) -> LlmGrant {
    grant
        .llm
        .as_ref()
        .and_then(LlmSetting::grant)
        .unwrap_or_default()
}

fn parse_fs(text: &str) -> anyhow::Result<FsGrant> {
    let mut parts = text.split(':');
    let (Some(host), Some(guest)) = (parts.next(), parts.next()) else {
        anyhow::bail!("write it as fs=/host/folder:/guest/path[:rw]");
    };
    let access = match parts.next() {
        None | Some("ro") => Access::ReadOnly,
        Some("rw") => Access::ReadWrite,
        Some(other) => anyhow::bail!("access {other:?} is neither ro nor rw"),
    };
    anyhow::ensure!(
        parts.next().is_none(),
        "write it as fs=/host/folder:/guest/path[:rw]"
    );
    let host = PathBuf::from(host);
    // The folder is named as it is now: a symlink swapped in later cannot
    // move the grant somewhere else.
    let host =
        std::fs::canonicalize(&host).with_context(|| format!("host folder {}", host.display()))?;
    anyhow::ensure!(host.is_dir(), "{} is not a folder", host.display());
    Ok(FsGrant {
        host,
        guest: guest.to_owned(),
        access,
    })
}

fn parse_size(text: &str) -> anyhow::Result<ByteSize> {
    text.parse()
        .map_err(|e| anyhow::anyhow!("{text:?} is not a size such as 1MiB: {e}"))
}

fn parse_bool(text: &str) -> anyhow::Result<bool> {
    match text {
        "true" | "yes" | "on" => Ok(true),
        "false" | "no" | "off" => Ok(false),
        _ => anyhow::bail!("{text:?} is neither true nor false"),
    }
}

/// Removes grant items (`kv`, `fs`, `fs=/guest`, `http=pattern`, `env=NAME`,
/// ..., or `all`) from `grant`, so a less specific table decides them again.
pub fn apply_revokes(grant: &mut Grant, items: &[String]) -> anyhow::Result<()> {
    for item in items {
        let (name, value) = match item.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (item.as_str(), None),
        };
        match (name, value) {
            ("all", None) => *grant = Grant::default(),
            ("fs", None) => grant.fs = None,
            ("fs", Some(guest)) => remove_from(&mut grant.fs, item, |f| {
                f.guest.trim_end_matches('/') == guest.trim_end_matches('/')
            })?,
            ("http", None) => grant.http = None,
            ("http", Some(pattern)) => {
                remove_from(&mut grant.http, item, |p| p.to_string() == pattern)?
            }
            ("env", None) => grant.env = None,
            ("env", Some(var)) => remove_from(&mut grant.env, item, |n| n == var)?,
            ("kv", None) => grant.kv = None,
            ("peers", None) => grant.peers = None,
            ("llm", None) => grant.llm = None,
            ("memory", None) => grant.memory = None,
            ("deadline", None) => grant.deadline = None,
            ("concurrency", None) => grant.max_concurrent_calls = None,
            _ => anyhow::bail!(
                "cannot revoke {item:?}: name a grant (fs, http, env, kv, peers, llm, memory, deadline, concurrency), \
                 one entry of a list (fs=/guest, http=PATTERN, env=NAME), or all"
            ),
        }
    }
    Ok(())
}

fn remove_from<T>(
    list: &mut Option<Vec<T>>,
    item: &str,
    matches: impl Fn(&T) -> bool,
) -> anyhow::Result<()> {
    let entries = list.as_mut().filter(|l| l.iter().any(&matches));
    let entries = entries.with_context(|| format!("{item:?} is not granted here"))?;
    entries.retain(|e| !matches(e));
    if entries.is_empty() {
        *list = None;
    }
    Ok(())
}

/// Grants `items` to `subject` in `file`; the subject's table as it is now.
pub fn add_grants(file: &PolicyFile, subject: &Subject, items: &[String]) -> anyhow::Result<Grant> {
    anyhow::ensure!(
        !items.is_empty(),
        "name what to grant, such as kv=1MiB or llm"
    );
    file.update(|policy| {
        apply_grants(table(policy, subject), items)?;
        Ok(table(policy, subject).clone())
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
        if let Subject::Agent(id) = subject
            && left.is_empty()
        {
            policy.agents.remove(id);
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

/// One line per capability granted in `grants`, then the limits.
pub fn describe(grants: &crate::policy::Grants) -> Vec<String> {
    let mut lines = Vec::new();
    for fs in &grants.fs {
        let access = match fs.access {
            Access::ReadOnly => "read-only",
            Access::ReadWrite => "read-write",
        };
        lines.push(format!(
            "fs       {} at {} ({access})",
            fs.host.display(),
            fs.guest
        ));
    }
    for pattern in &grants.http {
        lines.push(format!("http     {pattern}"));
    }
    for name in &grants.env {
        lines.push(format!("env      {name}"));
    }
    if let Some(quota) = grants.kv {
        lines.push(format!("kv       quota {}", ByteSize(quota)));
    }
    if let Some(peers) = grants.peers {
        lines.push(format!(
            "peers    depth {}, fan-out {}",
            peers.depth, peers.fanout
        ));
    }
    if let Some(llm) = &grants.llm {
        lines.push(format!("llm      {}", llm.describe()));
    }
    let limits = &grants.limits;
    lines.push(format!(
        "limits   memory {}, deadline {}, {} concurrent calls",
        limits.memory,
        humantime::format_duration(limits.deadline),
        limits.max_concurrent_calls
    ));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

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
            ("http=example.com", "scheme://host"),
            ("network", "unknown grant"),
        ] {
            let error = apply_grants(&mut Grant::default(), &items(&[item])).unwrap_err();
            let error = format!("{error:#}");
            assert!(error.contains(reason), "{item}: {error}");
        }
        let error = apply_revokes(&mut Grant::default(), &items(&["env=HOME"])).unwrap_err();
        assert!(error.to_string().contains("not granted"), "{error}");
    }
}
