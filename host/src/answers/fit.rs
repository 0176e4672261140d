//! Whether a call the model wrote fits the part of the request it is for,
//! before it runs: a wrong call that succeeds is a confident wrong answer.
//!
//! - Words the person wrote once go to one argument: `convert(5, "km",
//!   "km")` for "convert 5 parsecs to km" took "km" twice.
//! - Every word of the part that says what to do it with is accounted for:
//!   by the tool (its name, description and parameters) or by an argument
//!   that holds it (or abbreviates it). "parsecs" in "convert 5 parsecs to
//!   km" is neither, so the call does not answer the part, whatever it
//!   returns. This holds for calls that take words of the request as
//!   they stand; a quoted text says itself what the call takes.
//! - A number of the request is a number's value, not part of a text.

use super::steps::{Offered, Step, is_number, same_word};
use crate::llm::grounding::{Literal, ValueKind, numbers_in, values_in};
use crate::store::terms::terms;
use serde_json::Value;

/// Why `arguments` of `tool` do not fit `step`, if they do not.
pub fn check(tool: &Offered, step: &Step, arguments: &Value) -> Result<(), String> {
    check_with(tool, step, arguments, &[])
}

/// The clause `part` adds after a comma past its last value, or right
/// after a document it ends with ("user.name of {…} in caps": a document's
/// end is where its words end), when it writes no value of its own and
/// says something ("in capitals"; not "please").
fn added_clause(part: &str) -> Option<&str> {
    let (range, last) = values_in(part).into_iter().last()?;
    let rest = &part[range.end..];
    let after = match (rest.find(','), last) {
        (Some(comma), _) => &rest[comma + 1..],
        (None, Literal::Document(_)) => rest,
        (None, _) => return None,
    };
    let clause = after.trim_matches(|c: char| c.is_whitespace() || ".?!;:".contains(c));
    (values_in(clause).is_empty() && terms(clause).next().is_some()).then_some(clause)
}

/// Where a part starts with an operator ("…, minus 5"), the tool's first
/// number parameter and what came before the part, which it takes: the
/// left operand of "50 divided by 2, minus 5" is 25, `subtract(25, 5)`.
pub(super) fn left_operand(tool: &Offered, step: &Step) -> Option<(String, f64)> {
    let Some(Literal::Number(left)) = &step.grounding.required else {
        return None;
    };
    let written_here = values_in(&step.part)
        .iter()
        .any(|(_, v)| matches!(v, Literal::Number(n) if n == left));
    if written_here || super::notation::leading_operation(&step.part).is_none() {
        return None;
    }
    let numeric = |name: &str| {
        matches!(
            ValueKind::of(&tool.schema["properties"][name], &tool.schema),
            Some(ValueKind::Number | ValueKind::Integer)
        )
    };
    let order: Vec<&str> = match tool.schema["required"].as_array() {
        Some(required) => required.iter().filter_map(Value::as_str).collect(),
        None => tool.schema["properties"]
            .as_object()
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default(),
    };
    let first = order.into_iter().find(|name| numeric(name))?;
    Some((first.to_owned(), *left))
}

/// Whether the call gives the left operand of a part that starts with an
/// operator (see [`left_operand`]) to the tool's first number parameter.
fn left_operand_kept(tool: &Offered, step: &Step, arguments: &Value) -> Result<(), String> {
    match left_operand(tool, step) {
        Some((first, left)) if arguments[&first].as_f64() != Some(left) => Err(format!(
            "{first} does not take {}, what the operator starting the part works on",
            crate::llm::grounding::number_literal(left)
        )),
        _ => Ok(()),
    }
}

/// Whether `arguments` keep each list of numbers the step's part writes
/// as one value: none of its numbers taken alone ("three times the
/// average of 4, 8 and 12" is not `multiply(12, 3)`), and no other
/// number joined to it in a list ("mean of 4 8 12, times 3" is not
/// `summarize([4, 8, 12, 3])`).
fn written_lists_kept(step: &Step, arguments: &Value) -> Result<(), String> {
    let written = |list: &super::steps::WrittenList| {
        let numbers: Vec<String> = list
            .values
            .iter()
            .map(|n| crate::llm::grounding::number_literal(*n))
            .collect();
        numbers.join(", ")
    };
    let Some(object) = arguments.as_object() else {
        return Ok(());
    };
    for (name, value) in object {
        match value {
            Value::Number(n) => {
                let Some(n) = n.as_f64() else { continue };
                if let Some(list) = step.lists.iter().find(|l| l.contains(&n)) {
                    return Err(format!(
                        "{name} takes {} alone, of the list {} written as one",
                        crate::llm::grounding::number_literal(n),
                        written(list)
                    ));
                }
            }
            Value::Array(items) => {
                let numbers: Vec<f64> = items.iter().filter_map(Value::as_f64).collect();
                // The written list it is: the one that holds most of it.
                let Some(list) = step
                    .lists
                    .iter()
                    .map(|l| (numbers.iter().filter(|n| l.contains(n)).count(), l))
                    .filter(|(shared, _)| *shared > 0)
                    .max_by_key(|(shared, _)| *shared)
                    .map(|(_, l)| l)
                else {
                    continue;
                };
                if let Some(other) = numbers.iter().find(|n| !list.contains(n)) {
                    return Err(format!(
                        "{name} joins {} to the list {}",
                        crate::llm::grounding::number_literal(*other),
                        written(list)
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether `document` is `arguments` or one of its values, at any depth.
fn holds(arguments: &Value, document: &Value) -> bool {
    let mut found = false;
    crate::llm::grounding::visit(arguments, &[document], &mut |v| found |= v == document);
    found
}

/// [`check`] for a call the node corrected itself, each argument of
/// `replaced` now holding the agent's own word for the request's word it
/// names (`("to_unit", "pounds")` holds "lb"): that argument holds the
/// request's word; a word before it is not taken as part of its name ("2
/// nautical miles" corrected to `mi` leaves out "nautical"), since no
/// model wrote the call with the whole name before it; one before a word
/// an argument the model wrote holds still is ("degrees Celsius" of `c`).
pub fn check_corrected(
    tool: &Offered,
    step: &Step,
    arguments: &Value,
    replaced: &[(String, String)],
) -> Result<(), String> {
    check_with(tool, step, arguments, replaced)
}

fn check_with(
    tool: &Offered,
    step: &Step,
    arguments: &Value,
    replaced: &[(String, String)],
) -> Result<(), String> {
    let Some(object) = arguments.as_object() else {
        return Ok(());
    };
    let texts = &step.grounding.texts;
    let given = |s: &str| given_text(step, s);
    // Each number goes where it was written, as often as it was: not
    // `regress([0.1, 0.2], [0.1, 0.2])` for "0.1 + 0.2".
    let mut leaves: Vec<&Value> = Vec::new();
    super::steps::leaves(arguments, &mut leaves);
    let numbers: Vec<f64> = leaves.iter().filter_map(|v| v.as_f64()).collect();
    for n in &numbers {
        let used = numbers.iter().filter(|m| *m == n).count();
        let offered = step
            .grounding
            .all_values()
            .filter(|v| matches!(v, Literal::Number(m) if m == n))
            .count();
        if offered > 0 && used > offered {
            return Err(format!(
                "it gives {} {used} times, and the request writes it {offered}",
                crate::llm::grounding::number_literal(*n)
            ));
        }
    }
    written_lists_kept(step, arguments)?;
    left_operand_kept(tool, step, arguments)?;
    // A document the part writes is what it asks about: a call that leaves
    // it out (a note titled "user.name" for "get user.name from {…}")
    // answers something else.
    let left_out = step.grounding.all_values().find_map(|v| match v {
        Literal::Document(d) if !holds(arguments, d) => Some(d),
        _ => None,
    });
    if let Some(document) = left_out {
        return Err(format!(
            "it leaves out the document {}",
            crate::text::excerpt(&document.to_string(), 60)
        ));
    }
    // One text to two parameters only where the request writes it twice
    // (outside a document it holds): not `convert(5, "km", "km")` for "5
    // parsecs to km", nor `convert(6, "m", "m")` for "how many meters is
    // 6 ft", "m" standing for "meters" after a refusal.
    let written = crate::llm::grounding::without_documents(&step.part);
    let strings: Vec<(&String, &str)> = object
        .iter()
        .filter_map(|(k, v)| Some((k, v.as_str()?.trim())))
        .filter(|(_, s)| !s.is_empty())
        .collect();
    for (i, (name, text)) in strings.iter().enumerate() {
        for (other, again) in &strings[i + 1..] {
            if again.eq_ignore_ascii_case(text) && occurrences(&written, text) < 2 {
                return Err(format!(
                    "it gives {text:?} to both {name} and {other}, and the request does not write it twice"
                ));
            }
        }
    }
    // The free texts: runs of the request's words, not values it was given.
    let free: Vec<(&String, &str)> = object
        .iter()
        .filter_map(|(k, v)| Some((k, v.as_str()?)))
        .filter(|(_, s)| !s.trim().is_empty() && !given(s))
        .collect();
    for (name, text) in &free {
        if asks_in(&step.part, text) {
            return Err(format!(
                "{name} takes {text:?}, a word that asks how much, not a value"
            ));
        }
        if contraction_end(&step.part, text) {
            return Err(format!(
                "{name} takes {text:?}, written only as the end of a word such as \"what's\", \
                 not a value"
            ));
        }
        if is_whole_request(&step.part, text) {
            return Err(format!(
                "{name} takes the whole request, not a text it names"
            ));
        }
        if numbers_in(text).iter().any(|n| {
            step.grounding
                .all_values()
                .any(|v| matches!(v, Literal::Number(m) if m == n))
        }) {
            return Err(format!(
                "{name} takes {text:?}, and its number is a value of its own"
            ));
        }
    }
    let description = said_by(tool);
    let told = terms(&without_examples(&description)).collect::<Vec<String>>();
    let named: Vec<String> = terms(&tool.name.replace('_', " ")).collect();
    let held: Vec<String> = object
        .values()
        .filter_map(Value::as_str)
        .flat_map(|s| terms(s).collect::<Vec<_>>())
        .collect();
    // A call that takes nothing answers a part only where the tool says
    // what each of its words asks: "groceries note?" asks for a note, not
    // `list()` of their titles.
    if leaves.is_empty() {
        let unsaid = step
            .part
            .split(|c: char| !c.is_alphanumeric())
            .find(|word| {
                terms(word)
                    .any(|t| !is_number(&t) && !told.iter().chain(&named).any(|w| same_word(&t, w)))
            });
        if let Some(word) = unsaid {
            return Err(format!(
                "it takes nothing, and the request asks about {word:?}"
            ));
        }
    }
    // A clause the part adds after its values ("'a b c' reversed, in
    // capitals") asks for more than the call of them: its words are the
    // tool's or an argument's, else the call leaves it undone.
    if let Some(clause) = added_clause(&step.part) {
        let accounted = |term: &String| told.iter().chain(&held).any(|t| same_word(term, t));
        if !terms(clause).all(|t| accounted(&t)) {
            return Err(format!(
                "it leaves out {clause:?}, which the request asks for"
            ));
        }
    }
    if free.is_empty() {
        return Ok(());
    }
    // Every word of the part that is not a common one, a value or the
    // tool's own: an argument holds it.
    let quoted: Vec<String> = step
        .grounding
        .all_values()
        .filter_map(|v| match v {
            Literal::Text(t) => Some(t.to_lowercase()),
            _ => None,
        })
        .collect();
    for text in texts {
        let mut spans: Vec<(usize, &str)> = Vec::new();
        let mut start = None;
        for (at, c) in text.char_indices().chain([(text.len(), ' ')]) {
            match (start, c.is_alphanumeric()) {
                (None, true) => start = Some(at),
                (Some(from), false) => {
                    spans.push((from, &text[from..at]));
                    start = None;
                }
                _ => {}
            }
        }
        // Whether word `at` is followed by the next with only spaces
        // between: "degrees Celsius", not "kenya, peru".
        let joined_to_next = |at: usize| {
            spans.get(at + 1).is_some_and(|(next, _)| {
                let (start, word) = spans[at];
                text.get(start + word.len()..*next)
                    .is_some_and(|gap| gap.chars().all(char::is_whitespace))
            })
        };
        let words: Vec<&str> = spans.iter().map(|(_, w)| *w).collect();
        // The numbers as written, "minus 40" one of them.
        let written = crate::llm::grounding::numbers_at(text);
        for (at, word) in words.iter().enumerate() {
            let start = spans[at].0;
            if written.iter().any(|(range, _)| range.contains(&start)) {
                continue;
            }
            // A value the tool's description lists, written right after
            // a number the call takes, is that number's unit however
            // common a word it is ("how many feet is 72 in"): an argument
            // holds it. (The unit of a number another call takes, "20 c"
            // of "10 km to mi and 20 c to f", is that call's.)
            let unit = at > 0
                && written.iter().any(|(range, n)| {
                    range.end <= start
                        && text[range.end..start].trim().is_empty()
                        && numbers.contains(n)
                })
                && listed_in(&description, word);
            let Some(term) = terms(word)
                .next()
                .or_else(|| unit.then(|| word.to_lowercase()))
            else {
                continue;
            };
            // The first word of an order says to do it ("Convert",
            // "Tell me"); quantifiers ask how much, and so does the word
            // after "how" ("how far", "how many").
            if at == 0
                || asks_how_much(word, Some(words[at - 1]))
                || (terms(&term).next().is_none() && !unit)
                || term.bytes().all(|b| b.is_ascii_digit())
                || !numbers_in(word).is_empty()
                || quoted.iter().any(|q| q == &word.to_lowercase())
            {
                continue;
            }
            let by_argument = |word: &str| {
                replaced
                    .iter()
                    .any(|(_, stood)| stood.eq_ignore_ascii_case(word))
                    || terms(word).any(|term| held.iter().any(|h| same_word(&term, h)))
                    || object
                        .values()
                        .filter_map(Value::as_str)
                        .any(|s| s.trim().eq_ignore_ascii_case(word) || abbreviates(s, word))
            };
            // The same, of the arguments as the model wrote them.
            let by_models_argument = |word: &str| {
                object
                    .iter()
                    .filter(|(key, _)| !replaced.iter().any(|(argument, _)| argument == *key))
                    .filter_map(|(_, v)| v.as_str())
                    .any(|s| {
                        terms(s).any(|h| terms(word).any(|term| same_word(&term, &h)))
                            || s.trim().eq_ignore_ascii_case(word)
                            || abbreviates(s, word)
                    })
            };
            // The values a description lists ("mm, cm, m, km, in, ft") are
            // what the tool takes, not what it does: a number's unit is an
            // argument's to hold, unless it names the tool.
            let the_tools = told.iter().any(|t| same_word(&term, t))
                && (!unit || named.iter().any(|t| same_word(&term, t)));
            let the_tools_word =
                |w: &str| terms(w).any(|t| told.iter().chain(&named).any(|o| same_word(&t, o)));
            // A word right before one an argument holds is part of its
            // name: "degrees" of "degrees Celsius", "nautical" of
            // "nautical miles".
            let accounted = the_tools
                || by_argument(word)
                || (joined_to_next(at) && by_models_argument(words[at + 1]))
                || relates_to_argument(&words, at, &the_tools_word, &by_models_argument);
            if !accounted {
                return Err(format!(
                    "it leaves out {word:?}, which the request names and no argument holds"
                ));
            }
        }
    }
    Ok(())
}

/// Words that lead from what a tool gives to the thing it is of.
const RELATING: [&str; 7] = ["in", "of", "for", "from", "at", "on", "by"];

/// Whether `words[at]`, after a word of the tool's, leads to what an
/// argument holds through a preposition, itself or with one word after
/// it: it says how the tool's thing stands to the argument ("what
/// language is spoken in Brazil", "… spoken officially in Kenya"). Not a
/// word before any word of the tool's ("the president of France" asks
/// for a president, not a capital), nor one no preposition leads from to
/// the argument ("capitals of kenya and peru").
fn relates_to_argument(
    words: &[&str],
    at: usize,
    the_tools: &dyn Fn(&str) -> bool,
    held: &dyn Fn(&str) -> bool,
) -> bool {
    if !words[..at].iter().any(|w| the_tools(w)) {
        return false;
    }
    let relating = |w: &str| RELATING.iter().any(|r| r.eq_ignore_ascii_case(w));
    let Some(preposition) = (at + 1..words.len().min(at + 3)).find(|&k| relating(words[k])) else {
        return false;
    };
    let mut object = preposition + 1;
    if words
        .get(object)
        .is_some_and(|w| ["the", "a", "an"].iter().any(|a| a.eq_ignore_ascii_case(w)))
    {
        object += 1;
    }
    words.get(object).is_some_and(|w| held(w))
}

/// `arguments` with each parameter that takes a list of numbers given a
/// list the part writes whole: the list whose word before names it ("y =
/// 4, 7, 10"), the others in the order written. `None` unless the part
/// writes as many lists as the tool takes, and the call changes.
pub fn fill_lists(tool: &Offered, step: &Step, arguments: &Value) -> Option<Value> {
    let parameters = crate::llm::grounding::number_list_parameters(&tool.schema);
    if parameters.is_empty() || parameters.len() != step.lists.len() {
        return None;
    }
    let names = |label: &str, parameter: &str| {
        label.eq_ignore_ascii_case(parameter)
            || terms(&parameter.replace('_', " ")).any(|t| same_word(label, &t))
    };
    let mut placed: Vec<Option<&[f64]>> = vec![None; parameters.len()];
    let mut unnamed: Vec<&[f64]> = Vec::new();
    for list in &step.lists {
        let named: Vec<usize> = (0..parameters.len())
            .filter(|&p| {
                list.label
                    .as_deref()
                    .is_some_and(|l| names(l, parameters[p]))
            })
            .collect();
        match named.as_slice() {
            [p] if placed[*p].is_none() => placed[*p] = Some(&list.values),
            _ => unnamed.push(&list.values),
        }
    }
    let mut unnamed = unnamed.into_iter();
    let mut filled = arguments.as_object()?.clone();
    for (parameter, list) in parameters.iter().zip(placed) {
        let list = list.or_else(|| unnamed.next())?;
        let numbers: Vec<Value> = list
            .iter()
            .map(|n| {
                serde_json::from_str(&crate::llm::grounding::number_literal(*n))
                    .unwrap_or(Value::Null)
            })
            .collect();
        filled.insert((*parameter).clone(), Value::Array(numbers));
    }
    let filled = Value::Object(filled);
    (&filled != arguments).then_some(filled)
}

/// `arguments` with its text parameters filled by the part's own words,
/// in the order written: the words that are not common ones (but a word
/// written right after a number, which is its unit: "12 in"), not values,
/// not the tool's own and not the part's first (the order's verb). `None`
/// unless there are exactly as many as the call has text parameters that
/// take free words.
pub fn fill(tool: &Offered, step: &Step, arguments: &Value) -> Option<Value> {
    let object = arguments.as_object()?;
    let given = |s: &str| given_text(step, s);
    let slots: Vec<&String> = object
        .iter()
        .filter(|(_, v)| v.as_str().is_some_and(|s| !given(s)))
        .map(|(k, _)| k)
        .collect();
    if slots.is_empty() {
        return None;
    }
    // All the part's own words; or, where it goes on to what a later call
    // takes ("10 km -> mi, 20 c -> f"), those before its next number.
    let runs = own_word_runs(tool, step, false);
    let found = match own_words(tool, step) {
        all if all.len() == slots.len() => all,
        // A part that starts with what it names ("groceries note?") has
        // no order's verb first: where the rest leaves too few words, its
        // first is one of them.
        fewer if fewer.len() < slots.len() => Some(distinct(own_word_runs(tool, step, true)))
            .filter(|all| all.len() == slots.len())?,
        _ => runs
            .into_iter()
            .next()
            .filter(|run| run.len() == slots.len())?,
    };
    let mut filled = object.clone();
    for (slot, word) in slots.iter().zip(found) {
        filled.insert((*slot).clone(), Value::String(word));
    }
    Some(Value::Object(filled))
}

/// The part's own words a text parameter of `tool` may take, in the
/// order written: not common ones (but a word right after a number, which
/// is its unit: "12 in"), not values, not the tool's own words, not the
/// part's first (the order's verb), nor one that asks how much.
pub fn own_words(tool: &Offered, step: &Step) -> Vec<String> {
    distinct(own_word_runs(tool, step, false))
}

/// The words of `runs` in order, each once.
fn distinct(runs: Vec<Vec<String>>) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for word in runs.into_iter().flatten() {
        if !found.iter().any(|f| f.eq_ignore_ascii_case(&word)) {
            found.push(word);
        }
    }
    found
}

/// [`own_words`] in runs: a number written after some of them starts the
/// next run (what a later call of the part takes). With `with_first`, the
/// part's first word may be one of them.
fn own_word_runs(tool: &Offered, step: &Step, with_first: bool) -> Vec<Vec<String>> {
    let Some(text) = step.grounding.texts.first() else {
        return Vec::new();
    };
    let description = said_by(tool);
    let told: Vec<String> = terms(&without_examples(&description)).collect();
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || ",;:?!()\"'".contains(c))
        .map(|w| w.trim_end_matches('.'))
        .filter(|w| !w.is_empty())
        .collect();
    let mut runs: Vec<Vec<String>> = vec![Vec::new()];
    for (at, word) in words.iter().enumerate() {
        let after_number = at > 0 && !numbers_in(words[at - 1]).is_empty();
        if !numbers_in(word).is_empty() && runs.last().is_some_and(|run| !run.is_empty()) {
            runs.push(Vec::new());
        }
        // A letter on its own is a symbol ("0 c in k"), but for the words
        // "a" and "I".
        let common = match word.chars().count() {
            1 => ["a", "i"].contains(&word.to_lowercase().as_str()),
            _ => terms(word)
                .next()
                .is_none_or(|t| terms(&t).next().is_none()),
        };
        let is_word = word.chars().all(char::is_alphabetic);
        // The tool's own words say what it does, but for those its
        // description lists as values it takes ("km, mi, ft").
        let tools_own = terms(word).any(|t| told.iter().any(|o| same_word(&t, o)))
            && !listed_in(&description, word);
        let run = runs.last_mut().expect("one run at least");
        if (at == 0 && !with_first)
            || !is_word
            || (common && !after_number)
            || (tools_own && !after_number)
            || asks_how_much(word, at.checked_sub(1).map(|b| words[b]))
            || run.iter().any(|f| f.eq_ignore_ascii_case(word))
        {
            continue;
        }
        run.push((*word).to_owned());
    }
    runs.retain(|run| !run.is_empty());
    runs
}

/// What `tool` says of itself: its name, description and parameters.
fn said_by(tool: &Offered) -> String {
    format!(
        "{} {} {}",
        tool.name,
        tool.description,
        described(&tool.schema)
    )
}

/// The values `tool`'s description and schema list (see [`listed_words`]):
/// the symbols it takes, for words of a request or of a refusal.
pub(super) fn listed_by(tool: &Offered) -> String {
    listed_words(&format!("{} {}", tool.description, tool.schema))
}

/// The words `description` lists as values ("mm, cm, m", "C, F or K"),
/// in order, joined by commas: what a tool says it takes, without the
/// rest of its prose ("a", "of").
pub(super) fn listed_words(description: &str) -> String {
    let mut listed: Vec<&str> = Vec::new();
    for word in description.split(|c: char| !c.is_alphanumeric()) {
        if !word.is_empty() && !listed.contains(&word) && listed_in(description, word) {
            listed.push(word);
        }
    }
    listed.join(", ")
}

/// Whether `description` lists `word` among others, as the values a
/// parameter takes are listed: "(mm, cm, m, km)", "C, F or K". What
/// separates them makes the list, not brackets: "(see the units tool)"
/// lists nothing.
fn listed_in(description: &str, word: &str) -> bool {
    let lower = description.to_lowercase();
    let word = word.to_lowercase();
    lower.match_indices(&word).any(|(at, _)| {
        let end = at + word.len();
        let before = lower[..at].trim_end_matches(' ');
        let after = lower[end..].trim_start_matches(' ');
        super::align::whole_word_at(&lower, at, word.len())
            && (before.ends_with([',', '/'])
                || after.starts_with([',', '/'])
                || (after.starts_with("or ") && before.ends_with(','))
                || ends_a_list(before))
    })
}

/// Whether `before` ends "…, F or": the next word ends a list.
fn ends_a_list(before: &str) -> bool {
    let Some(rest) = before.strip_suffix(" or") else {
        return false;
    };
    let rest = rest.trim_end();
    let word_start = rest
        .rfind(|c: char| !c.is_alphanumeric())
        .map_or(0, |i| i + 1);
    word_start > 0 && rest[..word_start].trim_end().ends_with(',')
}

/// Whether `text` is a text value `step` was given (quoted by the person,
/// an earlier result, a word an agent offered), not words taken as they
/// stand.
fn given_text(step: &Step, text: &str) -> bool {
    step.grounding
        .all_values()
        .any(|v| matches!(v, Literal::Text(t) if t == text))
}

/// Whether `word` (after `before`) asks how much of something: a
/// quantifier, or the word after "how" ("how far").
pub(super) fn asks_how_much(word: &str, before: Option<&str>) -> bool {
    QUANTIFIERS.contains(&word.to_lowercase().as_str())
        || before.is_some_and(|b| b.eq_ignore_ascii_case("how"))
}

/// Whether `text` is one word that asks how much in `part`: "many" of
/// "how many cm is 12 in" is no unit.
fn asks_in(part: &str, text: &str) -> bool {
    let text = text.trim();
    let words = super::align::words(part);
    !text.contains(char::is_whitespace)
        && (0..words.len()).any(|i| words[i].2.eq_ignore_ascii_case(text) && asks_at(&words, i))
}

/// Whether word `i` of `words` ([`super::align::words`]) asks how much,
/// after the word before it.
pub(super) fn asks_at(words: &[(usize, usize, String)], i: usize) -> bool {
    asks_how_much(&words[i].2, i.checked_sub(1).map(|b| words[b].2.as_str()))
}

/// Words that ask how much or how many of something, not what of.
const QUANTIFIERS: [&str; 4] = ["many", "much", "few", "several"];

/// Whether `text` is written in `part` only as the end of a contraction:
/// the "s" of "what's", the "t" of "don't" are no value a person gave
/// (a table booked at restaurant "s" for "what's 15% of 80").
fn contraction_end(part: &str, text: &str) -> bool {
    let text = text.trim().to_lowercase();
    if text.is_empty() || text.len() > 2 || !text.chars().all(char::is_alphabetic) {
        return false;
    }
    let lower = part.to_lowercase();
    let mut written = lower
        .match_indices(&text)
        .filter(|(at, _)| super::align::whole_word_at(&lower, *at, text.len()))
        .peekable();
    written.peek().is_some()
        && written.all(|(at, _)| {
            let mut before = lower[..at].chars().rev();
            matches!(before.next(), Some('\'' | '\u{2019}'))
                && before.next().is_some_and(char::is_alphabetic)
        })
}

/// Whether `text` holds every word of `part` (of two words or more): the
/// request itself, not a text it gives ("how many days are there until
/// Christmas" is not the message whose words `count` counts).
fn is_whole_request(part: &str, text: &str) -> bool {
    let words = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let (asked, held) = (words(part), words(text));
    asked.len() >= 2 && asked.iter().all(|w| held.contains(w))
}

/// How often `run` is written as whole words in `text`.
fn occurrences(text: &str, run: &str) -> usize {
    let lower = text.to_lowercase();
    let run = run.to_lowercase();
    lower
        .match_indices(&run)
        .filter(|(at, _)| super::align::whole_word_at(&lower, *at, run.len()))
        .count()
}

/// Whether `symbol` abbreviates `word` ("mi" for "miles"), case aside.
pub(super) fn abbreviates(symbol: &str, word: &str) -> bool {
    let (symbol, word) = (symbol.to_lowercase(), word.to_lowercase());
    let mut letters = word.chars();
    !symbol.is_empty()
        && symbol.len() < word.len()
        && symbol.chars().all(char::is_alphabetic)
        && symbol.chars().next() == word.chars().next()
        && symbol.chars().all(|c| letters.any(|w| w == c))
}

/// `description` without the examples it gives ("The country's name,
/// such as Kenya"): an example says what a parameter may take, not what
/// the tool does, so it accounts for no word of a request ("capitals:
/// kenya, peru" is not answered by `capital("peru")` because "Kenya" is
/// the description's example).
pub(super) fn without_examples(description: &str) -> String {
    const MARKS: [&str; 4] = ["such as ", "e.g. ", "for example", "for instance"];
    let mut kept = String::new();
    let mut rest = description;
    loop {
        let lower = rest.to_lowercase();
        let Some(at) = MARKS.iter().filter_map(|m| lower.find(m)).min() else {
            kept.push_str(rest);
            return kept;
        };
        kept.push_str(&rest[..at]);
        // The example runs to the end of its sentence or bracket.
        let end = rest[at..]
            .find(['.', ';', ')', '\n'])
            .map_or(rest.len(), |i| at + i);
        // "e.g." ends with a stop of its own.
        let end = if rest[at..].to_lowercase().starts_with("e.g.") {
            rest[at + 4..]
                .find(['.', ';', ')', '\n'])
                .map_or(rest.len(), |i| at + 4 + i)
        } else {
            end
        };
        rest = &rest[end..];
    }
}

/// The names and descriptions of a schema's properties, as words.
pub(super) fn described(schema: &Value) -> String {
    let mut words = String::new();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            words.push_str(&name.replace('_', " "));
            words.push(' ');
            if let Some(description) = property.get("description").and_then(Value::as_str) {
                words.push_str(description);
                words.push(' ');
            }
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::grounding::Grounding;
    use serde_json::json;

    fn convert() -> Offered {
        Offered {
            effects: crate::answers::steps::Effects::ReadOnly,
            output_schema: None,
            owner: "unit-convert".into(),
            name: "convert".into(),
            description: "Convert an amount from one unit to another.".into(),
            schema: json!({"type": "object", "properties": {
                "amount": {"type": "number", "description": "The amount to convert."},
                "from_unit": {"type": "string", "description": "The unit symbol of the amount, such as km."},
                "to_unit": {"type": "string", "description": "The unit symbol to convert to, such as mi."}}}),
        }
    }

    fn step(part: &str) -> Step {
        Step {
            grounding: Grounding {
                required: crate::llm::grounding::values_in(part)
                    .first()
                    .map(|(_, v)| v.clone()),
                values: Vec::new(),
                texts: vec![part.to_owned()],
            },
            part: part.to_owned(),
            index: 0,
            at: 0,
            tools: vec![0],
            refused: Vec::new(),
            lists: Vec::new(),
        }
    }

    #[test]
    fn a_text_goes_to_two_parameters_only_when_written_twice() {
        let mut corrected = step("How many meters is 6 ft?");
        // "m" offered for "meters" by the agent's refusal.
        corrected.grounding.values.push(Literal::Text("m".into()));
        let same = json!({"amount": 6, "from_unit": "m", "to_unit": "m"});
        let why = check_corrected(
            &convert(),
            &corrected,
            &same,
            &[("from_unit".into(), "meters".into())],
        )
        .unwrap_err();
        assert!(why.contains("twice"), "{why}");
        let twice = step("Convert 5 km to km, then 'a' and 'a'");
        assert!(
            check(
                &convert(),
                &twice,
                &json!({"amount": 5, "from_unit": "km", "to_unit": "km"})
            )
            .is_ok()
        );
    }

    /// The converter as its author wrote it: the units it takes listed in
    /// its description.
    fn listing_convert() -> Offered {
        let mut tool = convert();
        tool.description = "Convert an amount from one unit to another of the same kind. \
            Units are symbols: mm, cm, m, km, in, ft, yd, mi (length); g, kg, oz, lb (mass)."
            .into();
        tool
    }

    #[test]
    fn a_unit_the_tool_lists_is_held_by_an_argument_and_no_question_word_is_a_unit() {
        let fits =
            |part: &str, arguments: Value| check(&listing_convert(), &step(part), &arguments);
        // The unit written after the number is left out: the listing of
        // units in the description does not account for it.
        let ft = fits(
            "How many meters is 6 ft?",
            json!({"amount": 6, "from_unit": "m", "to_unit": "meters"}),
        )
        .unwrap_err();
        assert!(ft.contains("\"ft\""), "{ft}");
        // "in" after a number is a unit, though a common word.
        let inch = fits(
            "How many feet is 72 in?",
            json!({"amount": 72, "from_unit": "feet", "to_unit": "ft"}),
        )
        .unwrap_err();
        assert!(inch.contains("\"in\""), "{inch}");
        assert!(
            fits(
                "How many feet is 72 in?",
                json!({"amount": 72, "from_unit": "in", "to_unit": "feet"})
            )
            .is_ok()
        );
        let many = fits(
            "How many cm is 12 in?",
            json!({"amount": 12, "from_unit": "cm", "to_unit": "many"}),
        )
        .unwrap_err();
        assert!(many.contains("asks how much"), "{many}");
        assert!(
            fits(
                "Convert 10 km to mi",
                json!({"amount": 10, "from_unit": "km", "to_unit": "mi"})
            )
            .is_ok()
        );
        // The unit of a number another call takes is that call's.
        assert!(
            fits(
                "Convert 10 km to mi and 20 c to f.",
                json!({"amount": 10, "from_unit": "km", "to_unit": "mi"})
            )
            .is_ok()
        );
        // Refused, the part's own words fill the call, each unit bound to
        // what its description says it qualifies.
        let part = step("How many cm is 12 in?");
        let tool = listing_convert();
        let mut filled = fill(
            &tool,
            &part,
            &json!({"amount": 12, "from_unit": "cm", "to_unit": "many"}),
        )
        .unwrap();
        crate::answers::align::bind(&tool, &part.part, &mut filled);
        assert_eq!(
            filled,
            json!({"amount": 12, "from_unit": "in", "to_unit": "cm"})
        );
        assert!(check(&tool, &part, &filled).is_ok());
    }

    #[test]
    fn the_values_a_description_lists_are_its_listed_words() {
        assert_eq!(
            listed_words("A unit of a kind: length (mm, cm, m) or temperature (C, F, K)."),
            "mm, cm, m, C, F, K"
        );
        assert_eq!(listed_words("The capital city of a country."), "");
        assert_eq!(
            listed_words("Celsius, Fahrenheit or Kelvin"),
            "Celsius, Fahrenheit, Kelvin"
        );
        assert_eq!(
            listed_words(
                "cannot convert 'grams' to 'ounces': they are not known units of one kind \
                 (see the units tool)"
            ),
            ""
        );
    }

    #[test]
    fn a_clause_after_a_document_is_the_tools_or_left_undone() {
        let pick = Offered {
            effects: crate::answers::steps::Effects::ReadOnly,
            output_schema: None,
            owner: "jsontools".into(),
            name: "pick".into(),
            description: "The values at a path in a JSON document.".into(),
            schema: json!({"type": "object", "properties": {
                "document": {"description": "the document"}, "path": {"type": "string"}},
                "required": ["document", "path"]}),
        };
        let asked = |part: &str| {
            let mut step = step(part);
            step.grounding.texts = vec![crate::llm::grounding::without_documents(part)];
            check(
                &pick,
                &step,
                &json!({"document": {"user": {"name": "Ada"}}, "path": "user.name"}),
            )
        };
        let why = asked(r#"user.name of {"user": {"name": "Ada"}} in caps"#).unwrap_err();
        assert!(why.contains("in caps"), "{why}");
        assert!(asked(r#"What is user.name of {"user": {"name": "Ada"}}?"#).is_ok());
    }

    #[test]
    fn a_call_that_takes_nothing_answers_only_the_words_its_tool_says() {
        let list = Offered {
            effects: crate::answers::steps::Effects::Unknown,
            output_schema: None,
            owner: "notes".into(),
            name: "list".into(),
            description: "List the titles of all notes, in order.".into(),
            schema: json!({"type": "object", "properties": {}}),
        };
        let checked = |part: &str| check(&list, &step(part), &json!({}));
        let undone = checked("groceries note?").unwrap_err();
        assert!(undone.contains("\"groceries\""), "{undone}");
        assert!(checked("What does my note 'wifi' say?").is_err());
        for asked in [
            "List my notes.",
            "Which notes do I have?",
            "all note titles",
        ] {
            assert!(checked(asked).is_ok(), "{asked}");
        }
    }

    #[test]
    fn a_clause_added_after_the_values_is_the_tools_or_left_undone() {
        let reverse = Offered {
            effects: crate::answers::steps::Effects::Unknown,
            output_schema: None,
            owner: "wordsmith".into(),
            name: "reverse".into(),
            description: "Says the words of the message in reverse order.".into(),
            schema: json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
        };
        let call = json!({"message": "a b c"});
        let checked = |part: &str| check(&reverse, &step(part), &call);
        let undone = checked("What is 'a b c' reversed word by word, in capitals?").unwrap_err();
        assert!(undone.contains("in capitals"), "{undone}");
        assert!(checked("'a b c' words reversed, in caps").is_err());
        // Its own words, or nothing said: the call answers the part.
        assert!(checked("'a b c', words in reverse order").is_ok());
        assert!(checked("Reverse the words of 'a b c', please.").is_ok());
    }

    #[test]
    fn each_list_the_part_writes_fills_the_parameter_its_word_names_or_the_next() {
        let lists = |part: &str| -> Step {
            let tools = [regress()];
            super::super::steps::Steps::new(part).next(&tools).unwrap()
        };
        let regress = regress();
        let model = json!({"x": [0, 1, 2], "y": [4, 7, 10, 0, 1, 2]});
        // "y = …" names y, whichever is written first.
        let step = lists("What is the slope of the regression of y = 4, 7, 10 on x = 0, 1, 2?");
        assert_eq!(
            fill_lists(&regress, &step, &model),
            Some(json!({"x": [0, 1, 2], "y": [4, 7, 10]}))
        );
        // Lists no word names go in the order written.
        let step = lists("Correlate 1, 2, 3 with 6, 4, 2.");
        assert_eq!(
            fill_lists(&regress, &step, &json!({"x": [1, 2, 3, 6, 4, 2], "y": [1]})),
            Some(json!({"x": [1, 2, 3], "y": [6, 4, 2]}))
        );
        // A call that takes them already is left as it is; a part with
        // fewer lists than the tool takes fills nothing.
        let written = json!({"x": [1, 2, 3], "y": [6, 4, 2]});
        assert_eq!(fill_lists(&regress, &step, &written), None);
        // Each list is the written one it holds most of: 2 of [6, 4, 2]
        // is no 2 of [1, 2, 3] joined to it.
        assert_eq!(check(&regress, &step, &written), Ok(()));
        let mut one = step;
        one.lists.truncate(1);
        assert_eq!(fill_lists(&regress, &one, &model), None);
    }

    fn regress() -> Offered {
        Offered {
            name: "regress".into(),
            description: "Fits a straight line to points by least squares.".into(),
            schema: json!({"type": "object", "properties": {
                "x": {"type": "array", "items": {"type": "number"}},
                "y": {"type": "array", "items": {"type": "number"}}},
                "required": ["x", "y"]}),
            ..convert()
        }
    }

    #[test]
    fn a_written_list_is_taken_whole_and_alone() {
        let mut listed = step("What is three times the average of 4, 8 and 12?");
        listed.lists = vec![super::super::steps::WrittenList {
            values: vec![4.0, 8.0, 12.0],
            label: None,
        }];
        let calculator = Offered {
            name: "multiply".into(),
            description: "Multiply two numbers.".into(),
            schema: json!({"type": "object", "properties": {
                "a": {"type": "number"}, "b": {"type": "number"}}}),
            ..convert()
        };
        let split = check(&calculator, &listed, &json!({"a": 12, "b": 3})).unwrap_err();
        assert!(split.contains("12 alone"), "{split}");
        let stats = Offered {
            name: "summarize".into(),
            description: "The mean, median and spread of some numbers.".into(),
            schema: json!({"type": "object", "properties": {
                "values": {"type": "array", "items": {"type": "number"}}}}),
            ..convert()
        };
        let joined = check(&stats, &listed, &json!({"values": [4, 8, 12, 3]})).unwrap_err();
        assert!(joined.contains("joins 3"), "{joined}");
        assert!(check(&stats, &listed, &json!({"values": [4, 8, 12]})).is_ok());
    }

    #[test]
    fn the_parts_own_words_fill_the_text_parameters_in_order() {
        let filled = |part: &str, arguments: Value| fill(&convert(), &step(part), &arguments);
        assert_eq!(
            filled(
                "3 kg -> lb",
                json!({"amount": 3, "from_unit": "lb", "to_unit": "lb"})
            ),
            Some(json!({"amount": 3, "from_unit": "kg", "to_unit": "lb"}))
        );
        assert_eq!(
            filled(
                "12 in to cm",
                json!({"amount": 12, "from_unit": "cm", "to_unit": "cm"})
            ),
            Some(json!({"amount": 12, "from_unit": "in", "to_unit": "cm"}))
        );
        assert_eq!(
            filled(
                "Convert 0 c to kelvin.",
                json!({"amount": 0, "from_unit": "c", "to_unit": "c"})
            ),
            Some(json!({"amount": 0, "from_unit": "c", "to_unit": "kelvin"}))
        );
        // Single letters are symbols, and so are the words the tool's
        // description lists as the values it takes.
        assert_eq!(
            filled(
                "0 c in k",
                json!({"amount": 0, "from_unit": "c", "to_unit": "c"})
            ),
            Some(json!({"amount": 0, "from_unit": "c", "to_unit": "k"}))
        );
        let mut listing = convert();
        listing.description =
            "Converts a value between units of one kind: length (mm, cm, m, in, ft).".into();
        assert_eq!(
            fill(
                &listing,
                &step("12 in to cm"),
                &json!({"amount": 12, "from_unit": "cm", "to_unit": "cm"})
            ),
            Some(json!({"amount": 12, "from_unit": "in", "to_unit": "cm"}))
        );
        // A part that goes on to a later call's values: the words before
        // its next number are this call's.
        assert_eq!(
            filled(
                "10 km -> mi, 20 c -> f",
                json!({"amount": 10, "from_unit": "mi", "to_unit": "mi"})
            ),
            Some(json!({"amount": 10, "from_unit": "km", "to_unit": "mi"}))
        );
        // Three words for two parameters: the node does not guess.
        assert_eq!(
            filled(
                "What is 100 degrees Fahrenheit in Celsius?",
                json!({"amount": 100, "from_unit": "c", "to_unit": "c"})
            ),
            None
        );
        // A part that starts with the name it gives has no verb first.
        let mut get = convert();
        get.name = "get".into();
        get.description = "Read the note with a title.".into();
        get.schema = json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]});
        assert_eq!(
            fill(
                &get,
                &step("groceries note?"),
                &json!({"title": "groceries note?"})
            ),
            Some(json!({"title": "groceries"}))
        );
        assert_eq!(
            fill(
                &get,
                &step("Show the groceries note"),
                &json!({"title": "note"})
            ),
            Some(json!({"title": "groceries"}))
        );
    }

    #[test]
    fn the_end_of_a_contraction_is_no_value() {
        let booking = Offered {
            effects: crate::answers::steps::Effects::Unknown,
            output_schema: None,
            owner: String::new(),
            name: "book_table".into(),
            description: "Book a restaurant table for a number of guests.".into(),
            schema: json!({"type": "object", "properties": {
                "restaurant": {"type": "string"}, "guests": {"type": "integer"}},
                "required": ["restaurant", "guests"]}),
        };
        let why = check(
            &booking,
            &step("what's 15% of 80"),
            &json!({"restaurant": "s", "guests": 15}),
        )
        .unwrap_err();
        assert!(why.contains("what's"), "{why}");
        assert!(contraction_end("don\u{2019}t book it", "t"));
        // A letter the request writes on its own is one.
        assert!(!contraction_end("what's 20 c in f", "c"));
        assert!(!contraction_end("it's size s, isn't it", "s"));
        assert!(
            check(
                &convert(),
                &step("what's 20 c in f"),
                &json!({"amount": 20, "from_unit": "c", "to_unit": "f"})
            )
            .is_ok()
        );
    }

    #[test]
    fn a_call_fits_when_each_word_is_the_tools_or_an_arguments() {
        let fits = |part: &str, arguments: Value| check(&convert(), &step(part), &arguments);
        assert!(
            fits(
                "Convert 10 km to miles.",
                json!({"amount": 10, "from_unit": "km", "to_unit": "miles"})
            )
            .is_ok()
        );
        assert!(
            fits(
                "How many miles is 10 km?",
                json!({"amount": 10, "from_unit": "km", "to_unit": "mi"})
            )
            .is_ok()
        );
        assert!(
            fits(
                "What is 100 degrees Fahrenheit in Celsius?",
                json!({"amount": 100, "from_unit": "f", "to_unit": "c"})
            )
            .is_ok()
        );
        let nautical = step("How many kilometres are 2 nautical miles?");
        let corrected = json!({"amount": 2, "from_unit": "mi", "to_unit": "km"});
        assert!(check(&convert(), &nautical, &corrected).is_ok());
        let strict = check_corrected(
            &convert(),
            &nautical,
            &corrected,
            &[("from_unit".into(), "miles".into())],
        )
        .unwrap_err();
        assert!(strict.contains("\"nautical\""), "{strict}");
        // A name of two words the model's own argument holds still is one.
        let kelvin = step("What is 0 degrees Celsius in Kelvin?");
        let corrected = json!({"amount": 0, "from_unit": "c", "to_unit": "k"});
        assert!(
            check_corrected(
                &convert(),
                &kelvin,
                &corrected,
                &[("to_unit".into(), "Kelvin".into())]
            )
            .is_ok()
        );
        let twice = fits(
            "Convert 5 parsecs to km.",
            json!({"amount": 5, "from_unit": "km", "to_unit": "km"}),
        )
        .unwrap_err();
        assert!(twice.contains("both"), "{twice}");
        let left_out = fits(
            "Convert 5 parsecs to km.",
            json!({"amount": 5, "from_unit": "m", "to_unit": "km"}),
        )
        .unwrap_err();
        assert!(left_out.contains("\"parsecs\""), "{left_out}");
        let whole = fits(
            "How many days are there until Christmas?",
            json!({"amount": 1, "from_unit": "How many days are there until Christmas?", "to_unit": "d"}),
        )
        .unwrap_err();
        assert!(whole.contains("whole request"), "{whole}");
        let mut capital = convert();
        capital.name = "capital".into();
        capital.description = "The capital city of a country.".into();
        capital.schema = json!({"type": "object", "properties": {"country_name":
            {"type": "string", "description": "The country's English name, such as Kenya."}}});
        let example = check(
            &capital,
            &step("capitals: kenya, peru"),
            &json!({"country_name": "peru"}),
        )
        .unwrap_err();
        assert!(example.contains("\"kenya\""), "{example}");
        // A word after the tool's and before a preposition leading to the
        // argument says how the tool's thing stands to it; one before any
        // word of the tool's asks for something else.
        let mut languages = capital.clone();
        languages.name = "languages".into();
        languages.description = "The official languages of a country.".into();
        for asked in [
            "What language is spoken in Brazil?",
            "What languages are spoken officially in Kenya?",
            "What language do they speak in the Netherlands?",
        ] {
            let country = asked.trim_end_matches('?').rsplit(' ').next().unwrap();
            let fits = check(&languages, &step(asked), &json!({"country_name": country}));
            assert!(fits.is_ok(), "{asked}: {fits:?}");
        }
        for (asked, country) in [
            ("Who is the president of France?", "France"),
            ("What is the population in Kenya?", "Kenya"),
            ("capital of kenya and peru", "peru"),
        ] {
            let left_out = check(&capital, &step(asked), &json!({"country_name": country}));
            assert!(left_out.is_err(), "{asked}");
        }
        assert_eq!(
            without_examples("A unit, such as km. Or e.g. mi; the rest"),
            "A unit, . Or ; the rest"
        );
        let mut regress = convert();
        regress.schema = json!({"type": "object", "properties": {
            "x": {"type": "array", "items": {"type": "number"}},
            "y": {"type": "array", "items": {"type": "number"}}}});
        let mut part = step("0.1 + 0.2 in floating point");
        part.grounding.values = vec![Literal::Number(0.2)];
        let twice = check(&regress, &part, &json!({"x": [0.1, 0.2], "y": [0.1, 0.2]})).unwrap_err();
        assert!(twice.contains("0.1 2 times"), "{twice}");
        let number = fits(
            "How many pounds are 16 ounces?",
            json!({"amount": 16, "from_unit": "16 ounces", "to_unit": "pounds"}),
        )
        .unwrap_err();
        assert!(number.contains("its number"), "{number}");
    }
}
