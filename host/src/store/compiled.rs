//! Precompiled artifacts, so that an agent is compiled once, when it is added.
//!
//! An artifact is only valid for the engine configuration that produced it,
//! so files are keyed by content id and engine fingerprint. Loading an
//! artifact maps native code into the process, so each one is stored with
//! its own sha256 and checked before use; a damaged artifact is discarded and
//! rebuilt from the (verified) component bytes.

use super::{StoreError, remove_if_present, write_atomic};
use crate::AgentId;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// Compiled artifacts for one engine configuration.
#[derive(Debug, Clone)]
pub struct CompiledCache {
    dir: PathBuf,
    fingerprint: String,
}

impl CompiledCache {
    /// A cache in `dir` for the engine with `fingerprint`.
    pub fn new(dir: PathBuf, fingerprint: String) -> Self {
        CompiledCache { dir, fingerprint }
    }

    /// Where the artifact of `id` for this engine lives.
    pub fn path(&self, id: &AgentId) -> PathBuf {
        self.dir
            .join(format!("{}.{}.cwasm", id.hex(), self.fingerprint))
    }

    fn digest_path(&self, id: &AgentId) -> PathBuf {
        self.dir
            .join(format!("{}.{}.sha256", id.hex(), self.fingerprint))
    }

    /// The path of a present and intact artifact for `id`, or `None`.
    /// A damaged artifact is removed so that the caller rebuilds it.
    pub fn verified_path(&self, id: &AgentId) -> Option<PathBuf> {
        let path = self.path(id);
        let expected = std::fs::read_to_string(self.digest_path(id)).ok()?;
        let actual = super::sha256_file(&path).ok()?;
        if hex::encode(actual) == expected.trim() {
            return Some(path);
        }
        tracing::warn!(agent = %id, "compiled artifact is damaged; recompiling");
        let _ = self.remove(id);
        None
    }

    /// Stores `artifact`, the serialized compilation of `id`.
    pub fn put(&self, id: &AgentId, artifact: &[u8]) -> Result<(), StoreError> {
        // Digest first: a crash between the two writes leaves a mismatch,
        // which `verified_path` treats as "rebuild", never as valid.
        write_atomic(
            &self.digest_path(id),
            hex::encode(Sha256::digest(artifact)).as_bytes(),
        )?;
        write_atomic(&self.path(id), artifact)
    }

    /// Removes the artifacts of `id` for every engine fingerprint.
    pub fn remove(&self, id: &AgentId) -> Result<(), StoreError> {
        let prefix = format!("{}.", id.hex());
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(StoreError::io(
                    format!("cannot list {}", self.dir.display()),
                    e,
                ));
            }
        };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                remove_if_present(&entry.path())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_intact_artifact_is_found_and_a_damaged_one_discarded() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompiledCache::new(dir.path().to_owned(), "f00d".into());
        let id = AgentId::of(b"component");
        assert!(cache.verified_path(&id).is_none());
        cache.put(&id, b"native code").unwrap();
        assert_eq!(cache.verified_path(&id), Some(cache.path(&id)));
        std::fs::write(cache.path(&id), b"native c0de").unwrap();
        assert!(cache.verified_path(&id).is_none());
        assert!(
            !cache.path(&id).exists(),
            "damaged artifact should be removed"
        );
    }

    #[test]
    fn artifacts_of_another_engine_are_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let id = AgentId::of(b"component");
        CompiledCache::new(dir.path().to_owned(), "aaaa".into())
            .put(&id, b"native code")
            .unwrap();
        let other = CompiledCache::new(dir.path().to_owned(), "bbbb".into());
        assert!(other.verified_path(&id).is_none());
        other.remove(&id).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
