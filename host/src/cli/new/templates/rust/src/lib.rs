//! The agent __NAME__. Each method of the `#[agent]` block is a tool: its
//! doc comment is the tool's description, its arguments' doc comments and
//! types make the input schema (checked before the method runs), and what
//! it returns is the result: a `String` as text, a `#[data]` type as
//! structured content with an output schema. `Err` is a tool error the
//! caller reads.

use agentsite_sdk::{agent, data};

struct __TYPE__;

/// What a text is made of.
#[data]
struct Counts {
    /// How many words it has.
    words: usize,
    /// How many characters it has.
    characters: usize,
    /// Its longest word (the first, if several are as long).
    longest: String,
}

/// What __NAME__ does, in a sentence: people and other agents find it by
/// these words.
#[agent(tags = ["example"])]
impl __TYPE__ {
    /// Greets someone by name.
    #[tool(read_only, idempotent)]
    fn greet(
        /// Who to greet.
        name: String,
        /// The words to greet them with, such as "Good morning"
        /// (by default "Hello").
        greeting: Option<String>,
    ) -> String {
        let greeting = greeting.as_deref().unwrap_or("Hello");
        format!("{greeting}, {name}!")
    }

    /// Counts the words and characters of a text.
    #[tool(read_only, idempotent)]
    fn count(
        /// The text to count.
        text: String,
    ) -> Result<Counts, String> {
        let longest = text
            .split_whitespace()
            .reduce(|longest, word| {
                if word.chars().count() > longest.chars().count() {
                    word
                } else {
                    longest
                }
            })
            .ok_or("the text has no words")?;
        Ok(Counts {
            words: text.split_whitespace().count(),
            characters: text.chars().count(),
            longest: longest.to_owned(),
        })
    }
}
