//! Turning a conversation into the prompt text an embedded model was trained
//! on, and its answer back into text and tool calls.
//!
//! The prompt comes from the model's own chat template (the Jinja template a
//! GGUF file carries as `tokenizer.chat_template`), rendered with minijinja.
//! Templates that know no tools (SmolLM2's does not) get the tools in the
//! system message and the convention most small instruct models learned:
//! the answer `<tool_call>[{"name": …, "arguments": {…}}]</tool_call>`.

use super::{Message, Role, ToolCall, ToolSpec};
use minijinja::{Environment, ErrorKind, context};
use serde_json::{Value, json};

/// Where a tool call answer starts and ends.
pub const TOOL_CALL_OPEN: &str = "<tool_call>";
pub const TOOL_CALL_CLOSE: &str = "</tool_call>";

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    /// Whether the template renders `tools` itself.
    knows_tools: bool,
}

/// ChatML, for GGUF files that carry no template.
const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

impl ChatTemplate {
    /// Compiles `source` (a Jinja chat template, or ChatML when `None`).
    pub fn new(source: Option<&str>) -> Result<Self, String> {
        let source = source.unwrap_or(CHATML).to_owned();
        let knows_tools = source.contains("tools");
        let mut env = Environment::new();
        // Templates written for Python's Jinja call str methods (`.strip()`).
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |message: String| -> Result<String, _> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
        });
        env.add_template_owned("chat", source)
            .map_err(|e| format!("its chat template does not compile: {e}"))?;
        Ok(ChatTemplate { env, knows_tools })
    }

    /// The prompt for `messages` with `tools` on offer, ending where the
    /// assistant's answer begins. An answer that must be JSON matching
    /// `answer_schema` is asked for in the system message: the constraint
    /// holds the model to the schema, the words make it write sense in it.
    pub fn render(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
        answer_schema: Option<&Value>,
    ) -> Result<String, String> {
        let mut rendered: Vec<Value> = Vec::with_capacity(messages.len() + 1);
        let tools_json: Vec<Value> = tools.iter().map(openai_tool).collect();
        let mut system_additions = Vec::new();
        if !tools.is_empty() && !self.knows_tools {
            system_additions.push(tool_instructions(tools));
        }
        if let Some(schema) = answer_schema {
            system_additions.push(format!(
                "Answer with JSON only, matching this JSON schema: {schema}"
            ));
        }
        let mut system_pending = !system_additions.is_empty();
        for message in messages {
            let mut content = message.content.clone();
            if message.role == Role::System && system_pending {
                content = format!("{content}\n\n{}", system_additions.join("\n\n"));
                system_pending = false;
            }
            if message.role == Role::Assistant && !message.tool_calls.is_empty() {
                content = format!("{content}{}", tool_call_text(&message.tool_calls));
            }
            rendered.push(json!({ "role": message.role.as_str(), "content": content }));
        }
        if system_pending {
            rendered.insert(
                0,
                json!({ "role": "system", "content": system_additions.join("\n\n") }),
            );
        }
        let template = self.env.get_template("chat").expect("added in new");
        let tools_value = (self.knows_tools && !tools.is_empty()).then_some(tools_json);
        template
            .render(context! {
                messages => minijinja::value::Serde(&rendered),
                tools => minijinja::value::Serde(&tools_value),
                add_generation_prompt => true,
                bos_token => "",
                eos_token => "",
            })
            .map_err(|e| format!("its chat template failed: {e}"))
    }
}

/// A tool as the OpenAI API (and most templates) describe one.
pub fn openai_tool(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        }
    })
}

/// The tools as a model without a tool-aware template reads them: one line
/// each, its signature and what it does. The constraint holds the call to
/// the full schema, so the prompt need not spell it out: a short prompt is
/// read faster, and a small model chooses as well from it.
fn tool_instructions(tools: &[ToolSpec]) -> String {
    let lines: Vec<String> = tools
        .iter()
        .map(|t| format!("- {}: {}", signature(t), t.description.trim()))
        .collect();
    format!(
        "The tools:\n{}\n\nTo call a tool, answer with nothing but \
         {TOOL_CALL_OPEN}[{{\"name\": \"<tool name>\", \"arguments\": {{<arguments>}}}}]{TOOL_CALL_CLOSE}.",
        lines.join("\n")
    )
}

/// `name(a: number, mode: "upper" | "lower")`: the tool's parameters with
/// their types, or their values when the schema lists them.
fn signature(tool: &ToolSpec) -> String {
    let Some(properties) = tool.parameters.get("properties").and_then(Value::as_object) else {
        return format!("{}()", tool.name);
    };
    let parameters: Vec<String> = properties
        .iter()
        .take(16)
        .map(|(name, schema)| {
            let about = schema
                .get("description")
                .and_then(Value::as_str)
                .map(|d| crate::text::excerpt(d.trim().trim_end_matches('.'), 60).into_owned())
                .filter(|d| !d.is_empty());
            match about {
                Some(about) => format!("{name}: {} ({about})", type_of(schema)),
                None => format!("{name}: {}", type_of(schema)),
            }
        })
        .collect();
    format!("{}({})", tool.name, parameters.join(", "))
}

fn type_of(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let values: Vec<String> = values.iter().take(8).map(Value::to_string).collect();
        return values.join(" | ");
    }
    match schema.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" | "),
        _ if schema.get("$ref").is_some() => "object".into(),
        _ => "value".into(),
    }
}

fn tool_call_text(calls: &[ToolCall]) -> String {
    let list: Vec<Value> = calls
        .iter()
        .map(|c| {
            let arguments = serde_json::from_str::<Value>(&c.arguments)
                .unwrap_or_else(|_| Value::String(c.arguments.clone()));
            json!({"name": c.name, "arguments": arguments})
        })
        .collect();
    format!("{TOOL_CALL_OPEN}{}{TOOL_CALL_CLOSE}", Value::Array(list))
}

/// Splits a generated answer into its text and the tool calls it asks for.
/// `next_id` names each call (`call_1`, `call_2`, … in the conversation).
pub fn parse_answer(
    answer: &str,
    tools: &[ToolSpec],
    mut next_id: impl FnMut() -> String,
) -> Result<(String, Vec<ToolCall>), String> {
    let Some(open) = answer.find(TOOL_CALL_OPEN).filter(|_| !tools.is_empty()) else {
        return Ok((answer.to_owned(), Vec::new()));
    };
    let text = answer[..open].trim();
    let body = &answer[open + TOOL_CALL_OPEN.len()..];
    let body = body
        .find(TOOL_CALL_CLOSE)
        .map_or(body, |end| &body[..end])
        .trim();
    let list: Value = serde_json::from_str(body)
        .map_err(|e| format!("the model's tool call is not JSON: {e}"))?;
    let list = match list {
        Value::Array(list) => list,
        single @ Value::Object(_) => vec![single],
        _ => return Err("the model's tool call is not a list of calls".into()),
    };
    let mut calls = Vec::with_capacity(list.len());
    for call in list {
        let name = call
            .get("name")
            .and_then(Value::as_str)
            .ok_or("the model's tool call names no tool")?;
        if !tools.iter().any(|t| t.name == name) {
            return Err(format!(
                "the model called {name:?}, which is not one of its tools"
            ));
        }
        let arguments = call.get("arguments").cloned().unwrap_or(json!({}));
        calls.push(ToolCall {
            id: next_id(),
            name: name.to_owned(),
            arguments: arguments.to_string(),
        });
    }
    Ok((text.to_owned(), calls))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    fn weather() -> ToolSpec {
        ToolSpec {
            name: "weather".into(),
            description: "The weather in a city".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        }
    }

    #[test]
    fn renders_the_models_own_template() {
        let template = ChatTemplate::new(Some(SMOLLM2)).unwrap();
        let prompt = template.render(&[Message::user("Hi")], &[], None).unwrap();
        assert_eq!(
            prompt,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn tools_go_into_the_system_message_of_templates_without_them() {
        let template = ChatTemplate::new(Some(SMOLLM2)).unwrap();
        let prompt = template
            .render(
                &[Message::system("Be brief."), Message::user("Paris?")],
                &[weather()],
                None,
            )
            .unwrap();
        assert!(
            prompt.starts_with("<|im_start|>system\nBe brief.\n\nThe tools:\n- weather(city: string): The weather in a city\n"),
            "{prompt}"
        );
        assert_eq!(prompt.matches("<|im_start|>system").count(), 1);
    }

    #[test]
    fn answers_split_into_text_and_tool_calls() {
        let tools = [weather()];
        let mut n = 0;
        let mut id = || {
            n += 1;
            format!("call_{n}")
        };
        let (text, calls) = parse_answer(
            r#"<tool_call>[{"name": "weather", "arguments": {"city": "Paris"}}]</tool_call>"#,
            &tools,
            &mut id,
        )
        .unwrap();
        assert_eq!(text, "");
        assert_eq!(calls[0].name, "weather");
        assert_eq!(calls[0].id, "call_1");
        assert_eq!(calls[0].arguments, r#"{"city":"Paris"}"#);
        let (text, calls) = parse_answer("It is sunny.", &tools, &mut id).unwrap();
        assert_eq!((text.as_str(), calls.len()), ("It is sunny.", 0));
        let (text, calls) = parse_answer(
            r#"Let me look. <tool_call>[{"name": "weather", "arguments": {"city": "Oslo"}}]</tool_call>"#,
            &tools,
            &mut id,
        )
        .unwrap();
        assert_eq!(
            (text.as_str(), calls[0].id.as_str()),
            ("Let me look.", "call_2")
        );
        let error = parse_answer(
            r#"<tool_call>[{"name": "rm"}]</tool_call>"#,
            &tools,
            &mut id,
        )
        .unwrap_err();
        assert!(error.contains("not one of its tools"), "{error}");
    }

    #[test]
    fn a_broken_template_is_refused_with_the_reason() {
        let error = ChatTemplate::new(Some("{% for %}")).err().unwrap();
        assert!(error.contains("does not compile"), "{error}");
    }
}
