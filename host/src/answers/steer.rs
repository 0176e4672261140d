//! Requests of OpenAI clients the node did not play itself (see
//! [`super::tool_loop`]), steered for a model held to groundings (the
//! embedded one), which cannot keep to what a tool returned on its own.
//!
//! - The person asks and no tool can take what they ask: with
//!   `tool_choice` auto, the model answers in words, held to the values
//!   the person gave; with `required`, it makes the call the client
//!   requires, held to the message's values.
//! - A tool answered (the last message is a tool's) of a call the node did
//!   not make: the answer is held to the values the person and the tools
//!   gave, so it cannot say 32 when the tool said 42.
//!
//! Where tools were offered, the answer is then checked before anyone
//! reads it (see [`checked`]): after results, it must state them; in words
//! no tool could back, it may state no name or number that neither the
//! conversation nor the tools hold: that is the model's memory, which a
//! small model fills with inventions. It says so instead.

use super::steps::Offered;
use crate::llm::grounding::{Grounding, Literal, values_in};
use crate::llm::{ChatRequest, Role, ToolChoice};

/// How a request was steered, and so what its answer is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steered {
    /// As it came, or held only while written: the answer goes out as
    /// the model writes it.
    Unchecked,
    /// To words, where the tools offered could take none of what was
    /// asked: checked to state nothing the conversation did not.
    ToWords,
    /// To the answer after tool results: checked to state them.
    FromResults,
}

impl Steered {
    /// Whether the answer is checked, and so written whole before it is
    /// sent.
    pub fn checks_the_answer(self) -> bool {
        self != Steered::Unchecked
    }
}

/// Steers `request` as the module says; a request with its own
/// grounding, or none of these shapes, is left as it is.
pub fn steer(request: &mut ChatRequest) -> Steered {
    if request.grounding.is_some() {
        return Steered::Unchecked;
    }
    let Some(last) = request.messages.last() else {
        return Steered::Unchecked;
    };
    match last.role {
        Role::User if request.tool_choice == ToolChoice::Auto => {
            // No tool can take it: answered in words, which state no value
            // the person did not give ("3x4 then +5" is not "15x5").
            request.tool_choice = ToolChoice::None;
            let values = request
                .messages
                .last()
                .map(|m| values_in(&m.content).into_iter().map(|(_, v)| v).collect())
                .unwrap_or_default();
            request.grounding = Some(Grounding {
                required: None,
                values,
                texts: Vec::new(),
            });
            match request.tools.is_empty() {
                true => Steered::Unchecked,
                false => Steered::ToWords,
            }
        }
        Role::User if request.tool_choice == ToolChoice::Required => {
            hold_to_values(request);
            Steered::Unchecked
        }
        Role::Tool => {
            answer_from_results(request);
            Steered::FromResults
        }
        _ => Steered::Unchecked,
    }
}

/// What replaces the model's answer `content` to the steered `request`
/// (see [`Steered`]), or `None` when it stands.
pub fn checked(request: &ChatRequest, steered: Steered, content: &str) -> Option<String> {
    match steered {
        Steered::Unchecked => None,
        Steered::FromResults => keep_to_results(request, content),
        Steered::ToWords => keep_to_conversation(request, content),
    }
}

/// How many of the offered tools a refusal names.
const NAMED_TOOLS: usize = 8;

/// The answer `content`, given in words where the tools offered could
/// take nothing of what was asked: `None` when the person gave no values
/// and it states no name or number that neither the conversation nor the
/// tools hold ("Hello! How can I help?"); else the plain statement that no
/// tool offered could answer, which replaces it. What the model says of
/// values the person gave ("8 sevens", "the square root of 16") with no
/// tool to work them is its own arithmetic, which a small model gets
/// wrong more often than right.
fn keep_to_conversation(request: &ChatRequest, content: &str) -> Option<String> {
    let schemas: Vec<String> = request
        .tools
        .iter()
        .map(|tool| tool.parameters.to_string())
        .collect();
    let sources: Vec<&str> = request
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .chain(
            request
                .tools
                .iter()
                .flat_map(|t| [t.name.as_str(), t.description.as_str()]),
        )
        .chain(schemas.iter().map(String::as_str))
        .collect();
    let asked = request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map_or("", |m| m.content.as_str());
    if values_in(asked).is_empty() {
        super::unfounded::unfounded(content, &sources)?;
    }
    let mut names: Vec<&str> = request
        .tools
        .iter()
        .take(NAMED_TOOLS)
        .map(|t| t.name.as_str())
        .collect();
    if request.tools.len() > NAMED_TOOLS {
        names.push("…");
    }
    Some(format!(
        "I cannot answer this with the tools offered ({}): none of them takes what was \
         asked, and an answer without a tool's result would be the model's guess.",
        names.join(", ")
    ))
}

/// A call the client requires where the node found none that fits:
/// the model makes it, held to the values of the message's first step
/// its tools can take ("Paris" of "What's the weather like in Paris
/// today?", which the weather tool leaves "today" of).
fn hold_to_values(request: &mut ChatRequest) {
    let Some(asked) = request.messages.last().map(|m| m.content.clone()) else {
        return;
    };
    let offered = super::tool_loop::offered(request);
    if let Some(step) = super::steps::Steps::new(&asked).next(&offered) {
        request.grounding = Some(step.grounding);
    }
}

/// The answer `content` to `request` (which follows tool results), kept to
/// what the tools returned: `None` when it states a value of each result
/// of the last turn; else the node's statement of those calls and
/// results, which replaces it (a model that ignored "39" and wrote "13 *
/// 3", or a paragraph of its own, is not shown).
fn keep_to_results(request: &ChatRequest, content: &str) -> Option<String> {
    let results: Vec<&crate::llm::Message> = request
        .messages
        .iter()
        .rev()
        .take_while(|m| m.role == Role::Tool)
        .collect();
    let stated = crate::llm::grounding::numbers_in(content);
    let states = |result: &str| {
        let values = super::steps::values_of_text(result);
        values.is_empty()
            || values.iter().any(|value| match value {
                Literal::Number(n) => stated.contains(n),
                Literal::Text(t) => content.contains(t.trim()),
                Literal::Document(d) => content.contains(&d.to_string()),
            })
    };
    if !content.trim().is_empty() && results.iter().all(|m| states(&m.content)) {
        return None;
    }
    let calls: Vec<&crate::llm::ToolCall> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| &m.tool_calls)
        .collect();
    let lines: Vec<String> = results
        .iter()
        .rev()
        .map(|result| {
            let call = calls
                .iter()
                .rev()
                .find(|c| Some(&c.id) == result.tool_call_id.as_ref());
            let said = crate::text::one_line(&result.content, 300);
            match call {
                Some(call) => {
                    let arguments: serde_json::Value =
                        serde_json::from_str(&call.arguments).unwrap_or(serde_json::Value::Null);
                    let tool = Offered {
                        effects: crate::answers::steps::Effects::Unknown,
                        output_schema: None,
                        owner: String::new(),
                        name: call.name.clone(),
                        description: String::new(),
                        schema: serde_json::Value::Null,
                    };
                    format!("{} = {said}", super::wording::call_label(&tool, &arguments))
                }
                None => format!("The tool returned: {said}"),
            }
        })
        .collect();
    Some(lines.join("\n"))
}

fn answer_from_results(request: &mut ChatRequest) {
    let mut values: Vec<Literal> = Vec::new();
    for message in &request.messages {
        match message.role {
            Role::User => values.extend(values_in(&message.content).into_iter().map(|(_, v)| v)),
            Role::Tool => values.extend(super::steps::values_of_text(&message.content)),
            _ => {}
        }
    }
    values.truncate(crate::llm::grounding::MAX_VALUES * 2);
    request.tool_choice = ToolChoice::None;
    request.grounding = Some(Grounding {
        required: None,
        values,
        texts: Vec::new(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Message, ToolSpec};
    use serde_json::json;

    fn tools() -> Vec<ToolSpec> {
        let two = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]});
        let city = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
        vec![
            ToolSpec {
                name: "add".into(),
                description: "Add two numbers.".into(),
                parameters: two.clone(),
            },
            ToolSpec {
                name: "multiply".into(),
                description: "Multiply two numbers.".into(),
                parameters: two,
            },
            ToolSpec {
                name: "weather".into(),
                description: "The weather in a city.".into(),
                parameters: city,
            },
        ]
    }

    fn asked(text: &str) -> ChatRequest {
        ChatRequest {
            messages: vec![Message::user(text)],
            tools: tools(),
            ..Default::default()
        }
    }

    #[test]
    fn what_no_tool_can_take_is_answered_in_words_of_the_persons_values() {
        let mut request = asked("Hello, how are you?");
        assert_eq!(steer(&mut request), Steered::ToWords);
        assert_eq!(request.tool_choice, ToolChoice::None);
        assert_eq!(request.grounding.unwrap().values, []);
        let mut request = asked("3x4 then +5");
        steer(&mut request);
        let values = request.grounding.unwrap().values;
        assert!(values.contains(&Literal::Number(5.0)), "{values:?}");
        assert!(!values.contains(&Literal::Number(15.0)), "{values:?}");
    }

    #[test]
    fn an_answer_that_ignores_the_result_is_replaced_by_it() {
        let mut request = asked("Multiply 13 by 3");
        let mut call = Message::new(Role::Assistant, "");
        call.tool_calls = vec![crate::llm::ToolCall {
            id: "c1".into(),
            name: "multiply".into(),
            arguments: r#"{"a":13,"b":3}"#.into(),
        }];
        request.messages.push(call);
        let mut result = Message::new(Role::Tool, "39");
        result.tool_call_id = Some("c1".into());
        request.messages.push(result);
        assert_eq!(keep_to_results(&request, "13 times 3 is 39."), None);
        assert_eq!(
            keep_to_results(&request, "13 * 3").as_deref(),
            Some("multiply(13, 3) = 39")
        );
        assert_eq!(
            keep_to_results(&request, "Lisbon is a lovely city in spring.").as_deref(),
            Some("multiply(13, 3) = 39")
        );
    }

    #[test]
    fn words_no_tool_backs_may_not_state_what_only_memory_holds() {
        let mut request = asked("Who is the president of France?");
        let steered = steer(&mut request);
        let refused = checked(
            &request,
            steered,
            "The President of France is François-Étienne Maréchal.",
        )
        .expect("an invented name is not shown");
        assert!(
            refused.starts_with(
                "I cannot answer this with the tools offered (add, multiply, weather)"
            ),
            "{refused}"
        );
        assert_eq!(
            checked(&request, steered, "I do not know who leads France."),
            None
        );
        // Values the person gave that no tool took are not worked by the
        // model: "8 sevens" with no step is not "56", nor "57".
        let mut request = asked("8 sevens");
        let steered = steer(&mut request);
        assert!(checked(&request, steered, "Sure, that makes 56.").is_some());
        // Small talk stands, and a name the tools hold is founded.
        let mut request = asked("Hello! How are you today?");
        let steered = steer(&mut request);
        let reply = "Hello! I'm doing well, thank you. How can I help you today?";
        assert_eq!(checked(&request, steered, reply), None);
        assert_eq!(
            checked(&request, steered, "I can tell you the Weather in a city."),
            None
        );
        // Without tools the model answers as it will: nothing was offered
        // to rest an answer on.
        let mut plain = asked("Who is the president of France?");
        plain.tools.clear();
        assert_eq!(steer(&mut plain), Steered::Unchecked);
    }

    #[test]
    fn a_required_call_is_held_to_the_messages_values() {
        let mut request = asked("What's the weather like in Paris today?");
        request.tool_choice = ToolChoice::Required;
        assert_eq!(steer(&mut request), Steered::Unchecked);
        assert_eq!(request.tool_choice, ToolChoice::Required);
        let grounding = request.grounding.expect("held to the message");
        assert!(
            grounding.texts.iter().any(|t| t.contains("Paris")),
            "{grounding:?}"
        );
    }

    #[test]
    fn after_a_tool_the_answer_keeps_to_what_it_returned() {
        let mut request = asked("What is 17 plus 25?");
        request.messages.push(Message::new(Role::Tool, "42"));
        assert_eq!(steer(&mut request), Steered::FromResults);
        assert_eq!(request.tool_choice, ToolChoice::None);
        let values = request.grounding.unwrap().values;
        assert!(values.contains(&Literal::Number(42.0)), "{values:?}");
    }
}
