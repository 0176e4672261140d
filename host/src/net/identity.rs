//! Ed25519 keys: a node's persistent identity (its libp2p peer id), and the
//! publisher key that signs the manifests it publishes.
//!
//! The identity lives in `<data-dir>/identity.key` (libp2p protobuf
//! encoding), readable by the owner only; it is made on first use and never
//! rewritten. A publisher key (`agentsite keygen`, `<data-dir>/publisher.key`)
//! is optional: without one the node signs with its identity. With one, the
//! agents of a person or organisation carry one key whichever node
//! published them, and operators trust that key.

use anyhow::Context as _;
use libp2p::identity::Keypair;
use std::path::Path;

/// Reads the node key at `path`, or makes one there if there is none.
pub fn load_or_create(path: &Path) -> anyhow::Result<Keypair> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let keypair = Keypair::from_protobuf_encoding(&bytes).map_err(|e| {
                anyhow::anyhow!(
                    "{} is not a node key ({e}); move it away to make a new identity",
                    path.display()
                )
            })?;
            anyhow::ensure!(
                keypair.key_type() == libp2p::identity::KeyType::Ed25519,
                "{} is not an ed25519 key",
                path.display()
            );
            Ok(keypair)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(path),
        Err(e) => Err(e).with_context(|| format!("cannot read node key {}", path.display())),
    }
}

/// The publisher key at `path`, if one was made.
pub fn load_publisher(path: &Path) -> anyhow::Result<Option<Keypair>> {
    match std::fs::metadata(path) {
        Ok(_) => load_or_create(path).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read publisher key {}", path.display())),
    }
}

/// Makes a new publisher key at `path`; an existing one is replaced only
/// with `replace`.
pub fn generate_publisher(path: &Path, replace: bool) -> anyhow::Result<Keypair> {
    use crate::store::{Existing, StoreError, write_private};
    let keypair = Keypair::generate_ed25519();
    let encoded = keypair
        .to_protobuf_encoding()
        .map_err(|e| anyhow::anyhow!("cannot encode the key: {e}"))?;
    let existing = if replace {
        Existing::Replace
    } else {
        Existing::Keep
    };
    match write_private(path, &encoded, existing) {
        Ok(()) => Ok(keypair),
        Err(StoreError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::AlreadyExists =>
        {
            let current = load_or_create(path)?.public().to_peer_id();
            anyhow::bail!(
                "{} already holds publisher key {current}; --force replaces it (agents signed with it stay signed by it)",
                path.display()
            )
        }
        Err(e) => Err(e).with_context(|| format!("cannot save publisher key {}", path.display())),
    }
}

fn create(path: &Path) -> anyhow::Result<Keypair> {
    use crate::store::{Existing, StoreError, write_private};
    let keypair = Keypair::generate_ed25519();
    let encoded = keypair
        .to_protobuf_encoding()
        .map_err(|e| anyhow::anyhow!("cannot encode the node key: {e}"))?;
    // Two processes starting at once: the first key written wins and the
    // other process reads it.
    match write_private(path, &encoded, Existing::Keep) {
        Ok(()) => Ok(keypair),
        Err(StoreError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::AlreadyExists =>
        {
            load_or_create(path)
        }
        Err(e) => Err(e).with_context(|| format!("cannot save node key {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_persists() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("identity.key");
        let first = load_or_create(&path).unwrap();
        let second = load_or_create(&path).unwrap();
        assert_eq!(first.public(), second.public());
        std::fs::write(&path, b"garbage").unwrap();
        let error = load_or_create(&path).unwrap_err().to_string();
        assert!(error.contains("is not a node key"), "{error}");
    }
}
