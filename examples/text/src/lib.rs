//! Text utilities: structured results (word count) next to plain text ones.

use agentsite_sdk::agent;
use schemars::JsonSchema;
use serde::Serialize;
use sha2::{Digest, Sha256};

struct Text;

/// Counts of a text.
#[derive(Serialize, JsonSchema)]
struct Counts {
    /// Whitespace-separated words.
    words: usize,
    /// Lines (a final line without a newline counts).
    lines: usize,
    /// Unicode scalar values.
    characters: usize,
    /// UTF-8 bytes.
    bytes: usize,
}

/// Small text utilities: count words, change case, hash.
#[agent(tags = ["text", "string", "hash"])]
impl Text {
    /// Count the words, lines, characters and bytes of a text.
    #[tool(read_only, idempotent)]
    fn word_count(
        /// The text to count.
        text: &str,
    ) -> Counts {
        Counts {
            words: text.split_whitespace().count(),
            lines: text.lines().count(),
            characters: text.chars().count(),
            bytes: text.len(),
        }
    }

    /// Convert a text to upper case.
    #[tool(read_only, idempotent)]
    fn upper(text: &str) -> String {
        text.to_uppercase()
    }

    /// Convert a text to lower case.
    #[tool(read_only, idempotent)]
    fn lower(text: &str) -> String {
        text.to_lowercase()
    }

    /// The SHA-256 digest of a text's UTF-8 bytes, as 64 hex digits.
    #[tool(read_only, idempotent)]
    fn sha256(text: &str) -> String {
        Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}
