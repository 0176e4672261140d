//! Which value goes to which argument, where the tool's own description
//! says it: "Subtract `b` from `a`." puts the value written between
//! "subtract" and "from" in `b`, so "subtract 8 from 50" is
//! `subtract(a: 50, b: 8)` whatever order the model wrote them in.
//!
//! A description that names its parameters in a phrase is the author's
//! statement of their order; a person's request in the same phrase gives
//! the values in the same places. The values the model chose are only
//! moved between its arguments, never changed, and only when every
//! argument the description places gets a value of its own.

use super::steps::Offered;
use crate::llm::grounding::values_in;
use serde_json::Value;

/// The words either side of a place in a text: lower-case, without
/// punctuation or quotes.
#[derive(Debug, Default, PartialEq)]
struct Neighbours {
    before: Option<String>,
    after: Option<String>,
}

impl Neighbours {
    /// How many of the two sides `other` shares.
    fn shared(&self, other: &Neighbours) -> usize {
        let same = |a: &Option<String>, b: &Option<String>| a.is_some() && a == b;
        usize::from(same(&self.before, &other.before))
            + usize::from(same(&self.after, &other.after))
    }
}

/// The words of `text`, lower-case, with where each starts and ends.
pub(super) fn words(text: &str) -> Vec<(usize, usize, String)> {
    let mut found = Vec::new();
    let mut start = None;
    for (at, c) in text.char_indices().chain([(text.len(), ' ')]) {
        let in_word = c.is_alphanumeric() || c == '_';
        match (start, in_word) {
            (None, true) => start = Some(at),
            (Some(from), false) => {
                found.push((from, at, text[from..at].to_lowercase()));
                start = None;
            }
            _ => {}
        }
    }
    found
}

/// The words either side of `range` in `text`.
fn around(text: &str, range: std::ops::Range<usize>) -> Neighbours {
    let words = words(text);
    Neighbours {
        before: words
            .iter()
            .rev()
            .find(|(_, end, _)| *end <= range.start)
            .map(|(_, _, w)| w.clone()),
        after: words
            .iter()
            .find(|(start, _, _)| *start >= range.end)
            .map(|(_, _, w)| w.clone()),
    }
}

/// Where the tool's description names each of `parameters`, as the words
/// either side of the name (the first mention; none for a parameter it
/// does not name).
fn placed(description: &str, parameters: &[String]) -> Vec<Option<Neighbours>> {
    let words = words(description);
    parameters
        .iter()
        .map(|name| {
            let name = name.to_lowercase();
            let index = words.iter().position(|(_, _, w)| *w == name)?;
            Some(Neighbours {
                before: index.checked_sub(1).map(|i| words[i].2.clone()),
                after: words.get(index + 1).map(|(_, _, w)| w.clone()),
            })
        })
        .collect()
}

/// `arguments` of `tool`, their values moved to the parameters where the
/// description places the phrase of `part` they were written in; as they
/// are when the description places no two of them, or the values do not
/// sit in such phrases.
pub fn align(tool: &Offered, part: &str, arguments: &mut Value) {
    let Some(object) = arguments.as_object_mut() else {
        return;
    };
    let parameters: Vec<String> = object.keys().cloned().collect();
    let places = placed(&tool.description, &parameters);
    if places.iter().filter(|p| p.is_some()).count() < 2 {
        return;
    }
    // Where each argument's value is written in the part.
    let written = values_in(part);
    let at: Vec<Option<Neighbours>> = parameters
        .iter()
        .map(|name| {
            let value = &object[name];
            written
                .iter()
                .find(|(_, literal)| literal.matches(value))
                .map(|(range, _)| around(part, range.clone()))
        })
        .collect();
    // Each placed parameter takes the value whose neighbours it shares
    // most; a value left over goes to the one parameter left, if any.
    let n = parameters.len();
    let mut assigned: Vec<Option<usize>> = vec![None; n];
    let mut taken = vec![false; n];
    for (p, place) in places.iter().enumerate() {
        let Some(place) = place else { continue };
        let best = (0..n)
            .filter(|&v| !taken[v])
            .filter_map(|v| Some((v, at[v].as_ref()?.shared(place))))
            .filter(|(_, shared)| *shared > 0)
            .max_by_key(|(v, shared)| (*shared, usize::MAX - v));
        if let Some((v, _)) = best {
            assigned[p] = Some(v);
            taken[v] = true;
        }
    }
    let left: Vec<usize> = (0..n).filter(|&v| !taken[v]).collect();
    let open: Vec<usize> = (0..n).filter(|&p| assigned[p].is_none()).collect();
    if left.len() != open.len() || open.len() > 1 {
        return;
    }
    for (p, v) in open.into_iter().zip(left) {
        assigned[p] = Some(v);
    }
    // Only a different order of the same values, of the same kinds.
    let values: Vec<Value> = parameters.iter().map(|k| object[k].clone()).collect();
    let kind = |v: &Value| (v.is_number(), v.is_string());
    let moved: Vec<Value> = assigned
        .iter()
        .map(|v| values[v.expect("every parameter assigned")].clone())
        .collect();
    if moved.iter().zip(&values).any(|(a, b)| kind(a) != kind(b)) {
        // Only numbers with numbers, texts with texts, documents with
        // documents.
        return;
    }
    for (name, value) in parameters.iter().zip(moved) {
        object.insert(name.clone(), value);
    }
}

/// Puts what came before a part that starts with an operator in the
/// tool's first number parameter (see [`super::fit::left_operand`]),
/// swapping it with the number the model wrote there: "…, minus 5" after
/// 25 is `subtract(25, 5)`. Values are only moved, never changed.
pub fn left_first(tool: &Offered, step: &super::steps::Step, arguments: &mut Value) {
    let Some((first, left)) = super::fit::left_operand(tool, step) else {
        return;
    };
    let Some(object) = arguments.as_object_mut() else {
        return;
    };
    let holder = object
        .iter()
        .find(|(name, value)| **name != first && value.as_f64() == Some(left))
        .map(|(name, _)| name.clone());
    if let Some(holder) = holder
        && let Some(there) = object.get(&first).cloned()
        && let Some(moved) = object.insert(holder, there)
    {
        object.insert(first, moved);
    }
}

/// `arguments` with each value the part writes right after a parameter's
/// name (the word before it, common words aside) moved to that parameter:
/// "a note titled 'call mom' with the text 'Sunday at 5'" is
/// `put(title: "call mom", text: "Sunday at 5")` whichever way round the
/// model wrote them. A number with no name before it is the parameter
/// the word right after it names, as a count's noun does ("a bill of 90
/// between 3 people": `people` is 3). A value no name stands by goes to
/// the one parameter left; nothing moves unless every value finds its
/// place.
pub fn named_before(tool: &Offered, part: &str, arguments: &mut Value) {
    let Some(object) = arguments.as_object_mut() else {
        return;
    };
    let properties = tool.schema.get("properties").and_then(Value::as_object);
    let parameters: Vec<String> = object.keys().cloned().collect();
    let named = |word: &str| -> Option<usize> {
        let term = crate::store::terms::terms(word).next()?;
        let matching: Vec<usize> = (0..parameters.len())
            .filter(|&p| {
                crate::store::terms::terms(&parameters[p].replace('_', " "))
                    .any(|t| super::steps::same_word(&term, &t))
            })
            .collect();
        match matching.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    };
    let written = values_in(part);
    let all_words = words(part);
    let mut assigned: Vec<Option<Value>> = vec![None; parameters.len()];
    let mut left: Vec<Value> = Vec::new();
    for name in &parameters {
        let value = &object[name];
        let Some((range, _)) = written.iter().find(|(_, l)| l.matches(value)) else {
            return;
        };
        // The nearest word before the value that is not a common one, nor
        // a word of another value.
        let before = all_words
            .iter()
            .rev()
            .filter(|(_, end, _)| *end <= range.start)
            .filter(|(start, _, _)| !written.iter().any(|(r, _)| r.contains(start)))
            .find(|(_, _, w)| crate::store::terms::terms(w).next().is_some());
        // The word right after a number, with only a space between.
        let after = || {
            let next = all_words
                .iter()
                .find(|(start, _, _)| *start >= range.end)
                .filter(|(start, _, _)| part[range.end..*start].trim().is_empty())?;
            value.is_number().then_some(next)
        };
        match before
            .and_then(|(_, _, w)| named(w))
            .or_else(|| after().and_then(|(_, _, w)| named(w)))
        {
            Some(p) if assigned[p].is_none() => assigned[p] = Some(value.clone()),
            Some(_) => return,
            None => left.push(value.clone()),
        }
    }
    let open: Vec<usize> = (0..parameters.len())
        .filter(|&p| assigned[p].is_none())
        .collect();
    if open.len() != left.len() || open.len() > 1 || open.len() == parameters.len() {
        return;
    }
    for (p, value) in open.into_iter().zip(left) {
        assigned[p] = Some(value);
    }
    // Only texts with texts, numbers with numbers, as the schema types them.
    let fits = parameters.iter().zip(&assigned).all(|(name, value)| {
        let value = value.as_ref().expect("every parameter placed");
        let typed = properties
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str);
        match typed {
            Some("string") => value.is_string(),
            Some("number" | "integer") => value.is_number(),
            _ => value.is_string() == object[name].is_string(),
        }
    });
    if fits {
        for (name, value) in parameters.iter().zip(assigned) {
            object.insert(name.clone(), value.expect("every parameter placed"));
        }
    }
}

/// Whether `text[at..at + len]` is whole words: no letter or digit
/// touches it on either side.
pub(super) fn whole_word_at(text: &str, at: usize, len: usize) -> bool {
    let touches = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    !touches(text[..at].chars().next_back()) && !touches(text[at + len..].chars().next())
}

/// `arguments` of `tool` with its texts moved to the parameters whose
/// descriptions bind them to another parameter's value: "The unit symbol
/// of the amount" is the unit written right after the amount, so "how
/// many km is 40 mi" is `convert(40, from_unit: "mi", to_unit: "km")`
/// whichever order the model wrote the units in. Only texts the part
/// writes are moved, and only between text parameters.
pub fn bind(tool: &Offered, part: &str, arguments: &mut Value) {
    let Some(properties) = tool.schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let Some(object) = arguments.as_object_mut() else {
        return;
    };
    let lower = part.to_lowercase();
    // Where each text argument is first written, as whole words, or the
    // word it abbreviates ("f" for "fahrenheit").
    let written_at = |text: &str| -> Option<usize> {
        let text = text.to_lowercase();
        lower
            .match_indices(&text)
            .map(|(at, _)| at)
            .find(|&at| whole_word_at(&lower, at, text.len()))
            .or_else(|| {
                // Not a word that asks how much ("m" is no "many").
                let all = words(&lower);
                (0..all.len())
                    .filter(|&i| !super::fit::asks_at(&all, i))
                    .find(|&i| super::fit::abbreviates(&text, &all[i].2))
                    .map(|i| all[i].0)
            })
    };
    // Every text argument must be placed, or none is moved.
    let texts: Vec<&str> = object
        .iter()
        .filter(|(k, _)| {
            properties.get(*k).and_then(|p| p.get("type")) == Some(&Value::from("string"))
        })
        .filter_map(|(_, v)| v.as_str())
        .collect();
    if texts.iter().any(|t| written_at(t).is_none()) {
        return;
    }
    for (name, property) in properties {
        if property.get("type").and_then(Value::as_str) != Some("string") {
            continue;
        }
        let description = property
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let said: Vec<String> = words(description).into_iter().map(|(_, _, w)| w).collect();
        // The other parameter its description names, and where its value
        // is; a parameter named for where a value comes from (`from_unit`)
        // is the qualifier of the one number the tool takes.
        let named = properties
            .keys()
            .filter(|other| *other != name)
            .find(|other| said.contains(&other.to_lowercase()));
        let is_number = |p: &Value| {
            matches!(
                p.get("type").and_then(Value::as_str),
                Some("number" | "integer")
            )
        };
        let numbers: Vec<&String> = properties
            .iter()
            .filter(|(_, p)| is_number(p))
            .map(|(k, _)| k)
            .collect();
        let from = name.to_lowercase().split('_').any(|w| w == "from");
        let Some(anchor) = named.or(match numbers.as_slice() {
            [number] if from => Some(*number),
            _ => None,
        }) else {
            continue;
        };
        let Some(anchor_end) = object.get(anchor).and_then(|value| {
            values_in(part)
                .into_iter()
                .find(|(_, literal)| literal.matches(value))
                .map(|(range, _)| range.end)
        }) else {
            continue;
        };
        // The text argument written nearest after it.
        let nearest = object
            .iter()
            .filter(|(k, _)| {
                properties.get(*k).and_then(|p| p.get("type")) == Some(&Value::from("string"))
            })
            .filter_map(|(k, v)| Some((k.clone(), written_at(v.as_str()?)?)))
            .filter(|(_, at)| *at >= anchor_end)
            .min_by_key(|(_, at)| *at);
        if let Some((holder, _)) = nearest
            && holder != *name
            && let (Some(mine), Some(theirs)) =
                (object.get(name).cloned(), object.get(&holder).cloned())
        {
            object.insert(name.clone(), theirs);
            object.insert(holder, mine);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(description: &str) -> Offered {
        Offered {
            effects: crate::answers::steps::Effects::ReadOnly,
            output_schema: None,
            owner: "calculator".into(),
            name: "t".into(),
            description: description.into(),
            schema: json!({}),
        }
    }

    fn aligned(description: &str, part: &str, arguments: Value) -> Value {
        let mut arguments = arguments;
        align(&tool(description), part, &mut arguments);
        arguments
    }

    #[test]
    fn a_description_that_places_its_parameters_orders_the_values() {
        let subtract = "Subtract `b` from `a`.";
        assert_eq!(
            aligned(subtract, "Subtract 8 from 50.", json!({"a": 8, "b": 50})),
            json!({"a": 50, "b": 8})
        );
        assert_eq!(
            aligned(subtract, "Take 13 from 100.", json!({"a": 13, "b": 100})),
            json!({"a": 100, "b": 13})
        );
        // Already in place, it stays.
        assert_eq!(
            aligned(subtract, "subtract 5 from 25", json!({"a": 25, "b": 5})),
            json!({"a": 25, "b": 5})
        );
        // A value from an earlier result, not written: the one written
        // takes its place, the other the place left.
        assert_eq!(
            aligned(
                subtract,
                "then subtract 5 from the result.",
                json!({"a": 5, "b": 25})
            ),
            json!({"a": 25, "b": 5})
        );
        assert_eq!(
            aligned(
                "Divide `a` by `b`.",
                "Divide 50 by 2",
                json!({"a": 2, "b": 50})
            ),
            json!({"a": 50, "b": 2})
        );
    }

    #[test]
    fn a_text_bound_to_a_value_is_the_one_written_after_it() {
        let convert = Offered {
            effects: crate::answers::steps::Effects::ReadOnly,
            output_schema: None,
            owner: "unit-convert".into(),
            name: "convert".into(),
            description: "Convert an amount.".into(),
            schema: json!({"type": "object", "properties": {
                "amount": {"type": "number"},
                "from_unit": {"type": "string", "description": "The unit symbol of the amount, such as km."},
                "to_unit": {"type": "string", "description": "The unit symbol to convert to."}}}),
        };
        let bound = |part: &str, arguments: Value| {
            let mut arguments = arguments;
            bind(&convert, part, &mut arguments);
            arguments
        };
        assert_eq!(
            bound(
                "How many km is 40 mi?",
                json!({"amount": 40, "from_unit": "km", "to_unit": "mi"})
            ),
            json!({"amount": 40, "from_unit": "mi", "to_unit": "km"})
        );
        assert_eq!(
            bound(
                "How many kilometers are 1000 meters?",
                json!({"amount": 1000, "from_unit": "km", "to_unit": "m"})
            ),
            json!({"amount": 1000, "from_unit": "m", "to_unit": "km"})
        );
        assert_eq!(
            bound(
                "Convert 26.2 mi to km",
                json!({"amount": 26.2, "from_unit": "mi", "to_unit": "km"})
            ),
            json!({"amount": 26.2, "from_unit": "mi", "to_unit": "km"})
        );
        assert_eq!(
            bound(
                "100 f in c?",
                json!({"amount": 100, "from_unit": "c", "to_unit": "f"})
            ),
            json!({"amount": 100, "from_unit": "f", "to_unit": "c"})
        );
        assert_eq!(
            bound(
                "Convert 100 fahrenheit to c",
                json!({"amount": 100, "from_unit": "f", "to_unit": "c"})
            ),
            json!({"amount": 100, "from_unit": "f", "to_unit": "c"})
        );
        // A text it cannot place: nothing moves.
        assert_eq!(
            bound(
                "Convert 100 to c",
                json!({"amount": 100, "from_unit": "f", "to_unit": "c"})
            ),
            json!({"amount": 100, "from_unit": "f", "to_unit": "c"})
        );
    }

    #[test]
    fn a_number_before_the_noun_that_names_a_parameter_is_that_parameters() {
        let split = Offered {
            effects: crate::answers::steps::Effects::ReadOnly,
            output_schema: None,
            owner: "tips".into(),
            name: "split_bill".into(),
            description: "Split a total evenly between a number of people.".into(),
            schema: json!({"type": "object", "properties": {
                "total": {"type": "number"}, "people": {"type": "integer"}}}),
        };
        let mut arguments = json!({"total": 3, "people": 90});
        named_before(
            &split,
            "Split a bill of 90 between 3 people.",
            &mut arguments,
        );
        assert_eq!(arguments, json!({"total": 90, "people": 3}));
    }

    #[test]
    fn a_value_written_after_a_parameters_name_is_that_parameters() {
        let put = Offered {
            effects: crate::answers::steps::Effects::Changes,
            output_schema: None,
            owner: "notes".into(),
            name: "put".into(),
            description: "Saves a note.".into(),
            schema: json!({"type": "object", "properties": {
                "title": {"type": "string"}, "text": {"type": "string"}}}),
        };
        let placed = |part: &str, arguments: Value| {
            let mut arguments = arguments;
            named_before(&put, part, &mut arguments);
            arguments
        };
        assert_eq!(
            placed(
                "Save a note titled 'call mom' with the text 'Sunday at 5'.",
                json!({"title": "Sunday at 5", "text": "call mom"})
            ),
            json!({"title": "call mom", "text": "Sunday at 5"})
        );
        assert_eq!(
            placed(
                "Could you note down 'keys' under the title 'plumber'?",
                json!({"title": "keys", "text": "plumber"})
            ),
            json!({"title": "plumber", "text": "keys"})
        );
        // No name before either value: nothing moves.
        assert_eq!(
            placed(
                "Write 'plumber' as 'keys'.",
                json!({"title": "keys", "text": "plumber"})
            ),
            json!({"title": "keys", "text": "plumber"})
        );
    }

    #[test]
    fn a_parameter_named_from_takes_the_text_written_after_the_number() {
        // The MCP server's schema, from a Python signature: no descriptions.
        let convert = Offered {
            effects: crate::answers::steps::Effects::ReadOnly,
            output_schema: None,
            owner: "units".into(),
            name: "convert".into(),
            description: "Converts a value between two units of the same kind.".into(),
            schema: json!({"type": "object", "properties": {
                "value": {"type": "number"},
                "from_unit": {"type": "string"},
                "to_unit": {"type": "string"}}}),
        };
        let mut arguments = json!({"value": 10, "from_unit": "meters", "to_unit": "yd"});
        bind(&convert, "How many meters are 10 yd?", &mut arguments);
        assert_eq!(
            arguments,
            json!({"value": 10, "from_unit": "yd", "to_unit": "meters"})
        );
        let mut arguments = json!({"value": 3, "from_unit": "yd", "to_unit": "ft"});
        bind(&convert, "Convert 3 yd to ft.", &mut arguments);
        assert_eq!(
            arguments,
            json!({"value": 3, "from_unit": "yd", "to_unit": "ft"})
        );
    }

    #[test]
    fn a_description_that_places_nothing_changes_nothing() {
        assert_eq!(
            aligned("Add two numbers.", "Add 2 and 3", json!({"a": 3, "b": 2})),
            json!({"a": 3, "b": 2})
        );
    }
}
