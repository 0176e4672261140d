//! `agentsite add oci://…` and `agentsite push AGENT oci://…`: components
//! in OCI registries.

use crate::Node;
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
            pulled.origin,
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
    Ok(())
}

/// `agentsite push AGENT oci://…`: publishes an installed component; prints
/// the reference pinned to the pushed manifest's digest.
pub async fn push(node: &Node, agent: &str, argument: &str, access: &Access) -> anyhow::Result<()> {
    let reference = oci::parse(argument)?;
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
    Ok(())
}
