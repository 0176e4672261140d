//! An OpenAI client's tool loop, played by the node for a model held to
//! groundings (the embedded one).
//!
//! The client runs the calls and sends their results back; each request
//! is one turn of the loop. The node reads the conversation as the steps
//! of the person's last message (see [`Steps`]): the calls the client ran
//! and what they returned are recorded, and the turn is the next step's
//! call, chosen and checked as chat's and goals' calls are, or, when every
//! part is settled, the answer worded from the results, with the parts not
//! done named. So the loop makes no call that does not fit its part, tries
//! again after a refusal with what the tool said, and never answers in
//! prose a question a tool was there to answer.
//!
//! What the node knows of a step the client cannot hold, it keeps in the
//! ids of the calls it makes, which the client sends back with their
//! results: the part a call was for, whether the model's accounts agreed
//! on its tool, and the parts given up on the way. A client can only
//! mislead itself by changing them.

use super::serve::{MADE_ALREADY, NO_USABLE_CALL, Skipped, call_for};
use super::steps::{Effects, Offered, Steps};
use super::{Ask, wording};
use crate::agent::tool::{Content, StructuredContent, ToolOutput};
use crate::llm::grounding::Literal;
use crate::llm::{ChatRequest, Completion, Role, StopReason, ToolCall, ToolChoice, Usage};
use serde_json::Value;
use std::sync::Mutex;

/// How the node played a turn.
pub enum Turn {
    /// The next call, or the answer: the completion to send.
    Played(Completion),
    /// Nothing for a tool to do, or a conversation the node did not steer:
    /// the model answers (see [`super::steer`]).
    ToTheModel,
}

/// Why a part was given up in an earlier turn: written in the id of the
/// call that followed, read back when the client returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GaveUp {
    /// The model made no usable call for it.
    NoUsableCall,
    /// The only call left for it was one already made.
    Repeated,
    /// The tool chosen for it was not one to run on a guess.
    NotRun,
}

impl GaveUp {
    fn code(self) -> char {
        match self {
            GaveUp::NoUsableCall => 'n',
            GaveUp::Repeated => 'r',
            GaveUp::NotRun => 'm',
        }
    }

    fn of(code: char) -> Option<GaveUp> {
        match code {
            'n' => Some(GaveUp::NoUsableCall),
            'r' => Some(GaveUp::Repeated),
            'm' => Some(GaveUp::NotRun),
            _ => None,
        }
    }

    fn why(self) -> &'static str {
        match self {
            GaveUp::NoUsableCall => NO_USABLE_CALL,
            GaveUp::Repeated => MADE_ALREADY,
            GaveUp::NotRun => {
                "neither the request's words nor the model's accounts in both orders chose \
                 a tool for it, and the one the model chose was not called"
            }
        }
    }
}

/// What a call's id says of the step it was made for.
#[derive(Debug, Clone, PartialEq, Default)]
struct Marked {
    part: Option<usize>,
    agreed: bool,
    gave_up: Vec<(usize, GaveUp)>,
}

/// The id of the `n`th call of a conversation, marked as [`Marked`]:
/// `call_3_p1a_g0n` (part 1, tool agreed on, part 0 given up: no usable
/// call).
fn call_id(n: usize, marked: &Marked) -> String {
    let mut id = format!("call_{n}");
    if let Some(part) = marked.part {
        id.push_str(&format!("_p{part}"));
        if marked.agreed {
            id.push('a');
        }
    }
    for (part, why) in &marked.gave_up {
        id.push_str(&format!("_g{part}{}", why.code()));
    }
    id
}

/// What an id the node made says; an id of anyone else's says nothing.
fn marked(id: &str) -> Marked {
    let mut marked = Marked::default();
    let Some(rest) = id.strip_prefix("call_") else {
        return marked;
    };
    for field in rest.split('_').skip(1) {
        if let Some(part) = field.strip_prefix('p') {
            let agreed = part.ends_with('a');
            if let Ok(index) = part.trim_end_matches('a').parse::<usize>() {
                marked.part = Some(index);
                marked.agreed = agreed;
            }
        } else if let Some(given_up) = field.strip_prefix('g') {
            let mut chars = given_up.chars();
            let code = chars.next_back();
            if let (Ok(index), Some(why)) =
                (chars.as_str().parse::<usize>(), code.and_then(GaveUp::of))
                && marked.gave_up.len() < super::steps::MAX_CALLS
            {
                marked.gave_up.push((index, why));
            }
        }
    }
    marked
}

/// A tool's result as the client sent it: an error when it says so the
/// way tool loops write one (`error: …`, `{"error": …}`).
fn output_of(content: &str) -> ToolOutput {
    let structured = StructuredContent::from_text(content.to_owned())
        .ok()
        .filter(|s| s.to_value().is_object());
    let head: String = content.trim_start().chars().take(5).collect();
    let is_error = head.eq_ignore_ascii_case("error")
        || structured.as_ref().is_some_and(|s| {
            let value = s.to_value();
            value.get("error").is_some_and(|e| !e.is_null())
                && value.as_object().is_some_and(|o| o.len() <= 2)
        });
    ToolOutput {
        content: vec![Content::Text {
            text: content.to_owned(),
        }],
        structured_content: if is_error { None } else { structured },
        is_error,
    }
}

/// The tools of `request` as the steps offer them. Their effects are not
/// known: a tool is called only when it was chosen for certain.
pub(super) fn offered(request: &ChatRequest) -> Vec<Offered> {
    request
        .tools
        .iter()
        .map(|tool| Offered {
            effects: Effects::named(&tool.name),
            output_schema: None,
            owner: String::new(),
            name: tool.name.clone(),
            description: tool.description.clone(),
            schema: tool.parameters.clone(),
        })
        .collect()
}

/// The steps of the person's last message, with the calls the client ran
/// for it recorded; and the parts given up so far.
fn replay(request: &ChatRequest, tools: &[Offered]) -> Option<(Steps, Vec<(usize, GaveUp)>)> {
    let asked_at = request
        .messages
        .iter()
        .rposition(|m| m.role == Role::User)?;
    // What earlier turns found: what "it" in "now double it" is.
    let earlier: Vec<Literal> = request.messages[..asked_at]
        .iter()
        .rev()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| super::steps::values_of_text(&m.content))
        .collect();
    let mut steps = Steps::after(&request.messages[asked_at].content, earlier);
    let mut gave_up: Vec<(usize, GaveUp)> = Vec::new();
    let since = &request.messages[asked_at + 1..];
    for (at, message) in since.iter().enumerate() {
        if message.role != Role::Assistant {
            continue;
        }
        for call in &message.tool_calls {
            // A call whose result the client did not send was not run.
            let Some(result) = since[at + 1..]
                .iter()
                .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(&call.id))
            else {
                continue;
            };
            let Some(tool) = tools.iter().position(|t| t.name == call.name) else {
                continue;
            };
            let Ok(arguments @ Value::Object(_)) = serde_json::from_str::<Value>(&call.arguments)
            else {
                continue;
            };
            let marked = marked(&call.id);
            for &(part, why) in &marked.gave_up {
                steps.give_up(part, why.why().to_owned());
                if !gave_up.contains(&(part, why)) {
                    gave_up.push((part, why));
                }
            }
            let Some(step) = steps.next(tools) else {
                break;
            };
            if marked.agreed && marked.part == Some(step.index) {
                steps.agree(&step, vec![tool]);
            }
            steps.record(tools, &step, tool, arguments, output_of(&result.content));
        }
    }
    Some((steps, gave_up))
}

/// The model's usage over the turn, summed, and whether the model itself
/// failed (it is not there, or its time ran out), as against answering
/// with no usable call.
struct Counted<'a, A> {
    ask: &'a A,
    usage: Mutex<Usage>,
    failed: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl<A: Ask> Ask for Counted<'_, A> {
    type Error = A::Error;

    async fn ask(
        &self,
        request: ChatRequest,
        max_tokens: u32,
        sink: crate::llm::DeltaSink,
    ) -> Result<Completion, A::Error> {
        let completion = self
            .ask
            .ask(request, max_tokens, sink)
            .await
            .inspect_err(|_| {
                self.failed
                    .store(true, std::sync::atomic::Ordering::Relaxed)
            })?;
        if let Ok(mut usage) = self.usage.lock() {
            usage.prompt_tokens = usage
                .prompt_tokens
                .saturating_add(completion.usage.prompt_tokens);
            usage.completion_tokens = usage
                .completion_tokens
                .saturating_add(completion.usage.completion_tokens);
        }
        Ok(completion)
    }

    fn unusable(&self, why: String) -> A::Error {
        self.ask.unusable(why)
    }
}

/// Plays the turn `request` asks for (see the module): `ToTheModel` when
/// it offers no tools, lets the model call none or names the one to call,
/// or asks nothing a tool can take.
pub async fn play<A: Ask>(request: &ChatRequest, ask: &A, model: &str) -> Result<Turn, A::Error> {
    let steerable = request.grounding.is_none()
        && !request.tools.is_empty()
        && matches!(request.tool_choice, ToolChoice::Auto | ToolChoice::Required)
        && request
            .messages
            .last()
            .is_some_and(|m| matches!(m.role, Role::User | Role::Tool));
    if !steerable {
        return Ok(Turn::ToTheModel);
    }
    let tools = offered(request);
    let Some((mut steps, mut gave_up)) = replay(request, &tools) else {
        return Ok(Turn::ToTheModel);
    };
    let counted = Counted {
        ask,
        usage: Mutex::new(Usage::default()),
        failed: Default::default(),
    };
    let played = |content: String, tool_calls: Vec<ToolCall>| {
        let usage = counted.usage.lock().map(|u| *u).unwrap_or_default();
        Turn::Played(Completion {
            content,
            stop_reason: if tool_calls.is_empty() {
                StopReason::EndTurn
            } else {
                StopReason::ToolCalls
            },
            tool_calls,
            model: model.to_owned(),
            usage,
            time_to_first_token: None,
        })
    };
    while let Some(step) = steps.next(&tools) {
        let chosen = match call_for(&counted, &mut steps, &tools, &step).await {
            Ok(chosen) => chosen,
            Err(skipped) => {
                // Said again in later turns from the call ids, so by a
                // code: the reason a tool may not run is not kept whole.
                let why = match skipped {
                    // No model to ask (its file is missing, its time ran
                    // out) is the node's failure, not an answer.
                    Skipped::Unusable(failure)
                        if steps.made().is_empty()
                            && counted.failed.load(std::sync::atomic::Ordering::Relaxed) =>
                    {
                        return Err(failure);
                    }
                    Skipped::Unusable(_) => GaveUp::NoUsableCall,
                    Skipped::Repeated => GaveUp::Repeated,
                    Skipped::NotRun(_) => GaveUp::NotRun,
                    Skipped::AnsweredBefore => continue,
                };
                steps.give_up(step.index, why.why().to_owned());
                gave_up.push((step.index, why));
                continue;
            }
        };
        let agreed = steps.agreed_on(&step, chosen.tool);
        let id = call_id(
            steps.made().len() + 1,
            &Marked {
                part: Some(step.index),
                agreed,
                gave_up: gave_up.clone(),
            },
        );
        let call = ToolCall {
            id,
            name: tools[chosen.tool].name.clone(),
            arguments: chosen.arguments.to_string(),
        };
        return Ok(played(String::new(), vec![call]));
    }
    // No part a tool can take; or none the node could make a call for,
    // where the client requires one: the model's call, which the client
    // asked for, is checked when its result comes back.
    let required = request.tool_choice == ToolChoice::Required;
    if steps.made().is_empty() && (gave_up.is_empty() || required) {
        return Ok(Turn::ToTheModel);
    }
    let note = wording::left_undone(&steps, &tools);
    let answer = wording::answer(&counted, &steps, &tools, note.as_deref(), None).await?;
    Ok(played(answer.text, Vec::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Message, ToolSpec};
    use serde_json::json;

    #[test]
    fn a_call_id_carries_its_step_and_what_was_given_up() {
        let state = Marked {
            part: Some(1),
            agreed: true,
            gave_up: vec![(0, GaveUp::NoUsableCall), (2, GaveUp::Repeated)],
        };
        let id = call_id(3, &state);
        assert_eq!(id, "call_3_p1a_g0n_g2r");
        assert_eq!(marked(&id), state);
        // Anyone else's id says nothing.
        assert_eq!(marked("call_abc123"), Marked::default());
        assert_eq!(marked("toolu_01"), Marked::default());
    }

    #[test]
    fn a_result_that_says_error_is_a_refusal() {
        assert!(output_of("error: unknown unit \"gallons\"; known units: gal, l").is_error);
        assert!(output_of("Error executing tool convert").is_error);
        assert!(output_of(r#"{"error": "no such country"}"#).is_error);
        assert!(!output_of("68").is_error);
        assert!(!output_of(r#"{"value": 20, "result": 68}"#).is_error);
        // A result that only mentions an error field among others is a result.
        assert!(!output_of(r#"{"errors": 0, "words": 4}"#).is_error);
    }

    fn convert() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "convert".into(),
            description: "Convert an amount between units (km, mi, kg, lb, c, f, gal, l).".into(),
            parameters: json!({"type": "object", "properties": {
                "amount": {"type": "number"},
                "from_unit": {"type": "string"},
                "to_unit": {"type": "string"}},
                "required": ["amount", "from_unit", "to_unit"]}),
        }]
    }

    /// A scripted model: it calls the step's tool with `arguments` (in
    /// turn, one list a call), and words answers as `answer`.
    struct Scripted {
        calls: Mutex<Vec<Value>>,
        answer: &'static str,
    }

    #[async_trait::async_trait]
    impl Ask for Scripted {
        type Error = String;

        async fn ask(
            &self,
            request: ChatRequest,
            _max_tokens: u32,
            _sink: crate::llm::DeltaSink,
        ) -> Result<Completion, String> {
            let tool_calls = if request.tools.is_empty() {
                Vec::new()
            } else {
                let mut calls = self.calls.lock().unwrap();
                if calls.is_empty() {
                    return Err("no more calls scripted".into());
                }
                vec![ToolCall {
                    id: "call_1".into(),
                    name: request.tools[0].name.clone(),
                    arguments: calls.remove(0).to_string(),
                }]
            };
            Ok(Completion {
                content: if tool_calls.is_empty() {
                    self.answer.into()
                } else {
                    String::new()
                },
                tool_calls,
                stop_reason: StopReason::EndTurn,
                model: "test".into(),
                usage: Usage::default(),
                time_to_first_token: None,
            })
        }

        fn unusable(&self, why: String) -> String {
            why
        }
    }

    fn scripted(calls: Vec<Value>, answer: &'static str) -> Scripted {
        Scripted {
            calls: Mutex::new(calls),
            answer,
        }
    }

    fn call_of(turn: Turn) -> ToolCall {
        match turn {
            Turn::Played(completion) => {
                assert_eq!(completion.stop_reason, StopReason::ToolCalls);
                completion.tool_calls[0].clone()
            }
            Turn::ToTheModel => panic!("the node played no call"),
        }
    }

    fn answer_of(turn: Turn) -> String {
        match turn {
            Turn::Played(completion) => {
                assert!(completion.tool_calls.is_empty());
                completion.content
            }
            Turn::ToTheModel => panic!("the node gave no answer"),
        }
    }

    /// `request` after the client ran `call`, which returned `result`.
    fn ran(request: &mut ChatRequest, call: ToolCall, result: &str) {
        let mut assistant = Message::new(Role::Assistant, "");
        let id = call.id.clone();
        assistant.tool_calls = vec![call];
        request.messages.push(assistant);
        let mut tool = Message::new(Role::Tool, result);
        tool.tool_call_id = Some(id);
        request.messages.push(tool);
    }

    #[tokio::test]
    async fn a_refused_call_is_made_again_from_what_the_tool_said_and_the_answer_is_its_result() {
        let mut request = ChatRequest {
            messages: vec![Message::user("Convert 5 gallons to liters")],
            tools: convert(),
            ..Default::default()
        };
        let model = scripted(
            vec![json!({"amount": 5, "from_unit": "gallons", "to_unit": "liters"})],
            "5 gallons is 18.93 liters.",
        );
        let first = call_of(play(&request, &model, "local").await.unwrap());
        assert_eq!(first.name, "convert");
        ran(
            &mut request,
            first,
            "error: unknown unit \"gallons\"; known units: km, mi, kg, lb, c, f, gal, l",
        );
        // The refusal corrects the call by itself.
        let second = call_of(play(&request, &model, "local").await.unwrap());
        let arguments: Value = serde_json::from_str(&second.arguments).unwrap();
        assert_eq!(arguments["from_unit"], "gal");
        assert_eq!(arguments["to_unit"], "l");
        ran(&mut request, second, "18.93");
        let answer = answer_of(play(&request, &model, "local").await.unwrap());
        assert_eq!(answer, "5 gallons is 18.93 liters.");
    }

    #[tokio::test]
    async fn an_answer_that_states_an_echoed_input_is_replaced_by_the_result() {
        let mut request = ChatRequest {
            messages: vec![Message::user("convert 20 c to f")],
            tools: convert(),
            ..Default::default()
        };
        let model = scripted(
            vec![json!({"amount": 20, "from_unit": "c", "to_unit": "f"})],
            "The result of the conversion from c to f is 20.",
        );
        let call = call_of(play(&request, &model, "local").await.unwrap());
        ran(
            &mut request,
            call,
            r#"{"amount": 20, "from_unit": "c", "to_unit": "f", "result": 68}"#,
        );
        let answer = answer_of(play(&request, &model, "local").await.unwrap());
        assert!(answer.contains("68"), "{answer}");
        assert!(!answer.contains("is 20."), "{answer}");
    }

    #[tokio::test]
    async fn a_call_that_fails_every_time_is_named_not_done_never_answered() {
        let mut request = ChatRequest {
            messages: vec![Message::user("Convert 5 parsecs to km")],
            tools: convert(),
            ..Default::default()
        };
        let model = scripted(
            vec![
                json!({"amount": 5, "from_unit": "parsecs", "to_unit": "km"}),
                json!({"amount": 5, "from_unit": "parsecs", "to_unit": "km"}),
                json!({"amount": 5, "from_unit": "parsecs", "to_unit": "km"}),
            ],
            "5 parsecs is 5 km.",
        );
        let call = call_of(play(&request, &model, "local").await.unwrap());
        ran(
            &mut request,
            call,
            "error: unknown unit \"parsecs\"; known units: km, mi, kg, lb, c, f, gal, l",
        );
        let answer = answer_of(play(&request, &model, "local").await.unwrap());
        assert!(answer.contains("Not done"), "{answer}");
        assert!(answer.contains("parsecs"), "{answer}");
        assert!(!answer.contains("5 km"), "{answer}");
    }

    #[tokio::test]
    async fn a_question_a_tool_plainly_answers_is_played_as_that_call() {
        let two = json!({"type": "object", "properties": {
            "a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]});
        let tool = |name: &str, description: &str| ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters: two.clone(),
        };
        let mut request = ChatRequest {
            messages: vec![Message::user("What is 17 plus 25?")],
            tools: vec![
                tool("multiply", "Multiply two numbers."),
                tool("add", "Add two numbers."),
            ],
            ..Default::default()
        };
        let model = scripted(vec![json!({"a": 17, "b": 25})], "17 plus 25 is 42.");
        let call = call_of(play(&request, &model, "local").await.unwrap());
        assert_eq!(
            (call.name.as_str(), call.arguments.as_str()),
            ("add", r#"{"a":17,"b":25}"#)
        );
        ran(&mut request, call, "42");
        assert_eq!(
            answer_of(play(&request, &model, "local").await.unwrap()),
            "17 plus 25 is 42."
        );
    }

    #[tokio::test]
    async fn small_talk_goes_to_the_model() {
        let request = ChatRequest {
            messages: vec![Message::user("Hello, how are you?")],
            tools: convert(),
            ..Default::default()
        };
        let model = scripted(Vec::new(), "Hello.");
        assert!(matches!(
            play(&request, &model, "local").await.unwrap(),
            Turn::ToTheModel
        ));
    }

    #[tokio::test]
    async fn a_missing_model_is_the_nodes_failure_not_an_answer() {
        let request = ChatRequest {
            messages: vec![Message::user("Convert 5 miles to km")],
            tools: convert(),
            ..Default::default()
        };
        // A model with no call scripted fails every request for one, as a
        // model whose file is missing does.
        let missing = scripted(Vec::new(), "unused");
        let failure = play(&request, &missing, "local").await.err();
        assert_eq!(failure.as_deref(), Some("no more calls scripted"));
        // A model that answers with no usable call is the model's answer.
        let model = scripted(vec![json!({"amount": "five"}); 8], "unused");
        let answer = answer_of(play(&request, &model, "local").await.unwrap());
        assert!(answer.contains("no usable call"), "{answer}");
    }
}
