//! JSON schemas written as llguidance Lark rules, with values grounded.
//!
//! The parts of a schema that a [`Grounding`] speaks to are written out
//! here: objects (their required properties in order, the optional ones
//! after, each may be left out), arrays of a bounded length, and plain
//! numbers and strings, which take the grounding's values (a number one it
//! offers, a string one of its texts or a run of words of its sources).
//! The required properties of an object are filled together, so that each
//! offered value is used at most as often as it was offered and the value
//! the grounding requires is used once. Everything else
//! (enums, formats, unions, nested schemas the grounding says nothing
//! about) stays a `%json` sub-grammar of its own schema, with the root's
//! definitions beside it so that its `$ref`s resolve. Output is compact
//! JSON: no whitespace between tokens.

use super::super::grounding::{
    Grounding, Literal, ValueKind as Kind, plain_type, required_properties, resolve,
};
use serde_json::{Map, Value, json};
use std::fmt::Write as _;

/// Ways to fill an object's required properties from the grounding's
/// values, at most: past it, each property takes any value of its type.
const MAX_ASSIGNMENTS: usize = 64;
/// Items an array written out here holds at most.
const MAX_ITEMS: u64 = 8;
/// Levels of objects and arrays written out; deeper ones are `%json`.
const MAX_DEPTH: usize = 4;

/// Rules being written, and the grounded terminals they share.
pub struct Lark<'a> {
    pub rules: String,
    grounding: Option<&'a Grounding>,
    number: Option<Option<&'static str>>,
    integer: Option<Option<&'static str>>,
    string: Option<Option<&'static str>>,
    document: Option<Option<&'static str>>,
    runs_written: bool,
    next_rule: usize,
}

impl<'a> Lark<'a> {
    pub fn new(grounding: Option<&'a Grounding>) -> Self {
        Lark {
            rules: String::new(),
            grounding: grounding.filter(|g| !g.is_empty()),
            number: None,
            integer: None,
            string: None,
            document: None,
            runs_written: false,
            next_rule: 0,
        }
    }

    /// Holds the values of the rules written next to `grounding`, or
    /// leaves them free. One grammar has one grounding: the terminals
    /// written for it are shared by all its rules.
    pub fn set_grounding(&mut self, grounding: Option<&'a Grounding>) {
        self.grounding = grounding.filter(|g| !g.is_empty());
    }

    /// Writes a rule `name` for values of `schema` (a root, or a part of
    /// `root`).
    pub fn rule(&mut self, name: &str, schema: &Value, root: &Value) {
        let body = self.value(schema, root, 0);
        let _ = writeln!(self.rules, "{name}: {body}");
    }

    /// A Lark expression for one value of `schema`.
    fn value(&mut self, schema: &Value, root: &Value, depth: usize) -> String {
        let resolved = resolve(schema, root);
        let written = if self.grounding.is_some() && depth < MAX_DEPTH {
            match plain_type(resolved) {
                Some("object") => self.object(resolved, root, depth),
                Some("array") => self.array(resolved, root, depth),
                Some("number") => self.any_of(Kind::Number),
                Some("integer") => self.any_of(Kind::Integer),
                Some("string") => self.any_of(Kind::Text),
                _ => match Kind::of(resolved, root) {
                    Some(Kind::Document) => self.any_of(Kind::Document),
                    _ => None,
                },
            }
        } else {
            None
        };
        written.unwrap_or_else(|| format!("%json {}", with_definitions(schema, root)))
    }

    /// An object of named properties, written in order; `None` for other
    /// objects (open ones, pattern properties, none required).
    ///
    /// Numbers are copied as the sources write them: where the ways to
    /// fill the required number properties are few, each written number
    /// fills at most as many of them as it was written (`50` and `8` of
    /// "subtract 8 from 50" cannot become 50 and 50).
    fn object(&mut self, schema: &Value, root: &Value, depth: usize) -> Option<String> {
        let properties = schema.get("properties")?.as_object()?;
        let required = required_properties(schema);
        let named = schema
            .get("required")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        if required.is_empty()
            || required.len() != named
            || schema.get("patternProperties").is_some()
            || schema
                .get("additionalProperties")
                .is_some_and(|a| a != &Value::Bool(false))
        {
            return None;
        }
        let mut slots: Vec<Slot> = Vec::new();
        for (index, (key, property)) in required.iter().enumerate() {
            let comma = if index == 0 { "" } else { "\",\" " };
            let key = key_literal(key);
            let kind = Kind::of(property, root);
            match kind {
                Some(kind) => {
                    slots.push(Slot::Text(format!("{comma}{key}")));
                    slots.push(Slot::Value(kind));
                }
                None => {
                    let value = self.value(property, root, depth + 1);
                    slots.push(Slot::Text(format!("{comma}{key} {value}")));
                }
            }
        }
        let mut parts = vec![self.fill(&slots)?];
        for (key, property) in properties
            .iter()
            .filter(|(k, _)| !required.iter().any(|(r, _)| r == k))
        {
            // An optional value the grounding offers none of is left to
            // its default, not made up ("limit": 1 of a diff).
            if let Some(kind) = Kind::of(property, root)
                && self.any_of(kind).is_none()
            {
                continue;
            }
            let value = self.value(property, root, depth + 1);
            parts.push(format!("(\",\" {} {value})?", key_literal(key)));
        }
        Some(self.named(format!("\"{{\" {} \"}}\"", parts.join(" "))))
    }

    /// An array of at most [`MAX_ITEMS`] items (or its `maxItems`), at
    /// least its `minItems`.
    fn array(&mut self, schema: &Value, root: &Value, depth: usize) -> Option<String> {
        let items = schema.get("items").filter(|i| i.is_object())?;
        if schema.get("prefixItems").is_some()
            || schema.get("uniqueItems") == Some(&Value::Bool(true))
        {
            return None;
        }
        let least = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
        let most = schema
            .get("maxItems")
            .and_then(Value::as_u64)
            .unwrap_or(MAX_ITEMS);
        if most > MAX_ITEMS || least > most {
            return None;
        }
        let item = self.value(items, root, depth + 1);
        let item = self.named(item);
        let body = if most == 0 {
            String::new()
        } else {
            let mut body = item.clone();
            for n in 1..most {
                body.push_str(&if n < least {
                    format!(" \",\" {item}")
                } else {
                    format!(" (\",\" {item}")
                });
            }
            body.push_str(&")?".repeat((most - least.max(1)) as usize));
            if least == 0 {
                format!("({body})?")
            } else {
                body
            }
        };
        Some(format!("\"[\" {body} \"]\""))
    }

    /// `expression` as a rule of its own; the rule's name.
    fn named(&mut self, expression: String) -> String {
        let name = format!("part_{}", self.next_rule);
        self.next_rule += 1;
        let _ = writeln!(self.rules, "{name}: {expression}");
        name
    }

    /// `slots` written out, the value slots filled from the grounding:
    /// as alternatives that use each offered value at most as often as it
    /// was offered, and the required one once, where they are few; else
    /// any value of its kind in each. `None` when a slot can take no value
    /// (or none can take the required one).
    fn fill(&mut self, slots: &[Slot]) -> Option<String> {
        let grounding = self.grounding?;
        let kinds: Vec<Kind> = slots
            .iter()
            .filter_map(|s| match s {
                Slot::Value(kind) => Some(*kind),
                Slot::Text(_) => None,
            })
            .collect();
        let write = |values: &[String]| -> String {
            let mut values = values.iter();
            slots
                .iter()
                .map(|slot| match slot {
                    Slot::Text(text) => text.clone(),
                    Slot::Value(_) => values.next().cloned().unwrap_or_default(),
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        if kinds.is_empty() {
            return Some(write(&[]));
        }
        let runs = self.runs();
        match assignments(grounding, &kinds, runs.as_deref()) {
            Assignments::Ways(ways) => {
                let alternatives: Vec<String> = ways
                    .iter()
                    .map(|values| format!("({})", write(values)))
                    .collect();
                Some(format!("({})", alternatives.join(" | ")))
            }
            Assignments::None => None,
            Assignments::TooMany => {
                let terminals: Vec<String> = kinds
                    .iter()
                    .map(|kind| self.any_of(*kind))
                    .collect::<Option<_>>()?;
                Some(write(&terminals))
            }
        }
    }

    /// A terminal of any value of `kind` the grounding offers (for a
    /// string, also a run of words of its texts), written once; `None`
    /// when it offers none.
    fn any_of(&mut self, kind: Kind) -> Option<String> {
        let grounding = self.grounding?;
        let name = match kind {
            Kind::Number => "GNUM",
            Kind::Integer => "GINT",
            Kind::Text => "GSTR",
            Kind::Document => "GDOC",
        };
        let slot = self.terminal(kind);
        if slot.is_some() {
            return slot.flatten().map(str::to_owned);
        }
        let mut alternatives: Vec<String> = Vec::new();
        for value in grounding.all_values() {
            if kind.takes(value) {
                let literal = lark_string(&value.json());
                if !alternatives.contains(&literal) {
                    alternatives.push(literal);
                }
            }
        }
        *slot = Some(None);
        let runs = if kind == Kind::Text {
            self.runs()
        } else {
            None
        };
        if let Some(runs) = runs {
            alternatives.push(runs);
        }
        if alternatives.is_empty() {
            return None;
        }
        let _ = writeln!(self.rules, "{name}: {}", alternatives.join(" | "));
        *self.terminal(kind) = Some(Some(name));
        Some(name.to_owned())
    }

    /// The terminal of `kind`'s values, once written (`Some(None)`: it
    /// offers none).
    fn terminal(&mut self, kind: Kind) -> &mut Option<Option<&'static str>> {
        match kind {
            Kind::Number => &mut self.number,
            Kind::Integer => &mut self.integer,
            Kind::Text => &mut self.string,
            Kind::Document => &mut self.document,
        }
    }

    /// The terminal of a JSON string holding a run of words of one of the
    /// grounding's texts, written once; `None` when it has none.
    fn runs(&mut self) -> Option<String> {
        let grounding = self.grounding?;
        if grounding.texts.is_empty() {
            return None;
        }
        if !self.runs_written {
            let runs: Vec<String> = grounding
                .texts
                .iter()
                .map(|source| {
                    // The words as they are written inside a JSON string.
                    let escaped = serde_json::to_string(source).expect("a string serializes");
                    let inner = &escaped[1..escaped.len() - 1];
                    format!("%regex {}", json!({ "substring_words": inner }))
                })
                .collect();
            // A run with a letter in it: a string argument takes words, and
            // a bare number of the message is a number's value.
            let _ = writeln!(
                self.rules,
                "GRUN: \"\\\"\" (({}) & /(?s:.*\\p{{L}}.*)/) \"\\\"\"",
                runs.join(" | ")
            );
            self.runs_written = true;
        }
        Some("GRUN".to_owned())
    }
}

/// A piece of an object being written: text as it stands, or a value
/// still to be filled.
enum Slot {
    Text(String),
    Value(Kind),
}

/// `text` as a Lark string literal.
pub fn lark_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// `"key":` as a Lark string.
fn key_literal(key: &str) -> String {
    lark_string(&format!(
        "{}:",
        serde_json::to_string(key).expect("a string serializes")
    ))
}

/// The grammar of free text held to `grounding`: every number in it is
/// one the grounding offers, and a value with digits in it (a digest, a
/// result's text) is copied whole.
pub fn grounded_text(grounding: &Grounding) -> String {
    let mut literals: Vec<String> = Vec::new();
    for value in grounding.all_values() {
        let plain = value.plain();
        if plain.bytes().any(|b| b.is_ascii_digit()) {
            let literal = lark_string(&plain);
            if !literals.contains(&literal) {
                literals.push(literal);
            }
        }
    }
    if literals.is_empty() {
        return "start: /[^0-9]*/\n".to_owned();
    }
    format!(
        "start: piece*\npiece: WORDS | VALUE\nWORDS: /[^0-9]+/\nVALUE: {}\n",
        literals.join(" | ")
    )
}

/// How the value slots of an object can be filled.
enum Assignments {
    /// Each way, as the Lark of each slot's value.
    Ways(Vec<Vec<String>>),
    /// No way: a slot takes no value, or none takes the required one.
    None,
    /// More than [`MAX_ASSIGNMENTS`] ways.
    TooMany,
}

/// The ways to give each slot of `kinds` one of the grounding's values
/// (a string slot may instead take a run of words, `runs`): each offered
/// value used at most once, the required one exactly once.
fn assignments(grounding: &Grounding, kinds: &[Kind], runs: Option<&str>) -> Assignments {
    struct Search<'g> {
        required: Option<&'g Literal>,
        values: &'g [Literal],
        kinds: &'g [Kind],
        runs: Option<&'g str>,
        ways: Vec<Vec<String>>,
    }
    impl Search<'_> {
        /// False once there are too many ways.
        fn extend(
            &mut self,
            used: &mut Vec<usize>,
            required_used: bool,
            chosen: &mut Vec<String>,
        ) -> bool {
            let Some(&kind) = self.kinds.get(chosen.len()) else {
                if (required_used || self.required.is_none()) && !self.ways.contains(chosen) {
                    self.ways.push(chosen.clone());
                }
                return self.ways.len() <= MAX_ASSIGNMENTS;
            };
            if let Some(required) = self.required.filter(|r| !required_used && kind.takes(r)) {
                chosen.push(lark_string(&required.json()));
                let more = self.extend(used, true, chosen);
                chosen.pop();
                if !more {
                    return false;
                }
            }
            for (index, value) in self.values.iter().enumerate() {
                if used.contains(&index) || !kind.takes(value) {
                    continue;
                }
                used.push(index);
                chosen.push(lark_string(&value.json()));
                let more = self.extend(used, required_used, chosen);
                chosen.pop();
                used.pop();
                if !more {
                    return false;
                }
            }
            if kind == Kind::Text
                && let Some(runs) = self.runs
            {
                chosen.push(runs.to_owned());
                let more = self.extend(used, required_used, chosen);
                chosen.pop();
                if !more {
                    return false;
                }
            }
            true
        }
    }
    let mut search = Search {
        required: grounding.required.as_ref(),
        values: &grounding.values,
        kinds,
        runs,
        ways: Vec::new(),
    };
    if !search.extend(&mut Vec::new(), false, &mut Vec::new()) {
        return Assignments::TooMany;
    }
    if search.ways.is_empty() {
        Assignments::None
    } else {
        Assignments::Ways(search.ways)
    }
}

/// A part of a schema as a root of its own: the definitions of `root`
/// that its `$ref`s may point at go with it.
pub fn with_definitions(schema: &Value, root: &Value) -> Value {
    let mut out = match schema {
        Value::Object(map) => map.clone(),
        Value::Bool(true) => Map::new(),
        other => return other.clone(),
    };
    if std::ptr::eq(schema, root) || !schema.to_string().contains("\"$ref\"") {
        return Value::Object(out);
    }
    for key in ["$defs", "definitions"] {
        if let Some(defs) = root.get(key) {
            out.entry(key).or_insert_with(|| defs.clone());
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(values: &[f64]) -> Grounding {
        Grounding {
            values: values.iter().map(|n| Literal::Number(*n)).collect(),
            ..Grounding::default()
        }
    }

    fn ways(grounding: &Grounding, kinds: &[Kind]) -> Vec<Vec<String>> {
        match assignments(grounding, kinds, None) {
            Assignments::Ways(ways) => ways,
            Assignments::None => Vec::new(),
            Assignments::TooMany => panic!("too many"),
        }
    }

    fn literals(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| lark_string(v)).collect()
    }

    #[test]
    fn a_property_of_any_value_copies_a_document_given() {
        let grounding =
            Grounding::of_texts(["pick user.name out of {\"user\": {\"name\": \"Ada\"}}"]);
        let schema = json!({"type": "object", "properties": {
            "document": {"description": "the document"}, "path": {"type": "string"},
            "limit": {"type": "integer", "default": 200}},
            "required": ["document", "path"]});
        let mut lark = Lark::new(Some(&grounding));
        lark.rule("start", &schema, &schema);
        let document = lark_string(r#"{"user":{"name":"Ada"}}"#);
        let path = lark_string("\"user.name\"");
        assert!(
            lark.rules
                .contains(&format!("{document} \",\" {} {path}", key_literal("path"))),
            "{}",
            lark.rules
        );
        assert!(!lark.rules.contains("%json"), "{}", lark.rules);
        // No number is written: the optional limit is left to its default.
        assert!(!lark.rules.contains("limit"), "{}", lark.rules);
    }

    #[test]
    fn each_offered_value_fills_one_property() {
        let two = [Kind::Number, Kind::Number];
        assert_eq!(
            ways(&numbers(&[8.0, 50.0]), &two),
            [literals(&["8", "50"]), literals(&["50", "8"])]
        );
        // Offered twice, usable twice.
        assert_eq!(ways(&numbers(&[7.0, 7.0]), &two), [literals(&["7", "7"])]);
        // Too few values: no way.
        assert!(matches!(
            assignments(&numbers(&[64.0]), &two, None),
            Assignments::None
        ));
        let many: Vec<f64> = (0..20).map(f64::from).collect();
        assert!(matches!(
            assignments(&numbers(&many), &two, None),
            Assignments::TooMany
        ));
        // Whole numbers only where the property is an integer.
        assert_eq!(
            ways(&numbers(&[2.5, 4.0]), &[Kind::Integer]),
            [literals(&["4"])]
        );
    }

    #[test]
    fn the_required_value_is_used_once() {
        let grounding = Grounding {
            required: Some(Literal::Number(3.0)),
            values: vec![Literal::Number(6.0), Literal::Number(1.0)],
            texts: Vec::new(),
        };
        let found = ways(&grounding, &[Kind::Number, Kind::Number]);
        assert_eq!(
            found,
            [
                literals(&["3", "6"]),
                literals(&["3", "1"]),
                literals(&["6", "3"]),
                literals(&["1", "3"])
            ]
        );
        // A text required where only numbers go: no way.
        let text = Grounding {
            required: Some(Literal::Text("abc".into())),
            ..numbers(&[1.0, 2.0])
        };
        assert!(ways(&text, &[Kind::Number, Kind::Number]).is_empty());
        assert_eq!(ways(&text, &[Kind::Text]), [literals(&["\"abc\""])]);
    }

    #[test]
    fn free_text_takes_its_numbers_from_the_grounding() {
        let grounding = Grounding {
            values: vec![
                Literal::Number(42.0),
                Literal::Text("HELLO".into()),
                Literal::Text("e3b0c4".into()),
            ],
            ..Grounding::default()
        };
        assert_eq!(
            grounded_text(&grounding),
            "start: piece*\npiece: WORDS | VALUE\nWORDS: /[^0-9]+/\nVALUE: \"42\" | \"e3b0c4\"\n"
        );
        assert_eq!(grounded_text(&Grounding::default()), "start: /[^0-9]*/\n");
    }

    #[test]
    fn without_a_grounding_a_schema_stays_json() {
        let schema =
            json!({"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]});
        let mut lark = Lark::new(None);
        lark.rule("answer", &schema, &schema);
        assert!(lark.rules.starts_with("answer: %json {"), "{}", lark.rules);
    }

    #[test]
    fn arrays_and_objects_are_written_out_with_grounded_values() {
        let schema = json!({
            "type": "object",
            "properties": {
                "tasks": {
                    "type": "array", "minItems": 1, "maxItems": 3,
                    "items": {"$ref": "#/$defs/Task"}
                }
            },
            "required": ["tasks"],
            "$defs": {"Task": {
                "type": "object",
                "properties": {"task": {"type": "string"}, "tool": {"enum": ["a.x", "b.y"]}},
                "required": ["task", "tool"],
                "additionalProperties": false
            }}
        });
        let grounding = Grounding::of_texts(["Add 2 and 3, then shout"]);
        let mut lark = Lark::new(Some(&grounding));
        lark.rule("answer", &schema, &schema);
        let rules = &lark.rules;
        assert!(
            rules.contains(r#""\"task\":" GRUN "," "\"tool\":" %json {"enum":["a.x","b.y"]}"#),
            "{rules}"
        );
        // One item at least, three at most.
        assert!(
            rules.contains(r#""[" part_1 ("," part_1 ("," part_1)?)? "]""#),
            "{rules}"
        );
    }
}
