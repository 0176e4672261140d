//! The grammar (llguidance's Lark) of an answer that calls tools, in the
//! form the model's family writes calls in ([`CallFormat`]): the listed
//! form `<tool_call>[{"name":…,"arguments":{…}}]</tool_call>`, Qwen's
//! tagged calls, Llama 3's bare JSON call or FunctionGemma's `call:name{…}`.
//!
//! Each offered tool gets its own rule: its name, then arguments that
//! match its schema. A schema is compiled as its own root, so its `$ref`s
//! into `$defs` (or `definitions`) resolve as they do for any validator.
//! A request with a [`Grounding`] holds argument values to it: a number
//! is one of the numbers the sources write, a free string a run of their
//! words (llguidance's substring lexemes); values the grounding says
//! nothing about (enums, nested objects, formats) keep their schema.

use super::super::call_format::{CallFormat, GEMMA_CLOSE, GEMMA_ESCAPE, GEMMA_OPEN};
use super::super::grounding::Grounding;
use super::super::grounding::can_fill;
use super::super::{ChatRequest, LlmFailure, ToolChoice, ToolSpec};
use super::schema_lark::{Lark, grounded_text, lark_string};
use serde_json::{Map, Value, json};
use std::fmt::Write as _;

/// Tool calls one answer may hold: a small model otherwise repeats a call
/// until its tokens run out.
pub const MAX_CALLS: usize = 8;

/// The tools of `request` a call may be made of: with a grounding, those
/// whose arguments it can fill (a small model would fill the others with
/// values of its own). All of them when that leaves none.
pub fn usable_tools(request: &ChatRequest) -> Vec<&ToolSpec> {
    let all: Vec<&ToolSpec> = request.tools.iter().collect();
    let Some(grounding) = request.grounding.as_ref().filter(|g| !g.is_empty()) else {
        return all;
    };
    if matches!(request.tool_choice, ToolChoice::Named(_) | ToolChoice::None) {
        return all;
    }
    let usable: Vec<&ToolSpec> = all
        .iter()
        .copied()
        .filter(|tool| can_fill(&arguments_schema(&tool.parameters), grounding))
        .collect();
    if usable.is_empty() { all } else { usable }
}

/// How a format's calls sit in the answer: the text that starts them
/// (none: the answer is the call), what comes after it, between two calls
/// and after the last.
struct Frame {
    trigger: Option<&'static str>,
    first: &'static str,
    between: &'static str,
    end: &'static str,
}

fn frame(format: CallFormat) -> Frame {
    match format {
        CallFormat::Listed => Frame {
            trigger: Some("<tool_call>"),
            first: "[",
            between: ",",
            end: "]</tool_call>",
        },
        CallFormat::Hermes => Frame {
            trigger: Some("<tool_call>"),
            first: "\n",
            between: "\n</tool_call>\n<tool_call>\n",
            end: "\n</tool_call>",
        },
        CallFormat::Llama3 => Frame {
            trigger: None,
            first: "",
            between: "; ",
            end: "",
        },
        CallFormat::FunctionGemma => Frame {
            trigger: Some(GEMMA_OPEN),
            first: "",
            between: "<end_function_call><start_function_call>",
            end: GEMMA_CLOSE,
        },
    }
}

/// The grammar of an answer to `request`, which offers tools, in `format`:
/// `None` when the tools leave the answer free.
pub fn tool_grammar(
    request: &ChatRequest,
    format: CallFormat,
) -> Result<Option<String>, LlmFailure> {
    if request.tools.is_empty() {
        return match &request.tool_choice {
            ToolChoice::Required | ToolChoice::Named(_) => Err(LlmFailure::InvalidRequest(
                "the request requires a tool call and offers no tools".into(),
            )),
            ToolChoice::Auto | ToolChoice::None => Ok(None),
        };
    }
    let tools: Vec<&ToolSpec> = match &request.tool_choice {
        ToolChoice::None => return Ok(None),
        ToolChoice::Auto | ToolChoice::Required => usable_tools(request),
        ToolChoice::Named(name) => {
            let named: Vec<&ToolSpec> = request.tools.iter().filter(|t| &t.name == name).collect();
            if named.is_empty() {
                return Err(LlmFailure::InvalidRequest(format!(
                    "the request requires a call of tool {name:?}, which it does not offer"
                )));
            }
            named
        }
    };
    // Llama 3's template renders one call a turn.
    let most = if request.parallel_tool_calls == Some(false) || format == CallFormat::Llama3 {
        1
    } else {
        MAX_CALLS
    };
    // Tools whose arguments the grounding cannot fill are called freely.
    let fillable = |tool: &ToolSpec| {
        request
            .grounding
            .as_ref()
            .filter(|g| can_fill(&arguments_schema(&tool.parameters), g))
    };
    let mut lark = Lark::new(None);
    let mut alternatives = Vec::new();
    let mut gemma_rules_written = 0;
    for (index, tool) in tools.iter().enumerate() {
        let arguments = format!("args_{index}");
        let root = arguments_schema(&tool.parameters);
        let name = serde_json::to_string(&tool.name).expect("a string serializes");
        let (head, tail) = match format {
            CallFormat::FunctionGemma => {
                let mut rules = String::new();
                let mut gemma = GemmaRules {
                    rules: &mut rules,
                    next: gemma_rules_written,
                };
                let value = gemma.value(&root, &root, 0);
                gemma_rules_written = gemma.next;
                let _ = writeln!(lark.rules, "{rules}{arguments}: {value}");
                (lark_string(&format!("call:{}", tool.name)), String::new())
            }
            _ => {
                lark.set_grounding(fillable(tool));
                lark.rule(&arguments, &root, &root);
                let head = match format {
                    CallFormat::Listed => format!("{{\"name\":{name},\"arguments\":"),
                    CallFormat::Hermes => format!("{{\"name\": {name}, \"arguments\": "),
                    _ => format!("{{\"name\": {name}, \"parameters\": "),
                };
                (lark_string(&head), "\"}\"".to_owned())
            }
        };
        let _ = writeln!(lark.rules, "call_{index}: {head} {arguments} {tail}");
        alternatives.push(format!("call_{index}"));
    }
    let frame = frame(format);
    let _ = writeln!(lark.rules, "one_call: {}", alternatives.join(" | "));
    let piece = |text: &str| match text {
        "" => String::new(),
        text => format!("{} ", lark_string(text)),
    };
    let more = format!(" ({}one_call)?", piece(frame.between)).repeat(most.saturating_sub(1));
    let _ = writeln!(
        lark.rules,
        "calls: {}one_call{more} {}",
        piece(frame.first),
        piece(frame.end)
    );
    let start = match (&request.tool_choice, frame.trigger) {
        // Free text, or tool calls from where the text says the trigger.
        (ToolChoice::Auto, Some(trigger)) => format!(
            "start: TEXT | call\n\
             call: call_head calls\n\
             call_head[lazy]: TEXT {}\n\
             TEXT: /(?s:.*)/\n",
            lark_string(trigger)
        ),
        // Free text that does not start as a call does, or the call.
        (ToolChoice::Auto, None) => "start: TEXT | calls\nTEXT: /(?s:([^{\\s].*)?)/\n".to_owned(),
        (_, Some(trigger)) => format!("start: {} calls\n", lark_string(trigger)),
        (_, None) => "start: calls\n".to_owned(),
    };
    Ok(Some(format!("{start}{}", lark.rules)))
}

/// FunctionGemma's values as Lark rules: objects as `{key:value,…}`
/// (required properties in order, then each optional one), text between
/// `<escape>`s, numbers and booleans bare, lists in brackets. Each property
/// is a rule of its own, so that the grammar grows with the schema, not
/// with the ways its optional properties may be left out.
struct GemmaRules<'r> {
    rules: &'r mut String,
    next: usize,
}

impl GemmaRules<'_> {
    /// Most properties of one object written out; most levels of nesting.
    const MOST_PROPERTIES: usize = 16;
    const MOST_DEPTH: usize = 4;

    fn value(&mut self, schema: &Value, root: &Value, depth: usize) -> String {
        let escape = lark_string(GEMMA_ESCAPE);
        // Text up to the next `<`: llguidance's expressions look no further
        // ahead, and a `<` would open the closing `<escape>`.
        let text = format!("{escape} /[^<]*/ {escape}");
        let schema = super::super::grounding::resolve(schema, root);
        if depth > Self::MOST_DEPTH {
            return text;
        }
        if let Some(options) = schema.get("enum").and_then(Value::as_array) {
            let written: Vec<String> = options
                .iter()
                .take(64)
                .map(|option| match option {
                    Value::String(s) => format!("{escape} {} {escape}", lark_string(s)),
                    other => lark_string(&other.to_string()),
                })
                .collect();
            if !written.is_empty() {
                return format!("({})", written.join(" | "));
            }
        }
        match super::super::grounding::plain_type(schema) {
            Some("integer") => "/-?(0|[1-9][0-9]*)/".to_owned(),
            Some("number") => "/-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?/".to_owned(),
            Some("boolean") => "(\"true\" | \"false\")".to_owned(),
            Some("array") => {
                let item = match schema.get("items") {
                    Some(items) => self.value(items, root, depth + 1),
                    None => text,
                };
                let item = self.named(item);
                format!("\"[\" ({item} (\",\" {item})*)? \"]\"")
            }
            Some("object") | None if schema.get("properties").is_some() => {
                self.object(schema, root, depth)
            }
            Some("object") => "\"{\" /[^{}<]*/ \"}\"".to_owned(),
            _ => text,
        }
    }

    fn object(&mut self, schema: &Value, root: &Value, depth: usize) -> String {
        let empty = Map::new();
        let properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let pair = |this: &mut Self, key: &str, value: &Value| {
            let value = this.value(value, root, depth + 1);
            this.named(format!("{} {value}", lark_string(&format!("{key}:"))))
        };
        let mut required_pairs = Vec::new();
        for key in required.iter().take(Self::MOST_PROPERTIES) {
            if let Some(value) = properties.get(*key) {
                required_pairs.push(pair(self, key, value));
            }
        }
        let mut optional_pairs = Vec::new();
        for (key, value) in properties
            .iter()
            .filter(|(key, _)| !required.contains(&key.as_str()))
            .take(Self::MOST_PROPERTIES)
        {
            optional_pairs.push(pair(self, key, value));
        }
        let comma_then = |p: &String| format!("(\",\" {p})?");
        let body = if required_pairs.is_empty() {
            // With nothing before it, the first present optional property
            // has no comma: one alternative per first.
            let firsts: Vec<String> = (0..optional_pairs.len())
                .map(|i| {
                    let after: Vec<String> =
                        optional_pairs[i + 1..].iter().map(comma_then).collect();
                    format!("{} {}", optional_pairs[i], after.join(" "))
                })
                .collect();
            match firsts.is_empty() {
                true => String::new(),
                false => format!("({})?", firsts.join(" | ")),
            }
        } else {
            let after: Vec<String> = optional_pairs.iter().map(comma_then).collect();
            format!("{} {}", required_pairs.join(" \",\" "), after.join(" "))
        };
        format!("\"{{\" {body} \"}}\"")
    }

    /// `expression` as a rule of its own; its name.
    fn named(&mut self, expression: String) -> String {
        let name = format!("gemma_{}", self.next);
        self.next += 1;
        let _ = writeln!(self.rules, "{name}: {expression}");
        name
    }
}

/// The grammar of a JSON answer to `schema` held to `grounding`.
pub fn grounded_answer(schema: &Value, grounding: &Grounding) -> String {
    let mut lark = Lark::new(Some(grounding));
    lark.rule("start", schema, schema);
    lark.rules
}

/// The grammar of a free-text answer held to `grounding`.
pub fn grounded_free_text(grounding: &Grounding) -> String {
    grounded_text(grounding)
}

/// A tool's argument schema as the grammar's own root: an object, with no
/// properties beside the ones it names unless it says otherwise (as
/// OpenAI's strict mode does): a small model otherwise invents properties
/// and fills them with prose.
fn arguments_schema(parameters: &Value) -> Value {
    match parameters {
        Value::Object(schema) if !schema.is_empty() => {
            let mut schema = schema.clone();
            if schema.contains_key("properties") {
                schema
                    .entry("additionalProperties")
                    .or_insert(Value::Bool(false));
            }
            Value::Object(schema)
        }
        _ => json!({ "type": "object" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, parameters: Value) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters,
        }
    }

    #[test]
    fn tools_that_need_numbers_are_left_out_when_none_are_written() {
        let request = ChatRequest {
            tools: vec![
                tool(
                    "add",
                    json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
                ),
                tool(
                    "upper",
                    json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
                ),
            ],
            tool_choice: ToolChoice::Required,
            grounding: Some(Grounding::of_texts(["shout 'hello'"])),
            ..ChatRequest::default()
        };
        let names = |request: &ChatRequest| -> Vec<String> {
            usable_tools(request)
                .iter()
                .map(|t| t.name.clone())
                .collect()
        };
        assert_eq!(names(&request), ["upper"]);
        let with_numbers = ChatRequest {
            grounding: Some(Grounding::of_texts(["add 2 and 3"])),
            ..request.clone()
        };
        assert_eq!(names(&with_numbers), ["add", "upper"]);
    }

    #[test]
    fn tool_grammars_follow_the_tool_choice() {
        let mut request = ChatRequest {
            tools: vec![tool(
                "search",
                json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            )],
            ..ChatRequest::default()
        };
        let auto = tool_grammar(&request, CallFormat::Listed).unwrap().unwrap();
        assert!(
            auto.contains("TEXT") && auto.contains(r#"\"name\":\"search\""#),
            "{auto}"
        );
        request.tool_choice = ToolChoice::Required;
        let required = tool_grammar(&request, CallFormat::Listed).unwrap().unwrap();
        assert!(
            required.starts_with("start: \"<tool_call>\" calls\n"),
            "{required}"
        );
        request.tool_choice = ToolChoice::None;
        assert!(
            tool_grammar(&request, CallFormat::Listed)
                .unwrap()
                .is_none()
        );
        request.tool_choice = ToolChoice::Named("fetch".into());
        assert!(matches!(
            tool_grammar(&request, CallFormat::Listed),
            Err(LlmFailure::InvalidRequest(_))
        ));
        request.tools.clear();
        request.tool_choice = ToolChoice::Required;
        assert!(matches!(
            tool_grammar(&request, CallFormat::Listed),
            Err(LlmFailure::InvalidRequest(_))
        ));
    }

    #[test]
    fn arguments_are_their_own_root_so_their_definitions_resolve() {
        let request = ChatRequest {
            tools: vec![tool(
                "paint",
                json!({
                    "type": "object",
                    "properties": {"colour": {"$ref": "#/$defs/Colour"}},
                    "required": ["colour"],
                    "$defs": {"Colour": {"enum": ["red", "green"]}}
                }),
            )],
            tool_choice: ToolChoice::Required,
            ..ChatRequest::default()
        };
        let lark = tool_grammar(&request, CallFormat::Listed).unwrap().unwrap();
        let args = lark.lines().find(|l| l.starts_with("args_0:")).unwrap();
        assert!(args.contains("\"$defs\""), "{args}");
        assert!(args.contains("\"additionalProperties\":false"), "{args}");
    }

    #[test]
    fn a_grounded_call_takes_numbers_and_words_from_the_sources() {
        let request = ChatRequest {
            tools: vec![
                tool(
                    "add",
                    json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
                ),
                tool(
                    "upper",
                    json!({"type": "object", "properties": {"text": {"type": "string"}, "mode": {"enum": ["x"]}}, "required": ["text"]}),
                ),
            ],
            tool_choice: ToolChoice::Required,
            parallel_tool_calls: Some(false),
            grounding: Some(Grounding::of_texts([
                "Add 23 and 19, then shout 'hi there'",
            ])),
            ..ChatRequest::default()
        };
        let lark = tool_grammar(&request, CallFormat::Listed).unwrap().unwrap();
        // Each written number fills one of the two: 23 then 19, or 19 then 23.
        assert!(
            lark.contains(
                r#"(("\"a\":" "23" "," "\"b\":" "19") | ("\"a\":" "19" "," "\"b\":" "23"))"#
            ),
            "{lark}"
        );
        assert!(lark.contains("substring_words"), "{lark}");
        // A quoted text is offered as it is, or a run of the message's words.
        assert!(
            lark.contains(r#"(("\"text\":" "\"hi there\"") | ("\"text\":" GRUN))"#),
            "{lark}"
        );
        assert!(
            lark.contains("calls: \"[\" one_call \"]</tool_call>\""),
            "{lark}"
        );
        // The enum keeps its schema; it is optional, so it may be left out.
        assert!(
            lark.contains(r#"GRUN)) ("," "\"mode\":" %json {"enum":["x"]})?"#),
            "{lark}"
        );
    }
}
