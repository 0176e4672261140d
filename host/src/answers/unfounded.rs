//! What a reply states that nothing it rests on said: a name or a number
//! of the model's own. A reply from a small model's memory is where
//! inventions come from ("The President of France is François-Étienne
//! Maréchal", "approximately 7.3 million"); a reply to small talk states
//! neither, and passes.
//!
//! A name is read the way English writes one: a capitalized word that
//! does not start a sentence (nor is the pronoun "I"). A name at the start
//! of a sentence cannot be told from any other first word, and is let be.

use crate::llm::grounding::{numbers_at, numbers_in};
use std::collections::HashSet;

/// The first name or number `reply` states that none of `sources` (the
/// conversation, the tools offered) holds, as the reply writes it. Only
/// numbers in digits count: "one of the tools" states no number.
pub fn unfounded<'a>(reply: &'a str, sources: &[&str]) -> Option<&'a str> {
    let known: HashSet<String> = sources
        .iter()
        .flat_map(|source| words(source))
        .map(str::to_lowercase)
        .collect();
    if let Some(name) = names(reply).find(|name| !known.contains(&name.to_lowercase())) {
        return Some(name);
    }
    let given: Vec<f64> = sources.iter().flat_map(|s| numbers_in(s)).collect();
    numbers_at(reply)
        .into_iter()
        .filter(|(at, _)| !is_list_marker(reply, at))
        .map(|(at, n)| (&reply[at], n))
        .filter(|(written, _)| written.chars().any(|c| c.is_ascii_digit()))
        .find(|(_, n)| {
            !given
                .iter()
                .any(|g| (g - n).abs() <= 1e-9 * g.abs().max(1.0))
        })
        .map(|(written, _)| written)
}

/// Whether the number at `at` numbers a list's item ("1. " at a line's
/// start) rather than stating a value.
fn is_list_marker(text: &str, at: &std::ops::Range<usize>) -> bool {
    let line_start = text[..at.start].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..at.start].trim().is_empty()
        && text[at.end..].starts_with(['.', ')'])
        && text[at.end + 1..].starts_with(char::is_whitespace)
}

/// The words of `text`: runs of letters and digits (an identifier's
/// parts, `from_unit` as "from" and "unit", and its whole).
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’' || c == '-'))
        .flat_map(|word| {
            let word = trim_word(word);
            std::iter::once(word).chain(word.split(['-', '\'', '’']))
        })
        .filter(|word| !word.is_empty())
}

/// `word` without the punctuation around it.
fn trim_word(word: &str) -> &str {
    word.trim_matches(|c: char| !c.is_alphanumeric())
}

/// The names `text` writes: capitalized words (each part of a hyphenated
/// one) that do not start a sentence, the pronoun "I" aside.
fn names(text: &str) -> impl Iterator<Item = &str> {
    let mut starts_sentence = true;
    text.split_inclusive(char::is_whitespace)
        .flat_map(move |token| {
            let word = trim_word(token);
            let name = !starts_sentence && is_capitalized(word) && !is_pronoun_i(word);
            // A list's marker ("-", "1.") leaves the next word first.
            let marker = word.is_empty() || word.chars().all(|c| c.is_ascii_digit());
            starts_sentence = token.ends_with('\n')
                || (marker && starts_sentence)
                || token
                    .trim_end()
                    .trim_end_matches(['"', '\'', ')', '”', '’', '*', '_'])
                    .ends_with(['.', '!', '?']);
            let parts = word
                .split('-')
                .filter(|part| is_capitalized(part))
                .map(|part| part.split(['\'', '’']).next().unwrap_or(part));
            name.then_some(parts).into_iter().flatten()
        })
        .filter(|name| name.chars().count() > 1)
}

fn is_capitalized(word: &str) -> bool {
    word.chars().next().is_some_and(char::is_uppercase)
}

/// "I", "I'm", "I'll", "I've", "I'd".
fn is_pronoun_i(word: &str) -> bool {
    word == "I" || word.starts_with("I'") || word.starts_with("I’")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_or_number_nothing_said_is_unfounded() {
        let asked = [
            "Who is the president of France?",
            "capital: The capital city of a country.",
        ];
        assert_eq!(
            unfounded(
                "The President of France is François-Étienne Maréchal.",
                &asked
            ),
            Some("François")
        );
        assert_eq!(
            unfounded(
                "Kenya has approximately 7.3 million people.",
                &["What is the population of Kenya?"]
            ),
            Some("7.3")
        );
        // A name the person wrote, and the tools' words, are founded.
        assert_eq!(unfounded("I cannot tell who leads France.", &asked), None);
        assert_eq!(unfounded("Ask me about a Capital City.", &asked), None);
    }

    #[test]
    fn small_talk_states_nothing_unfounded() {
        let asked = ["Hello! How are you today?"];
        for reply in [
            "Hello! I'm doing well, thank you for asking. How can I help you today?",
            "Hi there! I'm fine. What would you like to do?",
            "I'd be glad to help.\n- Ask me anything.\n1. Anything at all.",
        ] {
            assert_eq!(unfounded(reply, &asked), None, "{reply}");
        }
    }

    #[test]
    fn the_first_word_of_a_sentence_is_not_read_as_a_name() {
        let asked = ["What is the capital of Narnia?"];
        // "Paris" starts its sentence: it cannot be told from "The".
        assert_eq!(unfounded("Paris is lovely. So is the rest.", &asked), None);
        assert_eq!(
            unfounded(
                "\"I do not know.\" The capital of Narnia is Cair Paravel.",
                &asked
            ),
            Some("Cair")
        );
    }
}
