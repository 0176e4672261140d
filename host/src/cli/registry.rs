//! `agentsite add oci://…` and `agentsite push AGENT oci://…`: components
//! in OCI registries.

use crate::Node;
use crate::oci::signature::{self, Signer, Verdict};
use crate::oci::{self, Registry, credentials};
use crate::text::terminal_safe as safe;
use anyhow::Context as _;
use std::collections::BTreeMap;

/// How to reach a registry, from the command line.
#[derive(Debug, Default)]
pub struct Access {
    pub username: Option<String>,
    /// Read the password from stdin (`--password-stdin`).
    pub password_stdin: bool,
    /// Plain HTTP to a registry that is not on this machine.
    pub plain_http: bool,
}

impl Access {
    fn registry(&self, reference: &oci_client::Reference) -> anyhow::Result<Registry> {
        let password = if self.password_stdin {
            let mut password = String::new();
            std::io::stdin()
                .read_line(&mut password)
                .context("cannot read the password from stdin")?;
            Some(password.trim_end_matches(['\n', '\r']).to_owned())
        } else {
            None
        };
        let given = credentials::Given {
            username: self.username.clone(),
            password,
        };
        let auth = credentials::for_registry(reference.resolve_registry(), given)?;
        Ok(Registry::new(reference, auth, self.plain_http))
    }
}

/// Pulls the component at `argument` (`oci://…`) and adds it.
pub async fn add(
    node: &Node,
    argument: &str,
    name: Option<&str>,
    access: &Access,
    same_name: crate::SameName,
) -> anyhow::Result<()> {
    let reference = oci::parse(argument)?;
    let registry = access.registry(&reference)?;
    eprintln!("pulling {}", safe(argument));
    let pulled = registry.pull(&reference).await?;
    let verdict = match &pulled.signatures {
        Ok(found) => signature::check(found, &pulled.manifest, &trusted_keys(node)?),
        Err(why) => Verdict::Unreadable { why: why.clone() },
    };
    // Checked before anything is stored: a refused component leaves no trace.
    let signer = node
        .policy()
        .current()
        .admit_from_registry(&verdict)
        .map_err(|why| {
            anyhow::anyhow!("cannot add {}: {why}; nothing was stored", safe(argument))
        })?;
    let size = pulled.bytes.len();
    let repository = reference
        .repository()
        .rsplit('/')
        .next()
        .unwrap_or_default();
    let fallback = super::agent_name_from(repository);
    let installed = node
        .install(
            &pulled.bytes,
            pulled.origin(signer),
            Some(name.unwrap_or(&fallback)),
            same_name,
        )
        .await
        .with_context(|| format!("cannot add {}", safe(argument)))?;
    let record = &installed.record;
    println!("{}", record.id);
    super::note_name_not_taken(name, record);
    eprintln!(
        "added {} {} from {} ({}, {}: {})",
        record.card.name,
        safe(&record.card.version),
        safe(argument),
        bytesize::ByteSize(size as u64),
        super::counted(record.tools.len(), "tool"),
        super::tool_names(&record.tools)
    );
    super::note_replaced(&installed);
    eprintln!("{}", safe(&verdict.describe()));
    Ok(())
}

/// The keys whose signatures admit a component: the publishers the
/// operator trusts, and the node's own (its identity and publisher key).
fn trusted_keys(node: &Node) -> anyhow::Result<Vec<libp2p::PeerId>> {
    let mut keys: Vec<libp2p::PeerId> =
        node.policy().current().publishers.keys().copied().collect();
    let data = node.data_dir();
    for path in [data.identity(), data.publisher_key()] {
        if let Some(key) = crate::net::identity::load_publisher(&path)? {
            keys.push(key.public().to_peer_id());
        }
    }
    Ok(keys)
}

/// How `push` signs what it pushed.
#[derive(Debug, Default)]
pub enum Signing {
    #[default]
    None,
    /// With the node's publisher key if it has one, else its identity:
    /// the key that signs what it publishes to the network.
    NodeKey,
    /// With the ed25519 key in a PKCS#8 PEM file.
    KeyFile(std::path::PathBuf),
}

impl Signing {
    fn signer(&self, node: &Node) -> anyhow::Result<Option<Signer>> {
        let keypair = match self {
            Signing::None => return Ok(None),
            Signing::KeyFile(path) => return Ok(Some(Signer::from_pem_file(path)?)),
            Signing::NodeKey => {
                let data = node.data_dir();
                match crate::net::identity::load_publisher(&data.publisher_key())? {
                    Some(key) => key,
                    None => crate::net::identity::load_or_create(&data.identity())?,
                }
            }
        };
        let keypair = keypair
            .try_into_ed25519()
            .map_err(|_| anyhow::anyhow!("the node's key is not an ed25519 key"))?;
        Ok(Some(Signer::new(keypair)))
    }
}

/// `agentsite push AGENT oci://…`: publishes an installed component; prints
/// the reference pinned to the pushed manifest's digest.
pub async fn push(
    node: &Node,
    agent: &str,
    argument: &str,
    access: &Access,
    signing: &Signing,
) -> anyhow::Result<()> {
    let reference = oci::parse(argument)?;
    // A key that cannot sign is found before anything is pushed.
    let signer = signing.signer(node)?;
    let record = node.resolve(agent)?;
    anyhow::ensure!(
        !record.is_attached(),
        "{} is an attached server, not a component: there is nothing to push",
        record.card.name
    );
    let bytes = node.blobs().get(&record.id)?;
    let registry = access.registry(&reference)?;
    let card = &record.card;
    // The OCI annotations registries and `wkg` show for a package.
    let mut annotations = BTreeMap::from([
        (
            "org.opencontainers.image.title".to_owned(),
            card.name.clone(),
        ),
        (
            "org.opencontainers.image.version".to_owned(),
            card.version.clone(),
        ),
        (
            "org.opencontainers.image.description".to_owned(),
            card.description.clone(),
        ),
    ]);
    if let Some(homepage) = &card.homepage {
        annotations.insert("org.opencontainers.image.url".to_owned(), homepage.clone());
    }
    eprintln!("pushing {} to {}", record.card.name, safe(argument));
    let file_name = format!("{}.wasm", card.name);
    let pushed = registry
        .push(&reference, bytes, &file_name, annotations)
        .await?;
    println!("oci://{}", safe(&pushed.pinned));
    eprintln!(
        "pushed {} {} ({}) as {}",
        record.card.name,
        safe(&card.version),
        record.id,
        pushed.digest
    );
    if let Some(signer) = signer {
        registry.sign(&reference, &pushed.digest, &signer).await?;
        eprintln!(
            "signed {} with {} (cosign's format, tag {})",
            pushed.digest,
            signer.did(),
            signature::tag(&pushed.digest)
        );
    }
    Ok(())
}
