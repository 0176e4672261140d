//! The words agents are found by: text split into words, lower-cased,
//! common English words dropped, and each word cut to its stem (Snowball's
//! English stemmer), so that "counts", "counting" and "count" meet.
//!
//! Publishers and searchers run the same analysis: a manifest's keywords
//! (its DHT keys) and a query's words are terms of this module.

use rust_stemmers::{Algorithm, Stemmer};
use std::sync::LazyLock;

/// Longest word kept, in bytes: longer ones are not words a person types.
const MAX_WORD: usize = 40;

static ENGLISH: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// Words too common to tell agents apart, sorted (searched by bisection).
const STOP_WORDS: &[&str] = &[
    "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been",
    "being", "but", "by", "can", "could", "did", "do", "does", "doing", "each", "else", "etc",
    "for", "from", "get", "gets", "give", "gives", "had", "has", "have", "he", "her", "here",
    "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "let", "lets", "me",
    "more", "most", "my", "need", "no", "not", "of", "off", "on", "one", "only", "or", "other",
    "our", "out", "over", "please", "pls", "plz", "she", "should", "so", "some", "such", "than",
    "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "through",
    "to", "too", "up", "us", "use", "uses", "using", "very", "want", "was", "we", "were", "what",
    "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you",
    "your",
];

/// The terms of `text`, in order, repeats included.
pub fn terms(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.len() >= 2 && word.len() <= MAX_WORD)
        .map(str::to_lowercase)
        .filter(|word| STOP_WORDS.binary_search(&word.as_str()).is_err())
        .map(|word| ENGLISH.stem(&word).into_owned())
        .filter(|term| !term.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<String> {
        terms(text).collect()
    }

    #[test]
    fn forms_of_a_word_meet_and_common_words_go() {
        assert_eq!(all("Counts the words"), all("count word"));
        assert_eq!(all("counting words in a text"), ["count", "word", "text"]);
        assert_eq!(all("What is the weather?"), ["weather"]);
        assert_eq!(all("text-tools: UPPER"), ["text", "tool", "upper"]);
        assert!(all("x a").is_empty());
        assert!(all(&"y".repeat(41)).is_empty());
    }

    #[test]
    fn stop_words_are_sorted() {
        assert!(STOP_WORDS.windows(2).all(|pair| pair[0] < pair[1]));
    }
}
