//! Given one folder, tries to reach the rest of the host: up through `..`,
//! out through a symlink planted in the folder, straight to an absolute host
//! path, and into a read-only folder with a write. cap-std under the WASI
//! preopens must refuse every one.

use agentsite_sdk::agent;

struct Escape;

/// Walks out of its folder.
#[agent]
impl Escape {
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
