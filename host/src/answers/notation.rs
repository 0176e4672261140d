//! Arithmetic notation in a request: "23 + 19", "six times seven",
//! "1000 over 8" name adding, multiplying and dividing as the words
//! "add", "multiply" and "divide" would, the way "six" is read as 6. It
//! reads notation written between two numbers, not phrasings: "take 7
//! away from 30" is left to the words and the model.

use crate::llm::grounding::{Literal, values_in};
use crate::store::terms::terms;
use std::ops::Range;

/// Arithmetic written between two numbers, and the operation it names:
/// the notation of sums, read as "2" and "two" are read as numbers.
const OPERATORS: [(&str, &str); 15] = [
    ("+", "add"),
    ("plus", "add"),
    ("-", "subtract"),
    ("−", "subtract"),
    ("minus", "subtract"),
    ("less", "subtract"),
    ("*", "multiply"),
    ("×", "multiply"),
    ("x", "multiply"),
    ("times", "multiply"),
    ("multiplied by", "multiply"),
    ("/", "divide"),
    ("÷", "divide"),
    ("over", "divide"),
    ("divided by", "divide"),
];

/// The terms of the operations `part` writes as arithmetic: "23 + 19",
/// "six times seven", "1000 over 8" name adding, multiplying, dividing
/// (the operator stands alone between the two numbers).
pub(super) fn operations(part: &str) -> Vec<String> {
    operations_at(part)
        .into_iter()
        .map(|(_, term)| term)
        .collect()
}

/// [`operations`], each with where its operator is written.
pub(super) fn operations_at(part: &str) -> Vec<(usize, String)> {
    let numbers = numbers_written(part);
    let leading = leading(part, &numbers).map(|term| (0, term));
    numbers
        .windows(2)
        .filter_map(|pair| {
            let between = part.get(pair[0].end..pair[1].start)?.to_lowercase();
            let words: Vec<&str> = between.split_whitespace().collect();
            operator(&words).map(|operation| (pair[0].end, operation))
        })
        .flat_map(|(at, operation)| terms(operation).map(move |term| (at, term)))
        .chain(leading)
        .collect()
}

/// The operation named by an operator that starts `part` (after a comma,
/// "then" or "and"), right before its first number: "2 plus 3, times 4"
/// reads ", times 4" after the first call, which multiplies what that call
/// found by 4. The earlier result is its left operand.
pub(super) fn leading_operation(part: &str) -> Option<String> {
    leading(part, &numbers_written(part))
}

/// [`leading_operation`], given where `part` writes its numbers.
fn leading(part: &str, numbers: &[Range<usize>]) -> Option<String> {
    // One number: the other operand is what came before ("times: 6, 7"
    // writes both).
    let [first] = numbers else {
        return None;
    };
    let before = part.get(..first.start)?.to_lowercase();
    let mut words: Vec<&str> = before
        .split(|c: char| c.is_whitespace() || ",;".contains(c))
        .filter(|w| !w.is_empty())
        .collect();
    while words.first().is_some_and(|w| CARRYING_ON.contains(w)) {
        words.remove(0);
    }
    terms(operator(&words)?).next()
}

/// Where `part` writes its numbers.
fn numbers_written(part: &str) -> Vec<Range<usize>> {
    values_in(part)
        .into_iter()
        .filter(|(_, v)| matches!(v, Literal::Number(_)))
        .map(|(range, _)| range)
        .collect()
}

/// The operation an operator written as `words` names ("divided by").
fn operator(words: &[&str]) -> Option<&'static str> {
    let written = words.join(" ");
    OPERATORS
        .iter()
        .find(|(operator, _)| *operator == written)
        .map(|(_, operation)| *operation)
}

/// Words that start a part carrying on from the one before it.
const CARRYING_ON: [&str; 3] = ["then", "and", "now"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operator_alone_between_two_numbers_names_its_operation() {
        assert_eq!(operations("23 + 19, then 81 minus 9"), ["add", "subtract"]);
        assert_eq!(
            operations("1000 over 8 and 5 divided  by 2"),
            ["divid", "divid"]
        );
        assert!(operations("6 and 7, times: 6, 7").is_empty());
        assert_eq!(operations_at("6 x 7"), [(1, "multipli".to_owned())]);
    }

    #[test]
    fn an_operator_before_a_parts_only_number_names_its_operation_on_what_came_before() {
        for (part, operation) in [
            (", times 4?", "multipli"),
            ("then times 4", "multipli"),
            (" then +5", "add"),
            (", minus 5?", "subtract"),
            (", multiplied by 10?", "multipli"),
            ("and divided by 2", "divid"),
        ] {
            assert_eq!(
                leading_operation(part).as_deref(),
                Some(operation),
                "{part}"
            );
            assert_eq!(operations(part), [operation], "{part}");
        }
        for part in [
            "What is minus 40 Celsius in F?",
            "take 5 off",
            "then 4 times",
            "3 + 4",
            "times: 6, 7",
            "times 6 and 7",
        ] {
            assert_eq!(leading_operation(part), None, "{part}");
        }
    }
}
