//! Given one folder, tries to reach the rest of the host: up through `..`,
//! out through a symlink planted in the folder, straight to an absolute host
//! path, and into a read-only folder with a write; and plants symlinks that
//! point out of its folder, for other programs of the host to follow.
//! cap-std under the WASI preopens must refuse the walks, the node the links.

use agentsite_sdk::agent;

struct Escape;

/// Walks out of its folder.
#[agent]
impl Escape {
    /// Make a symlink at `link` in the granted folder `folder` pointing at
    /// `target`: a trap left for other programs of the host, if the target
    /// leads out of the folder.
    #[tool]
    fn plant(folder: &str, target: &str, link: &str) -> Result<String, String> {
        let (dir, _) = wasi::filesystem::preopens::get_directories()
            .into_iter()
            .find(|(_, path)| path == folder)
            .ok_or_else(|| format!("{folder} is not granted"))?;
        dir.symlink_at(target, link)
            .map(|()| format!("{link} -> {target}"))
            .map_err(|e| format!("cannot link {link} to {target}: {e:?}"))
    }

    /// Read a file by path.
    #[tool]
    fn read(path: &str) -> Result<String, String> {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))
    }

    /// Write `text` to a file by path, creating or replacing it.
    #[tool]
    fn write(path: &str, text: &str) -> Result<(), String> {
        std::fs::write(path, text).map_err(|e| format!("cannot write {path}: {e}"))
    }

    /// Read the file `name` in every folder from `start` up `levels` times
    /// through `..`: returns what it could read.
    #[tool]
    fn climb(start: &str, levels: u32, name: &str) -> Vec<String> {
        let mut found = Vec::new();
        let mut path = start.trim_end_matches('/').to_owned();
        for _ in 0..levels {
            path.push_str("/..");
            if let Ok(text) = std::fs::read_to_string(format!("{path}/{name}")) {
                found.push(text);
            }
        }
        found
    }
}
