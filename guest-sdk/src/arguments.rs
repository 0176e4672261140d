//! A tool's arguments read into the author's type, and what a caller is
//! told when they do not fit: the argument by name and what it should have
//! been, in the words the Python and JavaScript SDKs use (`a: expected a
//! number, got a string "two"`), not serde's (`invalid type: string "two",
//! expected f64 at line 1 column 11`).

use serde::de::DeserializeOwned;

/// Parses `arguments` (JSON text; empty means none) into `A`, or says in
/// one line which argument is wrong and how.
pub fn parse<A: DeserializeOwned>(arguments: &str) -> Result<A, String> {
    let text = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let error = error.into_inner();
        if error.is_syntax() || error.is_eof() {
            return format!("the arguments are not valid JSON: {error}");
        }
        describe(&path, &without_position(&error.to_string()))
    })?;
    // Text after the arguments' object.
    deserializer
        .end()
        .map_err(|error| format!("the arguments are not valid JSON: {error}"))?;
    Ok(parsed)
}

/// serde_json's message without the ` at line 1 column 11` it appends: the
/// argument's name says where.
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

/// One of serde's data errors about the value at `path` (`.` for the
/// arguments themselves, else `a`, `items[2].name`), in a caller's words.
fn describe(path: &str, message: &str) -> String {
    let at = |what: &str| match path {
        "." | "" => what.to_owned(),
        path => format!("{path}: {what}"),
    };
    // As the Python SDK says it.
    if let Some(field) = between(message, "missing field `", "`") {
        return match path {
            "." | "" => format!("missing argument `{field}`"),
            path => format!("{path}: missing field `{field}`"),
        };
    }
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((field, expected)) = rest.split_once("`, ")
    {
        // The path already ends with the unknown field.
        let field = match path {
            "." | "" => field,
            path => path,
        };
        let known = expected
            .strip_prefix("expected one of ")
            .or_else(|| expected.strip_prefix("expected "))
            .unwrap_or(expected);
        return format!("{field}: not an argument of this tool (it takes {known})");
    }
    if let Some(rest) = message.strip_prefix("unknown variant `")
        && let Some((variant, expected)) = rest.split_once("`, ")
    {
        let known = expected.strip_prefix("expected ").unwrap_or(expected);
        return at(&format!("expected {known}, got \"{variant}\""));
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some((given, expected)) = rest.rsplit_once(", expected ")
        {
            return at(&format!(
                "expected {}, got {}",
                expected_words(expected),
                given_words(given)
            ));
        }
    }
    if let Some(rest) = message.strip_prefix("invalid length ")
        && let Some((length, expected)) = rest.split_once(", expected ")
    {
        return at(&format!("expected {expected}, got {length} items"));
    }
    at(message)
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
        parse::<A>(arguments).unwrap_err()
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
        let add: Add = parse(r#"{"a": 2, "b": 3.5}"#).unwrap();
        assert_eq!((add.a, add.b), (2.0, 3.5));
    }
}
