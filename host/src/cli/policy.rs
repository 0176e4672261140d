//! `agentsite grant`, `revoke`, `trust` and `policy show`: the operator's
//! edits of the policy file, written atomically and picked up by a running
//! node at its next call.
//!
//! The grammar and the edits themselves are [`crate::policy::edit`]'s.

use crate::Node;
use crate::agent::key::AgentKey;
use crate::capabilities::wasi::exposure::broad;
use crate::config::Limits;
use crate::policy::edit::{
    NodeAccess, Subject, add_grants, parse_publisher, remove_grants, set_trust, subject_of,
};
use crate::policy::{Grant, Policy, PolicyFile};
use anyhow::Context as _;
use std::io::IsTerminal as _;

/// The subject named on the command line: an installed agent (name, id or
/// prefix: its name's table for an agent the operator installed, see
/// [`subject_of`]), any agent id (granted before it is fetched), a
/// publisher key, or the defaults.
pub fn subject(
    node: &Node,
    agent: Option<&str>,
    publisher: Option<&str>,
) -> anyhow::Result<Subject> {
    match (agent, publisher) {
        (Some(agent), None) => match node.resolve(agent) {
            Ok(record) => Ok(subject_of(&record, agent)),
            Err(_) if agent.starts_with("sha256:") => Ok(Subject::Agent(AgentKey::Id(
                agent.parse().map_err(|e| anyhow::anyhow!("{e}"))?,
            ))),
            Err(e) => Err(e.into()),
        },
        (None, Some(key)) => Ok(Subject::Publisher(parse_publisher(key)?)),
        (None, None) => Ok(Subject::Defaults),
        (Some(_), Some(_)) => anyhow::bail!("name an agent or a publisher, not both"),
    }
}

/// `agentsite grant [AGENT | --publisher KEY] ITEM... [--dangerously-allow-node-access]`
pub fn grant(
    node: &Node,
    subject: &Subject,
    items: &[String],
    access: NodeAccess,
) -> anyhow::Result<()> {
    if let Subject::Agent(key) = subject
        && let Ok(record) = node.resolve(&key.to_string())
        && record.is_attached()
        && let Some(item) = items
            .iter()
            .find(|item| !item.starts_with("deadline=") && !item.starts_with("concurrency="))
    {
        anyhow::bail!(
            "{} is an attached server, which runs outside the sandbox: the node has nothing like \
             {item:?} to grant it (only deadline= and concurrency= apply to its calls)",
            record.card.name
        );
    }
    let grant = add_grants(node.policy(), subject, items, node.node_self(), access)?;
    eprintln!("granted to {subject} in {}", node.policy().path().display());
    if access == NodeAccess::Allowed && !grant.node_access.is_empty() {
        eprintln!(
            "warning: {subject} may reach the node itself through: {}",
            grant.node_access.join(", ")
        );
    }
    print_grant(&grant, node.config().limits);
    Ok(())
}

/// The grant items a Wassette `policy.yaml` allows (see
/// [`crate::policy::wassette`]); printed, so the operator sees what they
/// became. A file that grants something broad is granted only when the
/// operator says yes, at the terminal or with `yes`.
pub fn items_from_wassette(file: &std::path::Path, yes: bool) -> anyhow::Result<Vec<String>> {
    use crate::policy::wassette::{MAX_POLICY_FILE, grant_items};
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(MAX_POLICY_FILE + 1).read_to_string(&mut text))
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
    anyhow::ensure!(
        text.len() as u64 <= MAX_POLICY_FILE,
        "{} is larger than {MAX_POLICY_FILE} bytes",
        file.display()
    );
    let items = grant_items(&text, file).map_err(|e| anyhow::anyhow!(e))?;
    eprintln!(
        "{} allows: {}",
        file.display(),
        if items.is_empty() {
            "nothing".to_owned()
        } else {
            crate::text::terminal_safe(&items.join(" ")).into_owned()
        }
    );
    let mut asked = Grant::default();
    crate::policy::edit::apply_grants(&mut asked, &items)?;
    let broad = broad(&asked);
    if broad.is_empty() || yes {
        return Ok(items);
    }
    for line in &broad {
        eprintln!("  broad: {}", crate::text::terminal_safe(line));
    }
    let confirmed = std::io::stdin().is_terminal() && {
        eprint!("grant it? [y/N] ");
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        matches!(answer.trim(), "y" | "Y" | "yes")
    };
    anyhow::ensure!(
        confirmed,
        "{} grants broadly ({}); nothing was granted: read it, then run again with --yes to grant it",
        file.display(),
        broad.join("; ")
    );
    Ok(items)
}

/// `agentsite revoke [AGENT | --publisher KEY] ITEM...`
pub fn revoke(node: &Node, subject: &Subject, items: &[String]) -> anyhow::Result<()> {
    let grant = remove_grants(node.policy(), subject, items)?;
    eprintln!(
        "revoked from {subject} in {}",
        node.policy().path().display()
    );
    print_grant(&grant, node.config().limits);
    Ok(())
}

/// `agentsite trust KEY` / `agentsite untrust KEY`
pub fn trust(file: &PolicyFile, key: &str, trusted: bool) -> anyhow::Result<()> {
    let key = publisher_key(key)?;
    set_trust(file, key, trusted)?;
    let verb = if trusted {
        "trusted"
    } else {
        "no longer trusted"
    };
    eprintln!("publisher {key} {verb} (in {})", file.path().display());
    Ok(())
}

/// A publisher key as the operator names it: a peer id, a did:key, or a
/// PEM public key file (`cosign.pub`, `openssl pkey -pubout`).
fn publisher_key(key: &str) -> anyhow::Result<libp2p::PeerId> {
    let looks_like_key = key.starts_with("did:") || key.starts_with("12D3KooW");
    let path = std::path::Path::new(key);
    if !looks_like_key && path.is_file() {
        // A key file is a few hundred bytes; a larger file is not one.
        let metadata = std::fs::metadata(path)?;
        anyhow::ensure!(
            metadata.len() <= 16 * 1024,
            "{key} is {} bytes, too large for a public key file",
            metadata.len()
        );
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the key file {key}"))?;
        return crate::oci::signature::peer_of_public_pem(&text).with_context(|| key.to_owned());
    }
    parse_publisher(key)
}

/// `agentsite keygen [--force]`
pub fn keygen(data: &crate::config::DataDir, force: bool) -> anyhow::Result<()> {
    let path = data.publisher_key();
    let keypair = crate::net::identity::generate_publisher(&path, force)?;
    let key = keypair.public().to_peer_id();
    println!("{key}");
    let did = crate::did::of_peer(&key).unwrap_or_default();
    eprintln!(
        "publisher key {did} written to {}; `agentsite publish` signs with it from the next start of \
         `agentsite serve`. Operators trust it with: agentsite trust {key} (or its did:key)",
        path.display()
    );
    Ok(())
}

/// `agentsite policy show`
pub fn show(file: &PolicyFile, json: bool) -> anyhow::Result<()> {
    let policy = file.current();
    if json {
        return super::print_json(&*policy);
    }
    println!("# {}", file.path().display());
    if *policy == Policy::default() {
        println!("# empty: every agent runs as pure computation, every publisher is untrusted");
    }
    print!("{}", toml::to_string_pretty(&*policy)?);
    Ok(())
}

fn print_grant(grant: &Grant, limits: Limits) {
    let lines = grant.resolve(limits).describe();
    if lines.is_empty() {
        println!("nothing granted: pure computation");
    }
    for line in lines {
        println!("{line}");
    }
}
