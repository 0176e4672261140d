//! The answer a person reads: in the model's words where those state what
//! the calls found, in the node's own words where they do not.
//!
//! The model writes the answer held to the numbers and texts the person and
//! the tools gave (an embedded model cannot write another number; any
//! other model's answer is checked for one). An answer is shown only when
//! it states each call's result and what the call was given; otherwise
//! the node states the calls and their results itself, one line a call.

use super::Ask;
use super::steps::{Made, Offered, Steps};
use crate::llm::grounding::{Grounding, Literal, number_literal, numbers_in, values_in};
use crate::llm::{ChatRequest, DeltaSink, Message};
use crate::text::excerpt;
use serde_json::Value;

/// Tokens the model's answer may take.
const ANSWER_TOKENS: u32 = 96;
/// A result as an answer or a prompt shows it, at most.
const RESULT_CHARS: usize = 300;

/// An answer to a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub text: String,
    /// Whether the model worded it (else the node stated the results).
    pub by_model: bool,
}

/// The answer to the request of `steps`: the model's, when it states every
/// call's result and what the call was given, and no number the request
/// and the results did not give; else the node's statement of the calls.
/// `note` is said after the results (why the work stopped, when it stopped
/// early).
pub async fn answer<A: Ask>(
    ask: &A,
    steps: &Steps,
    tools: &[Offered],
    note: Option<&str>,
    sink: DeltaSink,
) -> Result<Answer, A::Error> {
    let made: Vec<&Made> = steps.made().iter().filter(|m| m.succeeded()).collect();
    if made.is_empty() {
        // Nothing was found: the node says what was tried and what the
        // agents said; the model has nothing to word.
        let text = statement(steps, tools, note);
        return Ok(Answer {
            text: if text.is_empty() {
                "No tool was called.".to_owned()
            } else {
                text
            },
            by_model: false,
        });
    }
    let mut results = String::new();
    for call in made {
        results.push_str(&format!(
            "- {} = {}\n",
            call_label(&tools[call.tool], &call.arguments),
            result_text(call)
        ));
    }
    let request = ChatRequest {
        messages: vec![
            Message::system(
                "Answer the person's request in one or two sentences, from the results of the \
                 tools: say what each tool was given, and its result exactly as the tool gave it.",
            ),
            Message::user(format!("Request: {}\nResults:\n{results}", steps.request())),
        ],
        grounding: Some(grounding(steps)),
        temperature: Some(0.0),
        ..Default::default()
    };
    let completion = ask.ask(request, ANSWER_TOKENS, sink).await?;
    let worded = completion.content.trim();
    let checked = check(worded, steps).and_then(|()| {
        if completion.stop_reason == crate::llm::StopReason::MaxTokens {
            Err("the answer was cut off".into())
        } else {
            Ok(())
        }
    });
    Ok(match checked {
        Ok(()) => Answer {
            text: match note {
                Some(note) => format!("{worded}\n\n{note}"),
                None => worded.to_owned(),
            },
            by_model: true,
        },
        Err(_) => Answer {
            text: statement(steps, tools, note),
            by_model: false,
        },
    })
}

/// The values an answer may state: those of the request, of the calls'
/// arguments and of their results.
pub fn grounding(steps: &Steps) -> Grounding {
    let mut values: Vec<Literal> = Vec::new();
    for (_, value) in values_in(steps.request()) {
        // A document's own numbers and texts are the person's too.
        if let Literal::Document(document) = &value {
            literals(document, &mut values);
        }
        values.push(value);
    }
    for call in steps.made().iter().filter(|m| m.succeeded()) {
        let mut arguments = Vec::new();
        literals(&call.arguments, &mut arguments);
        values.extend(arguments);
        values.extend(call.values().iter().cloned());
        if let Some(structured) = &call.output.structured_content {
            literals(&structured.to_value(), &mut values);
        }
    }
    values.truncate(crate::llm::grounding::MAX_VALUES * 2);
    Grounding {
        required: None,
        values,
        texts: Vec::new(),
    }
}

fn literals(value: &Value, out: &mut Vec<Literal>) {
    match value {
        Value::Number(n) => out.extend(n.as_f64().map(Literal::Number)),
        Value::String(s) if s.len() <= crate::llm::grounding::MAX_TEXT_VALUE => {
            out.push(Literal::Text(s.clone()))
        }
        Value::Array(items) => items.iter().for_each(|v| literals(v, out)),
        Value::Object(map) => map.values().for_each(|v| literals(v, out)),
        _ => {}
    }
}

/// Texts a call took that an answer must repeat: those the person quoted,
/// at most this long (a longer one, a paragraph to count, they know).
const STATED_TEXT_CHARS: usize = 40;

/// Whether `answer` states what the calls of `steps` found: each call
/// that succeeded has one of its result's values in it and the numbers
/// and quoted texts it took (so that a person reads what was computed from
/// what: "The answer is 90" hides that 81 and 9 were added, not
/// subtracted), and every number in it is one the request or the calls
/// gave. The first thing wrong.
pub fn check(answer: &str, steps: &Steps) -> Result<(), String> {
    if answer.is_empty() {
        return Err("the answer is empty".into());
    }
    debris(answer, steps)?;
    let allowed = grounding(steps);
    let known: Vec<f64> = allowed
        .all_values()
        .filter_map(|v| match v {
            Literal::Number(n) => Some(*n),
            Literal::Text(t) => t.parse().ok(),
            Literal::Document(_) => None,
        })
        .collect();
    if let Some(stray) = numbers_in(answer).into_iter().find(|n| !known.contains(n)) {
        return Err(format!(
            "it states {}, which no tool and not the request gave",
            number_literal(stray)
        ));
    }
    // A document the answer copies states none of its numbers: "the
    // paths of {"a": 1} are a list" states no result.
    let stated: Vec<f64> = numbers_in(&crate::llm::grounding::without_documents(answer));
    // The texts the person quoted: values they gave, as a number is.
    let quoted: Vec<String> = values_in(steps.request())
        .into_iter()
        .filter_map(|(_, value)| match value {
            Literal::Text(t) => Some(t),
            _ => None,
        })
        .collect();
    for (number, call) in steps.made().iter().enumerate() {
        if call.output.is_error {
            continue;
        }
        let values = call.values();
        let found = values.is_empty()
            || values.iter().any(|value| match value {
                Literal::Number(n) => stated.contains(n),
                Literal::Text(t) => answer.contains(t.trim()),
                Literal::Document(d) => answer.contains(&d.to_string()),
            });
        if !found {
            return Err(format!(
                "it leaves out the result {}",
                excerpt(&result_text(call), 80)
            ));
        }
        let mut taken = Vec::new();
        literals(&call.arguments, &mut taken);
        let unsaid = taken.iter().find(|value| match value {
            Literal::Number(n) => !stated.contains(n),
            Literal::Text(t) => {
                let t = t.trim();
                quoted.iter().any(|q| q.trim() == t)
                    && t.chars().count() <= STATED_TEXT_CHARS
                    && !answer.contains(t)
            }
            Literal::Document(_) => false,
        });
        if let Some(value) = unsaid {
            return Err(format!(
                "it does not say that call {} took {}",
                number + 1,
                match value {
                    Literal::Number(n) => number_literal(*n),
                    Literal::Text(t) => format!("{:?}", excerpt(t, 60)),
                    Literal::Document(d) => excerpt(&d.to_string(), 60).into_owned(),
                }
            ));
        }
    }
    Ok(())
}

/// Marks of a prompt template or of markup, which a small model copies
/// into its answer when it loses the thread (`{{<insert task here}}`,
/// `<|im_end|>`), and which a sentence for a person has no use for unless
/// the request or a result has them too.
const DEBRIS: [&str; 8] = ["{", "}", "<|", "|>", "<insert", "[INST", "</s>", "<s>"];

/// Marks of a formula, which a small model writes around the values it
/// was given ("30 * (°C * 30) / exchange(C, F) = 86") and which a sentence
/// stating a result needs only where the person wrote one.
const FORMULA: [&str; 4] = [" * ", " / ", "^", "->"];

/// Whether `answer` is template debris or repeats itself: the first thing
/// wrong.
fn debris(answer: &str, steps: &Steps) -> Result<(), String> {
    let given = |mark: &str| {
        steps.request().contains(mark)
            || steps
                .made()
                .iter()
                .any(|m| m.output.text().contains(mark) || m.arguments.to_string().contains(mark))
    };
    if let Some(mark) = DEBRIS.iter().find(|m| answer.contains(**m) && !given(m)) {
        return Err(format!("it has template debris ({mark:?})"));
    }
    if let Some(mark) = FORMULA.iter().find(|m| answer.contains(**m) && !given(m)) {
        return Err(format!("it writes a formula ({mark:?}) nobody gave"));
    }
    let mut sentences: Vec<String> = Vec::new();
    for sentence in answer.split(['.', '!', '?', '\n']) {
        let words: Vec<&str> = sentence.split_whitespace().collect();
        if words.len() < 3 {
            continue;
        }
        let sentence = words.join(" ").to_lowercase();
        if sentences.contains(&sentence) {
            return Err(format!("it repeats \"{}\"", excerpt(&sentence, 60)));
        }
        sentences.push(sentence);
    }
    Ok(())
}

/// What a person must know when parts of a request were not done: each
/// part, and why (the agent's own error, no tool at hand, the model made
/// no usable call), one line a part.
pub fn left_undone(steps: &Steps, tools: &[Offered]) -> Option<String> {
    let lines: Vec<String> = steps
        .undone(tools)
        .into_iter()
        .map(|undone| {
            format!(
                "Not done: \"{}\" ({}).",
                crate::text::excerpt(&undone.part, 160),
                undone.why
            )
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// The node's own statement of what the calls found: one line a call, but
/// for refused calls of parts a later call did.
pub fn statement(steps: &Steps, tools: &[Offered], note: Option<&str>) -> String {
    let mut lines: Vec<String> = steps
        .made()
        .iter()
        // A refusal of a part done since is provenance, not the answer.
        .filter(|call| !(call.output.is_error && steps.done(call.part)))
        .map(|call| {
            let label = call_label(&tools[call.tool], &call.arguments);
            if call.output.is_error {
                format!(
                    "{label} failed: {}",
                    crate::text::one_line(&call.output.text(), RESULT_CHARS)
                )
            } else {
                format!("{label} = {}", result_text(call))
            }
        })
        .collect();
    if let Some(note) = note {
        lines.push(note.to_owned());
    }
    lines.join("\n")
}

/// A call as a person reads it: `add(1200, 345)`, `upper("hello")`.
pub fn call_label(tool: &Offered, arguments: &Value) -> String {
    let values: Vec<String> = match arguments {
        Value::Object(map) => map.values().map(value_text).collect(),
        Value::Null => Vec::new(),
        other => vec![value_text(other)],
    };
    format!("{}({})", tool.name, values.join(", "))
}

fn value_text(value: &Value) -> String {
    match value {
        Value::Number(n) => n.as_f64().map_or_else(|| n.to_string(), number_literal),
        Value::String(s) => format!("{:?}", excerpt(s, 120)),
        other => excerpt(&other.to_string(), 120).into_owned(),
    }
}

/// A call's result as a person reads it: the value, the fields of a
/// structured one (`words 4, lines 1`), or its text.
pub fn result_text(call: &Made) -> String {
    let output = &call.output;
    if output.is_error {
        return format!(
            "error: {}",
            crate::text::one_line(&output.text(), RESULT_CHARS)
        );
    }
    if let Some(structured) = &output.structured_content {
        let value = structured.to_value();
        if let Value::Object(map) = &value {
            // What only echoes the call's arguments is left out while
            // something else is there ({"amount": 20, …, "result": 68} is
            // 68); the fields the request asked about first ("count the
            // words": `words 4, bytes 19, …`).
            let echoes = |k: &String, v: &Value| {
                call.arguments.get(k).is_some_and(|given| {
                    given == v || (given.as_f64().is_some() && given.as_f64() == v.as_f64())
                })
            };
            let answers = map.iter().filter(|(k, v)| !echoes(k, v)).count();
            let map: serde_json::Map<String, Value> = map
                .iter()
                .filter(|(k, v)| answers == 0 || !echoes(k, v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let map = &map;
            let named = call.named_fields();
            let mut ordered: Vec<(&String, &Value)> = map.iter().collect();
            ordered.sort_by_key(|(k, _)| !named.contains(k));
            let fields: Vec<String> = ordered
                .into_iter()
                .filter(|(_, v)| match v {
                    Value::Object(_) => false,
                    Value::Array(items) => items.iter().all(|x| !x.is_object() && !x.is_array()),
                    _ => true,
                })
                .map(|(k, v)| (k, value_plain(v)))
                .map(|(k, v)| {
                    if map.len() == 1 {
                        v
                    } else {
                        format!("{k} {v}")
                    }
                })
                .collect();
            if !fields.is_empty() && fields.len() == map.len() {
                return crate::text::one_line(&fields.join(", "), RESULT_CHARS);
            }
        }
        return crate::text::one_line(&value.to_string(), RESULT_CHARS);
    }
    let text = output.text();
    match text.trim().parse::<f64>() {
        Ok(n) if n.is_finite() => number_literal(n),
        _ => crate::text::one_line(text.trim(), RESULT_CHARS),
    }
}

fn value_plain(value: &Value) -> String {
    match value {
        Value::Number(n) => n.as_f64().map_or_else(|| n.to_string(), number_literal),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tool::{Content, StructuredContent, ToolOutput};
    use crate::answers::steps::Steps;
    use serde_json::json;

    fn offered(name: &str) -> Offered {
        Offered {
            effects: crate::answers::steps::Effects::ReadOnly,
            output_schema: None,
            owner: "agent".into(),
            name: name.into(),
            description: String::new(),
            schema: json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
        }
    }

    fn worked() -> (Steps, Vec<Offered>) {
        let tools = vec![offered("add"), offered("word_count")];
        let mut steps = Steps::new("Add 23 and 19, then count the words in 'a b c'.");
        let step = steps.next(&tools).unwrap();
        steps.record(
            &tools,
            &step,
            0,
            json!({"a": 23, "b": 19}),
            ToolOutput {
                content: vec![Content::Text {
                    text: "42.0".into(),
                }],
                structured_content: StructuredContent::from_value(&json!({"result": 42.0})).ok(),
                is_error: false,
            },
        );
        let step = crate::answers::Step {
            grounding: Grounding::default(),
            part: String::new(),
            index: 1,
            at: 0,
            tools: vec![1],
            refused: Vec::new(),
            lists: Vec::new(),
        };
        steps.record(
            &tools,
            &step,
            1,
            json!({"text": "a b c"}),
            ToolOutput {
                content: Vec::new(),
                structured_content: StructuredContent::from_value(&json!({"words": 3, "lines": 1}))
                    .ok(),
                is_error: false,
            },
        );
        (steps, tools)
    }

    /// A structured result holding `value`, its JSON as its text.
    fn returned(value: Value) -> ToolOutput {
        ToolOutput {
            content: vec![Content::Text {
                text: value.to_string(),
            }],
            structured_content: StructuredContent::from_value(&value).ok(),
            is_error: false,
        }
    }

    #[test]
    fn an_answer_states_the_field_the_request_names_by_its_description() {
        let mut summarize = offered("summarize");
        summarize.schema = json!({"type": "object", "properties": {"values": {"type": "array",
            "items": {"type": "number"}, "description": "the numbers"}}, "required": ["values"]});
        summarize.output_schema = Some(json!({"type": "object", "properties": {
            "mean": {"type": "number", "description": "their arithmetic mean"},
            "stdev": {"type": "number", "description": "sample standard deviation"}}}));
        let tools = vec![summarize];
        let mut steps = Steps::new("What is the standard deviation of 10, 12, 14?");
        let step = steps.next(&tools).unwrap();
        let output = returned(json!({"mean": 12.0, "stdev": 2.0}));
        steps.record(&tools, &step, 0, json!({"values": [10, 12, 14]}), output);
        assert!(check("The standard deviation of 10, 12 and 14 is 2.", &steps).is_ok());
        // The mean is a result too, and not the one asked for.
        let mean = check(
            "The standard deviation of 10, 12 and 14 is about 12.",
            &steps,
        );
        assert!(mean.unwrap_err().contains("leaves out"));
    }

    #[test]
    fn a_yes_or_no_result_is_a_value_an_answer_states() {
        let mut pick = offered("pick");
        pick.schema = json!({"type": "object", "properties": {"document": {},
            "path": {"type": "string"}}, "required": ["document", "path"]});
        let tools = vec![pick];
        let mut steps = Steps::new("flags.beta of {\"flags\": {\"beta\": true}}");
        let step = steps.next(&tools).unwrap();
        let output = returned(json!({"path": "flags.beta", "values": [true]}));
        let arguments = json!({"document": {"flags": {"beta": true}}, "path": "flags.beta"});
        steps.record(&tools, &step, 0, arguments, output);
        assert!(check("The \"flags.beta\" is true.", &steps).is_ok());
        let unrelated = check(
            "The tool is not available in the \"flags.beta\" enum.",
            &steps,
        );
        assert!(unrelated.unwrap_err().contains("leaves out"));
    }

    #[test]
    fn an_answer_must_state_every_result_and_invent_no_number() {
        let (steps, _) = worked();
        assert!(check("23 plus 19 is 42, and 'a b c' has 3 words.", &steps).is_ok());
        let contradicts = check("23 plus 19 is 32, and there are 3 words.", &steps).unwrap_err();
        assert!(contradicts.contains("32"), "{contradicts}");
        let formula = check("23 * (19 * 23) is 42, and 'a b c' has 3 words.", &steps).unwrap_err();
        assert!(formula.contains("formula"), "{formula}");
        let leaves_out = check("The sum of 23 and 19 is 42.", &steps).unwrap_err();
        assert!(leaves_out.contains("leaves out"), "{leaves_out}");
        // A result without what it was computed from hides the call: "42"
        // might be 23 + 19 or 23 - 19 for all the person can tell.
        let unsourced = check("The answer is 42, and 'a b c' has 3 words.", &steps).unwrap_err();
        assert!(unsourced.contains("call 1 took 23"), "{unsourced}");
        let unsourced = check("23 plus 19 is 42, and there are 3 words.", &steps).unwrap_err();
        assert!(unsourced.contains("call 2 took \"a b c\""), "{unsourced}");
        assert!(check("", &steps).is_err());
        let debris = check(
            "- #1 {{<insert task here}} (calculator): 23, 19, 42, 'a b c', 3 words",
            &steps,
        );
        assert!(debris.unwrap_err().contains("debris"));
        let repeats = check(
            "23 and 19 make 42 and 'a b c' has 3 words. 23 and 19 make 42 and 'a b c' has 3 words.",
            &steps,
        );
        assert!(repeats.unwrap_err().contains("repeats"));
    }

    #[test]
    fn a_document_copied_into_an_answer_states_none_of_its_numbers() {
        let mut flatten = offered("flatten");
        flatten.schema =
            json!({"type": "object", "properties": {"document": {}}, "required": ["document"]});
        let tools = vec![flatten];
        let mut steps = Steps::new("What are the paths of every value in {\"a\": {\"b\": 1}}?");
        let step = steps.next(&tools).unwrap();
        steps.record(
            &tools,
            &step,
            0,
            json!({"document": {"a": {"b": 1}}}),
            ToolOutput {
                content: Vec::new(),
                structured_content: StructuredContent::from_value(&json!({"a.b": 1})).ok(),
                is_error: false,
            },
        );
        let copied = "The path of every value in {\"a\":{\"b\":1}} is a nested list.";
        assert!(check(copied, &steps).unwrap_err().contains("leaves out"));
        assert!(check("The path a.b holds 1.", &steps).is_ok());
    }

    #[test]
    fn the_node_states_the_results_in_its_own_words() {
        let (steps, tools) = worked();
        assert_eq!(
            statement(&steps, &tools, Some("Stopped at the deadline.")),
            "add(23, 19) = 42\nword_count(\"a b c\") = words 3, lines 1\nStopped at the deadline."
        );
    }
}
