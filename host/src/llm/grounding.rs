//! Values grounded in what the model was given.
//!
//! A small model that writes a tool call or an answer invents values:
//! asked "what is 6 times 7?" it calls `multiply(a=1, b=7)`; told the tool
//! returned 42 it answers "6 times 7 is 32". A caller that knows where the
//! values must come from (the person's words, the results of earlier
//! calls) says so with a [`Grounding`], and an embedded model is held to
//! it while it writes:
//!
//! - in a tool call, a number argument is one of the grounding's numbers
//!   and a string argument one of its texts (or a run of words of its
//!   sources), each written value used at most as often as it was written,
//!   and the value the grounding requires used once;
//! - in free text, every number is one of its numbers, and a long value
//!   (a digest, a result's text) is copied whole or not at all.
//!
//! Any other model's call is checked against it afterwards ([`Grounding::check`]).
//! Which tool, which value where, and the words around them: that stays
//! the model's choice.

use serde_json::Value;

/// Bytes of source text a grounding holds at most: every word of it is a
/// state of the grammar an embedded model is held to.
pub const MAX_SOURCE_BYTES: usize = 8 * 1024;
/// Values a grounding offers at most.
pub const MAX_VALUES: usize = 48;
/// The longest text value, in bytes.
pub const MAX_TEXT_VALUE: usize = 1024;
/// The longest JSON document a request may write inline, in bytes, and
/// its deepest nesting: a longer or deeper one is left as text.
pub const MAX_DOCUMENT_BYTES: usize = 4 * 1024;
pub const MAX_DOCUMENT_DEPTH: usize = 16;

/// A value a model may copy: a number, a text, or a JSON document the
/// person wrote inline (`{"user": {"name": "Ada"}}`).
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Number(f64),
    Text(String),
    Document(Value),
}

impl Literal {
    /// As JSON writes it: whole numbers without a fraction, texts quoted.
    pub fn json(&self) -> String {
        match self {
            Literal::Number(n) => number_literal(*n),
            Literal::Text(text) => serde_json::to_string(text).expect("a string serializes"),
            Literal::Document(document) => document.to_string(),
        }
    }

    /// As a person reads it: numbers as JSON writes them, texts bare,
    /// documents as compact JSON.
    pub fn plain(&self) -> String {
        match self {
            Literal::Number(n) => number_literal(*n),
            Literal::Text(text) => text.clone(),
            Literal::Document(document) => document.to_string(),
        }
    }

    pub fn is_whole(&self) -> bool {
        matches!(self, Literal::Number(n) if n.fract() == 0.0)
    }

    /// Whether `value` (a JSON argument) is this literal.
    pub fn matches(&self, value: &Value) -> bool {
        match (self, value) {
            (Literal::Number(n), Value::Number(v)) => v.as_f64() == Some(*n),
            (Literal::Text(t), Value::String(v)) => t == v,
            (Literal::Document(d), v) => d == v,
            _ => false,
        }
    }
}

/// Where the values of a tool call or an answer come from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grounding {
    /// The value a call must use, once (the earliest one not used yet).
    pub required: Option<Literal>,
    /// The values it may use besides, each as often as it is listed.
    pub values: Vec<Literal>,
    /// Texts a string may be a run of words of (what the person wrote,
    /// when it quotes nothing).
    pub texts: Vec<String>,
}

impl Grounding {
    /// The values written in `texts` (numbers and quoted texts), and their
    /// words for strings: what a call may copy from a person's message.
    pub fn of_texts<S: AsRef<str>>(texts: impl IntoIterator<Item = S>) -> Grounding {
        let mut grounding = Grounding::default();
        let mut left = MAX_SOURCE_BYTES;
        for text in texts {
            let text = text.as_ref().trim();
            if text.is_empty() || left == 0 {
                continue;
            }
            let text = &text[..crate::text::floor_char_boundary(text, left.min(text.len()))];
            left -= text.len();
            grounding
                .values
                .extend(values_in(text).into_iter().map(|(_, value)| value));
            grounding.texts.push(text.to_owned());
        }
        grounding.values.truncate(MAX_VALUES);
        grounding
    }

    pub fn is_empty(&self) -> bool {
        self.required.is_none() && self.values.is_empty() && self.texts.is_empty()
    }

    /// Every value, the required one first.
    pub fn all_values(&self) -> impl Iterator<Item = &Literal> {
        self.required.iter().chain(&self.values)
    }

    /// The numbers it offers, each once, as JSON writes them; with
    /// `integers`, only whole ones.
    pub fn numbers(&self, integers: bool) -> Vec<String> {
        let mut found: Vec<String> = Vec::new();
        for value in self.all_values() {
            if let Literal::Number(n) = value
                && (!integers || n.fract() == 0.0)
            {
                let literal = number_literal(*n);
                if !found.contains(&literal) {
                    found.push(literal);
                }
            }
        }
        found
    }

    /// Whether the grounding offers any number (a whole one with
    /// `integers`), and any text or words for strings.
    pub fn offers_number(&self, integers: bool) -> bool {
        !self.numbers(integers).is_empty()
    }

    pub fn offers_text(&self) -> bool {
        !self.texts.is_empty() || self.all_values().any(|v| matches!(v, Literal::Text(_)))
    }

    /// Checks a call's `arguments` against the grounding, for models that
    /// could not be held to it while writing: every number is one it
    /// offers (when it offers any), every string one of its texts or a run
    /// of its sources. The first value that is not, named.
    pub fn check(&self, arguments: &Value) -> Result<(), String> {
        let numbers: Vec<f64> = self
            .all_values()
            .filter_map(|v| match v {
                Literal::Number(n) => Some(*n),
                _ => None,
            })
            .collect();
        let documents: Vec<&Value> = self
            .all_values()
            .filter_map(|v| match v {
                Literal::Document(d) => Some(d),
                _ => None,
            })
            .collect();
        let mut problem = None;
        visit(arguments, &documents, &mut |value| {
            if problem.is_some() {
                return;
            }
            match value {
                // Where the grounding offers numbers or documents, numbers
                // come from them (those inside a document copied whole).
                Value::Number(n) if !numbers.is_empty() || !documents.is_empty() => {
                    let n = n.as_f64().unwrap_or(f64::NAN);
                    if !numbers.contains(&n) {
                        problem = Some(format!(
                            "{} is not a number the message gives",
                            number_literal(n)
                        ));
                    }
                }
                Value::String(s) if !s.is_empty() => {
                    let given = self.all_values().any(|v| v.matches(value));
                    let run = self.texts.iter().any(|t| is_word_run(t, s));
                    if given {
                        return;
                    }
                    if run && s.parse::<f64>().is_ok() {
                        // A number is a number's value: a string takes
                        // words ("convert(\"10\", …)" took the amount).
                        problem = Some(format!(
                            "{s:?} is a number, and the argument takes words of the message"
                        ));
                    } else if !run {
                        problem = Some(format!(
                            "{:?} is not text the message gives",
                            crate::text::excerpt(s, 60)
                        ));
                    }
                }
                _ => {}
            }
        });
        problem.map_or(Ok(()), Err)
    }
}

/// The kind of value a property of an arguments schema takes, where a
/// grounding can give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    Number,
    Integer,
    Text,
    /// Any JSON, or any object: a document.
    Document,
}

impl ValueKind {
    pub fn takes(self, value: &Literal) -> bool {
        match (self, value) {
            (ValueKind::Number, Literal::Number(_)) => true,
            (ValueKind::Integer, value @ Literal::Number(_)) => value.is_whole(),
            (ValueKind::Text, Literal::Text(_)) => true,
            (ValueKind::Document, Literal::Document(_)) => true,
            _ => false,
        }
    }

    /// The kind `schema` (a property, `$ref`s resolved in `root`) takes,
    /// when it is a plain number, integer or string, or any JSON value or
    /// object (a document: `{}`, `{"description": "the document"}`, an
    /// object of no named properties).
    pub fn of(schema: &Value, root: &Value) -> Option<ValueKind> {
        let schema = resolve(schema, root);
        match plain_type(schema) {
            Some("number") => Some(ValueKind::Number),
            Some("integer") => Some(ValueKind::Integer),
            Some("string") => Some(ValueKind::Text),
            Some("object") if schema.get("properties").is_none() => Some(ValueKind::Document),
            Some(_) => None,
            None => is_any(schema).then_some(ValueKind::Document),
        }
    }
}

/// The kinds of the required plain properties of an object schema, in order.
pub fn required_kinds(schema: &Value) -> Vec<ValueKind> {
    required_properties(schema)
        .iter()
        .filter_map(|(_, property)| ValueKind::of(property, schema))
        .collect()
}

/// The kinds of values a call of `schema` takes: its required plain
/// properties', or, where it requires none (every argument optional, as
/// many tools have it), those of its plain properties.
pub fn slot_kinds(schema: &Value) -> Vec<ValueKind> {
    if !required_properties(schema).is_empty() {
        return required_kinds(schema);
    }
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .values()
                .filter_map(|property| ValueKind::of(property, schema))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a call with arguments of `schema` can be made from `grounding`:
/// each required number or string takes one of its values (a string may
/// be a run of its texts' words), each value used at most as often as it
/// is offered, the required value among them.
pub fn can_fill(schema: &Value, grounding: &Grounding) -> bool {
    let kinds = slot_kinds(schema);
    fn fill(kinds: &[ValueKind], values: &mut Vec<&Literal>, runs: bool) -> bool {
        let Some((&kind, rest)) = kinds.split_first() else {
            return true;
        };
        if kind == ValueKind::Text && runs && fill(rest, values, runs) {
            return true;
        }
        for index in 0..values.len() {
            if kind.takes(values[index]) {
                let taken = values.remove(index);
                let filled = fill(rest, values, runs);
                values.insert(index, taken);
                if filled {
                    return true;
                }
            }
        }
        false
    }
    let runs = !grounding.texts.is_empty();
    let mut values: Vec<&Literal> = grounding.values.iter().collect();
    match &grounding.required {
        None => fill(&kinds, &mut values, runs),
        Some(required) => {
            (0..kinds.len()).any(|slot| {
                kinds[slot].takes(required) && {
                    let mut rest = kinds.clone();
                    rest.remove(slot);
                    fill(&rest, &mut values, runs)
                }
            }) || {
                // A list is of two numbers at least: the mean of one number
                // is no question.
                let lists = number_lists(schema);
                let numbers = 1 + values
                    .iter()
                    .filter(|v| matches!(v, Literal::Number(_)))
                    .count();
                matches!(required, Literal::Number(_))
                    && lists > 0
                    && numbers >= 2 * lists
                    && fill(&kinds, &mut values, runs)
            }
        }
    }
}

/// How many required lists of numbers a call of `schema` takes (`values:
/// list[float]` of a statistics tool): each takes the numbers of the
/// request, as many as it writes.
pub fn number_lists(schema: &Value) -> usize {
    number_list_parameters(schema).len()
}

/// The required parameters of `schema` that take a list of numbers, in
/// order.
pub fn number_list_parameters(schema: &Value) -> Vec<&String> {
    required_properties(schema)
        .into_iter()
        .filter(|(_, property)| {
            let property = resolve(property, schema);
            plain_type(property) == Some("array")
                && property
                    .get("items")
                    .map(|items| resolve(items, schema))
                    .and_then(plain_type)
                    .is_some_and(|t| t == "number" || t == "integer")
        })
        .map(|(name, _)| name)
        .collect()
}

/// The required properties of an object schema, in order.
pub fn required_properties(schema: &Value) -> Vec<(&String, &Value)> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .filter(|(k, _)| required.contains(&k.as_str()))
                .collect()
        })
        .unwrap_or_default()
}

/// `schema` with `$ref` to a definition of `root` followed (a few levels).
pub fn resolve<'s>(mut schema: &'s Value, root: &'s Value) -> &'s Value {
    for _ in 0..8 {
        let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
            break;
        };
        let target = ["#/$defs/", "#/definitions/"].iter().find_map(|prefix| {
            let name = reference.strip_prefix(prefix)?;
            root.get(&prefix[2..prefix.len() - 1])?.get(name)
        });
        match target {
            Some(target) => schema = target,
            None => break,
        }
    }
    schema
}

/// The one JSON type `schema` allows when it is a plain value of it: no
/// enum, constant, format, pattern or union that a grounding would
/// override.
pub fn plain_type(schema: &Value) -> Option<&str> {
    let object = schema.as_object()?;
    const OVERRIDES: [&str; 9] = [
        "enum", "const", "format", "pattern", "anyOf", "oneOf", "allOf", "not", "$ref",
    ];
    if OVERRIDES.iter().any(|k| object.contains_key(*k)) {
        return None;
    }
    match object.get("type")? {
        Value::String(kind) => Some(kind),
        // A nullable type (`["string", "null"]`, as an `Option` is
        // written): a value of the type is one of the schema's.
        Value::Array(kinds) => {
            let mut not_null = kinds
                .iter()
                .filter_map(Value::as_str)
                .filter(|k| *k != "null");
            let kind = not_null.next()?;
            (not_null.next().is_none() && kinds.len() <= 2).then_some(kind)
        }
        _ => None,
    }
}

/// Whether `schema` allows any JSON value: it says nothing of types,
/// properties, items or values (it may describe, title or default it).
fn is_any(schema: &Value) -> bool {
    const ANNOTATIONS: [&str; 5] = ["description", "title", "default", "examples", "$comment"];
    schema
        .as_object()
        .is_some_and(|o| o.keys().all(|k| ANNOTATIONS.contains(&k.as_str())))
        || schema == &Value::Bool(true)
}

/// Whether `run` is a run of whole words of `text`: it starts and ends
/// where words do ("km" is one of "10 km to mi", "m" is not).
pub fn is_word_run(text: &str, run: &str) -> bool {
    let run = run.trim();
    if run.is_empty() {
        return false;
    }
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    text.match_indices(run).any(|(at, _)| {
        !word(text[..at].chars().next_back()) && !word(text[at + run.len()..].chars().next())
    })
}

/// Calls `f` with each value `value` holds: its leaves, but a part of it
/// that is one of `documents` whole is one value (a document given is
/// copied whole, not made up of its leaves).
pub fn visit<'v>(value: &'v Value, documents: &[&Value], f: &mut impl FnMut(&'v Value)) {
    if documents.contains(&value) {
        return f(value);
    }
    match value {
        Value::Array(items) => items.iter().for_each(|v| visit(v, documents, f)),
        Value::Object(map) => map.values().for_each(|v| visit(v, documents, f)),
        other => f(other),
    }
}

/// `number` as JSON writes it: whole numbers without a fraction.
pub fn number_literal(number: f64) -> String {
    if number.fract() == 0.0 && number.abs() < 9.0e15 {
        format!("{}", number as i64)
    } else {
        serde_json::Number::from_f64(number)
            .map(|n| n.to_string())
            .unwrap_or_else(|| number.to_string())
    }
}

/// English words that stand for a number, and the number. "Half of 64"
/// divides by two, "a dozen" is twelve: a word that names a number gives
/// it as surely as digits do.
const NUMBER_WORDS: [(&str, f64); 40] = [
    ("zero", 0.0),
    ("one", 1.0),
    ("two", 2.0),
    ("three", 3.0),
    ("four", 4.0),
    ("five", 5.0),
    ("six", 6.0),
    ("seven", 7.0),
    ("eight", 8.0),
    ("nine", 9.0),
    ("ten", 10.0),
    ("eleven", 11.0),
    ("twelve", 12.0),
    ("thirteen", 13.0),
    ("fourteen", 14.0),
    ("fifteen", 15.0),
    ("sixteen", 16.0),
    ("seventeen", 17.0),
    ("eighteen", 18.0),
    ("nineteen", 19.0),
    ("twenty", 20.0),
    ("thirty", 30.0),
    ("forty", 40.0),
    ("fifty", 50.0),
    ("sixty", 60.0),
    ("seventy", 70.0),
    ("eighty", 80.0),
    ("ninety", 90.0),
    ("hundred", 100.0),
    ("thousand", 1000.0),
    ("million", 1_000_000.0),
    ("dozen", 12.0),
    ("half", 2.0),
    ("halve", 2.0),
    ("double", 2.0),
    ("twice", 2.0),
    ("triple", 3.0),
    ("thrice", 3.0),
    ("third", 3.0),
    ("quarter", 4.0),
];

/// `text` with a space between a number and the unit written against it
/// ("254mm in inches", "-40C in F", "2.5km"), outside quoted texts, paths
/// and documents: the number is a value, and its unit a word. Ordinals
/// ("3rd"), digits after the letters ("4x4", "0x1f") and words that start
/// with letters ("sha256") are left as they are.
pub fn spaced_units(text: &str) -> std::borrow::Cow<'_, str> {
    let kept: Vec<std::ops::Range<usize>> = values_in(text)
        .into_iter()
        .filter(|(_, v)| !matches!(v, Literal::Number(_)))
        .map(|(range, _)| range)
        .collect();
    let bytes = text.as_bytes();
    let mut cuts: Vec<usize> = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if !is_word_byte(bytes[at]) {
            at += 1;
            continue;
        }
        let end = at + bytes[at..].iter().take_while(|b| is_word_byte(**b)).count();
        let word = &bytes[at..end];
        let digits = word.iter().take_while(|b| b.is_ascii_digit()).count();
        let letters = &word[digits..];
        // "x10" multiplies by ten ("…, then x10"): an "x" before digits
        // is the operator, spaced as "x 10". Digits on both sides ("4x4")
        // are a name, as "sha256" is.
        let times = |w: &[u8]| {
            w.len() >= 2
                && w[0].eq_ignore_ascii_case(&b'x')
                && w[1..].iter().all(u8::is_ascii_digit)
        };
        let kept_here = kept.iter().any(|r| r.start <= at && at < r.end);
        if !kept_here && digits == 0 && times(word) {
            cuts.push(at + 1);
            at = end;
            continue;
        }
        let unit = digits > 0
            && !letters.is_empty()
            && letters.len() <= 5
            && letters.iter().all(u8::is_ascii_alphabetic)
            && !["st", "nd", "rd", "th"]
                .iter()
                .any(|o| letters.eq_ignore_ascii_case(o.as_bytes()))
            && !(word[0] == b'0' && letters[0].eq_ignore_ascii_case(&b'x'))
            && !kept.iter().any(|r| r.start <= at && at < r.end);
        if unit {
            cuts.push(at + digits);
        }
        at = end;
    }
    if cuts.is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut spaced = String::with_capacity(text.len() + cuts.len());
    let mut from = 0;
    for cut in cuts {
        spaced.push_str(&text[from..cut]);
        spaced.push(' ');
        from = cut;
    }
    spaced.push_str(&text[from..]);
    std::borrow::Cow::Owned(spaced)
}

/// The values written in `text`, in order, with the byte range each takes:
/// JSON documents written inline (an object, or an array of more than
/// numbers: `{"user": {"name": "Ada"}}`), quoted texts (`'…'`, `"…"`,
/// `` `…` ``, `“…”`, `‘…’`), paths and dotted names written as one word
/// (`user.name`, `items[1].price`), and outside them numbers (digits with
/// an optional sign, thousands separators and decimals, and the English
/// words for numbers). Digits inside a word (`sha256`, `b2`) are not
/// numbers, nor is an apostrophe a quote.
pub fn values_in(text: &str) -> Vec<(std::ops::Range<usize>, Literal)> {
    let mut values = documents_in(text);
    for find in [quoted_values, paths_in, number_values] {
        let mut found = Vec::new();
        for gap in gaps(text.len(), &values) {
            found.extend(
                find(&text[gap.clone()])
                    .into_iter()
                    .map(|(r, value)| (r.start + gap.start..r.end + gap.start, value)),
            );
        }
        values.extend(found);
        values.sort_by_key(|(r, _)| r.start);
    }
    values
}

/// The ranges of `0..length` that none of `taken` (in order) covers.
fn gaps(length: usize, taken: &[(std::ops::Range<usize>, Literal)]) -> Vec<std::ops::Range<usize>> {
    let mut gaps = Vec::new();
    let mut from = 0;
    for (range, _) in taken {
        if range.start > from {
            gaps.push(from..range.start);
        }
        from = from.max(range.end);
    }
    if from < length {
        gaps.push(from..length);
    }
    gaps
}

fn quoted_values(text: &str) -> Vec<(std::ops::Range<usize>, Literal)> {
    quoted_in(text)
        .into_iter()
        .map(|(range, inner)| (range, Literal::Text(inner)))
        .collect()
}

fn number_values(text: &str) -> Vec<(std::ops::Range<usize>, Literal)> {
    numbers_at(text)
        .into_iter()
        .map(|(range, n)| (range, Literal::Number(n)))
        .collect()
}

/// JSON documents written inline in `text`: an object, or an array that
/// holds more than numbers (a list of numbers is its numbers), at most
/// [`MAX_DOCUMENT_BYTES`] long and [`MAX_DOCUMENT_DEPTH`] deep, not
/// glued to a word before it (`items[1]` is a path's step).
fn documents_in(text: &str) -> Vec<(std::ops::Range<usize>, Literal)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let opens = matches!(bytes[at], b'{' | b'[') && (at == 0 || !is_word_byte(bytes[at - 1]));
        if !opens {
            at += 1;
            continue;
        }
        let Some(end) = document_end(bytes, at) else {
            // Not one within bounds: nor is any that opens inside this run
            // of openers (the inner levels of one nested too deep).
            at += bytes[at..]
                .iter()
                .take_while(|b| matches!(b, b'{' | b'[') || b.is_ascii_whitespace())
                .count();
            continue;
        };
        let document = serde_json::from_str::<Value>(&text[at..end])
            .ok()
            .filter(|d| match d {
                Value::Object(map) => !map.is_empty(),
                Value::Array(items) => items.iter().any(|i| !i.is_number()),
                _ => false,
            });
        match document {
            Some(document) => {
                found.push((at..end, Literal::Document(document)));
                at = end;
            }
            None => at += 1,
        }
    }
    found
}

/// Where the bracket at `start` is closed, past its closing byte, minding
/// JSON strings; `None` when it is not within the bounds of a document.
fn document_end(bytes: &[u8], start: usize) -> Option<usize> {
    let within = &bytes[start..bytes.len().min(start + MAX_DOCUMENT_BYTES)];
    // The first bracket opens it: the depth is back at the top only when
    // it closes.
    for (offset, depth) in crate::text::json_brackets(within) {
        if depth > MAX_DOCUMENT_DEPTH {
            return None;
        }
        if depth == 0 {
            return Some(start + offset + 1);
        }
    }
    None
}

/// Paths and dotted names written as one word: `user.name`,
/// `items[1].price`, `users[*].email`, `config.json`. A word of letters,
/// digits and `_ $ - * @`, joined by dots or `[…]` steps, starting with
/// a letter and its first piece two long at least ("e.g." is no path),
/// the sentence's own punctuation after it left out.
fn paths_in(text: &str) -> Vec<(std::ops::Range<usize>, Literal)> {
    let mut found = Vec::new();
    let mut offset = 0;
    for piece in text.split_inclusive(char::is_whitespace) {
        let start = offset;
        offset += piece.len();
        let word = piece.trim_end();
        let word = word.trim_end_matches(['.', ',', ';', ':', '?', '!', ')']);
        let lead = word.len() - word.trim_start_matches('(').len();
        let word = &word[lead..];
        if is_path(word) {
            let at = start + lead;
            found.push((at..at + word.len(), Literal::Text(word.to_owned())));
        }
    }
    found
}

fn is_path(word: &str) -> bool {
    let piece = |c: char| c.is_ascii_alphanumeric() || "_$-*@".contains(c);
    let Some(first) = word.chars().next() else {
        return false;
    };
    if !(first.is_ascii_alphabetic() || first == '_' || first == '$')
        || !word.contains(['.', '['])
        || !word.chars().all(|c| piece(c) || ".[]".contains(c))
    {
        return false;
    }
    // Brackets in pairs, nothing empty between dots.
    let mut open = false;
    for c in word.chars() {
        match c {
            '[' if open => return false,
            '[' => open = true,
            ']' if !open => return false,
            ']' => open = false,
            _ => {}
        }
    }
    let head = word.split(['.', '[']).next().unwrap_or("");
    !open && head.len() >= 2 && !word.contains("..") && !word.ends_with('.')
}

/// `text` with the JSON documents written in it blanked out: its own
/// words and numbers, not those of a document it holds.
pub fn without_documents(text: &str) -> String {
    let mut plain = text.to_owned();
    for (range, value) in values_in(text) {
        if matches!(value, Literal::Document(_)) {
            plain.replace_range(range.clone(), &" ".repeat(range.len()));
        }
    }
    plain
}

/// The numbers written in `text`, in order (see [`values_in`]; quotes are
/// not looked for).
pub fn numbers_in(text: &str) -> Vec<f64> {
    numbers_at(text).into_iter().map(|(_, n)| n).collect()
}

/// Quoted texts of `text`: (the range with the quotes, the text inside).
fn quoted_in(text: &str) -> Vec<(std::ops::Range<usize>, String)> {
    const PAIRS: [(char, char); 5] = [('\'', '\''), ('"', '"'), ('`', '`'), ('“', '”'), ('‘', '’')];
    let mut found = Vec::new();
    let mut chars = text.char_indices().peekable();
    let mut previous: Option<char> = None;
    while let Some((at, c)) = chars.next() {
        let opens = PAIRS.iter().find(|(open, _)| *open == c);
        let after_word = previous.is_some_and(char::is_alphanumeric);
        previous = Some(c);
        let Some(&(_, close)) = opens.filter(|_| !after_word) else {
            continue;
        };
        let inner_start = at + c.len_utf8();
        // The closing quote: not followed by a letter (an apostrophe in
        // "fox's" does not close "'the fox's tail'").
        let rest = &text[inner_start..];
        let mut end = None;
        for (offset, d) in rest.char_indices() {
            if d == close {
                let next = rest[offset + d.len_utf8()..].chars().next();
                if !next.is_some_and(char::is_alphanumeric) {
                    end = Some(inner_start + offset);
                    break;
                }
            }
        }
        let Some(end) = end else { continue };
        let inner = &text[inner_start..end];
        if inner.trim().is_empty() {
            continue;
        }
        let closing = end + close.len_utf8();
        found.push((at..closing, inner.to_owned()));
        while chars.peek().is_some_and(|(i, _)| *i < closing) {
            chars.next();
        }
        previous = Some(close);
    }
    found
}

/// The numbers of `text` (in digits or words), with where each is written.
pub(crate) fn numbers_at(text: &str) -> Vec<(std::ops::Range<usize>, f64)> {
    let bytes = text.as_bytes();
    let mut numbers = Vec::new();
    // Where a "minus" that signs the next number starts: one written
    // before any number ("what is minus 40 Celsius in F?"), not one
    // between two ("81 minus 9").
    let mut sign: Option<usize> = None;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_alphabetic() && (i == 0 || !is_word_byte(bytes[i - 1])) {
            let mut end = i + bytes[i..].iter().take_while(|b| is_word_byte(**b)).count();
            let word = text[i..end].to_ascii_lowercase();
            // Not one that starts the text or follows "then", "and" or a
            // comma: ", minus 5" subtracts 5 from what came before.
            let leads = || {
                let before = text[..i].trim_end();
                before.is_empty()
                    || before.ends_with([',', ';', ':'])
                    || before.rsplit(char::is_whitespace).next().is_some_and(|w| {
                        ["then", "and", "or"]
                            .iter()
                            .any(|c| w.eq_ignore_ascii_case(c))
                    })
            };
            sign = ((word == "minus" || word == "negative") && numbers.is_empty() && !leads())
                .then_some(i);
            if let Some(&(_, mut n)) = NUMBER_WORDS.iter().find(|(w, _)| *w == word) {
                // "ninety-nine" is one number, not 90 and 9.
                if (20.0..100.0).contains(&n)
                    && n % 10.0 == 0.0
                    && let Some((unit, past)) = with_units(text, end)
                {
                    n += unit;
                    end = past;
                }
                numbers.push((i..end, n));
            }
            i = end;
            continue;
        }
        if !bytes[i].is_ascii_digit() || (i > 0 && is_word_byte(bytes[i - 1])) {
            i += 1;
            continue;
        }
        // `SHA-256`, `UTF-8`: digits joined to a word by a hyphen are part
        // of its name.
        if i >= 2 && bytes[i - 1] == b'-' && bytes[i - 2].is_ascii_alphabetic() {
            while i < bytes.len() && is_word_byte(bytes[i]) {
                i += 1;
            }
            continue;
        }
        let signed = sign
            .take()
            .filter(|&at| text[at..i].split_whitespace().count() == 1);
        let negative = signed.is_some()
            || (i > 0
                && bytes[i - 1] == b'-'
                && (i < 2 || !is_word_byte(bytes[i - 2]) && bytes[i - 2] != b'-'));
        let start = match signed {
            Some(at) => at,
            None if negative => i - 1,
            None => i,
        };
        let mut digits = String::new();
        // Digits before the first thousands separator: one to three.
        let mut separated = false;
        while i < bytes.len() {
            let b = bytes[i];
            if b.is_ascii_digit() {
                digits.push(b as char);
                i += 1;
            } else if b == b','
                && !digits.contains('.')
                && (separated || (1..=3).contains(&digits.len()))
                && bytes.len() >= i + 4
                && bytes[i + 1..i + 4].iter().all(u8::is_ascii_digit)
                && bytes.get(i + 4).is_none_or(|b| !b.is_ascii_digit())
            {
                // `1,200`: a group of three digits after a comma.
                separated = true;
                i += 1;
            } else if b == b'.'
                && !digits.contains('.')
                && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)
            {
                digits.push('.');
                i += 1;
            } else {
                break;
            }
        }
        // A power of ten written as scientific notation (`1e308`,
        // `2.5E-3`) or a power (`10^400`) is one number, not two: read
        // apart, "10^400" would be 10 and 400, which a tool would add.
        if let Some((exponent, past)) = exponent_at(bytes, i) {
            let value = match digits.parse::<f64>() {
                Ok(base) if bytes[i] == b'^' => base.powf(exponent),
                Ok(_) => format!("{digits}e{exponent}").parse().unwrap_or(f64::NAN),
                Err(_) => f64::NAN,
            };
            i = past;
            // One too large for any number a tool takes stays in the
            // text as what it is: infinite, so no call is grounded in it.
            if !value.is_nan() {
                numbers.push((start..i, if negative { -value } else { value }));
            }
            continue;
        }
        // A number glued to letters after it (`3rd`, `4x4`'s `4x`) is a
        // word, not a number.
        if bytes.get(i).is_some_and(|b| b.is_ascii_alphabetic()) {
            while i < bytes.len() && is_word_byte(bytes[i]) {
                i += 1;
            }
            continue;
        }
        if let Ok(value) = digits.parse::<f64>()
            && value.is_finite()
        {
            numbers.push((start..i, if negative { -value } else { value }));
        }
    }
    numbers
}

/// The exponent written at `at` right after a number's digits (`e308`,
/// `E-3`, `^400`, `^-2`) and where it ends; not when letters follow it
/// (`1em` is a length in a style sheet).
fn exponent_at(bytes: &[u8], at: usize) -> Option<(f64, usize)> {
    let marker = *bytes.get(at)?;
    if !matches!(marker, b'e' | b'E' | b'^') {
        return None;
    }
    let mut i = at + 1;
    let negative = match bytes.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let digits = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
    // At most five digits: a larger exponent is as infinite as 99999's.
    if digits == 0 || bytes.get(i + digits).is_some_and(|b| is_word_byte(*b)) {
        return None;
    }
    let exponent: f64 = std::str::from_utf8(&bytes[i..i + digits.min(5)])
        .ok()?
        .parse()
        .ok()?;
    Some((if negative { -exponent } else { exponent }, i + digits))
}

/// The unit word ("one" to "nine") joined by a hyphen at `at` of
/// `text`, and where it ends.
fn with_units(text: &str, at: usize) -> Option<(f64, usize)> {
    let rest = text.get(at..)?.strip_prefix('-')?;
    let length = rest.bytes().take_while(|b| is_word_byte(*b)).count();
    let word = rest[..length].to_ascii_lowercase();
    NUMBER_WORDS[1..10]
        .iter()
        .find(|(w, _)| *w == word)
        .map(|(_, n)| (*n, at + 1 + length))
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scientific_notation_and_powers_are_one_number() {
        let numbers =
            |text: &str| -> Vec<f64> { numbers_at(text).into_iter().map(|(_, n)| n).collect() };
        assert_eq!(numbers("add 1e308 and 2.5E-3"), [1e308, 0.0025]);
        assert_eq!(numbers("10^3 plus 2^-1"), [1000.0, 0.5]);
        assert_eq!(
            numbers("10^400 and -1e999"),
            [f64::INFINITY, f64::NEG_INFINITY]
        );
        // Not an exponent: letters follow, or no digits do.
        assert_eq!(numbers("1em, 3e and 4x4"), Vec::<f64>::new());
        assert_eq!(numbers("2^ 3"), [2.0, 3.0]);
    }

    #[test]
    fn a_number_of_two_words_joined_by_a_hyphen_is_one() {
        assert_eq!(plain("ninety-nine plus one"), ["99", "1"]);
        assert_eq!(
            plain("Forty-two, thirty and twenty-one"),
            ["42", "30", "21"]
        );
        assert_eq!(plain("twenty-first"), ["20"]);
    }

    #[test]
    fn a_unit_written_against_its_number_is_parted_from_it() {
        assert_eq!(spaced_units("254mm in inches"), "254 mm in inches");
        assert_eq!(spaced_units("-40C in F"), "-40 C in F");
        assert_eq!(spaced_units("3x4 then x10, 0x10"), "3x4 then x 10, 0x10");
        assert_eq!(spaced_units("'4x4' and x-ray"), "'4x4' and x-ray");
        assert_eq!(spaced_units("Convert 2.5km, 300K"), "Convert 2.5 km, 300 K");
        assert_eq!(plain(&spaced_units("-40C in F")), ["-40"]);
        for kept in [
            "the 3rd of 4x4 at 0x1f",
            "sha256 of 'Thursday 8am'",
            "get user.name2x",
            "12ab34",
        ] {
            assert_eq!(spaced_units(kept), kept);
        }
    }

    fn plain(text: &str) -> Vec<String> {
        values_in(text)
            .into_iter()
            .map(|(_, v)| v.plain())
            .collect()
    }

    #[test]
    fn numbers_are_read_as_people_write_them() {
        assert_eq!(numbers_in("What is 23 plus 19?"), [23.0, 19.0]);
        assert_eq!(numbers_in("Add 1,200 and 345."), [1200.0, 345.0]);
        assert_eq!(numbers_in("3.5 times -4, then 1545.0"), [3.5, -4.0, 1545.0]);
        assert_eq!(numbers_in("the sha256 of b2, the 3rd"), Vec::<f64>::new());
        assert_eq!(numbers_in("{\"words\":4,\"lines\":1}"), [4.0, 1.0]);
        assert_eq!(numbers_in("10-4 and 1,2,3"), [10.0, 4.0, 1.0, 2.0, 3.0]);
        assert_eq!(numbers_in("Half of 64, twice"), [2.0, 64.0, 2.0]);
        assert_eq!(numbers_in("someone anyone"), Vec::<f64>::new());
        assert_eq!(numbers_in("SHA-256 of UTF-8, 5 - 3"), [5.0, 3.0]);
        // "minus" before any number signs it; between two, it subtracts.
        assert_eq!(numbers_in("What is minus 40 Celsius in F?"), [-40.0]);
        assert_eq!(numbers_in("is negative 2.5 times 4"), [-2.5, 4.0]);
        assert_eq!(numbers_in(", minus 5"), [5.0]);
        assert_eq!(numbers_in("81 minus 9"), [81.0, 9.0]);
        assert_eq!(numbers_in("minus the 40"), [40.0]);
    }

    #[test]
    fn quoted_texts_are_values_and_their_numbers_are_theirs() {
        assert_eq!(
            plain("Count the words in 'I have 3 cats', then multiply by 2."),
            ["I have 3 cats", "2"]
        );
        assert_eq!(
            plain("Upper-case \"it's fine\" and the fox's tail"),
            ["it's fine"]
        );
        assert_eq!(plain("Hash `abc` and “déjà vu”"), ["abc", "déjà vu"]);
        assert_eq!(plain("don't 'close"), Vec::<String>::new());
        let ranges: Vec<_> = values_in("add 2 and 'x y'")
            .into_iter()
            .map(|(r, _)| r)
            .collect();
        assert_eq!(ranges, [4..5, 10..15]);
    }

    #[test]
    fn documents_and_paths_written_inline_are_one_value_each() {
        let values: Vec<Literal> = values_in(
            "Pick items[1].price from {\"items\": [{\"price\": 3}, {\"price\": 8}]}, then add 2.",
        )
        .into_iter()
        .map(|(_, v)| v)
        .collect();
        assert_eq!(
            values,
            [
                Literal::Text("items[1].price".into()),
                Literal::Document(json!({"items": [{"price": 3}, {"price": 8}]})),
                Literal::Number(2.0),
            ]
        );
        // A list of numbers is its numbers; "e.g." is no path; a brace
        // that does not close, nor one nested past the bound, a document.
        assert_eq!(plain("corr of [1,2,3], e.g. 4"), ["1", "2", "3", "4"]);
        assert_eq!(
            plain("users[*].email of ['a'], 5"),
            ["users[*].email", "a", "5"]
        );
        assert_eq!(plain("{\"a\": 1 and 2"), ["a", "1", "2"]);
        let deep = format!(
            "{}1{}",
            "[".repeat(MAX_DOCUMENT_DEPTH + 1),
            "]".repeat(MAX_DOCUMENT_DEPTH + 1)
        );
        assert!(
            values_in(&deep)
                .iter()
                .all(|(_, v)| !matches!(v, Literal::Document(_)))
        );
        // A document given is copied whole: its values are not made up.
        let grounding = Grounding::of_texts(["flatten {\"a\": {\"b\": 1}}"]);
        assert!(
            grounding
                .check(&json!({"document": {"a": {"b": 1}}}))
                .is_ok()
        );
        assert!(
            grounding
                .check(&json!({"document": {"a": {"b": 2}}}))
                .is_err()
        );
    }

    #[test]
    fn a_property_of_any_value_takes_a_document() {
        let root = json!({});
        assert_eq!(
            ValueKind::of(&json!({"description": "the document"}), &root),
            Some(ValueKind::Document)
        );
        assert_eq!(
            ValueKind::of(&json!({"type": "object"}), &root),
            Some(ValueKind::Document)
        );
        assert_eq!(
            ValueKind::of(&json!({"type": "object", "properties": {}}), &root),
            None
        );
        assert_eq!(ValueKind::of(&json!({"enum": ["a"]}), &root), None);
        let pick = json!({"type": "object", "properties": {
            "document": {"description": "the document"}, "path": {"type": "string"}},
            "required": ["document", "path"]});
        assert!(can_fill(
            &pick,
            &Grounding::of_texts(["user.name of {\"user\": {\"name\": \"Ada\"}}"])
        ));
        assert!(!can_fill(
            &pick,
            &Grounding::of_texts(["the name of user 'Ada'"])
        ));
    }

    #[test]
    fn a_grounding_of_texts_offers_their_values() {
        let grounding = Grounding::of_texts(["Add 1200 and 345", "", "then 'abc' and 1200"]);
        assert_eq!(grounding.texts.len(), 2);
        assert_eq!(grounding.numbers(false), ["1200", "345"]);
        assert_eq!(
            grounding.values,
            [
                Literal::Number(1200.0),
                Literal::Number(345.0),
                Literal::Text("abc".into()),
                Literal::Number(1200.0)
            ]
        );
        let long = "word ".repeat(4000);
        let grounding = Grounding::of_texts([long.clone(), long]);
        let total: usize = grounding.texts.iter().map(String::len).sum();
        assert!(total <= MAX_SOURCE_BYTES, "{total}");
    }

    #[test]
    fn a_call_can_be_made_when_its_values_are_there() {
        let two = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"$ref": "#/$defs/N"}}, "required": ["a", "b"], "$defs": {"N": {"type": "number"}}});
        let text = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
        let numbers = Grounding {
            required: Some(Literal::Number(4.0)),
            values: vec![Literal::Number(5.0)],
            texts: Vec::new(),
        };
        assert!(can_fill(&two, &numbers));
        assert!(!can_fill(&text, &numbers));
        let one = Grounding {
            values: Vec::new(),
            ..numbers.clone()
        };
        assert!(!can_fill(&two, &one));
        let quoted = Grounding {
            required: Some(Literal::Text("abc".into())),
            ..Grounding::default()
        };
        assert!(can_fill(&text, &quoted));
        assert!(!can_fill(&two, &quoted));
        // Words of the request fill a string when nothing is quoted.
        assert!(can_fill(&text, &Grounding::of_texts(["shout hello"])));
    }

    #[test]
    fn calls_of_other_models_are_checked_against_the_values() {
        let grounding = Grounding::of_texts(["What is 6 times 7?", "count 'the quick brown fox'"]);
        assert!(grounding.check(&json!({"a": 6, "b": 7})).is_ok());
        assert!(
            grounding
                .check(&json!({"text": "the quick brown fox"}))
                .is_ok()
        );
        let wrong = grounding.check(&json!({"a": 1, "b": 7})).unwrap_err();
        assert!(wrong.contains('1'), "{wrong}");
        assert!(grounding.check(&json!({"text": "a lazy dog"})).is_err());
        // Without numbers, numbers are free.
        assert!(
            Grounding::of_texts(["add it"])
                .check(&json!({"a": 2}))
                .is_ok()
        );
        assert!(
            Grounding::of_texts(["double it"])
                .check(&json!({"a": 2}))
                .is_ok()
        );
    }
}
