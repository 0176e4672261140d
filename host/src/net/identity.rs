//! A node's persistent ed25519 identity: its libp2p peer id and the key that
//! signs the manifests it publishes.
//!
//! The key lives in `<data-dir>/identity.key` (libp2p protobuf encoding),
//! readable by the owner only. It is made on first use and never rewritten.

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

fn create(path: &Path) -> anyhow::Result<Keypair> {
    use std::io::Write as _;
    let keypair = Keypair::generate_ed25519();
    let encoded = keypair
        .to_protobuf_encoding()
        .map_err(|e| anyhow::anyhow!("cannot encode the node key: {e}"))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        file.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(&encoded)?;
    file.as_file().sync_all()?;
    // Two processes starting at once: the first key written wins and the
    // other process reads it.
    match file.persist_noclobber(path) {
        Ok(_) => Ok(keypair),
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => load_or_create(path),
        Err(e) => Err(e.error).with_context(|| format!("cannot save node key {}", path.display())),
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
