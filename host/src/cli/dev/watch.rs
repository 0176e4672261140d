//! The changes to a project that call for a new build: files saved,
//! made, renamed or removed, except what builds write (target/, *.wasm,
//! __pycache__/, node_modules/) and what editors keep beside a file
//! (hidden swap files, backups ending in ~).
//!
//! Each top folder is watched on its own, not the project as a whole, so
//! that a cargo target folder of thousands of folders is not watched one
//! inotify watch each.

use notify::{EventKind, RecursiveMode, Watcher as _};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc;

/// A project folder's changes, as they happen.
pub struct Changes {
    root: PathBuf,
    watcher: notify::RecommendedWatcher,
    /// The top folders watched (each with what it holds).
    watched: HashSet<PathBuf>,
    events: mpsc::UnboundedReceiver<notify::Event>,
}

impl Changes {
    /// Starts watching `root`.
    pub fn watch(root: &Path) -> anyhow::Result<Changes> {
        let (sender, events) = mpsc::unbounded_channel();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
                Ok(event) => {
                    let _ = sender.send(event);
                }
                Err(e) => tracing::warn!("watching for changes: {e}"),
            })
            .map_err(|e| anyhow::anyhow!("cannot watch {} for changes: {e}", root.display()))?;
        watcher
            .watch(root, RecursiveMode::NonRecursive)
            .map_err(|e| anyhow::anyhow!("cannot watch {} for changes: {e}", root.display()))?;
        let mut changes = Changes {
            root: root.to_path_buf(),
            watcher,
            watched: HashSet::new(),
            events,
        };
        let entries = std::fs::read_dir(root)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", root.display()))?;
        for entry in entries.flatten() {
            changes.watch_folder(&entry.path());
        }
        Ok(changes)
    }

    /// Watches `path`, a top folder of the project, with all it holds,
    /// unless builds write there.
    fn watch_folder(&mut self, path: &Path) {
        if !path.is_dir() || !matters(&self.root, path) || self.watched.contains(path) {
            return;
        }
        match self.watcher.watch(path, RecursiveMode::Recursive) {
            Ok(()) => {
                self.watched.insert(path.to_path_buf());
            }
            Err(e) => tracing::warn!("cannot watch {} for changes: {e}", path.display()),
        }
    }

    /// Waits for a change that calls for a build, then until `quiet` passes
    /// without another (an editor's save is several events, a `git
    /// checkout` many); returns the files changed, each once. `None` when
    /// the watch ended.
    pub async fn next(&mut self, quiet: Duration) -> Option<Vec<PathBuf>> {
        loop {
            let mut batch = Batch::default();
            while batch.changed.is_empty() {
                let event = self.events.recv().await?;
                self.note(event, &mut batch);
            }
            while let Ok(event) = tokio::time::timeout(quiet, self.events.recv()).await {
                self.note(event?, &mut batch);
            }
            // A file made and gone within the batch is an editor's or a
            // tool's scratch file (sed -i's, say), not the project's.
            let Batch { changed, made } = batch;
            let changed: Vec<PathBuf> = changed
                .into_iter()
                .filter(|path| !made.contains(path) || path.exists())
                .collect();
            if !changed.is_empty() {
                return Some(changed);
            }
        }
    }

    /// Adds the files of `event` that matter to `batch`, and watches a
    /// new top folder.
    fn note(&mut self, event: notify::Event, batch: &mut Batch) {
        if !calls_for_a_build(&event.kind) {
            return;
        }
        let made = matches!(
            event.kind,
            EventKind::Create(_)
                | EventKind::Modify(notify::event::ModifyKind::Name(
                    notify::event::RenameMode::To
                ))
        );
        for path in event.paths {
            if !matters(&self.root, &path) {
                continue;
            }
            if path.parent() == Some(self.root.as_path()) {
                self.watch_folder(&path);
            }
            if made {
                batch.made.insert(path.clone());
            }
            if !batch.changed.contains(&path) {
                batch.changed.push(path);
            }
        }
    }
}

/// The changes of one batch: the files, in the order first seen, and
/// those made in it.
#[derive(Default)]
struct Batch {
    changed: Vec<PathBuf>,
    made: HashSet<PathBuf>,
}

/// Whether a change of this kind can change what a build makes: reading a
/// file or changing its permissions or times cannot.
fn calls_for_a_build(kind: &EventKind) -> bool {
    match kind {
        EventKind::Create(_) | EventKind::Remove(_) => true,
        EventKind::Modify(notify::event::ModifyKind::Metadata(_)) => false,
        EventKind::Modify(_) => true,
        EventKind::Access(_) | EventKind::Other | EventKind::Any => false,
    }
}

/// Whether a change at `path` (under `root`) is the project's own: not a
/// build's output or an editor's scratch file.
fn matters(root: &Path, path: &Path) -> bool {
    let Ok(relative) = path.strip_prefix(root) else {
        return false;
    };
    let mut components = relative.components().peekable();
    if components.peek().is_none() {
        return false;
    }
    for component in components {
        let name = component.as_os_str().to_string_lossy();
        let build_output = matches!(
            name.as_ref(),
            "target" | "node_modules" | "__pycache__" | ".venv" | "venv"
        );
        let scratch = name.starts_with('.')
            || name.ends_with('~')
            || name.ends_with(".swp")
            || name.ends_with(".swx")
            // vim's check that it may write in the folder.
            || name == "4913";
        if build_output || scratch {
            return false;
        }
    }
    let name = relative.to_string_lossy();
    // cargo writes the lock file itself; a build must not call for another.
    !(name.ends_with(".wasm") || name.ends_with(".wasm.inputs") || name == "Cargo.lock")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_matter_and_build_outputs_and_editor_files_do_not() {
        let root = Path::new("/p");
        for source in [
            "src/lib.rs",
            "Cargo.toml",
            "app.py",
            "lib/util.js",
            "wit/x.wit",
        ] {
            assert!(matters(root, &root.join(source)), "{source}");
        }
        for other in [
            "target/release/x.wasm",
            "tally.wasm",
            "tally.wasm.inputs",
            "Cargo.lock",
            "node_modules/a/index.js",
            "pkg/__pycache__/m.pyc",
            ".git/index",
            "src/.lib.rs.swp",
            "src/lib.rs~",
            "src/4913",
            "",
        ] {
            assert!(!matters(root, &root.join(other)), "{other}");
        }
        assert!(!matters(root, Path::new("/elsewhere/app.py")));
    }

    /// The changes seen until one names `path` (at most 30 s), each batch
    /// ended by half a second without a change.
    async fn until(changes: &mut Changes, path: &Path) -> Vec<PathBuf> {
        let mut seen = Vec::new();
        let wait = async {
            while !seen.iter().any(|p: &PathBuf| p == path) {
                for changed in changes.next(Duration::from_millis(500)).await.unwrap() {
                    if !seen.contains(&changed) {
                        seen.push(changed);
                    }
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(30), wait)
            .await
            .unwrap_or_else(|_| panic!("{} was not seen", path.display()));
        seen
    }

    #[tokio::test]
    async fn saved_files_are_changes_and_build_outputs_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::create_dir(root.join("target")).unwrap();
        let mut changes = Changes::watch(&root).unwrap();
        std::fs::write(root.join("target/out.wasm"), "built").unwrap();
        std::fs::write(root.join("app.wasm"), "built").unwrap();
        std::fs::write(root.join("src/lib.rs"), "fn a() {}").unwrap();
        // As `sed -i` saves: a scratch file, renamed over the file.
        std::fs::write(root.join("src/sedX1y2"), "fn b() {}").unwrap();
        std::fs::rename(root.join("src/sedX1y2"), root.join("src/lib.rs")).unwrap();
        let seen = until(&mut changes, &root.join("src/lib.rs")).await;
        // The build outputs were written first: had they counted, they
        // would be here.
        assert_eq!(seen, vec![root.join("src/lib.rs")]);
        // A folder made after the watch began is watched too.
        std::fs::create_dir(root.join("more")).unwrap();
        until(&mut changes, &root.join("more")).await;
        std::fs::write(root.join("more/util.py"), "x = 1").unwrap();
        until(&mut changes, &root.join("more/util.py")).await;
    }
}
