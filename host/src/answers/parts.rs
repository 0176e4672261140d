//! The parts of a request: what a person asks for, clause by clause.
//!
//! "What is the capital of Kenya, and what currency does Kenya use?" asks
//! two things; "Convert 26.2 mi to km, then convert 5 kg to lb" two more.
//! Each part must be answered by a call that succeeded, or named as not
//! done: a request is answered only when all of its parts are.
//!
//! A part ends where a clause does: at the end of a sentence, at `;`, at
//! "then" (", then", "and then"), at "also", and at "and" (or ", and")
//! when a word follows it, not a value: "add 2 and 3" is one part, "upper-case
//! 'abc' and lower-case 'XYZ'" two; and at a comma before a quoted text
//! when what comes before and after it each say what to do ("'abc' to
//! caps, 'XYZ' to lower"). Quoted text is never split.

use super::align::words;
use crate::llm::grounding::values_in;
use crate::store::terms::terms;
use std::ops::Range;

/// Parts one request has at most: beyond them, the rest is one part.
pub const MAX_PARTS: usize = 8;

/// Words that start a new clause wherever they stand.
const CLAUSE_WORDS: [&str; 3] = ["then", "also", "afterwards"];

/// The parts of `request`, in order, as byte ranges of it (trimmed of
/// spaces and of the joining words and punctuation between them). A
/// request with no words has none.
pub fn parts(request: &str) -> Vec<Range<usize>> {
    let values = values_in(request);
    let inside_value = |at: usize| values.iter().any(|(r, _)| r.start < at && at < r.end);
    let words = words(request);
    // Cuts: (where the joint starts, where the next part starts).
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    // Sentence ends and semicolons.
    for (at, c) in request.char_indices() {
        if inside_value(at) {
            continue;
        }
        let next = request[at + c.len_utf8()..].chars().next();
        let ends = match c {
            ';' => true,
            '.' | '?' | '!' => next.is_none_or(char::is_whitespace),
            _ => false,
        };
        if ends {
            // A question keeps its mark; `;` is only a joint.
            let keeps = c != ';';
            let end = at + c.len_utf8();
            cuts.push((if keeps { end } else { at }, end));
        }
    }
    // A comma before a quoted text, between two clauses that each say
    // what to do: "'abc' to caps, 'XYZ' to lower" (not "join 'a', 'b'
    // and 'c'", whose texts after the comma are only more of its own).
    let says_what = |range: Range<usize>| {
        words.iter().any(|(start, _, word)| {
            range.contains(start)
                && !values
                    .iter()
                    .any(|(r, _)| r.start <= *start && *start < r.end)
                && terms(word).next().is_some()
        })
    };
    // Whether a quoted text right after `joint_end` starts a clause that
    // says what to do, as the words before `joint_start` do.
    let quoted_clause_after = |joint_start: usize, joint_end: usize| {
        let Some((quoted, _)) = values.iter().find(|(r, _)| {
            r.start >= joint_end
                && request[joint_end..r.start].trim().is_empty()
                && request[r.start..].starts_with(['\'', '"'])
        }) else {
            return false;
        };
        let clause_end = request[quoted.end..]
            .find([',', ';', '.', '?', '!'])
            .map_or(request.len(), |i| quoted.end + i);
        says_what(0..joint_start) && says_what(quoted.end..clause_end)
    };
    for (at, _) in request.match_indices(',') {
        if inside_value(at) {
            continue;
        }
        // An operator and one number after a comma carry the sum on:
        // "1.25 plus 2.75, multiplied by 10" multiplies what the first
        // part found (see `notation::leading_operation`).
        let clause = &request[at + 1..];
        let clause = &clause[..clause.find([',', ';']).unwrap_or(clause.len())];
        if quoted_clause_after(at, at + 1) || super::notation::leading_operation(clause).is_some() {
            cuts.push((at, at + 1));
        }
    }
    for (index, (start, end, word)) in words.iter().enumerate() {
        if inside_value(*start) {
            continue;
        }
        let joint_start = joint_start(request, &words, index);
        if CLAUSE_WORDS.contains(&word.as_str()) {
            // "then" joins: "add 2 and 3, then double it", "and then",
            // and it is no part of what follows a sentence's end.
            cuts.push((joint_start, *end));
            continue;
        }
        if word == "and" {
            // A value after "and" is the clause's own: "2 and 3", "[1,2,3]
            // and [6,4,2]", and so is one a name is set to: "x = 0, 1, 2
            // and y = 4, 7, 10".
            let after = request[*end..].trim_start();
            let next_is_value = values.iter().any(|(r, _)| {
                r.start >= *end && {
                    let between = request[*end..r.start]
                        .trim_matches(|c: char| c.is_whitespace() || c == '[' || c == '(');
                    between.is_empty() || names_a_value(between)
                }
            });
            let next_word = words.get(index + 1).map(|(_, _, w)| w.as_str());
            // "'abc' in upper case and 'XYZ' in lower case": a quoted
            // text after "and" starts a clause of its own when words say
            // what to do with it, as words after the value before do (not
            // "join 'foo' and 'bar' with a dash").
            let said_after_value = values
                .iter()
                .rev()
                .find(|(r, _)| r.end <= joint_start)
                .is_some_and(|(r, _)| says_what(r.end..joint_start));
            if (next_is_value && !(said_after_value && quoted_clause_after(joint_start, *end)))
                || after.is_empty()
                || next_word.is_some_and(|w| CLAUSE_WORDS.contains(&w))
            {
                continue;
            }
            cuts.push((joint_start, *end));
        }
    }
    cuts.sort();
    let mut ranges = Vec::new();
    let mut from = 0;
    for (joint, next) in cuts {
        if joint < from {
            from = from.max(next);
            continue;
        }
        push_trimmed(request, from..joint, &mut ranges);
        from = next;
    }
    push_trimmed(request, from..request.len(), &mut ranges);
    if ranges.len() > MAX_PARTS {
        let last = ranges[MAX_PARTS - 1].start..ranges[ranges.len() - 1].end;
        ranges.truncate(MAX_PARTS - 1);
        ranges.push(last);
    }
    ranges
}

/// Whether `between` is a name set to the value after it: "y =", "y:".
fn names_a_value(between: &str) -> bool {
    between
        .strip_suffix(['=', ':'])
        .map(str::trim_end)
        .is_some_and(|name| {
            !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_')
        })
}

/// Where the joint before word `index` starts: the word itself, or a comma
/// or "and" right before it (", then", "and then").
fn joint_start(request: &str, words: &[(usize, usize, String)], index: usize) -> usize {
    let mut start = words[index].0;
    let before = request[..start].trim_end();
    if index > 0 && words[index - 1].2 == "and" && before.ends_with(|c: char| c.is_alphabetic()) {
        start = words[index - 1].0;
    }
    let before = request[..start].trim_end();
    if before.ends_with(',') {
        start = before.len() - 1;
    }
    start
}

fn push_trimmed(request: &str, range: Range<usize>, out: &mut Vec<Range<usize>>) {
    let text = &request[range.clone()];
    if text
        .trim_matches(|c: char| c.is_whitespace() || c == ',')
        .is_empty()
    {
        return;
    }
    let leading = text.len()
        - text
            .trim_start_matches(|c: char| c.is_whitespace() || c == ',')
            .len();
    let trailing = text.len()
        - text
            .trim_end_matches(|c: char| c.is_whitespace() || c == ',')
            .len();
    let trimmed = range.start + leading..range.end - trailing;
    // A part says what to do or with what: a word that is not a common
    // one ("I also want…" leaves no part "I"), or a value.
    let text = &request[trimmed.clone()];
    if crate::store::terms::terms(text).next().is_some() || !values_in(text).is_empty() {
        out.push(trimmed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(request: &str) -> Vec<&str> {
        parts(request).into_iter().map(|r| &request[r]).collect()
    }

    #[test]
    fn a_list_or_a_name_set_to_one_after_and_is_the_clauses_own() {
        assert_eq!(
            split("corr of [1,2,3] and [6,4,2]"),
            ["corr of [1,2,3] and [6,4,2]"]
        );
        assert_eq!(
            split("Fit a line through x = 0, 1, 2 and y = 4, 7, 10 and give me its slope."),
            [
                "Fit a line through x = 0, 1, 2 and y = 4, 7, 10",
                "give me its slope."
            ]
        );
    }

    #[test]
    fn a_quoted_text_after_and_starts_a_clause_when_both_say_what_to_do() {
        assert_eq!(
            split("What is 'abc' in upper case and 'XYZ' in lower case?"),
            ["What is 'abc' in upper case", "'XYZ' in lower case?"]
        );
        assert_eq!(
            split("Join 'foo' and 'bar' with a dash."),
            ["Join 'foo' and 'bar' with a dash."]
        );
        assert_eq!(
            split("Count the words in 'a b' and 'c d'."),
            ["Count the words in 'a b' and 'c d'."]
        );
    }

    #[test]
    fn clauses_are_parts_and_values_stay_with_theirs() {
        assert_eq!(split("What is 23 plus 19?"), ["What is 23 plus 19?"]);
        assert_eq!(split("Add 2 and 3."), ["Add 2 and 3."]);
        assert_eq!(
            split("What is 1.25 plus 2.75, multiplied by 10?"),
            ["What is 1.25 plus 2.75", "multiplied by 10?"]
        );
        assert_eq!(split("Add 2, 3 and 4."), ["Add 2, 3 and 4."]);
        assert_eq!(
            split("What is the capital of Kenya, and what currency does Kenya use?"),
            [
                "What is the capital of Kenya",
                "what currency does Kenya use?"
            ]
        );
        assert_eq!(
            split("Convert 26.2 mi to km, then convert 5 kg to lb"),
            ["Convert 26.2 mi to km", "convert 5 kg to lb"]
        );
        assert_eq!(
            split("Upper-case 'abc' and lower-case 'XYZ'."),
            ["Upper-case 'abc'", "lower-case 'XYZ'."]
        );
        assert_eq!(
            split("Multiply 12 by 11 and subtract 8 from 50."),
            ["Multiply 12 by 11", "subtract 8 from 50."]
        );
        assert_eq!(
            split("Sum 1.25 and 2.75, then multiply that by 10"),
            ["Sum 1.25 and 2.75", "multiply that by 10"]
        );
        assert_eq!(
            split("Add 2 and 3 and then multiply the result by 4."),
            ["Add 2 and 3", "multiply the result by 4."]
        );
        assert_eq!(
            split("Count the words in 'to be, and then not to be'. Then shout it!"),
            [
                "Count the words in 'to be, and then not to be'.",
                "shout it!"
            ]
        );
        assert_eq!(split("Add 1, 2, and 3"), ["Add 1, 2, and 3"]);
        assert_eq!(
            split("'abc' to caps, 'XYZ' to lower"),
            ["'abc' to caps", "'XYZ' to lower"]
        );
        assert_eq!(split("Join 'a', 'b' and 'c'."), ["Join 'a', 'b' and 'c'."]);
        assert_eq!(split("3.5 plus 4.25"), ["3.5 plus 4.25"]);
        assert!(split("  ?! ").is_empty());
    }
}
