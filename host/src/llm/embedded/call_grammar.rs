//! The grammar (llguidance's Lark) of an answer that calls tools, in the
//! form the prompt teaches: `<tool_call>[{"name":…,"arguments":{…}}]</tool_call>`.
//!
//! Each offered tool gets its own rule: its name, then arguments that
//! match its schema. A schema is compiled as its own root, so its `$ref`s
//! into `$defs` (or `definitions`) resolve as they do for any validator.
//! A request with a [`Grounding`] holds argument values to it: a number
//! is one of the numbers the sources write, a free string a run of their
//! words (llguidance's substring lexemes); values the grounding says
//! nothing about (enums, nested objects, formats) keep their schema.

use super::super::grounding::Grounding;
use super::super::grounding::can_fill;
use super::super::template::{TOOL_CALL_CLOSE, TOOL_CALL_OPEN};
use super::super::{ChatRequest, LlmFailure, ToolChoice, ToolSpec};
use super::schema_lark::{Lark, grounded_text, lark_string};
use serde_json::{Value, json};
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

/// The grammar of an answer to `request`, which offers tools: `None` when
/// the tools leave the answer free.
pub fn tool_grammar(request: &ChatRequest) -> Result<Option<String>, LlmFailure> {
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
    let most = if request.parallel_tool_calls == Some(false) {
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
    for (index, tool) in tools.iter().enumerate() {
        let arguments = format!("args_{index}");
        let root = arguments_schema(&tool.parameters);
        lark.set_grounding(fillable(tool));
        lark.rule(&arguments, &root, &root);
        let head = lark_string(&format!(
            "{{\"name\":{},\"arguments\":",
            serde_json::to_string(&tool.name).expect("a string serializes")
        ));
        let _ = writeln!(lark.rules, "call_{index}: {head} {arguments} \"}}\"");
        alternatives.push(format!("call_{index}"));
    }
    let _ = writeln!(lark.rules, "one_call: {}", alternatives.join(" | "));
    let more = " (\",\" one_call)?".repeat(most.saturating_sub(1));
    let _ = writeln!(lark.rules, "calls: \"[\" one_call{more} \"]\"");
    let open = lark_string(TOOL_CALL_OPEN);
    let close = lark_string(TOOL_CALL_CLOSE);
    let start = match request.tool_choice {
        // Free text, or tool calls from where the text says `<tool_call>`.
        ToolChoice::Auto => format!(
            "start: TEXT | call\n\
             call: call_head calls {close}\n\
             call_head[lazy]: TEXT {open}\n\
             TEXT: /(?s:.*)/\n"
        ),
        _ => format!("start: {open} calls {close}\n"),
    };
    Ok(Some(format!("{start}{}", lark.rules)))
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
        let auto = tool_grammar(&request).unwrap().unwrap();
        assert!(
            auto.contains("TEXT") && auto.contains(r#"\"name\":\"search\""#),
            "{auto}"
        );
        request.tool_choice = ToolChoice::Required;
        let required = tool_grammar(&request).unwrap().unwrap();
        assert!(required.starts_with("start: \"<tool_call>\" calls \"</tool_call>\""));
        request.tool_choice = ToolChoice::None;
        assert!(tool_grammar(&request).unwrap().is_none());
        request.tool_choice = ToolChoice::Named("fetch".into());
        assert!(matches!(
            tool_grammar(&request),
            Err(LlmFailure::InvalidRequest(_))
        ));
        request.tools.clear();
        request.tool_choice = ToolChoice::Required;
        assert!(matches!(
            tool_grammar(&request),
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
        let lark = tool_grammar(&request).unwrap().unwrap();
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
        let lark = tool_grammar(&request).unwrap().unwrap();
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
        assert!(lark.contains("calls: \"[\" one_call \"]\""), "{lark}");
        // The enum keeps its schema; it is optional, so it may be left out.
        assert!(
            lark.contains(r#"GRUN)) ("," "\"mode\":" %json {"enum":["x"]})?"#),
            "{lark}"
        );
    }
}
