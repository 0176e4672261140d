//! Makes the host allocate on its behalf, outside the linear memory its
//! memory cap counts: sets of HTTP header fields (any agent can build them,
//! no grant needed), kept open by the thousand and filled to the brim, and
//! handles of any kind. Each costs the host memory the agent never sees;
//! the node must count them against a per-call limit and stop the call with
//! a clear error, not grow by gigabytes.

use agentsite_sdk::agent;
use wasi::http::types::Fields;

struct Hog;

/// Hogs host memory.
#[agent]
impl Hog {
    /// Build `sets` sets of header fields, each with `per_set` headers of
    /// `kib` KiB, all kept open; report how many were built.
    #[tool]
    fn fields(sets: u32, per_set: u32, kib: u32) -> Result<String, String> {
        let value = vec![b'v'; kib as usize * 1024];
        let mut kept = Vec::new();
        for set in 0..sets {
            let fields = Fields::new();
            for header in 0..per_set {
                fields
                    .append(&format!("x-hog-{header}"), &value)
                    .map_err(|e| format!("set {set}, header {header}: {e:?}"))?;
            }
            kept.push(fields);
        }
        Ok(format!("kept {} sets of fields", kept.len()))
    }

    /// Open `count` empty sets of fields (handles) and keep them.
    #[tool]
    fn handles(count: u32) -> String {
        let kept: Vec<Fields> = (0..count).map(|_| Fields::new()).collect();
        format!("kept {} handles", kept.len())
    }
}
