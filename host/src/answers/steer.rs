//! Requests of OpenAI clients, steered for a model held to groundings (the
//! embedded one), which cannot judge on its own when a tool is needed nor
//! keep to what a tool returned.
//!
//! - The person asks (the last message is theirs), with tools and
//!   `tool_choice` auto or required: when a tool can take the values the
//!   message gives (or its words name a tool that needs none), a call is
//!   plainly needed: one call is required, of the tool the person's words
//!   or the model's few words on how to do it name ("what is 17 plus 25":
//!   "add 17 and 25"), held to the message's values, the earliest first.
//!   Auto with no tool needed is answered in words.
//! - A tool answered (the last message is a tool's): the answer is held to
//!   the values the person and the tools gave, so it cannot say 32 when
//!   the tool said 42.

use super::Ask;
use super::steps::{Offered, Steps};
use crate::llm::grounding::{Grounding, Literal, values_in};
use crate::llm::{ChatRequest, Role, ToolChoice};

/// Steers `request` as the module says, asking `ask` (the same model) in
/// a few words how to do what the person asks when their words leave more
/// than one tool; a request with its own grounding, or none of these
/// shapes, is left as it is.
pub async fn steer<A: Ask>(request: &mut ChatRequest, ask: &A) {
    if request.grounding.is_some() {
        return;
    }
    let Some(last) = request.messages.last() else {
        return;
    };
    match last.role {
        Role::User => call_when_needed(request, ask).await,
        Role::Tool => answer_from_results(request),
        _ => {}
    }
}

async fn call_when_needed<A: Ask>(request: &mut ChatRequest, ask: &A) {
    if request.tools.is_empty()
        || !matches!(request.tool_choice, ToolChoice::Auto | ToolChoice::Required)
    {
        return;
    }
    let asked = request
        .messages
        .last()
        .map(|m| m.content.clone())
        .unwrap_or_default();
    let offered: Vec<Offered> = request
        .tools
        .iter()
        .map(|tool| Offered {
            effects: crate::answers::steps::Effects::Unknown,
            owner: String::new(),
            name: tool.name.clone(),
            description: tool.description.clone(),
            schema: tool.parameters.clone(),
        })
        .collect();
    let steps = Steps::new(&asked);
    let Some(step) = steps.next(&offered) else {
        if request.tool_choice == ToolChoice::Auto {
            request.tool_choice = ToolChoice::None;
        }
        return;
    };
    // A tool can take what the person gave: one is plainly needed. Which
    // one their words say, or the model's account of how to do it.
    let mut chosen = steps.named_by(&offered, &step, "");
    if chosen.len() > 1 {
        let thought = ask
            .ask(
                ChatRequest {
                    messages: vec![
                        crate::llm::Message::system("Explain briefly how to do this."),
                        crate::llm::Message::user(step.part.clone()),
                    ],
                    temperature: Some(0.0),
                    caller: request.caller.clone(),
                    ..Default::default()
                },
                super::THOUGHT_TOKENS,
                None,
            )
            .await;
        if let Ok(thought) = thought {
            chosen = steps.named_by(&offered, &step, &thought.content);
        }
    }
    let tools = chosen
        .iter()
        .map(|&i| request.tools[i].clone())
        .collect::<Vec<_>>();
    request.tool_choice = match tools.as_slice() {
        [one] => ToolChoice::Named(one.name.clone()),
        _ => ToolChoice::Required,
    };
    request.tools = tools;
    request.parallel_tool_calls = Some(false);
    request.grounding = Some(step.grounding);
}

/// Whether `request` asks for the answer after tool results: its last
/// messages are tools'.
pub fn after_results(request: &ChatRequest) -> bool {
    request
        .messages
        .last()
        .is_some_and(|m| m.role == Role::Tool)
}

/// The answer `content` to `request` (which follows tool results), kept to
/// what the tools returned: `None` when it states a value of each result
/// of the last turn; else the node's statement of those calls and
/// results, which replaces it (a model that ignored "39" and wrote "13 *
/// 3", or a paragraph of its own, is not shown).
pub fn keep_to_results(request: &ChatRequest, content: &str) -> Option<String> {
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

    /// A model whose account of how to do anything is `said`.
    struct Says(&'static str);

    #[async_trait::async_trait]
    impl Ask for Says {
        type Error = String;

        async fn ask(
            &self,
            _request: ChatRequest,
            _max_tokens: u32,
            _sink: crate::llm::DeltaSink,
        ) -> Result<crate::llm::Completion, String> {
            Ok(crate::llm::Completion {
                content: self.0.into(),
                tool_calls: Vec::new(),
                stop_reason: crate::llm::StopReason::EndTurn,
                model: "test".into(),
                usage: Default::default(),
                time_to_first_token: None,
            })
        }

        fn unusable(&self, why: String) -> String {
            why
        }
    }

    fn asked(text: &str) -> ChatRequest {
        ChatRequest {
            messages: vec![Message::user(text)],
            tools: tools(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_question_a_tool_plainly_answers_requires_that_call_with_its_values() {
        let mut request = asked("What is 17 plus 25?");
        steer(&mut request, &Says("Add 17 and 25.")).await;
        assert_eq!(request.tool_choice, ToolChoice::Named("add".into()));
        let grounding = request.grounding.unwrap();
        assert_eq!(grounding.required, Some(Literal::Number(17.0)));
        assert_eq!(grounding.values, [Literal::Number(25.0)]);
    }

    #[tokio::test]
    async fn small_talk_is_answered_in_words() {
        let mut request = asked("Hello, how are you?");
        steer(&mut request, &Says("Say hello.")).await;
        assert_eq!(request.tool_choice, ToolChoice::None);
        assert!(request.grounding.is_none());
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
        assert!(after_results(&request));
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

    #[tokio::test]
    async fn after_a_tool_the_answer_keeps_to_what_it_returned() {
        let mut request = asked("What is 17 plus 25?");
        request.messages.push(Message::new(Role::Tool, "42"));
        steer(&mut request, &Says("")).await;
        assert_eq!(request.tool_choice, ToolChoice::None);
        let values = request.grounding.unwrap().values;
        assert!(values.contains(&Literal::Number(42.0)), "{values:?}");
    }
}
