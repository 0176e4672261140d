//! Component bytes stored under their sha256, verified on every read.

use super::{StoreError, remove_if_present, write_atomic};
use crate::AgentId;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Component bytes by content id, one file per agent.
#[derive(Debug, Clone)]
pub struct BlobStore {
    dir: PathBuf,
}

impl BlobStore {
    pub fn new(dir: PathBuf) -> Self {
        BlobStore { dir }
    }

    /// Where the bytes of `id` live.
    pub fn path(&self, id: &AgentId) -> PathBuf {
        self.dir.join(id.hex())
    }

    /// Stores `bytes` and returns their id. Storing the same bytes twice is
    /// a no-op the second time.
    pub fn put(&self, bytes: &[u8]) -> Result<AgentId, StoreError> {
        let id = AgentId::of(bytes);
        let path = self.path(&id);
        if self.verify(&id).is_ok() {
            return Ok(id);
        }
        write_atomic(&path, bytes)?;
        Ok(id)
    }

    /// Checks that the stored bytes of `id` are present and still hash to `id`.
    pub fn verify(&self, id: &AgentId) -> Result<(), StoreError> {
        let path = self.path(id);
        let actual = super::sha256_file(&path).map_err(|e| read_error(id, &path, e))?;
        check_digest(id, actual)
    }

    /// The bytes of `id`, after checking that they still hash to `id`.
    pub fn get(&self, id: &AgentId) -> Result<Vec<u8>, StoreError> {
        let path = self.path(id);
        let bytes = std::fs::read(&path).map_err(|e| read_error(id, &path, e))?;
        check_digest(id, Sha256::digest(&bytes).into())?;
        Ok(bytes)
    }

    /// Bytes `range` of the blob of `id`, read without checking the whole
    /// (the caller checks the range against a manifest).
    pub fn read_range(
        &self,
        id: &AgentId,
        range: std::ops::Range<usize>,
    ) -> Result<Vec<u8>, StoreError> {
        use std::io::{Read as _, Seek as _};
        let path = self.path(id);
        let mut file = std::fs::File::open(&path).map_err(|e| read_error(id, &path, e))?;
        file.seek(std::io::SeekFrom::Start(range.start as u64))
            .map_err(|e| read_error(id, &path, e))?;
        // Read into spare capacity: nothing to zero first (a chunk is
        // served at the speed of hashing it).
        let mut bytes = Vec::with_capacity(range.len());
        file.take(range.len() as u64)
            .read_to_end(&mut bytes)
            .map_err(|e| read_error(id, &path, e))?;
        if bytes.len() != range.len() {
            let short = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
            return Err(read_error(id, &path, short));
        }
        Ok(bytes)
    }

    /// Removes the bytes of `id`.
    pub fn remove(&self, id: &AgentId) -> Result<(), StoreError> {
        remove_if_present(&self.path(id))
    }
}

/// A blob that cannot be read: missing, or an I/O failure.
fn read_error(id: &AgentId, path: &Path, error: std::io::Error) -> StoreError {
    match error.kind() {
        std::io::ErrorKind::NotFound => StoreError::Missing(*id),
        _ => StoreError::io(format!("cannot read {}", path.display()), error),
    }
}

/// Whether bytes hashing to `actual` are the bytes of `id`.
fn check_digest(id: &AgentId, actual: [u8; 32]) -> Result<(), StoreError> {
    if &actual != id.digest() {
        return Err(StoreError::Corrupt {
            id: *id,
            actual: hex::encode(actual),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_then_get_returns_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::new(dir.path().join("blobs"));
        let id = store.put(b"component bytes").unwrap();
        assert_eq!(id, AgentId::of(b"component bytes"));
        assert_eq!(store.get(&id).unwrap(), b"component bytes");
        assert_eq!(store.put(b"component bytes").unwrap(), id);
    }

    #[test]
    fn a_corrupted_blob_is_reported_not_returned() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::new(dir.path().join("blobs"));
        let id = store.put(b"original").unwrap();
        std::fs::write(store.path(&id), b"tampered").unwrap();
        let error = store.get(&id).unwrap_err();
        assert!(matches!(error, StoreError::Corrupt { .. }), "{error}");
        assert!(error.to_string().contains("corrupt"));
    }

    #[test]
    fn a_range_is_read_exactly_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::new(dir.path().join("blobs"));
        let bytes: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let id = store.put(&bytes).unwrap();
        assert_eq!(store.read_range(&id, 0..4096).unwrap(), &bytes[..4096]);
        assert_eq!(store.read_range(&id, 8192..10_000).unwrap(), &bytes[8192..]);
        // A blob cut short on disk: the range past its end is an error,
        // not fewer bytes.
        std::fs::write(store.path(&id), &bytes[..9000]).unwrap();
        let error = store.read_range(&id, 8192..10_000).unwrap_err();
        assert!(error.to_string().contains("cannot read"), "{error}");
    }

    #[test]
    fn writes_leave_no_temporary_files_behind() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::new(dir.path().join("blobs"));
        for i in 0..20u8 {
            store.put(&[i; 1000]).unwrap();
        }
        let names: Vec<_> = std::fs::read_dir(dir.path().join("blobs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 20);
        assert!(names.iter().all(|n| n.len() == 64), "{names:?}");
    }

    #[test]
    fn a_missing_blob_is_reported_as_missing() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::new(dir.path().join("blobs"));
        let error = store.get(&AgentId::of(b"never stored")).unwrap_err();
        assert!(matches!(error, StoreError::Missing(_)), "{error}");
    }
}
