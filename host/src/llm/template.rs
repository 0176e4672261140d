//! Turning a conversation into the prompt text an embedded model was trained
//! on, and its answer back into text and tool calls.
//!
//! The prompt comes from the model's own chat template (the Jinja template a
//! GGUF file carries as `tokenizer.chat_template`), rendered with minijinja
//! with what llama.cpp gives templates (`bos_token`, `strftime_now`,
//! `enable_thinking`). A template that renders tools gets them, and the
//! past calls, as the OpenAI API writes them, and the answer is read in its
//! family's form ([`CallFormat`]); templates that know no tools (SmolLM2's)
//! get the tools in the system message and the convention most small
//! instruct models learned.

use super::call_format::{CallFormat, LISTED_CLOSE, LISTED_OPEN};
use super::{Message, Role, ToolCall, ToolSpec};
use minijinja::{Environment, ErrorKind, context};
use serde_json::{Value, json};

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    /// How the model calls tools, which the template teaches.
    format: CallFormat,
    /// The texts of the begin- and end-of-text tokens, which templates
    /// write as `bos_token` and `eos_token` (Gemma's and Llama 3's begin
    /// with the first).
    bos_token: String,
    eos_token: String,
}

/// Gemma's turns, for Gemma files that carry no template (the base
/// models'): the system message opens the first user turn, as Gemma's own
/// template puts it, and a tool's output is a user turn.
pub const GEMMA_TURNS: &str = "{{ bos_token }}{% set ns = namespace(system='') %}{% for m in messages %}{% if m.role == 'system' %}{% set ns.system = ns.system + m.content + '\n\n' %}{% endif %}{% endfor %}{% for m in messages if m.role != 'system' %}{{ '<start_of_turn>' + ('model' if m.role == 'assistant' else 'user') + '\n' }}{% if loop.first %}{{ ns.system }}{% endif %}{{ m.content | trim }}{{ '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}";

/// ChatML, for GGUF files that carry no template.
const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

impl ChatTemplate {
    /// Compiles `source` (a Jinja chat template, or ChatML when `None`).
    pub fn new(source: Option<&str>) -> Result<Self, String> {
        let source = source.unwrap_or(CHATML).to_owned();
        let format = CallFormat::of_template(&source);
        let mut env = Environment::new();
        // Templates written for Python's Jinja call str methods (`.strip()`).
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |message: String| -> Result<String, _> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
        });
        // Llama 3's templates write today's date.
        env.add_function("strftime_now", strftime_now);
        env.add_filter("tojson", tojson);
        env.add_template_owned("chat", source)
            .map_err(|e| format!("its chat template does not compile: {e}"))?;
        Ok(ChatTemplate {
            env,
            format,
            bos_token: String::new(),
            eos_token: String::new(),
        })
    }

    /// The template with `bos_token` and `eos_token` standing for the
    /// model's begin- and end-of-text tokens.
    pub fn with_special_tokens(self, bos_token: String, eos_token: String) -> Self {
        ChatTemplate {
            bos_token,
            eos_token,
            ..self
        }
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
        let in_template = self.format.in_template();
        let tools_json: Vec<Value> = tools.iter().map(openai_tool).collect();
        let mut system_additions = Vec::new();
        if !tools.is_empty() && !in_template {
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
            let mut entry = json!({ "role": message.role.as_str(), "content": content });
            if message.role == Role::Assistant && !message.tool_calls.is_empty() {
                if in_template {
                    entry["tool_calls"] = message.tool_calls.iter().map(openai_call).collect();
                } else {
                    entry["content"] =
                        format!("{content}{}", self.format.write(&message.tool_calls)).into();
                }
            }
            if let Some(id) = message.tool_call_id.as_ref().filter(|_| in_template) {
                entry["tool_call_id"] = id.clone().into();
            }
            rendered.push(entry);
        }
        if system_pending {
            rendered.insert(
                0,
                json!({ "role": "system", "content": system_additions.join("\n\n") }),
            );
        }
        let template = self.env.get_template("chat").expect("added in new");
        let tools_value = (in_template && !tools.is_empty()).then_some(tools_json);
        template
            .render(context! {
                messages => minijinja::value::Serde(&rendered),
                tools => minijinja::value::Serde(&tools_value),
                add_generation_prompt => true,
                bos_token => &self.bos_token,
                eos_token => &self.eos_token,
                // Qwen 3 answers without a long reasoning first, which a
                // small model's tokens are better spent without.
                enable_thinking => false,
            })
            .map_err(|e| format!("its chat template failed: {e}"))
    }

    /// How the model calls tools.
    pub fn format(&self) -> CallFormat {
        self.format
    }
}

/// `strftime_now(format)`: now, in UTC, as `format` writes it; a format
/// chrono cannot write is the template's error, not a panic.
fn strftime_now(format: String) -> Result<String, minijinja::Error> {
    use chrono::format::{Item, StrftimeItems};
    use std::fmt::Write as _;
    let items: Vec<Item> = StrftimeItems::new(&format).collect();
    let invalid = || {
        minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!("strftime_now cannot write {format:?}"),
        )
    };
    if items.iter().any(|item| matches!(item, Item::Error)) {
        return Err(invalid());
    }
    let mut out = String::new();
    write!(
        out,
        "{}",
        chrono::Utc::now().format_with_items(items.into_iter())
    )
    .map_err(|_| invalid())?;
    Ok(out)
}

/// `value | tojson(indent=n)` as Python's `json.dumps` writes it, which is
/// what the templates were written against (and what llama.cpp and
/// transformers render): `", "` and `": "` between items, no escaping of
/// `<`, `>`, `&` or `'` (minijinja's own escapes them for HTML, which
/// would show a model `\u003c` where it learned `<`).
fn tojson(
    value: &minijinja::Value,
    kwargs: minijinja::value::Kwargs,
) -> Result<minijinja::Value, minijinja::Error> {
    use serde::Serialize as _;
    let indent: Option<usize> = kwargs.get("indent")?;
    let failed = |e: serde_json::Error| {
        minijinja::Error::new(ErrorKind::InvalidOperation, "cannot serialize to JSON")
            .with_source(e)
    };
    let mut out = Vec::new();
    match indent {
        Some(width) => {
            let indent = vec![b' '; width.min(16)];
            let formatter = serde_json::ser::PrettyFormatter::with_indent(&indent);
            let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
            value.serialize(&mut serializer).map_err(failed)?;
        }
        None => {
            let mut serializer = serde_json::Serializer::with_formatter(&mut out, PythonSpaced);
            value.serialize(&mut serializer).map_err(failed)?;
        }
    }
    let text = String::from_utf8(out).expect("serde_json writes UTF-8");
    Ok(minijinja::Value::from_safe_string(text))
}

/// Python's default JSON separators.
struct PythonSpaced;

impl serde_json::ser::Formatter for PythonSpaced {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        item_separator(writer, first)
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        item_separator(writer, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

/// `", "` before every item but the first.
fn item_separator<W: ?Sized + std::io::Write>(writer: &mut W, first: bool) -> std::io::Result<()> {
    if first {
        Ok(())
    } else {
        writer.write_all(b", ")
    }
}

/// A past call as the OpenAI API writes it, its arguments an object.
fn openai_call(call: &ToolCall) -> Value {
    let arguments = serde_json::from_str::<Value>(&call.arguments)
        .unwrap_or_else(|_| Value::String(call.arguments.clone()));
    json!({
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    })
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
         {LISTED_OPEN}[{{\"name\": \"<tool name>\", \"arguments\": {{<arguments>}}}}]{LISTED_CLOSE}.",
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

    /// Each family's own template, as its model files carry it (llama.cpp
    /// keeps the same copies in its tests).
    fn family_template(name: &str) -> ChatTemplate {
        let path = format!(
            "{}/../tests/fixtures/templates/{name}.jinja",
            env!("CARGO_MANIFEST_DIR")
        );
        let source = std::fs::read_to_string(&path).unwrap();
        ChatTemplate::new(Some(&source)).unwrap()
    }

    /// A conversation that called a tool and heard back.
    fn after_a_call() -> Vec<Message> {
        let mut asked = Message::new(Role::Assistant, "");
        asked.tool_calls.push(ToolCall {
            id: "call_1".into(),
            name: "weather".into(),
            arguments: r#"{"city": "Oslo"}"#.into(),
        });
        let mut heard = Message::new(Role::Tool, "Rain, 4 °C");
        heard.tool_call_id = Some("call_1".into());
        vec![Message::user("Weather in Oslo?"), asked, heard]
    }

    #[test]
    fn qwen3_renders_tools_and_calls_its_own_way_and_is_not_asked_to_think() {
        let template = family_template("qwen3");
        assert_eq!(template.format(), CallFormat::Hermes);
        let prompt = template
            .render(&after_a_call(), &[weather()], None)
            .unwrap();
        assert!(
            prompt.starts_with("<|im_start|>system\n# Tools\n\nYou may call one or more functions"),
            "{prompt}"
        );
        // The tool as Python's json.dumps writes it: spaced, `<` unescaped.
        assert!(
            prompt.contains(r#"{"type": "function", "function": {"name": "weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}"#),
            "{prompt}"
        );
        assert!(
            prompt.contains("<|im_start|>assistant\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><|im_end|>"),
            "{prompt}"
        );
        assert!(
            prompt.contains(
                "<|im_start|>user\n<tool_response>\nRain, 4 °C\n</tool_response><|im_end|>"
            ),
            "{prompt}"
        );
        assert!(
            prompt.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"),
            "{prompt}"
        );
    }

    #[test]
    fn llama3_renders_its_date_its_begin_token_and_its_json_calls() {
        let template = family_template("llama3.2")
            .with_special_tokens("<|begin_of_text|>".into(), "<|eot_id|>".into());
        assert_eq!(template.format(), CallFormat::Llama3);
        let prompt = template
            .render(&after_a_call(), &[weather()], None)
            .unwrap();
        assert!(prompt.starts_with("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\nToday Date: "), "{prompt}");
        let today = chrono::Utc::now().format("%d %b %Y").to_string();
        assert!(
            prompt.contains(&format!("Today Date: {today}\n")),
            "{prompt}"
        );
        // The tools go into the first user message, indented by four.
        assert!(
            prompt.contains("{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"weather\",\n        \"description\": \"The weather in a city\","),
            "{prompt}"
        );
        assert!(
            prompt.contains("\n\nWeather in Oslo?<|eot_id|>"),
            "{prompt}"
        );
        assert!(
            prompt.contains("<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"weather\", \"parameters\": {\"city\": \"Oslo\"}}<|eot_id|>"),
            "{prompt}"
        );
        assert!(
            // A string is iterable to Jinja: the template writes it as JSON.
            prompt.contains(
                "<|start_header_id|>ipython<|end_header_id|>\n\n\"Rain, 4 °C\"<|eot_id|>"
            ),
            "{prompt}"
        );
        assert!(prompt.ends_with("<|start_header_id|>assistant<|end_header_id|>\n\n"));
    }

    #[test]
    fn a_template_without_tools_reads_past_calls_in_the_listed_form() {
        let template = ChatTemplate::new(Some(SMOLLM2)).unwrap();
        assert_eq!(template.format(), CallFormat::Listed);
        let prompt = template
            .render(&after_a_call(), &[weather()], None)
            .unwrap();
        assert!(
            prompt.contains(
                r#"<|im_start|>assistant
<tool_call>[{"name":"weather","arguments":{"city":"Oslo"}}]</tool_call><|im_end|>"#
            ),
            "{prompt}"
        );
    }

    #[test]
    fn strftime_now_refuses_a_format_it_cannot_write() {
        assert!(strftime_now("%Y".into()).unwrap().starts_with("20"));
        assert!(strftime_now("%Q %".into()).is_err());
    }

    #[test]
    fn gemma_files_without_a_template_get_gemmas_turns() {
        let template = ChatTemplate::new(Some(GEMMA_TURNS))
            .unwrap()
            .with_special_tokens("<bos>".into(), "<eos>".into());
        let prompt = template
            .render(
                &[Message::system("Be brief."), Message::user(" Paris? ")],
                &[],
                None,
            )
            .unwrap();
        assert_eq!(
            prompt,
            "<bos><start_of_turn>user\nBe brief.\n\nParis?<end_of_turn>\n<start_of_turn>model\n"
        );
    }

    #[test]
    fn a_broken_template_is_refused_with_the_reason() {
        let error = ChatTemplate::new(Some("{% for %}")).err().unwrap();
        assert!(error.contains("does not compile"), "{error}");
    }
}
