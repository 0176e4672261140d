//! The calls a request needs, one step at a time, steered by its values.
//!
//! A person who asks "add 1200 and 345, then count the words in 'the quick
//! brown fox'" gives the values the calls take (1200, 345, the quoted
//! text), in the order the work goes. So each step takes the earliest
//! value not used yet (and the values written right after it, or the
//! results of earlier steps), and the request is served when every value
//! has been used, unless its words still name a tool no step has called
//! ("…then give its SHA-256": the earlier result is that step's value).
//!
//! The model makes the choices that need language: it says in a few words
//! how to do the step, and the tool its words (or the person's) name is
//! called; when they name none, it chooses among the tools itself. The
//! values are held to the step's grounding while the call is written.

use crate::agent::tool::ToolOutput;
use crate::llm::grounding::{Grounding, Literal, values_in};
use crate::store::terms::terms;
use serde_json::Value;
use std::ops::Range;

/// Steps one request takes at most.
pub const MAX_STEPS: usize = 6;
/// Values written after a step's first one that the step may also take,
/// at most (a tool of three values takes the next two).
const NEIGHBOURS: usize = 2;
/// A result's values offered to later steps, at most.
const RESULT_VALUES: usize = 8;

/// A tool a step may call, as the steps see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Offered {
    /// Who owns it (an agent's name), for the record.
    pub owner: String,
    pub name: String,
    pub description: String,
    pub schema: Value,
}

impl Offered {
    /// The tool `tool` of the agent `owner`.
    pub fn of(owner: &str, tool: &crate::agent::tool::ToolSpec) -> Offered {
        Offered {
            owner: owner.to_owned(),
            name: tool.name.clone(),
            description: tool.description.clone(),
            schema: tool.input_schema.clone(),
        }
    }

    /// The terms of its name and description.
    fn terms(&self) -> Vec<String> {
        terms(&format!("{} {}", self.name, self.description))
            .filter(|t| !is_number(t))
            .collect()
    }
}

/// A value the person wrote, and whether a call has used it.
#[derive(Debug, Clone)]
struct Given {
    range: Range<usize>,
    value: Literal,
    used: bool,
}

/// A call a step made and what it returned.
#[derive(Debug, Clone)]
pub struct Made {
    /// Index into the offered tools.
    pub tool: usize,
    pub arguments: Value,
    pub output: ToolOutput,
    /// The values of the result later steps may take, and whether one has.
    values: Vec<Literal>,
    /// The result's fields the request names ("count the words": `words`).
    named: Vec<String>,
    used: bool,
}

impl Made {
    /// The names of the result's fields the request asked about.
    pub fn named_fields(&self) -> &[String] {
        &self.named
    }

    /// The values of the result a person asked about: those under keys
    /// the request names ("count the words" → `words`), else all of them.
    pub fn values(&self) -> &[Literal] {
        &self.values
    }
}

/// What the next step is for.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The values its call takes.
    pub grounding: Grounding,
    /// The part of the request it serves, in the person's words.
    pub part: String,
    /// Where in `part` its first value is written (the words nearest it
    /// say most about what to do with it).
    pub at: usize,
    /// The tools that may make it (indices into the offered tools).
    pub tools: Vec<usize>,
}

/// The steps of one request.
#[derive(Debug, Clone)]
pub struct Steps {
    request: String,
    given: Vec<Given>,
    made: Vec<Made>,
    /// The request's words that name what to do (not its values).
    words: Vec<String>,
    /// Results of earlier requests of the same conversation, latest
    /// first: what "it" in "now double it" is.
    earlier: Vec<Literal>,
}

impl Steps {
    pub fn new(request: &str) -> Steps {
        let given: Vec<Given> = values_in(request)
            .into_iter()
            .map(|(range, value)| Given {
                range,
                value,
                used: false,
            })
            .collect();
        let mut value_words: Vec<String> = Vec::new();
        for g in &given {
            value_words.extend(terms(&request[g.range.clone()]));
        }
        let words = terms(request)
            .filter(|t| !is_number(t) && !value_words.contains(t))
            .collect();
        Steps {
            request: request.to_owned(),
            given,
            made: Vec::new(),
            words,
            earlier: Vec::new(),
        }
    }

    /// The steps of `request`, which follows requests whose calls
    /// returned `earlier` (latest first): a step whose call needs more
    /// values than the request gives takes them from these.
    pub fn after(request: &str, earlier: Vec<Literal>) -> Steps {
        let mut steps = Steps::new(request);
        steps.earlier = earlier;
        steps.earlier.truncate(RESULT_VALUES);
        steps
    }

    /// The values of this request's results, latest first, then those it
    /// was given from earlier requests: what a request after it may take.
    pub fn results_for_later(&self) -> Vec<Literal> {
        let mut values: Vec<Literal> = self
            .made
            .iter()
            .rev()
            .flat_map(|m| m.values.iter().cloned())
            .collect();
        values.extend(self.earlier.iter().cloned());
        values.truncate(RESULT_VALUES);
        values
    }

    pub fn request(&self) -> &str {
        &self.request
    }

    /// The calls made so far.
    pub fn made(&self) -> &[Made] {
        &self.made
    }

    /// Whether the request quotes text: then a string is one of its
    /// quotes, not any run of its words.
    fn quotes(&self) -> bool {
        self.given
            .iter()
            .any(|g| matches!(g.value, Literal::Text(_)))
    }

    /// The next step, given the tools on offer; `None` when the request is
    /// served (or no tool can take what is left).
    pub fn next(&self, tools: &[Offered]) -> Option<Step> {
        if self.made.len() >= MAX_STEPS {
            return None;
        }
        let unused_results: Vec<Literal> = self
            .made
            .iter()
            .rev()
            .filter(|m| !m.used)
            .flat_map(|m| m.values.iter().take(RESULT_VALUES).cloned())
            .chain(self.earlier.iter().cloned())
            .collect();
        let texts = if self.quotes() {
            Vec::new()
        } else {
            vec![self.request.clone()]
        };
        let first = self.given.iter().position(|g| !g.used);
        let (grounding, (part, at), candidates) = match first {
            Some(first) => {
                // As many values as the largest call takes, from the first.
                let slots = tools
                    .iter()
                    .map(|t| crate::llm::grounding::slot_kinds(&t.schema).len())
                    .max()
                    .unwrap_or(1);
                let neighbours: Vec<&Given> = self.given[first + 1..]
                    .iter()
                    .filter(|g| !g.used)
                    .take(slots.saturating_sub(1).min(NEIGHBOURS))
                    .collect();
                let mut values: Vec<Literal> = neighbours.iter().map(|g| g.value.clone()).collect();
                // Earlier results fill what the person's values cannot.
                if neighbours.len() + 1 < slots {
                    values.extend(unused_results);
                }
                let grounding = Grounding {
                    required: Some(self.given[first].value.clone()),
                    values,
                    texts,
                };
                (grounding, self.part(first), (0..tools.len()).collect())
            }
            None => {
                // Every value is used: go on only where the request's words
                // name a tool no step has called.
                let named = self.named_by_words(tools);
                if named.is_empty() {
                    return None;
                }
                let mut values = unused_results.into_iter();
                let grounding = Grounding {
                    required: values.next(),
                    values: values.collect(),
                    texts,
                };
                let start = self.given.last().map_or(0, |g| g.range.end);
                (grounding, (self.request[start..].to_owned(), 0), named)
            }
        };
        let tools: Vec<usize> = candidates
            .into_iter()
            .filter(|&i| crate::llm::grounding::can_fill(&tools[i].schema, &grounding))
            .collect();
        if tools.is_empty() {
            return None;
        }
        Some(Step {
            grounding,
            part,
            at,
            tools,
        })
    }

    /// The part of the request whose values no call has used yet, if any:
    /// what is left to do when no tool on offer can take them.
    pub fn unused_part(&self) -> Option<String> {
        let first = self.given.iter().position(|g| !g.used)?;
        Some(self.part(first).0)
    }

    /// The part of the request a step that starts at value `first` serves
    /// (from the end of the value used before it to the end of the values
    /// of its kind written right after it, or to the end of the request
    /// when no value is left after those), and where the value is in it.
    fn part(&self, first: usize) -> (String, usize) {
        let start = self.given[..first]
            .iter()
            .rev()
            .find(|g| g.used)
            .map_or(0, |g| g.range.end);
        let kind = std::mem::discriminant(&self.given[first].value);
        let mut last = first;
        for (index, g) in self.given.iter().enumerate().skip(first + 1) {
            if g.used {
                continue;
            }
            if std::mem::discriminant(&g.value) != kind {
                break;
            }
            last = index;
        }
        let more = self.given[last + 1..].iter().any(|g| !g.used);
        let end = if more {
            self.given[last].range.end
        } else {
            self.request.len()
        };
        let raw = &self.request[start..end];
        let part = raw.trim_start_matches(|c: char| {
            c.is_whitespace() || (c.is_ascii_punctuation() && !"'\"`".contains(c))
        });
        let skipped = raw.len() - part.len();
        let at = self.given[first]
            .range
            .start
            .saturating_sub(start + skipped);
        (part.to_owned(), at)
    }

    /// The uncalled tools whose name or description shares a word with the
    /// request's words that no called tool explains.
    fn named_by_words(&self, tools: &[Offered]) -> Vec<usize> {
        let called: Vec<usize> = self.made.iter().map(|m| m.tool).collect();
        let explained: Vec<String> = called
            .iter()
            .filter_map(|&i| tools.get(i))
            .flat_map(Offered::terms)
            .collect();
        let open: Vec<&String> = self
            .words
            .iter()
            .filter(|w| !explained.iter().any(|e| same_word(w, e)))
            .collect();
        (0..tools.len())
            .filter(|i| !called.contains(i))
            .filter(|&i| {
                let names = tools[i].terms();
                open.iter().any(|w| names.iter().any(|n| same_word(w, n)))
            })
            .collect()
    }

    /// The tools among `step.tools` that words name: the person's words
    /// of the step's part, nearest its value first, then `thought` (the
    /// model's account of how to do it). Each word that names some of the
    /// remaining tools but not all narrows the choice; a word that names
    /// only tools earlier steps called says what those did, and is passed
    /// over unless no other word names a tool. The tools left, which may
    /// be all.
    pub fn named_by(&self, tools: &[Offered], step: &Step, thought: &str) -> Vec<usize> {
        let called: Vec<usize> = self.made.iter().map(|m| m.tool).collect();
        let mut words: Vec<(usize, String)> = Vec::new();
        let mut offset: usize = 0;
        for piece in step.part.split_inclusive(|c: char| !c.is_alphanumeric()) {
            for term in terms(piece) {
                words.push((offset.abs_diff(step.at), term));
            }
            offset += piece.len();
        }
        words.sort_by_key(|(distance, _)| *distance);
        let words: Vec<String> = words
            .into_iter()
            .map(|(_, w)| w)
            .chain(terms(thought))
            .filter(|w| !is_number(w))
            .collect();
        // First without the words that name only called tools ("multiply
        // the count": `count` says what word_count did); if nothing else
        // names a tool, with them ("then add 30 and 40" adds again).
        for pass_over_called in [true, false] {
            let mut left = step.tools.clone();
            for word in &words {
                let naming: Vec<usize> = left
                    .iter()
                    .copied()
                    .filter(|&i| tools[i].terms().iter().any(|t| same_word(word, t)))
                    .collect();
                if naming.is_empty() || naming.len() == left.len() {
                    continue;
                }
                if pass_over_called && naming.iter().all(|i| called.contains(i)) {
                    continue;
                }
                left = naming;
                if left.len() == 1 {
                    break;
                }
            }
            if left.len() < step.tools.len() || !pass_over_called {
                return left;
            }
        }
        step.tools.clone()
    }

    /// Records a call the step made: the values it took are used, and its
    /// result's values are offered to later steps.
    pub fn record(&mut self, step: &Step, tool: usize, arguments: Value, output: ToolOutput) {
        let mut taken: Vec<&Value> = Vec::new();
        leaves(&arguments, &mut taken);
        let mut progressed = false;
        for value in taken {
            if let Some(given) = self
                .given
                .iter_mut()
                .find(|g| !g.used && g.value.matches(value))
            {
                given.used = true;
                progressed = true;
            } else if let Some(made) = self
                .made
                .iter_mut()
                .find(|m| !m.used && m.values.iter().any(|v| v.matches(value)))
            {
                made.used = true;
            } else if let Some(at) = self.earlier.iter().position(|v| v.matches(value)) {
                self.earlier.remove(at);
            }
        }
        // A call that took none of the values it was to start from (a
        // model not held to the grounding) still moves the steps on.
        if !progressed
            && let Some(Literal::Text(_) | Literal::Number(_)) = &step.grounding.required
            && let Some(given) = self
                .given
                .iter_mut()
                .find(|g| !g.used && Some(&g.value) == step.grounding.required.as_ref())
        {
            given.used = true;
        }
        let (values, named) = if output.is_error {
            (Vec::new(), Vec::new())
        } else {
            (
                result_values(&output, &self.words),
                named_fields(&output, &self.words),
            )
        };
        self.made.push(Made {
            tool,
            arguments,
            output,
            values,
            named,
            used: false,
        });
    }

    /// Whether a call of `tool` with `arguments` was made already.
    pub fn repeats(&self, tool: usize, arguments: &Value) -> bool {
        self.made
            .iter()
            .any(|m| m.tool == tool && &m.arguments == arguments)
    }
}

fn leaves<'v>(value: &'v Value, out: &mut Vec<&'v Value>) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| leaves(v, out)),
        Value::Object(map) => map.values().for_each(|v| leaves(v, out)),
        other => out.push(other),
    }
}

/// The values of a tool's result: the fields of its structured content
/// (those whose names the request's `words` name first, or only them when
/// some do), else its text (a number when it is one).
pub fn result_values(output: &ToolOutput, words: &[String]) -> Vec<Literal> {
    if let Some(structured) = &output.structured_content {
        let value = structured.to_value();
        let mut named = Vec::new();
        let mut all = Vec::new();
        fields(&value, None, &mut |key, literal| {
            let is_named =
                key.is_some_and(|k| terms(k).any(|t| words.iter().any(|w| same_word(w, &t))));
            if is_named {
                named.push(literal.clone());
            }
            all.push(literal);
        });
        let mut values = if named.is_empty() { all } else { named };
        values.truncate(RESULT_VALUES);
        if !values.is_empty() {
            return values;
        }
    }
    let text = output.text();
    let text = text.trim();
    if text.is_empty() {
        return Vec::new();
    }
    match text.parse::<f64>() {
        Ok(n) if n.is_finite() => vec![Literal::Number(n)],
        _ if text.len() <= crate::llm::grounding::MAX_TEXT_VALUE => {
            vec![Literal::Text(text.to_owned())]
        }
        _ => Vec::new(),
    }
}

/// The values of a result as its text reads (a number, the fields of a
/// JSON object, or the text): a result kept or passed on as text.
pub fn values_of_text(text: &str) -> Vec<Literal> {
    let output = ToolOutput {
        content: vec![crate::agent::tool::Content::Text {
            text: text.to_owned(),
        }],
        structured_content: crate::agent::tool::StructuredContent::from_text(text.to_owned())
            .ok()
            .filter(|s| s.to_value().is_object()),
        is_error: false,
    };
    result_values(&output, &[])
}

/// The top-level fields of a structured result that the request's
/// `words` name.
fn named_fields(output: &ToolOutput, words: &[String]) -> Vec<String> {
    let Some(structured) = &output.structured_content else {
        return Vec::new();
    };
    match structured.to_value() {
        Value::Object(map) => map
            .keys()
            .filter(|k| terms(k).any(|t| words.iter().any(|w| same_word(w, &t))))
            .cloned()
            .collect(),
        _ => Vec::new(),
    }
}

/// The leaf values of `value`, each with the name of the field it is in.
fn fields(value: &Value, key: Option<&str>, f: &mut impl FnMut(Option<&str>, Literal)) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                fields(v, Some(k), f);
            }
        }
        Value::Array(items) => items
            .iter()
            .take(RESULT_VALUES)
            .for_each(|v| fields(v, key, f)),
        Value::Number(n) => {
            if let Some(n) = n.as_f64() {
                f(key, Literal::Number(n));
            }
        }
        Value::String(s) if !s.is_empty() && s.len() <= crate::llm::grounding::MAX_TEXT_VALUE => {
            f(key, Literal::Text(s.clone()))
        }
        _ => {}
    }
}

fn is_number(term: &str) -> bool {
    term.bytes().all(|b| b.is_ascii_digit())
}

/// Whether two terms are forms of one word: equal, one the start of the
/// other (four letters at least), or sharing their first five letters
/// ("multiplication" and "multiply" stem apart).
pub fn same_word(a: &str, b: &str) -> bool {
    let common = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    a == b || common >= 5 || (common >= 4 && common == a.len().min(b.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tool::{Content, StructuredContent};
    use serde_json::json;

    fn tool(owner: &str, name: &str, description: &str, schema: Value) -> Offered {
        Offered {
            owner: owner.into(),
            name: name.into(),
            description: description.into(),
            schema,
        }
    }

    fn tools() -> Vec<Offered> {
        let two = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]});
        let text = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
        vec![
            tool("calculator", "add", "Add two numbers.", two.clone()),
            tool("calculator", "multiply", "Multiply two numbers.", two),
            tool(
                "text",
                "word_count",
                "Count the words, lines, characters and bytes of a text.",
                text.clone(),
            ),
            tool(
                "text",
                "upper",
                "Convert a text to upper case.",
                text.clone(),
            ),
            tool(
                "text",
                "sha256",
                "The SHA-256 digest of a text's UTF-8 bytes.",
                text,
            ),
        ]
    }

    fn number(n: f64) -> ToolOutput {
        ToolOutput {
            content: vec![Content::Text {
                text: format!("{n:?}"),
            }],
            structured_content: StructuredContent::from_value(&json!({"result": n})).ok(),
            is_error: false,
        }
    }

    fn text(t: &str) -> ToolOutput {
        ToolOutput {
            content: vec![Content::Text { text: t.into() }],
            structured_content: None,
            is_error: false,
        }
    }

    #[test]
    fn each_step_starts_from_the_earliest_unused_value() {
        let tools = tools();
        let mut steps =
            Steps::new("Add 1200 and 345, then count the words in 'the quick brown fox'.");
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.grounding.required, Some(Literal::Number(1200.0)));
        assert_eq!(step.part, "Add 1200 and 345");
        // Only the number tools can start from a number.
        assert_eq!(step.tools, [0, 1]);
        assert_eq!(steps.named_by(&tools, &step, ""), [0]);
        steps.record(&step, 0, json!({"a": 1200, "b": 345}), number(1545.0));

        let step = steps.next(&tools).unwrap();
        assert_eq!(
            step.grounding.required,
            Some(Literal::Text("the quick brown fox".into()))
        );
        assert_eq!(step.part, "then count the words in 'the quick brown fox'.");
        assert_eq!(&step.part[step.at..step.at + 5], "'the ");
        assert_eq!(steps.named_by(&tools, &step, ""), [2]);
        let counts = ToolOutput {
            structured_content: StructuredContent::from_value(
                &json!({"words": 4, "lines": 1, "characters": 19, "bytes": 19}),
            )
            .ok(),
            ..text("")
        };
        steps.record(&step, 2, json!({"text": "the quick brown fox"}), counts);
        // The result the person asked about is the word count.
        assert_eq!(steps.made()[1].values(), [Literal::Number(4.0)]);
        assert!(steps.next(&tools).is_none());
    }

    #[test]
    fn a_later_step_takes_an_earlier_result() {
        let tools = tools();
        let mut steps = Steps::new("Add 2 and 3, then multiply the result by 4.");
        let step = steps.next(&tools).unwrap();
        steps.record(&step, 0, json!({"a": 2, "b": 3}), number(5.0));
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.grounding.required, Some(Literal::Number(4.0)));
        assert_eq!(step.grounding.values, [Literal::Number(5.0)]);
        // The model's words choose: "multiply" names one tool.
        assert_eq!(
            steps.named_by(&tools, &step, "To do this, multiply 5 by 4."),
            [1]
        );
    }

    #[test]
    fn words_that_name_an_uncalled_tool_make_a_step_of_the_last_result() {
        let tools = tools();
        let mut steps = Steps::new("Convert 'abc' to upper case, then give its SHA-256.");
        let step = steps.next(&tools).unwrap();
        assert_eq!(steps.named_by(&tools, &step, ""), [3]);
        steps.record(&step, 3, json!({"text": "abc"}), text("ABC"));
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.tools, [4]);
        assert_eq!(step.grounding.required, Some(Literal::Text("ABC".into())));
        steps.record(&step, 4, json!({"text": "ABC"}), text("b5d4"));
        assert!(steps.next(&tools).is_none());
    }

    #[test]
    fn the_words_nearest_a_value_say_what_to_do_with_it() {
        let tools = tools();
        let mut steps = Steps::new("Convert 'hello' to upper case and hash 'abc' with sha256.");
        let step = steps.next(&tools).unwrap();
        steps.record(&step, 3, json!({"text": "hello"}), text("HELLO"));
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.part, "to upper case and hash 'abc' with sha256.");
        assert_eq!(
            steps.named_by(&tools, &step, "To convert it to upper case"),
            [4]
        );
        // Two numbers at most: the next value is the one right after.
        let steps = Steps::new("Multiply 12 by 11 and subtract 8 from 50.");
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.grounding.values, [Literal::Number(11.0)]);
        let mut steps = steps;
        steps.record(&step, 1, json!({"a": 12, "b": 11}), number(132.0));
        // The person's own values fill the next call: no earlier result.
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.grounding.required, Some(Literal::Number(8.0)));
        assert_eq!(step.grounding.values, [Literal::Number(50.0)]);
    }

    #[test]
    fn a_request_after_others_takes_what_they_found() {
        let tools = tools();
        let steps = Steps::after("Now double it.", vec![Literal::Number(5.0)]);
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.grounding.required, Some(Literal::Number(2.0)));
        assert_eq!(step.grounding.values, [Literal::Number(5.0)]);
    }

    #[test]
    fn a_request_with_nothing_left_ends() {
        let tools = tools();
        let mut steps = Steps::new("What is 23 plus 19?");
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.part, "What is 23 plus 19?");
        steps.record(&step, 0, json!({"a": 23, "b": 19}), number(42.0));
        assert!(steps.next(&tools).is_none());
        assert!(steps.repeats(0, &json!({"a": 23, "b": 19})));
    }

    #[test]
    fn words_are_the_same_across_their_forms() {
        assert!(same_word("multipli", "multipl"));
        assert!(same_word("sha", "sha"));
        assert!(!same_word("sha", "sha256"));
        assert!(same_word("lowercas", "lower"));
        assert!(!same_word("add", "address"));
        assert!(!same_word("to", "tool"));
    }
}
