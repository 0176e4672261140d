//! Why JSON does not fit a Rust type, in JSON's words and naming the
//! value: `a: expected a number, got a string "two"`, not serde's
//! `invalid type: string "two", expected f64 at line 1 column 11`.
//!
//! Shared by the guest SDK (a tool's arguments, in the words the Python
//! and JavaScript SDKs use) and the node (request bodies, such as `/v1`'s,
//! where OpenAI's `param` names the field).

use serde::de::DeserializeOwned;
use std::fmt;

/// Why a JSON text was refused: at which value, and how it is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The value's path (`a`, `items[2].name`); None for the whole text.
    pub path: Option<String>,
    pub kind: Kind,
}

/// How a JSON text is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Not JSON at all, or more than one value: serde_json's words, with
    /// the line and column.
    NotJson(String),
    /// An object lacks the field `field`.
    Missing { field: String },
    /// An object has `field`, which the type does not take; `known` lists
    /// those it takes (`` `a` or `b` ``).
    Unknown { field: String, known: String },
    /// The value is of the wrong type or out of range (`expected a number,
    /// got a string "two"`).
    Mismatch(String),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = &self.path {
            write!(f, "{path}: ")?;
        }
        match &self.kind {
            Kind::NotJson(error) => write!(f, "not valid JSON: {error}"),
            Kind::Missing { field } => write!(f, "missing field `{field}`"),
            Kind::Unknown { known, .. } => write!(f, "unknown field (the fields are {known})"),
            Kind::Mismatch(words) => f.write_str(words),
        }
    }
}

/// Parses `text` into `T`, or says where and how it does not fit.
pub fn parse<T: DeserializeOwned>(text: &[u8]) -> Result<T, Refusal> {
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    let parsed = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let path = (path != "." && !path.is_empty()).then_some(path);
        let error = error.into_inner();
        if error.is_syntax() || error.is_eof() {
            return Refusal {
                path: None,
                kind: Kind::NotJson(error.to_string()),
            };
        }
        refusal(path, &without_position(&error.to_string()))
    })?;
    // Text after the value.
    deserializer.end().map_err(|error| Refusal {
        path: None,
        kind: Kind::NotJson(error.to_string()),
    })?;
    Ok(parsed)
}

/// A tool's arguments (JSON text; empty means none) read into `A`. The
/// refusal reads as the Python SDK's: `missing argument `b``, `c: not an
/// argument of this tool (it takes `a` or `b`)`.
pub fn parse_arguments<A: DeserializeOwned>(arguments: &str) -> Result<A, ArgumentsRefused> {
    let text = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    parse(text.as_bytes()).map_err(ArgumentsRefused)
}

/// Why a tool's arguments were refused, in the words of a tool's caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentsRefused(pub Refusal);

impl fmt::Display for ArgumentsRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.0.path, &self.0.kind) {
            (_, Kind::NotJson(error)) => write!(f, "the arguments are not valid JSON: {error}"),
            (None, Kind::Missing { field }) => write!(f, "missing argument `{field}`"),
            (Some(path), Kind::Unknown { known, .. }) if !path.contains(['.', '[']) => {
                write!(f, "{path}: not an argument of this tool (it takes {known})")
            }
            _ => self.0.fmt(f),
        }
    }
}

/// serde_json's message without the ` at line 1 column 11` it appends: the
/// path says where.
fn without_position(message: &str) -> String {
    match message.rsplit_once(" at line ") {
        Some((kept, position))
            if position
                .split(" column ")
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
        {
            kept.to_owned()
        }
        _ => message.to_owned(),
    }
}

/// One of serde's data errors about the value at `path`, sorted and in
/// JSON's words.
fn refusal(path: Option<String>, message: &str) -> Refusal {
    let kind = |kind| Refusal {
        path: path.clone(),
        kind,
    };
    if let Some(field) = between(message, "missing field `", "`") {
        return kind(Kind::Missing {
            field: field.to_owned(),
        });
    }
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((field, expected)) = rest.split_once("`, ")
    {
        let known = expected
            .strip_prefix("expected one of ")
            .or_else(|| expected.strip_prefix("expected "))
            .unwrap_or(expected);
        // The path already ends with the unknown field.
        return Refusal {
            path: path.clone().or_else(|| Some(field.to_owned())),
            kind: Kind::Unknown {
                field: field.to_owned(),
                known: known.to_owned(),
            },
        };
    }
    if let Some(rest) = message.strip_prefix("unknown variant `")
        && let Some((variant, expected)) = rest.split_once("`, ")
    {
        let known = expected.strip_prefix("expected ").unwrap_or(expected);
        return kind(Kind::Mismatch(format!(
            "expected {known}, got \"{variant}\""
        )));
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some((given, expected)) = rest.rsplit_once(", expected ")
        {
            return kind(Kind::Mismatch(format!(
                "expected {}, got {}",
                expected_words(expected),
                given_words(given)
            )));
        }
    }
    if let Some(rest) = message.strip_prefix("invalid length ")
        && let Some((length, expected)) = rest.split_once(", expected ")
    {
        return kind(Kind::Mismatch(format!(
            "expected {expected}, got {length} items"
        )));
    }
    kind(Kind::Mismatch(message.to_owned()))
}

/// The text between `start` and the next `end` in `message`, when
/// `message` begins with `start`.
fn between<'a>(message: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = message.strip_prefix(start)?;
    Some(&rest[..rest.find(end)?])
}

/// What serde's visitors expect (`f64`, `u32`, `a string`, `struct Point`)
/// as JSON names it.
fn expected_words(expected: &str) -> String {
    match expected {
        "f32" | "f64" => "a number".into(),
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "an integer".into(),
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a whole number, 0 or more".into(),
        "a boolean" => "true or false".into(),
        "a sequence" | "a tuple" => "an array".into(),
        "a map" => "an object".into(),
        "unit" => "null".into(),
        "a character" => "a string of one character".into(),
        other if other.starts_with("struct ") => "an object".into(),
        other if other.starts_with("tuple of ") || other.starts_with("an array of ") => {
            format!("an array ({})", other.trim_start_matches("tuple of "))
        }
        other => other.into(),
    }
}

/// The value serde met (`string "two"`, ``integer `-1` ``, `map`) as JSON
/// names it.
fn given_words(given: &str) -> String {
    let quoted = |value: &str| value.trim_matches('`').to_owned();
    if let Some(value) = given.strip_prefix("string ") {
        return format!("a string {value}");
    }
    if let Some(value) = given.strip_prefix("integer ") {
        return format!("the integer {}", quoted(value));
    }
    if let Some(value) = given.strip_prefix("floating point ") {
        return format!("the number {}", quoted(value));
    }
    if let Some(value) = given.strip_prefix("boolean ") {
        return quoted(value);
    }
    match given {
        "map" => "an object".into(),
        "sequence" => "an array".into(),
        "unit value" | "null" => "null".into(),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Add {
        a: f64,
        b: f64,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Order {
        count: u32,
        items: Vec<Item>,
        #[serde(default)]
        unit: Option<Unit>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Item {
        name: String,
        urgent: bool,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Unit {
        Km,
        Mi,
    }

    fn error<A: DeserializeOwned + std::fmt::Debug>(arguments: &str) -> String {
        parse_arguments::<A>(arguments).unwrap_err().to_string()
    }

    #[test]
    fn a_wrong_type_names_the_argument_and_both_types() {
        assert_eq!(
            error::<Add>(r#"{"a": "two", "b": 3}"#),
            r#"a: expected a number, got a string "two""#
        );
        assert_eq!(
            error::<Order>(r#"{"count": -1, "items": []}"#),
            "count: expected a whole number, 0 or more, got the integer -1"
        );
        assert_eq!(
            error::<Order>(r#"{"count": 1.5, "items": []}"#),
            "count: expected a whole number, 0 or more, got the number 1.5"
        );
        assert_eq!(
            error::<Order>(r#"{"count": 1, "items": [{"name": "x", "urgent": "yes"}]}"#),
            r#"items[0].urgent: expected true or false, got a string "yes""#
        );
        assert_eq!(
            error::<Order>(r#"{"count": 1, "items": {}}"#),
            "items: expected an array, got an object"
        );
        assert_eq!(error::<Add>("5"), "expected an object, got the integer 5");
    }

    #[test]
    fn missing_unknown_and_misspelled_arguments_are_named() {
        assert_eq!(error::<Add>(r#"{"a": 2}"#), "missing argument `b`");
        assert_eq!(error::<Add>(""), "missing argument `a`");
        assert_eq!(
            error::<Order>(r#"{"count": 1, "items": [{"name": "x"}]}"#),
            "items[0]: missing field `urgent`"
        );
        assert_eq!(
            error::<Order>(r#"{"count": 1, "items": [], "colour": "red"}"#),
            "colour: not an argument of this tool (it takes `count`, `items`, `unit`)"
        );
        assert_eq!(
            error::<Order>(r#"{"count": 1, "items": [], "unit": "miles"}"#),
            r#"unit: expected `km` or `mi`, got "miles""#
        );
    }

    #[test]
    fn text_that_is_not_json_says_so_with_its_position() {
        let cut = error::<Add>(r#"{"a": 2,"#);
        assert!(
            cut.starts_with("the arguments are not valid JSON: "),
            "{cut}"
        );
        assert!(cut.contains("line 1"), "{cut}");
        let trailing = error::<Add>(r#"{"a": 2, "b": 3} trailing"#);
        assert!(
            trailing.starts_with("the arguments are not valid JSON: "),
            "{trailing}"
        );
    }

    #[test]
    fn good_arguments_parse() {
        let add: Add = parse_arguments(r#"{"a": 2, "b": 3.5}"#).unwrap();
        assert_eq!((add.a, add.b), (2.0, 3.5));
    }

    #[test]
    fn a_refusal_names_its_field_for_a_request_body() {
        let refusal = parse::<Order>(br#"{"count": -1, "items": []}"#).unwrap_err();
        assert_eq!(refusal.path.as_deref(), Some("count"));
        assert_eq!(
            refusal.to_string(),
            "count: expected a whole number, 0 or more, got the integer -1"
        );
        let refusal = parse::<Order>(br#"{"items": []}"#).unwrap_err();
        assert_eq!(refusal.to_string(), "missing field `count`");
        let refusal = parse::<Order>(br#"{"count": 1, "items": [], "x": 1}"#).unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "x: unknown field (the fields are `count`, `items`, `unit`)"
        );
        let refusal = parse::<Order>(b"{").unwrap_err();
        assert!(
            refusal.to_string().starts_with("not valid JSON: "),
            "{refusal}"
        );
    }
}
