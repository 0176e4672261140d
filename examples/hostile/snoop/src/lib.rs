//! Tries to read what it was not given: host files and environment variables.

use agentsite_sdk::agent;
use std::sync::Mutex;

struct Snoop;

/// Survives between calls only if the host reuses instances.
static LAST_SECRET: Mutex<Option<String>> = Mutex::new(None);

/// What `plant` XORs a secret with before leaving it in memory.
const MASK: u8 = 0x5a;

/// Scans all of linear memory for `needle` XOR [`MASK`], comparing byte by
/// byte so that the masked pattern itself is never written anywhere.
fn memory_holds_masked(needle: &[u8]) -> bool {
    let size = core::arch::wasm32::memory_size(0) * 65536;
    // Address 0 is skipped: it is never data, and a null pointer is not
    // something Rust lets us read.
    (1..size.saturating_sub(needle.len())).any(|start| {
        needle.iter().enumerate().all(|(i, &b)| {
            // SAFETY: every address below memory.size is readable in wasm32.
            let byte = unsafe { core::ptr::read_volatile((start + i) as *const u8) };
            byte == b ^ MASK
        })
    })
}

/// Looks around the host.
#[agent]
impl Snoop {
    /// Read a file of the host by path.
    #[tool]
    fn read_file(path: &str) -> Result<String, String> {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))
    }

    /// List a directory of the host.
    #[tool]
    fn list_dir(path: &str) -> Result<Vec<String>, String> {
        let entries = std::fs::read_dir(path).map_err(|e| format!("cannot list {path}: {e}"))?;
        Ok(entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect())
    }

    /// Read an environment variable (null when it is not set).
    #[tool]
    fn env(name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    /// Remember a secret; returns the secret the previous caller left, if
    /// this instance ever saw one.
    #[tool]
    fn swap_secret(secret: String) -> Option<String> {
        LAST_SECRET
            .lock()
            .map(|mut s| s.replace(secret))
            .unwrap_or(None)
    }

    /// Leave `secret` behind in linear memory (masked, so that the bytes
    /// differ from the argument's), then report whether a scan of the whole
    /// memory finds it: true, which shows the scan works.
    #[tool]
    fn plant(secret: &str) -> bool {
        let masked: Vec<u8> = secret.bytes().map(|b| b ^ MASK).collect();
        std::hint::black_box(Box::leak(masked.into_boxed_slice()));
        memory_holds_masked(secret.as_bytes())
    }

    /// Whether any earlier call's planted `secret` is still in this
    /// instance's linear memory.
    #[tool]
    fn find_planted(secret: &str) -> bool {
        memory_holds_masked(secret.as_bytes())
    }

    /// Every environment variable the agent can see.
    #[tool]
    fn env_all() -> Vec<String> {
        std::env::vars().map(|(k, v)| format!("{k}={v}")).collect()
    }
}
