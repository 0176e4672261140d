//! How a model writes a tool call: each family was trained on its own form,
//! and a call written in another is one the model was never taught.
//!
//! - [`CallFormat::Hermes`], Qwen 2.5 and 3, Hermes, SmolLM3's: each call
//!   a JSON object `{"name": …, "arguments": {…}}` in its own
//!   `<tool_call>…</tool_call>`;
//! - [`CallFormat::Llama3`], Llama 3.1–3.3's: the whole answer the JSON
//!   object `{"name": …, "parameters": {…}}`, one call;
//! - [`CallFormat::FunctionGemma`]'s `<start_function_call>call:name{key:
//!   <escape>text<escape>,n:3}<end_function_call>`;
//! - [`CallFormat::Listed`], for models whose template knows no tools
//!   (SmolLM2): the tools are described in the system message and the
//!   answer is `<tool_call>[{"name": …, "arguments": {…}}]</tool_call>`,
//!   the convention most small instruct models picked up.
//!
//! The form is read from the chat template the GGUF file carries: the
//! template that renders the tools also teaches the form.

use super::{ToolCall, ToolSpec};
use serde_json::{Map, Value, json};

/// The most calls one answer is read for.
const MOST_CALLS: usize = 64;
/// How deep FunctionGemma's arguments may nest.
const MOST_DEPTH: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallFormat {
    Listed,
    Hermes,
    Llama3,
    FunctionGemma,
}

pub const LISTED_OPEN: &str = "<tool_call>";
pub const LISTED_CLOSE: &str = "</tool_call>";
pub const GEMMA_OPEN: &str = "<start_function_call>";
pub const GEMMA_CLOSE: &str = "<end_function_call>";
pub const GEMMA_ESCAPE: &str = "<escape>";

/// The marks calls are written with: text the answer holds and the call's
/// grammar writes, whatever type a vocabulary gives their tokens (a file
/// may call `<start_function_call>` a control token, which would otherwise
/// be left out of the answer's text and out of the grammar's reach).
pub const CALL_MARKS: [&str; 5] = [
    LISTED_OPEN,
    LISTED_CLOSE,
    GEMMA_OPEN,
    GEMMA_CLOSE,
    GEMMA_ESCAPE,
];

impl CallFormat {
    /// The form the chat template `source` teaches; [`CallFormat::Listed`]
    /// when it teaches none the node knows (its tools then go into the
    /// system message).
    pub fn of_template(source: &str) -> CallFormat {
        if source.contains(GEMMA_OPEN) {
            CallFormat::FunctionGemma
        } else if source.contains("<tool_call>") && source.contains("tools") {
            CallFormat::Hermes
        } else if source.contains("\"parameters\": dictionary of argument name")
            || source.contains("<|python_tag|>")
        {
            CallFormat::Llama3
        } else {
            CallFormat::Listed
        }
    }

    /// Whether the template renders the tools and the calls itself.
    pub fn in_template(self) -> bool {
        self != CallFormat::Listed
    }

    /// Splits a generated answer into its text and the tool calls it asks
    /// for. `next_id` names each call (`call_1`, `call_2`, … in the
    /// conversation).
    pub fn parse(
        self,
        answer: &str,
        tools: &[ToolSpec],
        mut next_id: impl FnMut() -> String,
    ) -> Result<(String, Vec<ToolCall>), String> {
        if tools.is_empty() {
            return Ok((answer.to_owned(), Vec::new()));
        }
        let (text, found) = match self {
            CallFormat::Listed => listed(answer)?,
            CallFormat::Hermes => hermes(answer)?,
            CallFormat::Llama3 => llama3(answer)?,
            CallFormat::FunctionGemma => function_gemma(answer)?,
        };
        if found.len() > MOST_CALLS {
            return Err(format!(
                "the model's answer holds {} tool calls; at most {MOST_CALLS} are read",
                found.len()
            ));
        }
        let mut calls = Vec::with_capacity(found.len());
        for (name, arguments) in found {
            if !tools.iter().any(|t| t.name == name) {
                return Err(format!(
                    "the model called {name:?}, which is not one of its tools"
                ));
            }
            if !arguments.is_object() {
                return Err(format!(
                    "the model's call of {name:?} gives arguments that are not an object"
                ));
            }
            calls.push(ToolCall {
                id: next_id(),
                name,
                arguments: arguments.to_string(),
            });
        }
        Ok((text, calls))
    }

    /// `calls` as the model writes them, for a past turn of a template that
    /// does not render calls itself.
    pub fn write(self, calls: &[ToolCall]) -> String {
        let arguments = |call: &ToolCall| {
            serde_json::from_str::<Value>(&call.arguments)
                .unwrap_or_else(|_| Value::String(call.arguments.clone()))
        };
        match self {
            CallFormat::Listed => {
                let list: Vec<Value> = calls
                    .iter()
                    .map(|c| json!({"name": c.name, "arguments": arguments(c)}))
                    .collect();
                format!("{LISTED_OPEN}{}{LISTED_CLOSE}", Value::Array(list))
            }
            CallFormat::Hermes => calls
                .iter()
                .map(|c| {
                    format!(
                        "{LISTED_OPEN}\n{}\n{LISTED_CLOSE}",
                        json!({"name": c.name, "arguments": arguments(c)})
                    )
                })
                .collect::<Vec<_>>()
                .join("\n"),
            CallFormat::Llama3 => calls
                .iter()
                .map(|c| json!({"name": c.name, "parameters": arguments(c)}).to_string())
                .collect::<Vec<_>>()
                .join("; "),
            CallFormat::FunctionGemma => calls
                .iter()
                .map(|c| {
                    let mut out = format!("{GEMMA_OPEN}call:{}", c.name);
                    write_gemma_value(&arguments(c), &mut out);
                    out.push_str(GEMMA_CLOSE);
                    out
                })
                .collect(),
        }
    }
}

type Found = (String, Vec<(String, Value)>);

/// `<tool_call>[{…}, …]</tool_call>` (or one object in the tags).
fn listed(answer: &str) -> Result<Found, String> {
    let Some(open) = answer.find(LISTED_OPEN) else {
        return Ok((answer.to_owned(), Vec::new()));
    };
    let body = &answer[open + LISTED_OPEN.len()..];
    let body = body
        .find(LISTED_CLOSE)
        .map_or(body, |end| &body[..end])
        .trim();
    let list: Value = serde_json::from_str(body)
        .map_err(|e| format!("the model's tool call is not JSON: {e}"))?;
    let list = match list {
        Value::Array(list) => list,
        single @ Value::Object(_) => vec![single],
        _ => return Err("the model's tool call is not a list of calls".into()),
    };
    let calls = list
        .into_iter()
        .map(|call| named_call(call, "arguments"))
        .collect::<Result<_, _>>()?;
    Ok((answer[..open].trim().to_owned(), calls))
}

/// `<tool_call>\n{…}\n</tool_call>`, as many as there are.
fn hermes(answer: &str) -> Result<Found, String> {
    let Some(first) = answer.find(LISTED_OPEN) else {
        return Ok((answer.to_owned(), Vec::new()));
    };
    let mut calls = Vec::new();
    let mut rest = &answer[first..];
    while let Some(open) = rest.find(LISTED_OPEN) {
        let body = &rest[open + LISTED_OPEN.len()..];
        let (body, after) = match body.find(LISTED_CLOSE) {
            Some(end) => (&body[..end], &body[end + LISTED_CLOSE.len()..]),
            None => (body, ""),
        };
        let call: Value = serde_json::from_str(body.trim())
            .map_err(|e| format!("the model's tool call is not JSON: {e}"))?;
        calls.push(named_call(call, "arguments")?);
        if calls.len() > MOST_CALLS {
            break;
        }
        rest = after;
    }
    Ok((answer[..first].trim().to_owned(), calls))
}

/// An answer that is `{"name": …, "parameters": {…}}` (or several
/// separated by `;`); any other answer is text.
fn llama3(answer: &str) -> Result<Found, String> {
    let body = answer.trim();
    let body = body.strip_prefix("<|python_tag|>").unwrap_or(body).trim();
    if !body.starts_with('{') {
        return Ok((answer.to_owned(), Vec::new()));
    }
    let mut calls = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        let value = match stream.next() {
            Some(value) => value.map_err(|e| format!("the model's tool call is not JSON: {e}"))?,
            None => break,
        };
        calls.push(named_call(value, "parameters")?);
        if calls.len() > MOST_CALLS {
            break;
        }
        rest = rest[stream.byte_offset()..].trim_start();
        rest = rest.strip_prefix(';').unwrap_or(rest).trim_start();
    }
    Ok((String::new(), calls))
}

/// `{"name": n, key: {…}}` (`key` the arguments' name in this format; the
/// other common name is taken too).
fn named_call(call: Value, key: &str) -> Result<(String, Value), String> {
    let Value::Object(mut call) = call else {
        return Err("the model's tool call is not an object".into());
    };
    let name = match call.remove("name") {
        Some(Value::String(name)) => name,
        _ => return Err("the model's tool call names no tool".into()),
    };
    let arguments = call
        .remove(key)
        .or_else(|| call.remove("arguments"))
        .or_else(|| call.remove("parameters"))
        .unwrap_or_else(|| Value::Object(Map::new()));
    // Arguments written as a JSON text are read as the object they hold.
    let arguments = match arguments {
        Value::String(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        other => other,
    };
    Ok((name, arguments))
}

/// `<start_function_call>call:name{…}<end_function_call>`, as many as
/// there are.
fn function_gemma(answer: &str) -> Result<Found, String> {
    let Some(first) = answer.find(GEMMA_OPEN) else {
        return Ok((answer.to_owned(), Vec::new()));
    };
    let mut calls = Vec::new();
    let mut rest = &answer[first..];
    while let Some(open) = rest.find(GEMMA_OPEN) {
        let body = &rest[open + GEMMA_OPEN.len()..];
        let (body, after) = match body.find(GEMMA_CLOSE) {
            Some(end) => (&body[..end], &body[end + GEMMA_CLOSE.len()..]),
            None => (body, ""),
        };
        let body = body
            .trim()
            .strip_prefix("call:")
            .ok_or("the model's function call does not start with call:")?;
        let brace = body
            .find('{')
            .ok_or("the model's function call gives no arguments")?;
        let name = body[..brace].trim().to_owned();
        let mut reader = GemmaReader {
            text: &body[brace..],
            depth: 0,
        };
        let arguments = reader.value()?;
        if !reader.text.trim().is_empty() {
            return Err(format!(
                "the model's call of {name:?} goes on after its arguments"
            ));
        }
        calls.push((name, arguments));
        if calls.len() > MOST_CALLS {
            break;
        }
        rest = after;
    }
    Ok((answer[..first].trim().to_owned(), calls))
}

/// FunctionGemma's values: `{key:value,…}`, `[value,…]`, text between
/// `<escape>`s, and numbers, `true`, `false` and `null` as JSON writes them.
struct GemmaReader<'t> {
    text: &'t str,
    depth: usize,
}

impl GemmaReader<'_> {
    fn value(&mut self) -> Result<Value, String> {
        self.text = self.text.trim_start();
        if let Some(rest) = self.text.strip_prefix(GEMMA_ESCAPE) {
            let end = rest
                .find(GEMMA_ESCAPE)
                .ok_or("the model's text argument is not closed")?;
            self.text = &rest[end + GEMMA_ESCAPE.len()..];
            return Ok(Value::String(rest[..end].to_owned()));
        }
        if let Some(rest) = self.text.strip_prefix('{') {
            self.text = rest;
            return self.within(|reader| {
                let mut object = Map::new();
                loop {
                    reader.text = reader.text.trim_start();
                    if let Some(rest) = reader.text.strip_prefix('}') {
                        reader.text = rest;
                        return Ok(Value::Object(object));
                    }
                    let colon = reader
                        .text
                        .find(':')
                        .ok_or("the model's argument has no value")?;
                    let key = reader.text[..colon].trim().to_owned();
                    reader.text = &reader.text[colon + 1..];
                    let value = reader.value()?;
                    object.insert(key, value);
                    reader.separator('}')?;
                }
            });
        }
        if let Some(rest) = self.text.strip_prefix('[') {
            self.text = rest;
            return self.within(|reader| {
                let mut list = Vec::new();
                loop {
                    reader.text = reader.text.trim_start();
                    if let Some(rest) = reader.text.strip_prefix(']') {
                        reader.text = rest;
                        return Ok(Value::Array(list));
                    }
                    list.push(reader.value()?);
                    reader.separator(']')?;
                }
            });
        }
        // A bare word: a number, true, false or null, up to what ends it.
        let end = self.text.find([',', '}', ']']).unwrap_or(self.text.len());
        let word = self.text[..end].trim();
        self.text = &self.text[end..];
        match serde_json::from_str::<Value>(word) {
            Ok(value @ (Value::Number(_) | Value::Bool(_) | Value::Null)) => Ok(value),
            _ => Ok(Value::String(word.to_owned())),
        }
    }

    fn within(
        &mut self,
        read: impl FnOnce(&mut Self) -> Result<Value, String>,
    ) -> Result<Value, String> {
        self.depth += 1;
        if self.depth > MOST_DEPTH {
            return Err(format!(
                "the model's arguments nest deeper than {MOST_DEPTH} levels"
            ));
        }
        let value = read(self);
        self.depth -= 1;
        value
    }

    /// After a value: a comma, or the `close` that ends the list (left for
    /// the caller to take).
    fn separator(&mut self, close: char) -> Result<(), String> {
        self.text = self.text.trim_start();
        if let Some(rest) = self.text.strip_prefix(',') {
            self.text = rest;
            Ok(())
        } else if self.text.starts_with(close) {
            Ok(())
        } else {
            Err(format!("the model's arguments lack a {close:?}"))
        }
    }
}

/// `value` as FunctionGemma writes it.
fn write_gemma_value(value: &Value, out: &mut String) {
    match value {
        Value::String(text) => {
            out.push_str(GEMMA_ESCAPE);
            out.push_str(text);
            out.push_str(GEMMA_ESCAPE);
        }
        Value::Object(object) => {
            out.push('{');
            for (n, (key, value)) in object.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                out.push_str(key);
                out.push(':');
                write_gemma_value(value, out);
            }
            out.push('}');
        }
        Value::Array(list) => {
            out.push('[');
            for (n, value) in list.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                write_gemma_value(value, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather() -> ToolSpec {
        ToolSpec {
            name: "weather".into(),
            description: "The weather in a city".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        }
    }

    fn parse(format: CallFormat, answer: &str) -> Result<(String, Vec<ToolCall>), String> {
        let mut n = 0;
        format.parse(answer, &[weather()], || {
            n += 1;
            format!("call_{n}")
        })
    }

    fn calls(found: &[ToolCall]) -> Vec<(&str, &str)> {
        found
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect()
    }

    #[test]
    fn the_form_is_read_from_the_template() {
        let qwen = "{%- if tools %}…<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
        assert_eq!(CallFormat::of_template(qwen), CallFormat::Hermes);
        let llama = "{{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}";
        assert_eq!(CallFormat::of_template(llama), CallFormat::Llama3);
        let gemma = "{{- '<start_function_call>call:' + name }}";
        assert_eq!(CallFormat::of_template(gemma), CallFormat::FunctionGemma);
        let smollm2 = "{% for message in messages %}<|im_start|>{% endfor %}";
        assert_eq!(CallFormat::of_template(smollm2), CallFormat::Listed);
    }

    #[test]
    fn listed_calls_are_read_with_the_text_before_them() {
        let (text, found) = parse(
            CallFormat::Listed,
            r#"Let me look. <tool_call>[{"name": "weather", "arguments": {"city": "Oslo"}}]</tool_call>"#,
        )
        .unwrap();
        assert_eq!(text, "Let me look.");
        assert_eq!(calls(&found), [("weather", r#"{"city":"Oslo"}"#)]);
        assert_eq!(found[0].id, "call_1");
        let (text, found) = parse(CallFormat::Listed, "It is sunny.").unwrap();
        assert_eq!((text.as_str(), found.len()), ("It is sunny.", 0));
    }

    #[test]
    fn hermes_calls_each_in_its_tags() {
        let (text, found) = parse(
            CallFormat::Hermes,
            "<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
        )
        .unwrap();
        assert_eq!(text, "");
        assert_eq!(
            calls(&found),
            [
                ("weather", r#"{"city":"Oslo"}"#),
                ("weather", r#"{"city":"Rome"}"#)
            ]
        );
    }

    #[test]
    fn a_llama3_answer_that_is_a_json_call_is_a_call() {
        let (_, found) = parse(
            CallFormat::Llama3,
            r#" {"name": "weather", "parameters": {"city": "Oslo"}}"#,
        )
        .unwrap();
        assert_eq!(calls(&found), [("weather", r#"{"city":"Oslo"}"#)]);
        let (text, found) = parse(CallFormat::Llama3, "Oslo is rainy.").unwrap();
        assert_eq!((text.as_str(), found.len()), ("Oslo is rainy.", 0));
    }

    #[test]
    fn function_gemma_calls_read_as_json_arguments() {
        let (text, found) = parse(
            CallFormat::FunctionGemma,
            "<start_function_call>call:weather{city:<escape>São Paulo, Brazil<escape>,days:3,hourly:false,hours:[6,12],at:{lat:1.5}}<end_function_call>",
        )
        .unwrap();
        assert_eq!(text, "");
        let arguments: Value = serde_json::from_str(&found[0].arguments).unwrap();
        assert_eq!(
            arguments,
            json!({"city": "São Paulo, Brazil", "days": 3, "hourly": false, "hours": [6, 12], "at": {"lat": 1.5}})
        );
        let deep = format!(
            "<start_function_call>call:weather{{a:{}1{}}}<end_function_call>",
            "[".repeat(40),
            "]".repeat(40)
        );
        let error = parse(CallFormat::FunctionGemma, &deep).unwrap_err();
        assert!(error.contains("nest deeper"), "{error}");
    }

    #[test]
    fn calls_of_tools_not_offered_are_refused() {
        for (format, answer) in [
            (
                CallFormat::Listed,
                r#"<tool_call>[{"name": "rm"}]</tool_call>"#,
            ),
            (
                CallFormat::Hermes,
                "<tool_call>\n{\"name\": \"rm\", \"arguments\": {}}\n</tool_call>",
            ),
            (CallFormat::Llama3, r#"{"name": "rm", "parameters": {}}"#),
            (
                CallFormat::FunctionGemma,
                "<start_function_call>call:rm{}<end_function_call>",
            ),
        ] {
            let error = parse(format, answer).unwrap_err();
            assert!(
                error.contains("not one of its tools"),
                "{format:?}: {error}"
            );
        }
    }

    #[test]
    fn each_form_reads_back_what_it_writes() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "weather".into(),
            arguments: r#"{"city":"Oslo","days":2}"#.into(),
        };
        for format in [
            CallFormat::Listed,
            CallFormat::Hermes,
            CallFormat::Llama3,
            CallFormat::FunctionGemma,
        ] {
            let written = format.write(std::slice::from_ref(&call));
            let (_, found) = parse(format, &written).unwrap();
            assert_eq!(
                calls(&found),
                [("weather", r#"{"city":"Oslo","days":2}"#)],
                "{format:?}: {written}"
            );
        }
    }
}
