//! A request answered with a set of tools, start to end: the steps it
//! takes, each call run by the caller, and the answer from what they
//! returned. Chat and A2A answer people this way; goals run the same
//! steps under their budget, with teams (see [`crate::goals`]).

use super::steps::{Offered, Outcome, Step, Steps};
use super::wording::{self, Answer};
use super::{Ask, Chosen, choose};
use crate::agent::tool::ToolOutput;
use crate::llm::DeltaSink;
use serde_json::Value;

/// Runs the calls an answer makes, where their agents live.
#[async_trait::async_trait]
pub trait Runner: Send + Sync {
    /// Runs `tool` with `arguments` (`label` is how a person reads the
    /// call: `add(2, 3)`): its result, or an error result saying why it
    /// could not run.
    async fn run(&self, tool: &Offered, arguments: &Value, label: &str) -> ToolOutput;

    /// The model is about to be asked which call the next step makes.
    fn choosing(&self, _part: &str) {}
}

/// What answering a request did.
pub struct Served {
    /// The calls made and their results.
    pub steps: Steps,
    /// The answer, when a call was made (`None`: no step could be taken
    /// with these tools; the caller answers otherwise).
    pub answer: Option<Answer>,
}

impl Served {
    /// How far the request was answered.
    pub fn outcome(&self) -> Outcome {
        self.steps.outcome()
    }
}

/// Answers `request` with `tools`: each step's call chosen (see
/// [`choose`]) and run by `runner`, then the answer worded from the
/// results (its text sent to `sink` as written). A part the model cannot
/// make a usable call for, or whose call only repeats one made, is given
/// up and named in the answer; when no call at all could be made, the
/// model's failure is returned.
pub async fn serve<A: Ask, R: Runner>(
    ask: &A,
    request: &str,
    tools: &[Offered],
    runner: &R,
    sink: DeltaSink,
) -> Result<Served, A::Error> {
    let mut steps = Steps::new(request);
    let mut first_failure = None;
    while let Some(step) = steps.next(tools) {
        runner.choosing(&step.part);
        let chosen = match call_for(ask, &mut steps, tools, &step).await {
            Ok(chosen) => chosen,
            Err(skipped) => {
                let why = match skipped {
                    Skipped::Unusable(failure) => {
                        first_failure.get_or_insert(failure);
                        NO_USABLE_CALL.to_owned()
                    }
                    Skipped::Repeated => MADE_ALREADY.to_owned(),
                    Skipped::NotRun(why) => why,
                    Skipped::AnsweredBefore => continue,
                };
                steps.give_up(step.index, why);
                continue;
            }
        };
        let tool = &tools[chosen.tool];
        let label = wording::call_label(tool, &chosen.arguments);
        let output = runner.run(tool, &chosen.arguments, &label).await;
        steps.record(tools, &step, chosen.tool, chosen.arguments, output);
    }
    if steps.made().is_empty() {
        if let Some(failure) = first_failure {
            return Err(failure);
        }
        return Ok(Served {
            steps,
            answer: None,
        });
    }
    let note = wording::left_undone(&steps, tools);
    let answer = wording::answer(ask, &steps, tools, note.as_deref(), sink).await?;
    Ok(Served {
        steps,
        answer: Some(answer),
    })
}

/// Why a step is given up when the model made no usable call for it.
pub(super) const NO_USABLE_CALL: &str = "the model made no usable call for it";
/// Why a step is given up when its call would only repeat one made.
pub(super) const MADE_ALREADY: &str = "the only call left for it was one already made";

/// Why a step's call is not made.
pub(crate) enum Skipped<E> {
    /// The model made no usable call: its failure.
    Unusable(E),
    /// The call would only repeat one made, and its answer.
    Repeated,
    /// The tool chosen may not run on the choice that chose it: why.
    NotRun(String),
    /// The call was made already for another part, and its result answers
    /// this one too: it is on record for both (see
    /// [`Steps::answered_before`]).
    AnsweredBefore,
}

/// The call `step` makes: the one chosen for it (see [`choose`]), unless
/// it repeats a call made or its tool may not run on that choice (see
/// [`Steps::may_run`]). Chat, A2A and goals run it; `/v1` hands it to the
/// client (see [`super::tool_loop`]).
pub(crate) async fn call_for<A: Ask>(
    ask: &A,
    steps: &mut Steps,
    tools: &[Offered],
    step: &Step,
) -> Result<Chosen, Skipped<A::Error>> {
    let chosen = choose(ask, steps, tools, step)
        .await
        .map_err(Skipped::Unusable)?;
    if steps.repeats(chosen.tool, &chosen.arguments) {
        return Err(
            match steps.answered_before(tools, step, chosen.tool, &chosen.arguments) {
                true => Skipped::AnsweredBefore,
                false => Skipped::Repeated,
            },
        );
    }
    steps
        .may_run(tools, step, chosen.tool)
        .map_err(Skipped::NotRun)?;
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tool::Content;
    use crate::llm::{ChatRequest, Completion, ToolCall};
    use serde_json::json;
    use std::sync::Mutex;

    /// A model that makes the call the step's grounding gives, in order,
    /// and answers with `answer`.
    struct Model {
        answer: &'static str,
    }

    #[async_trait::async_trait]
    impl Ask for Model {
        type Error = String;

        async fn ask(
            &self,
            request: ChatRequest,
            _max_tokens: u32,
            _sink: DeltaSink,
        ) -> Result<Completion, String> {
            let (content, tool_calls) = match &request.grounding {
                Some(grounding) if !request.tools.is_empty() => {
                    let numbers: Vec<f64> = grounding
                        .all_values()
                        .filter_map(|v| match v {
                            crate::llm::grounding::Literal::Number(n) => Some(*n),
                            _ => None,
                        })
                        .collect();
                    let call = ToolCall {
                        id: "1".into(),
                        name: request.tools[0].name.clone(),
                        arguments: json!({"a": numbers[0], "b": numbers[1]}).to_string(),
                    };
                    (String::new(), vec![call])
                }
                _ => (self.answer.to_owned(), Vec::new()),
            };
            Ok(super::super::tests::scripted(content, tool_calls))
        }

        fn unusable(&self, why: String) -> String {
            why
        }
    }

    #[derive(Default)]
    struct Adder {
        ran: Mutex<Vec<String>>,
    }

    #[async_trait::async_trait]
    impl Runner for Adder {
        async fn run(&self, _tool: &Offered, arguments: &Value, label: &str) -> ToolOutput {
            self.ran.lock().unwrap().push(label.to_owned());
            let sum = arguments["a"].as_f64().unwrap() + arguments["b"].as_f64().unwrap();
            ToolOutput {
                content: vec![Content::Text {
                    text: sum.to_string(),
                }],
                structured_content: None,
                is_error: false,
            }
        }
    }

    fn add() -> Vec<Offered> {
        vec![Offered {
            effects: crate::answers::steps::Effects::ReadOnly,
            output_schema: None,
            owner: "calculator".into(),
            name: "add".into(),
            description: "Add two numbers.".into(),
            schema: json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
        }]
    }

    #[tokio::test]
    async fn each_step_is_run_and_the_answer_rests_on_the_results() {
        let runner = Adder::default();
        let model = Model {
            answer: "2 plus 3 is 5, and 10 plus 20 is 30.",
        };
        let served = serve(
            &model,
            "Add 2 and 3, then add 10 and 20.",
            &add(),
            &runner,
            None,
        )
        .await
        .unwrap();
        assert_eq!(*runner.ran.lock().unwrap(), ["add(2, 3)", "add(10, 20)"]);
        let answer = served.answer.unwrap();
        assert!(answer.by_model);
        assert_eq!(answer.text, "2 plus 3 is 5, and 10 plus 20 is 30.");

        // A wrong answer is replaced by the node's statement.
        let wrong = Model {
            answer: "2 plus 3 is 6.",
        };
        let served = serve(&wrong, "Add 2 and 3.", &add(), &Adder::default(), None)
            .await
            .unwrap();
        assert_eq!(served.answer.unwrap().text, "add(2, 3) = 5");
    }

    #[tokio::test]
    async fn a_request_no_tool_can_take_makes_no_call() {
        let runner = Adder::default();
        let model = Model { answer: "Hello." };
        let served = serve(&model, "Hello there!", &add(), &runner, None)
            .await
            .unwrap();
        assert!(served.answer.is_none());
        assert!(runner.ran.lock().unwrap().is_empty());
    }
}
