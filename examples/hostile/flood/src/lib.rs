//! Produces far too much: an oversized result, a torrent of output, and
//! floods that cost nothing when counted in text bytes alone (empty content
//! blocks, empty log lines, a huge error, huge progress messages). The
//! node's output cap and per-call log budget must contain all of them.

use agentsite_sdk::{Content, agent, host};

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

    /// Return `count` content blocks, each holding `text`.
    #[tool]
    fn blocks(count: u32, text: String) -> Vec<Content> {
        (0..count).map(|_| Content::Text(text.clone())).collect()
    }

    /// Fail with an error message of `mib` mebibytes.
    #[tool]
    fn grievance(mib: usize) -> Result<String, String> {
        Err("!".repeat(mib << 20))
    }

    /// Send `count` empty warnings through `host.log` and print as many
    /// empty lines to stderr.
    #[tool]
    fn whisper(count: u32) -> String {
        for _ in 0..count {
            host::warn("");
            eprintln!();
        }
        format!("whispered {count} times")
    }

    /// Report progress `count` times, each with a message of `kib` KiB.
    #[tool]
    fn nag(count: u32, kib: u32) -> String {
        let message = "p".repeat(kib as usize * 1024);
        for i in 0..count {
            host::progress(f64::from(i), Some(f64::from(count)), Some(&message));
        }
        format!("reported {count} times")
    }
}
