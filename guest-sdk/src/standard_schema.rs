//! JSON Schemas in JSON Schema's own vocabulary.
//!
//! Derived schemas carry `format`s that JSON Schema does not define, such as
//! schemars' `"uint32"` and `"uint"` for unsigned integers and `"double"`
//! for floats. Validators warn about them (the TypeScript MCP SDK's Ajv
//! prints "unknown format "uint" ignored in schema" for each property on
//! every listing) and ignore them, so they say nothing to a client.
//! [`standardize`] drops every format JSON Schema 2020-12 does not define
//! and keeps what an integer format meant as `minimum` and `maximum`.
//!
//! Shared, as source, by the guest SDK (for the schemas it derives) and the
//! node (for any agent's schema it serves).

use serde_json::{Map, Value};

/// The formats JSON Schema 2020-12 defines (section 7.3 of its validation
/// vocabulary).
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Keywords whose values are data, not schemas: nothing in them is changed.
const DATA_KEYWORDS: &[&str] = &["const", "enum", "default", "examples"];

/// Rewrites `schema` and every schema inside it to use only standard
/// formats. Returns whether anything changed.
pub fn standardize(schema: &mut Value) -> bool {
    match schema {
        Value::Object(map) => {
            let mut changed = standardize_format(map);
            for (key, value) in map.iter_mut() {
                if !DATA_KEYWORDS.contains(&key.as_str()) {
                    changed |= standardize(value);
                }
            }
            changed
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |changed, item| standardize(item) | changed),
        _ => false,
    }
}

/// Drops a non-standard `format` of one schema, keeping an integer format's
/// range as bounds the schema did not already state. A property named
/// `format` has a schema (an object) as its value, never a string, so it is
/// left alone.
fn standardize_format(schema: &mut Map<String, Value>) -> bool {
    let Some(Value::String(format)) = schema.get("format") else {
        return false;
    };
    if STANDARD_FORMATS.contains(&format.as_str()) {
        return false;
    }
    let (minimum, maximum) = integer_range(format);
    schema.remove("format");
    for (keyword, bound) in [("minimum", minimum), ("maximum", maximum)] {
        if let Some(bound) = bound {
            schema.entry(keyword).or_insert(bound);
        }
    }
    true
}

/// The range an integer format such as `uint32` or `int8` stands for, as
/// far as JSON numbers state it exactly; unsized and 128-bit unsigned
/// formats keep only their minimum of 0.
fn integer_range(format: &str) -> (Option<Value>, Option<Value>) {
    let (unsigned, bits) = match format.strip_prefix("uint") {
        Some(bits) => (true, bits),
        None => match format.strip_prefix("int") {
            Some(bits) => (false, bits),
            None => return (None, None),
        },
    };
    let bits: Option<u32> = match bits {
        "" => None,
        bits => match bits.parse() {
            Ok(bits @ (8 | 16 | 32 | 64 | 128)) => Some(bits),
            _ => return (None, None),
        },
    };
    match (unsigned, bits) {
        (true, Some(bits @ (8 | 16 | 32 | 64))) => (
            Some(Value::from(0)),
            Some(Value::from(u64::MAX >> (64 - bits))),
        ),
        (true, _) => (Some(Value::from(0)), None),
        (false, Some(bits @ (8 | 16 | 32 | 64))) => (
            Some(Value::from(i64::MIN >> (64 - bits))),
            Some(Value::from(i64::MAX >> (64 - bits))),
        ),
        (false, _) => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn integer_formats_become_bounds_and_other_formats_go() {
        let mut schema = json!({
            "type": "object",
            "properties": {
                "count": {"type": "integer", "format": "uint32", "minimum": 0},
                "index": {"type": "integer", "format": "uint"},
                "small": {"type": "integer", "format": "int8"},
                "big": {"type": ["integer", "null"], "format": "int64"},
                "at_least_one": {"type": "integer", "format": "uint64", "minimum": 1},
                "ratio": {"type": "number", "format": "double"},
                "when": {"type": "string", "format": "date-time"},
                "format": {"type": "string", "default": {"format": "uint"}},
                "list": {"type": "array", "items": {"type": "integer", "format": "uint16"}},
            },
            "$defs": {"Id": {"anyOf": [{"type": "integer", "format": "int32"}]}},
        });
        assert!(standardize(&mut schema));
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "minimum": 0, "maximum": 4294967295u64},
                    "index": {"type": "integer", "minimum": 0},
                    "small": {"type": "integer", "minimum": -128, "maximum": 127},
                    "big": {"type": ["integer", "null"], "minimum": i64::MIN, "maximum": i64::MAX},
                    "at_least_one": {"type": "integer", "minimum": 1, "maximum": u64::MAX},
                    "ratio": {"type": "number"},
                    "when": {"type": "string", "format": "date-time"},
                    "format": {"type": "string", "default": {"format": "uint"}},
                    "list": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 65535}},
                },
                "$defs": {"Id": {"anyOf": [{"type": "integer", "minimum": -2147483648, "maximum": 2147483647}]}},
            })
        );
        assert!(
            !standardize(&mut schema),
            "a standard schema stays as it is"
        );
    }
}
