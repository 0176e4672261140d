//! The content-addressed store: component bytes by sha256, their compiled
//! artifacts, and one record per installed agent.
//!
//! Every file is written atomically (temporary file in the same folder,
//! fsync, rename, fsync of the folder), so a crash leaves either the old
//! state or the new one, never a partial file under a valid name. The record
//! is written last: an agent is installed exactly when its record exists.

pub(crate) mod attachment;
mod blobs;
mod catalog;
mod compiled;
pub mod manifest;
mod origin;
pub(crate) mod terms;

pub use blobs::BlobStore;
pub use catalog::{AgentRecord, Catalog, ResolveError, resolve_in};
pub use compiled::CompiledCache;
pub use origin::Origin;

use std::io::Write as _;
use std::path::Path;

/// The sha256 of the file at `path`, read through a memory map: hashing a
/// file this way faults in page-cache pages a batch at a time instead of
/// copying the file into fresh heap pages.
pub(crate) fn sha256_file(path: &Path) -> std::io::Result<[u8; 32]> {
    use sha2::{Digest as _, Sha256};
    let file = std::fs::File::open(path)?;
    if file.metadata()?.len() == 0 {
        return Ok(Sha256::digest([]).into());
    }
    // SAFETY: the store never modifies a file in place (every write is a
    // rename of a new file), so the mapped bytes do not change under us.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    Ok(Sha256::digest(&map[..]).into())
}

/// Errors of the store a caller may act on.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The stored bytes no longer hash to their id: disk corruption or tampering.
    #[error(
        "stored blob {id} is corrupt (its bytes hash to sha256:{actual}); remove it with `agentsite rm` and add the agent again"
    )]
    Corrupt { id: crate::AgentId, actual: String },
    /// No blob for this id.
    #[error("no stored blob for {0}")]
    Missing(crate::AgentId),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl StoreError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        StoreError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Writes `bytes` to `path` atomically and durably.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    write_file(path, bytes, false, Existing::Replace)
}

/// What writing a file does when `path` already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Existing {
    Replace,
    /// Leave it; the write fails with [`std::io::ErrorKind::AlreadyExists`].
    Keep,
}

/// Writes `bytes` to `path` like [`write_atomic`], readable by the owner
/// only (keys and tokens).
pub(crate) fn write_private(
    path: &Path,
    bytes: &[u8],
    existing: Existing,
) -> Result<(), StoreError> {
    write_file(path, bytes, true, existing)
}

fn write_file(
    path: &Path,
    bytes: &[u8],
    private: bool,
    existing: Existing,
) -> Result<(), StoreError> {
    let dir = path.parent().ok_or_else(|| {
        StoreError::io(
            "store path has no parent",
            std::io::ErrorKind::InvalidInput.into(),
        )
    })?;
    std::fs::create_dir_all(dir)
        .map_err(|e| StoreError::io(format!("cannot create {}", dir.display()), e))?;
    let mut file = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(|e| StoreError::io(format!("cannot create a file in {}", dir.display()), e))?;
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::PermissionsExt as _;
        file.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| StoreError::io(format!("cannot protect {}", path.display()), e))?;
    }
    #[cfg(not(unix))]
    let _ = private;
    file.write_all(bytes)
        .and_then(|()| file.as_file().sync_all())
        .map_err(|e| StoreError::io(format!("cannot write {}", path.display()), e))?;
    let persisted = match existing {
        Existing::Replace => file.persist(path),
        Existing::Keep => file.persist_noclobber(path),
    };
    persisted
        .map_err(|e| StoreError::io(format!("cannot rename into {}", path.display()), e.error))?;
    sync_dir(dir)
}

/// Makes a rename in `dir` durable.
fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    #[cfg(unix)]
    {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| StoreError::io(format!("cannot sync {}", dir.display()), e))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Removes `path`; a file that is already gone is not an error.
pub fn remove_file(path: &Path) -> Result<(), StoreError> {
    remove_if_present(path)
}

pub(crate) fn remove_if_present(path: &Path) -> Result<(), StoreError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(
            format!("cannot remove {}", path.display()),
            e,
        )),
    }
}

/// How old an unfinished write must be before it is swept away: no write
/// takes this long, so a file this old belongs to a process that died.
pub const STALE_WRITE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes the temporary files that writes in `dir` left behind when their
/// process was killed, if they are older than `older_than` (younger ones may
/// belong to a write still going on in another process). Returns how many
/// were removed.
pub fn sweep_unfinished_writes(dir: &Path, older_than: std::time::Duration) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let now = std::time::SystemTime::now();
    let mut removed = 0;
    for entry in entries.flatten() {
        let stale = entry.file_name().to_string_lossy().starts_with(".tmp-")
            && entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|at| now.duration_since(at).unwrap_or_default() > older_than);
        if stale && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    if removed > 0 {
        tracing::info!(dir = %dir.display(), removed, "removed unfinished writes of a process that died");
    }
    removed
}

/// Opens (or creates) the redb database at `path`, with its folder; `what`
/// names it in the error, which is one line: another process holding the
/// file is said as such.
pub(crate) fn open_database(path: &Path, what: &str) -> Result<redb::Database, String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create its folder: {e}"))?;
    }
    redb::Database::create(path).map_err(|e| match e {
        redb::DatabaseError::DatabaseAlreadyOpen => {
            format!("{} is in use by another agentsite process", path.display())
        }
        other => format!("cannot open the {what} database: {other}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_old_unfinished_writes_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join(".tmp-old");
        let fresh = dir.path().join(".tmp-fresh");
        let blob = dir.path().join("0123");
        for path in [&old, &fresh, &blob] {
            std::fs::write(path, b"x").unwrap();
        }
        let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        for path in [&old, &blob] {
            let file = std::fs::File::options().write(true).open(path).unwrap();
            file.set_modified(two_hours_ago).unwrap();
        }
        assert_eq!(sweep_unfinished_writes(dir.path(), STALE_WRITE), 1);
        assert!(!old.exists());
        assert!(fresh.exists(), "a write that may still be going on stays");
        assert!(blob.exists(), "stored files are never swept");
    }
}
