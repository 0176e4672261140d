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
    let numbers: Vec<Range<usize>> = values_in(part)
        .into_iter()
        .filter(|(_, v)| matches!(v, Literal::Number(_)))
        .map(|(range, _)| range)
        .collect();
    numbers
        .windows(2)
        .filter_map(|pair| {
            let between = part.get(pair[0].end..pair[1].start)?.trim().to_lowercase();
            let between = between.split_whitespace().collect::<Vec<_>>().join(" ");
            OPERATORS
                .iter()
                .find(|(written, _)| *written == between)
                .map(|(_, operation)| (pair[0].end, *operation))
        })
        .flat_map(|(at, operation)| terms(operation).map(move |term| (at, term)))
        .collect()
}

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
}
