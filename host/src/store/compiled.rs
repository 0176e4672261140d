//! Precompiled artifacts, so that an agent is compiled once, when it is added.
//!
//! An artifact is only valid for the engine configuration that produced it,
//! so files are keyed by content id and engine fingerprint (the node has an
//! engine per [`Mode`]: WASI 0.2 and WASI 0.3 components). Loading an
//! artifact maps native code into the process, so each one is stored with
//! its own sha256 and checked before use; a damaged artifact is discarded and
//! rebuilt from the (verified) component bytes.

use super::{StoreError, remove_if_present, write_atomic};
use crate::AgentId;
use crate::runtime::mode::Mode;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// Compiled artifacts for the node's engines.
#[derive(Debug, Clone)]
pub struct CompiledCache {
    dir: PathBuf,
    /// The fingerprint of each mode's engine, in [`Mode::ALL`]'s order.
    fingerprints: [String; 2],
}

impl CompiledCache {
    /// A cache in `dir` for the engines with `fingerprints` (one per mode,
    /// in [`Mode::ALL`]'s order).
    pub fn new(dir: PathBuf, fingerprints: [String; 2]) -> Self {
        CompiledCache { dir, fingerprints }
    }

    fn fingerprint(&self, mode: Mode) -> &str {
        match mode {
            Mode::Synchronous => &self.fingerprints[0],
            Mode::Concurrent => &self.fingerprints[1],
        }
    }

    /// Where the artifact of `id` for the engine of `mode` lives.
    pub fn path(&self, id: &AgentId, mode: Mode) -> PathBuf {
        self.dir
            .join(format!("{}.{}.cwasm", id.hex(), self.fingerprint(mode)))
    }

    fn digest_path(&self, id: &AgentId, mode: Mode) -> PathBuf {
        self.dir
            .join(format!("{}.{}.sha256", id.hex(), self.fingerprint(mode)))
    }

    /// The path of a present and intact artifact for `id`, and the mode of
    /// the engine that made it, or `None`. A damaged artifact is removed so
    /// that the caller rebuilds it.
    pub fn verified_path(&self, id: &AgentId) -> Option<(PathBuf, Mode)> {
        let mode = Mode::ALL
            .into_iter()
            .find(|mode| self.digest_path(id, *mode).exists())?;
        let path = self.path(id, mode);
        let expected = std::fs::read_to_string(self.digest_path(id, mode)).ok()?;
        let actual = super::sha256_file(&path).ok()?;
        if hex::encode(actual) == expected.trim() {
            return Some((path, mode));
        }
        tracing::warn!(agent = %id, "compiled artifact is damaged; recompiling");
        let _ = self.remove(id);
        None
    }

    /// Stores `artifact`, the serialized compilation of `id` by the engine
    /// of `mode`.
    pub fn put(&self, id: &AgentId, mode: Mode, artifact: &[u8]) -> Result<(), StoreError> {
        // Digest first: a crash between the two writes leaves a mismatch,
        // which `verified_path` treats as "rebuild", never as valid.
        write_atomic(
            &self.digest_path(id, mode),
            hex::encode(Sha256::digest(artifact)).as_bytes(),
        )?;
        write_atomic(&self.path(id, mode), artifact)
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

    fn cache(dir: &std::path::Path, synchronous: &str, concurrent: &str) -> CompiledCache {
        CompiledCache::new(dir.to_owned(), [synchronous.into(), concurrent.into()])
    }

    #[test]
    fn an_intact_artifact_is_found_and_a_damaged_one_discarded() {
        let dir = tempfile::tempdir().unwrap();
        let cache = cache(dir.path(), "f00d", "cafe");
        let id = AgentId::of(b"component");
        assert!(cache.verified_path(&id).is_none());
        for mode in Mode::ALL {
            cache.put(&id, mode, b"native code").unwrap();
            assert_eq!(
                cache.verified_path(&id),
                Some((cache.path(&id, mode), mode))
            );
            std::fs::write(cache.path(&id, mode), b"native c0de").unwrap();
            assert!(cache.verified_path(&id).is_none());
            assert!(
                !cache.path(&id, mode).exists(),
                "damaged artifact should be removed"
            );
        }
    }

    #[test]
    fn artifacts_of_another_engine_are_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let id = AgentId::of(b"component");
        cache(dir.path(), "aaaa", "cccc")
            .put(&id, Mode::Synchronous, b"native code")
            .unwrap();
        let other = cache(dir.path(), "bbbb", "dddd");
        assert!(other.verified_path(&id).is_none());
        other.remove(&id).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
