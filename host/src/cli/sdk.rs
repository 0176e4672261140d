//! The SDKs this binary carries: the Rust crates (`agentsite-sdk` with its
//! macros and JSON-words crates), the Python and JavaScript SDKs and the
//! WIT contract, built into the binary and written out to a folder of the
//! data directory named by their version and digest.
//!
//! An agent made with `agentsite new` builds against that folder, so it
//! builds wherever it is made, whether or not a checkout of the repository
//! is there (or ever was), and always with the SDK of the node that made
//! it. The folder holds the repository's layout (`guest-sdk/…`, `wit/`), so
//! the Python and JavaScript builds find the WIT where they look for it.

use crate::config::DataDir;
use anyhow::Context as _;
use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};

/// The files carried, each as `(path in the repository, bytes)`.
macro_rules! carried {
    ($($path:literal),* $(,)?) => {
        &[$(($path, include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../", $path)))),*]
    };
}

const FILES: &[(&str, &[u8])] = carried![
    "guest-sdk/Cargo.toml",
    "guest-sdk/README.md",
    "guest-sdk/src/lib.rs",
    "guest-sdk/src/finite.rs",
    "guest-sdk/src/standard_schema.rs",
    "guest-sdk/src/asynchronous.rs",
    "guest-sdk/macros/Cargo.toml",
    "guest-sdk/macros/src/lib.rs",
    "guest-sdk/words/Cargo.toml",
    "guest-sdk/words/src/lib.rs",
    "guest-sdk/python/agentsite/__init__.py",
    "guest-sdk/python/agentsite/agent.py",
    "guest-sdk/python/agentsite/build.py",
    "guest-sdk/python/agentsite/exports.py",
    "guest-sdk/python/agentsite/node.py",
    "guest-sdk/python/agentsite/results.py",
    "guest-sdk/python/agentsite/schema.py",
    "guest-sdk/js/agentsite.js",
    "guest-sdk/js/build.mjs",
    "guest-sdk/js/package.json",
    "guest-sdk/js/package-lock.json",
    "wit/agent.wit",
    "wit/deps/cli.wit",
    "wit/deps/clocks.wit",
    "wit/deps/filesystem.wit",
    "wit/deps/http.wit",
    "wit/deps/io.wit",
    "wit/deps/random.wit",
    "wit/deps/sockets.wit",
    "wit/deps/cli-0.3.0.wit",
    "wit/deps/clocks-0.3.0.wit",
    "wit/deps/filesystem-0.3.0.wit",
    "wit/deps/http-0.3.0.wit",
    "wit/deps/random-0.3.0.wit",
    "wit/deps/sockets-0.3.0.wit",
];

/// The repository's workspace manifest, whose `[workspace.package]` and
/// `[workspace.dependencies]` the SDK crates inherit from.
const WORKSPACE: &str = include_str!("../../../Cargo.toml");

/// The versions the example agents build with, so that a new agent builds
/// with versions the SDK is tested against (and, where these crates are
/// already downloaded, without the network).
const LOCK: &str = include_str!("../../../examples/Cargo.lock");

/// Where the carried SDKs are, once written.
pub struct Sdk {
    root: PathBuf,
}

impl Sdk {
    /// The Rust SDK crate, for a `path` dependency.
    pub fn rust(&self) -> PathBuf {
        self.root.join("guest-sdk")
    }

    /// The Python SDK's folder, for `PYTHONPATH`.
    pub fn python(&self) -> PathBuf {
        self.root.join("guest-sdk/python")
    }

    /// The JavaScript SDK's folder (its `build.mjs` and `package.json`).
    pub fn js(&self) -> PathBuf {
        self.root.join("guest-sdk/js")
    }

    /// Versions for a new Rust agent's `Cargo.lock`.
    pub fn lock() -> &'static str {
        LOCK
    }
}

/// The folder's name: the version and a digest of everything carried, so
/// that a binary with other SDK files writes (and its agents use) its own.
fn versioned_name() -> String {
    let mut digest = Sha256::new();
    for (path, bytes) in FILES {
        digest.update((path.len() as u64).to_le_bytes());
        digest.update(path.as_bytes());
        digest.update((bytes.len() as u64).to_le_bytes());
        digest.update(bytes);
    }
    digest.update(WORKSPACE.as_bytes());
    let digest = hex::encode(digest.finalize());
    format!("{}-{}", env!("CARGO_PKG_VERSION"), &digest[..12])
}

/// Writes the carried SDKs under `<data-dir>/sdk/` unless they are there.
pub fn install(data: &DataDir) -> anyhow::Result<Sdk> {
    let parent = data.root().join("sdk");
    let root = parent.join(versioned_name());
    // Written whole into a fresh folder and renamed into place: a folder
    // under the versioned name is complete.
    if root.is_dir() {
        return Ok(Sdk { root });
    }
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot make {}", parent.display()))?;
    let staging = tempfile::Builder::new()
        .prefix(".writing-")
        .tempdir_in(&parent)
        .with_context(|| format!("cannot write in {}", parent.display()))?;
    write_all(staging.path())?;
    match std::fs::rename(staging.path(), &root) {
        Ok(()) => {
            // Renamed: nothing left for the temporary folder to remove.
            let _ = staging.keep();
        }
        // Another process wrote the same folder first: the same files.
        Err(_) if root.is_dir() => {}
        Err(e) => {
            return Err(e).with_context(|| format!("cannot write {}", root.display()));
        }
    }
    Ok(Sdk { root })
}

fn write_all(root: &Path) -> anyhow::Result<()> {
    let write = |path: &Path, bytes: &[u8]| -> anyhow::Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot make {}", parent.display()))?;
        }
        std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
    };
    for (path, bytes) in FILES {
        write(&root.join(path), bytes)?;
        // The Rust crate reads the contract from its own `wit/` (a link
        // to the repository's in a checkout).
        if let Some(wit) = path.strip_prefix("wit/") {
            write(&root.join("guest-sdk/wit").join(wit), bytes)?;
        }
    }
    write(&root.join("Cargo.toml"), workspace_manifest()?.as_bytes())?;
    Ok(())
}

/// A workspace of the three SDK crates, with the package fields and
/// dependency versions they inherit, as the repository's workspace has them.
fn workspace_manifest() -> anyhow::Result<String> {
    let repository: toml::Table = WORKSPACE.parse().context("the carried Cargo.toml")?;
    let inherited = repository
        .get("workspace")
        .and_then(toml::Value::as_table)
        .context("the carried Cargo.toml has no [workspace]")?;
    let mut workspace = toml::Table::new();
    workspace.insert("resolver".into(), "3".into());
    workspace.insert(
        "members".into(),
        toml::Value::Array(
            ["guest-sdk", "guest-sdk/macros", "guest-sdk/words"]
                .map(toml::Value::from)
                .into(),
        ),
    );
    for table in ["package", "dependencies"] {
        if let Some(value) = inherited.get(table) {
            workspace.insert(table.into(), value.clone());
        }
    }
    let mut manifest = toml::Table::new();
    manifest.insert("workspace".into(), toml::Value::Table(workspace));
    Ok(format!(
        "# The SDK crates agentsite {} carries, written by the binary: agents\n\
         # made with `agentsite new` depend on ./guest-sdk by path.\n{}",
        env!("CARGO_PKG_VERSION"),
        toml::to_string(&manifest)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of the SDKs a build reads is carried: one added to the
    /// repository and not to [`FILES`] would be missing from every agent
    /// made outside a checkout.
    #[test]
    fn every_file_of_the_sdks_is_carried() {
        let repository = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut on_disk = Vec::new();
        for (folder, suffixes) in [
            ("guest-sdk/src", &[".rs"][..]),
            ("guest-sdk/macros/src", &[".rs"]),
            ("guest-sdk/words/src", &[".rs"]),
            ("guest-sdk/python/agentsite", &[".py"]),
            ("wit", &[".wit"]),
        ] {
            for entry in walkdir(&repository.join(folder)) {
                let relative = entry.strip_prefix(&repository).unwrap();
                let relative = relative.to_str().unwrap().to_owned();
                if suffixes.iter().any(|s| relative.ends_with(s)) {
                    on_disk.push(relative);
                }
            }
        }
        let carried: Vec<&str> = FILES.iter().map(|(path, _)| *path).collect();
        for file in &on_disk {
            assert!(carried.contains(&file.as_str()), "{file} is not carried");
        }
    }

    fn walkdir(dir: &Path) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                found.extend(walkdir(&path));
            } else {
                found.push(path);
            }
        }
        found
    }

    #[test]
    fn the_written_sdk_is_a_workspace_of_its_crates_with_the_contract() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::new(dir.path());
        let sdk = install(&data).unwrap();
        let manifest: toml::Table = std::fs::read_to_string(sdk.root.join("Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            manifest["workspace"]["package"]["version"].as_str(),
            Some(env!("CARGO_PKG_VERSION"))
        );
        assert!(manifest["workspace"]["dependencies"].get("serde").is_some());
        assert!(sdk.rust().join("wit/agent.wit").is_file());
        assert!(sdk.python().join("agentsite/build.py").is_file());
        assert!(sdk.js().join("build.mjs").is_file());
        // Written once: a second install finds it.
        let again = install(&data).unwrap();
        assert_eq!(again.root, sdk.root);
        let entries = std::fs::read_dir(dir.path().join("sdk")).unwrap().count();
        assert_eq!(entries, 1, "no staging folder is left behind");
    }
}
