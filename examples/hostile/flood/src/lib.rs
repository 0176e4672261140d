//! Produces far too much: an oversized result, and a torrent of output.
//! The node's output cap and per-call log budget must contain both.

use agentsite_sdk::agent;

struct Flood;

/// Floods its caller and the node's log.
#[agent]
impl Flood {
    /// Return a text of `mib` mebibytes.
    #[tool]
    fn huge(
        /// Size of the text in MiB.
        mib: usize,
    ) -> String {
        "x".repeat(mib << 20)
    }

    /// Print `lines` lines to stdout and as many log messages, then return.
    #[tool]
    fn shout(lines: u32) -> String {
        for i in 0..lines {
            println!("line {i} of a flood of output that nobody asked for");
            agentsite_sdk::host::info("a log message that nobody asked for");
        }
        format!("printed {lines} lines")
    }
}
