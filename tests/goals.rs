//! Goals and teams, driven by a scripted model: a goal's steps called
//! where the agents live and concluded from their results; answers with
//! debris, contradictions or gaps replaced by the node's own statement;
//! calls with values the goal never gave refused; each limit stopping the
//! work as `stopped`, with what was found; cancel; a person's message
//! continuing a goal; teams formed from what a search finds, each member
//! there for a tool that served. The agents (calculator, text) are real and
//! called on a real node; the model is the only double: it answers by
//! rules over the request it gets.

use crate::support;

use agentsite::goals::ask::GoalModel;
use agentsite::goals::config::{AskedLimits, GoalsConfig};
use agentsite::goals::{Body, GoalError, GoalRecord, GoalState, Goals, Message, NewGoal, Speaker};
use agentsite::llm::grounding::Literal;
use agentsite::llm::{ChatRequest, Completion, LlmFailure};
use agentsite::{Node, config::Limits};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::hostile::node_with;
use support::scripted::{
    Answer, Asked, Request, capable, completion, goals_for, good_call, leak, read,
};

type Rules = dyn Fn(&Request) -> Answer + Send + Sync;

struct Scripted {
    rules: Box<Rules>,
    /// Tokens each answer reports using.
    tokens_per_answer: u32,
    requests: AtomicUsize,
    seen: Mutex<Vec<ChatRequest>>,
}

impl Scripted {
    fn new(rules: impl Fn(&Request) -> Answer + Send + Sync + 'static) -> Arc<Scripted> {
        Arc::new(Scripted {
            rules: Box::new(rules),
            tokens_per_answer: 10,
            requests: AtomicUsize::new(0),
            seen: Mutex::new(Vec::new()),
        })
    }

    /// The requests of kind `asked` it got, as read.
    fn asked(&self, asked: Asked) -> Vec<Request> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(read)
            .filter(|r| r.asked == asked)
            .collect()
    }
}

#[async_trait::async_trait]
impl GoalModel for Scripted {
    async fn complete(
        &self,
        _model: Option<&str>,
        request: ChatRequest,
        deadline: Instant,
    ) -> Result<Completion, LlmFailure> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        let mut answer = (self.rules)(&read(&request));
        self.seen.lock().unwrap().push(request);
        while let Answer::Later(wait, then) = answer {
            if tokio::time::timeout_at(deadline.into(), tokio::time::sleep(wait))
                .await
                .is_err()
            {
                return Err(LlmFailure::DeadlineExceeded("deadline".into()));
            }
            answer = *then;
        }
        Ok(completion(answer, self.tokens_per_answer))
    }

    fn resolve(&self, model: Option<&str>) -> Result<String, String> {
        Ok(model.unwrap_or("scripted").to_owned())
    }
}

struct Harness {
    goals: Arc<Goals>,
    _dir: tempfile::TempDir,
}

async fn harness(model: Arc<Scripted>, config: GoalsConfig) -> Harness {
    let (node, dir) = node_with(&["calculator", "text"], Limits::default()).await;
    let goals = goals_for(dir.path(), &node, None, model, config);
    Harness { goals, _dir: dir }
}

fn goal(text: &str, team: &[&str]) -> NewGoal {
    NewGoal {
        text: text.into(),
        team: team.iter().map(|t| t.to_string()).collect(),
        ..Default::default()
    }
}

impl Harness {
    /// Starts `new` and waits (bounded) for it to stop.
    async fn run(&self, new: NewGoal) -> (GoalRecord, Vec<Message>) {
        let record = self.goals.start(new, &tester()).await.unwrap();
        self.finish(&record.id).await
    }

    async fn finish(&self, id: &str) -> (GoalRecord, Vec<Message>) {
        let record = tokio::time::timeout(Duration::from_secs(60), self.goals.finished(id))
            .await
            .expect("the goal did not stop within 60 s")
            .unwrap();
        let messages = self.goals.messages(id, 0, 10_000).await.unwrap();
        (record, messages)
    }
}

fn kinds(messages: &[Message]) -> Vec<&'static str> {
    messages.iter().map(|m| m.body.kind()).collect()
}

fn conclusion(messages: &[Message]) -> (String, Option<String>, Speaker) {
    messages
        .iter()
        .rev()
        .find_map(|m| match &m.body {
            Body::Conclusion { text, limit } => {
                Some((text.clone(), limit.clone(), m.speaker.clone()))
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no conclusion in {:?}", kinds(messages)))
}

/// The tasks' results, in order: (ok, text).
fn results(messages: &[Message]) -> Vec<(bool, String)> {
    messages
        .iter()
        .filter_map(|m| match &m.body {
            Body::Result { ok, text, .. } => Some((*ok, text.clone())),
            _ => None,
        })
        .collect()
}

const TWO_PARTS: &str = "Add 1200 and 345, then count the words in 'the quick brown fox'.";

#[tokio::test]
async fn a_two_part_goal_calls_each_tool_where_its_agent_lives_and_concludes_from_the_results() {
    let model = Scripted::new(capable);
    let h = harness(model.clone(), GoalsConfig::default()).await;
    let started = Instant::now();
    let (record, messages) = h.run(goal(TWO_PARTS, &["calculator", "text"])).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    // Each step's call took the goal's own values, the earliest first.
    let calls = model.asked(Asked::Call);
    assert_eq!(calls.len(), 2, "one model request a step");
    assert_eq!(
        calls[0].grounding.as_ref().unwrap().required,
        Some(Literal::Number(1200.0))
    );
    assert_eq!(
        calls[1].grounding.as_ref().unwrap().required,
        Some(Literal::Text("the quick brown fox".into()))
    );
    // Tasks are titled by their calls, and report what the tools returned,
    // with the node that ran them.
    let assigned: Vec<(String, String)> = messages
        .iter()
        .filter_map(|m| match &m.body {
            Body::Assign { tasks, .. } => Some((tasks[0].assignee.clone(), tasks[0].text.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        assigned,
        [
            ("calculator".to_owned(), "add(1200, 345)".to_owned()),
            (
                "text".to_owned(),
                "word_count(\"the quick brown fox\")".to_owned()
            )
        ]
    );
    let peer = "this node";
    for m in &messages {
        if let Body::Progress {
            call: Some(call), ..
        } = &m.body
        {
            assert_eq!(call.node, peer);
            assert!(!call.is_error, "{call:?}");
        }
    }
    assert_eq!(
        results(&messages),
        [
            (true, "1545".to_owned()),
            (true, "words 4, lines 1, characters 19, bytes 19".to_owned())
        ]
    );
    // The conclusion states both results, in the model's words, said by
    // the member that did the first part.
    let (text, limit, speaker) = conclusion(&messages);
    assert_eq!(limit, None);
    assert!(text.contains("1545") && text.contains("words 4"), "{text}");
    assert!(matches!(speaker, Speaker::Member { ref name, .. } if name == "calculator"));
    assert_eq!(record.conclusion.as_deref(), Some(text.as_str()));
    assert_eq!(record.usage.tool_calls, 2);
    assert_eq!(record.usage.turns, 3, "two steps and the conclusion");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[tokio::test]
async fn an_answer_with_debris_a_contradiction_or_a_gap_is_replaced_by_the_nodes_statement() {
    let bad_answers = [
        "- #1 {{<insert task here}} (calculator): 42",
        "23 + 19 = 32",
        "I added the two numbers for you.",
        "The sum is 42. The sum is 42. The sum is 42.",
        "",
    ];
    for bad in bad_answers {
        let model = Scripted::new(move |request| match request.asked {
            Asked::Answer => Answer::Text(bad.into()),
            _ => capable(request),
        });
        let h = harness(model, GoalsConfig::default()).await;
        let (record, messages) = h.run(goal("Add 23 and 19.", &["calculator"])).await;
        assert_eq!(record.state, GoalState::Concluded, "{bad}: {messages:#?}");
        let (text, _, speaker) = conclusion(&messages);
        assert_eq!(text, "add(23, 19) = 42", "{bad}");
        assert_eq!(speaker, Speaker::Node, "{bad}");
    }
    // An answer that is a tool call instead of words is no answer either.
    let model = Scripted::new(|request| match request.asked {
        Asked::Answer => Answer::Call("add", json!({"a": 1, "b": 1})),
        _ => capable(request),
    });
    let h = harness(model, GoalsConfig::default()).await;
    let (record, _) = h.run(goal("Add 23 and 19.", &["calculator"])).await;
    assert_eq!(record.conclusion.as_deref(), Some("add(23, 19) = 42"));
}

#[tokio::test]
async fn a_call_with_values_the_goal_never_gave_is_refused_and_asked_again() {
    // The model first multiplies 1 by 7 for "6 by 7"; told, it corrects.
    let model = Scripted::new(|request| match request.asked {
        Asked::Call if request.told.is_none() => Answer::Call("multiply", json!({"a": 1, "b": 7})),
        _ => capable(request),
    });
    let h = harness(model.clone(), GoalsConfig::default()).await;
    let (record, messages) = h.run(goal("Multiply 6 by 7.", &["calculator"])).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    assert_eq!(results(&messages), [(true, "42".to_owned())]);
    let told = model.asked(Asked::Call).pop().unwrap().told.unwrap();
    assert!(told.starts_with("Not run:") && told.contains('1'), "{told}");
    assert_eq!(record.usage.tool_calls, 1, "the wrong call never ran");

    // A model that never corrects itself fails the goal with the reason,
    // after a bounded number of tries, without running a wrong call.
    let model = Scripted::new(|request| match request.asked {
        Asked::Call => Answer::Call("multiply", json!({"a": 1, "b": 7})),
        _ => capable(request),
    });
    let h = harness(model.clone(), GoalsConfig::default()).await;
    let (record, messages) = h.run(goal("Multiply 6 by 7.", &["calculator"])).await;
    assert_eq!(record.state, GoalState::Failed, "{messages:#?}");
    let reason = record.reason.unwrap();
    assert!(reason.contains("the model could not"), "{reason}");
    assert_eq!(record.usage.tool_calls, 0);
    assert!(model.asked(Asked::Call).len() <= 6);
}

#[tokio::test]
async fn a_tool_only_the_model_chose_is_on_record_and_answers_nothing() {
    // "What do you get from 6 and 7" names no tool of the calculator, and
    // the model's account of how to do it names whichever tool is listed
    // first: its `add` is the list's choice, and its 13 is nobody's
    // answer.
    let model = Scripted::new(|request| match request.asked {
        Asked::How => Answer::Text(format!("Use {} for it.", request.listed[0])),
        Asked::Call => Answer::Call("add", json!({"a": 6, "b": 7})),
        Asked::Answer => Answer::Text("6 and 7 make 13.".into()),
        _ => capable(request),
    });
    let h = harness(model.clone(), GoalsConfig::default()).await;
    let (record, messages) = h
        .run(goal("What do you get from 6 and 7?", &["calculator"]))
        .await;
    assert_eq!(record.state, GoalState::Failed, "{messages:#?}");
    assert_eq!(results(&messages), [(true, "13".to_owned())]);
    let reason = record.reason.unwrap();
    assert!(
        reason.contains(
            "no word of it names add, and the model's choice of it did not hold \
             with the tools listed in reverse: add(6, 7) returned 13"
        ),
        "{reason}"
    );
    // Asked with the tools in both orders, it named two tools.
    let listed: Vec<Vec<String>> = model
        .asked(Asked::How)
        .into_iter()
        .map(|r| r.listed)
        .collect();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(listed[0].first(), listed[1].last());
    assert!(model.asked(Asked::Answer).is_empty());
}

#[tokio::test]
async fn a_tool_the_model_names_in_either_order_answers() {
    // No word of the request names a tool, but the model says to multiply
    // however the tools are listed: the choice is its own, and the
    // product answers. ("6 times 7" would name `multiply` by itself.)
    let model = Scripted::new(|request| match request.asked {
        Asked::How => Answer::Text("Multiply 6 by 7.".into()),
        _ => capable(request),
    });
    let h = harness(model.clone(), GoalsConfig::default()).await;
    let (record, messages) = h
        .run(goal("What do you get from 6 and 7?", &["calculator"]))
        .await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    assert_eq!(results(&messages), [(true, "42".to_owned())]);
    assert!(record.conclusion.unwrap().contains("42"));
    assert_eq!(model.asked(Asked::How).len(), 2);
}

#[tokio::test]
async fn a_tool_that_changes_things_runs_only_when_the_words_choose_it() {
    // The model is sure, in either order, that reading a note means
    // deleting it: no word of the request names what `delete` does ("say"
    // is only in what it returns: "says whether it existed"), so it is not
    // offered for the part, the model's call of it is not made, and the
    // note is still there.
    let model = Scripted::new(|request| match request.asked {
        Asked::How => Answer::Text("Delete the note.".into()),
        Asked::Call => Answer::Call("delete", json!({"title": "groceries"})),
        _ => capable(request),
    });
    let (node, dir) = node_with(&["notes"], Limits::default()).await;
    support::hostile::grant(&node, "notes", &["kv=1MiB"]);
    let notes = node.resolve("notes").unwrap();
    let put = json!({"title": "groceries", "text": "milk, eggs"}).to_string();
    node.call_record(&notes, "put", &put, node.grants(&notes).unwrap(), None)
        .await
        .unwrap();
    let goals = goals_for(
        dir.path(),
        &node,
        None,
        model.clone(),
        GoalsConfig::default(),
    );
    let h = Harness { goals, _dir: dir };
    let (record, messages) = h
        .run(goal("What does the note 'groceries' say?", &["notes"]))
        .await;
    assert_ne!(record.state, GoalState::Concluded, "{messages:#?}");
    assert!(results(&messages).is_empty(), "{messages:#?}");
    let reason = record.reason.unwrap();
    assert!(
        reason.contains("not done: \"What does the note 'groceries' say?\"")
            && reason.contains("there is no tool \"delete\""),
        "{reason}"
    );
    let get = json!({"title": "groceries"}).to_string();
    let kept = node
        .call_record(&notes, "get", &get, node.grants(&notes).unwrap(), None)
        .await
        .unwrap();
    assert!(kept.text().contains("milk, eggs"), "{}", kept.text());
}

#[tokio::test]
async fn a_goal_whose_only_call_was_refused_fails_with_the_agents_own_error() {
    // The model would word a confident answer; it is never asked.
    let model = Scripted::new(|request| match request.asked {
        Asked::Answer => Answer::Text("1 divided by 0 is 1.".into()),
        _ => capable(request),
    });
    let h = harness(model.clone(), GoalsConfig::default()).await;
    let (record, messages) = h.run(goal("Divide 1 by 0.", &["calculator"])).await;
    assert_eq!(record.state, GoalState::Failed, "{messages:#?}");
    assert_eq!(
        results(&messages)[0],
        (false, "division by zero".to_owned())
    );
    let reason = record.reason.unwrap();
    assert!(
        reason.contains("calculator's divide(1, 0) failed: division by zero"),
        "{reason}"
    );
    assert!(record.conclusion.is_none());
    assert!(model.asked(Asked::Answer).is_empty());
}

/// A node with the agents a new user wrote: a unit converter whose units
/// are symbols, and a country almanac keyed by names.
async fn users_agents(model: Arc<Scripted>) -> Harness {
    let (node, dir) = node_with(&["unit_convert", "almanac"], Limits::default()).await;
    let goals = goals_for(dir.path(), &node, None, model, GoalsConfig::default());
    Harness { goals, _dir: dir }
}

/// A conversion as a model that reads the request's words makes it: the
/// amount, then the units as written ("5 gallons to liters"), or, once
/// an agent refused them, the words offered for them.
fn converting(request: &Request) -> Answer {
    let grounding = request.grounding.clone().unwrap();
    let amount = match grounding.required.clone() {
        Some(Literal::Number(n)) => n,
        other => panic!("a conversion starts from its amount, not {other:?}"),
    };
    // It copies the person's words until an agent's refusal is before it.
    let offered: Vec<String> = grounding
        .values
        .iter()
        .filter(|_| request.user.contains("Refused:"))
        .filter_map(|v| match v {
            Literal::Text(t) => Some(t.clone()),
            _ => None,
        })
        .collect();
    let words: Vec<String> = request
        .now()
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_owned())
        .collect();
    let after = |at: usize| words.get(at + 1).cloned().unwrap_or_default();
    let at = words
        .iter()
        .position(|w| w.parse::<f64>() == Ok(amount))
        .unwrap();
    let (mut from, mut to) = (after(at), after(at + 2));
    // The agent's offer for a word it refused stands in for it.
    for symbol in &offered {
        if from.starts_with(symbol.as_str()) && from != *symbol {
            from = symbol.clone();
        } else if to.starts_with(symbol.as_str()) && to != *symbol {
            to = symbol.clone();
        }
    }
    Answer::Call(
        "convert",
        json!({"amount": amount, "from_unit": from, "to_unit": to}),
    )
}

#[tokio::test]
async fn a_refused_call_is_made_again_from_the_agents_error_and_each_is_on_record() {
    let model = Scripted::new(|request| match request.asked {
        Asked::Call => converting(request),
        _ => capable(request),
    });
    let h = users_agents(model.clone()).await;
    // The agent's error offers one word for the one it refused ("gal" for
    // "gallons") and, in the list it stopped at, one for the word it would
    // have refused next ("l" for "liters"): the node makes the call again
    // with both.
    let (record, messages) = h
        .run(goal("Convert 5 gallons to liters", &["unit-convert"]))
        .await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    let results = results(&messages);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(!results[0].0 && results[0].1.contains("unknown unit \"gallons\""));
    assert!(
        results[1].0 && results[1].1.contains("18.9271"),
        "{results:?}"
    );
    let text = record.conclusion.unwrap();
    assert!(text.contains("18.9271"), "{text}");

    // It offers two ("f" and "ft" both abbreviate "fahrenheit"): the model
    // reads what the agent said, and may take either, and tries again.
    let (record, messages) = h
        .run(goal("Convert 100 fahrenheit to c", &["unit-convert"]))
        .await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    let calls = model.asked(Asked::Call);
    let retry = calls.last().unwrap();
    assert!(
        retry
            .user
            .contains("Refused: convert(100, \"fahrenheit\", \"c\")"),
        "{}",
        retry.user
    );
    assert!(retry.user.contains("known units:"));
    let offered = &retry.grounding.as_ref().unwrap().values;
    assert!(offered.contains(&Literal::Text("f".into())), "{offered:?}");
    assert!(offered.contains(&Literal::Text("ft".into())), "{offered:?}");
    let text = record.conclusion.unwrap();
    assert!(text.contains("37.7778"), "{text}\n{messages:#?}");
}

#[tokio::test]
async fn a_conversion_no_retry_can_fix_fails_with_the_agents_error_not_an_invention() {
    let model = Scripted::new(|request| match request.asked {
        Asked::Call => converting(request),
        Asked::Answer => Answer::Text("5 parsecs is 5 km.".into()),
        _ => capable(request),
    });
    let h = users_agents(model.clone()).await;
    let (record, messages) = h
        .run(goal("Convert 5 parsecs to km", &["unit-convert"]))
        .await;
    assert_eq!(record.state, GoalState::Failed, "{messages:#?}");
    let reason = record.reason.unwrap();
    assert!(reason.contains("unknown unit \"parsecs\""), "{reason}");
    // The error offers nothing that stands for "parsecs": one call, the
    // same again would only repeat it.
    assert_eq!(record.usage.tool_calls, 1, "{messages:#?}");
    assert!(model.asked(Asked::Answer).is_empty());
}

#[tokio::test]
async fn an_input_the_result_echoes_is_not_stated_as_the_result() {
    let model = Scripted::new(|request| match request.asked {
        Asked::Call => converting(request),
        Asked::Answer => Answer::Text("The result of the conversion from c to f is 20.".into()),
        _ => capable(request),
    });
    let h = users_agents(model).await;
    let (record, messages) = h.run(goal("Convert 20 c to f", &["unit-convert"])).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    let (text, _, speaker) = conclusion(&messages);
    assert_eq!(speaker, Speaker::Node, "{text}");
    assert!(text.contains("= 68") && !text.contains("is 20"), "{text}");
}

#[tokio::test]
async fn a_request_with_a_part_no_agent_can_do_is_partial_and_names_it() {
    let model = Scripted::new(|request| match request.asked {
        Asked::Call => Answer::Call(
            leak(&request.tools[0].name),
            json!({"country_name": "Kenya"}),
        ),
        _ => capable(request),
    });
    let h = users_agents(model.clone()).await;
    let (record, messages) = h
        .run(goal(
            "What is the capital of Kenya, and what is the population of Kenya?",
            &["almanac"],
        ))
        .await;
    assert_eq!(record.state, GoalState::Partial, "{messages:#?}");
    assert_eq!(results(&messages), [(true, "Nairobi".to_owned())]);
    let text = record.conclusion.clone().unwrap();
    assert!(text.contains("Nairobi"), "{text}");
    assert!(
        text.contains(
            "Not done: \"what is the population of Kenya?\" (no tool at hand does this)."
        ),
        "{text}"
    );
    let reason = record.reason.unwrap();
    assert!(reason.starts_with("partial: "), "{reason}");

    // Both parts, each by its own call.
    let (record, messages) = h
        .run(goal(
            "What is the capital of Kenya, and what currency does Kenya use?",
            &["almanac"],
        ))
        .await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    let results = results(&messages);
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0], (true, "Nairobi".to_owned()));
    assert!(results[1].1.contains("Kenyan shilling"), "{results:?}");
}

/// Runs the two-part goal under `limits`; it must stop at `limit`.
async fn stopped_by(
    model: Arc<Scripted>,
    limits: AskedLimits,
    limit: &str,
) -> (GoalRecord, Vec<Message>) {
    let h = harness(model, GoalsConfig::default()).await;
    let mut new = goal(TWO_PARTS, &["calculator", "text"]);
    new.limits = limits;
    let (record, messages) = h.run(new).await;
    assert_eq!(record.state, GoalState::Stopped, "{messages:#?}");
    assert_eq!(
        record.reason.as_deref(),
        Some(format!("stopped: the {limit} limit was hit").as_str())
    );
    let (text, at, speaker) = conclusion(&messages);
    assert_eq!(at.as_deref(), Some(limit));
    assert_eq!(speaker, Speaker::Node);
    assert!(
        text.contains(&format!("Stopped: the goal's {limit} limit")),
        "{text}"
    );
    (record, messages)
}

#[tokio::test]
async fn each_limit_stops_the_goal_as_stopped_with_what_was_found() {
    // One turn: the first step is done, the second is not.
    let turns = AskedLimits {
        turns: Some(1),
        ..Default::default()
    };
    let (record, _) = stopped_by(Scripted::new(capable), turns, "turns").await;
    let text = record.conclusion.unwrap();
    assert!(text.starts_with("add(1200, 345) = 1545\n"), "{text}");
    assert!(!text.contains("word_count"), "{text}");

    // One tool call: the second task is not run, and says so.
    let calls = AskedLimits {
        tool_calls: Some(1),
        ..Default::default()
    };
    let (record, messages) = stopped_by(Scripted::new(capable), calls, "tool calls").await;
    assert_eq!(record.usage.tool_calls, 1);
    let last = results(&messages).pop().unwrap();
    assert!(!last.0 && last.1.contains("not run"), "{last:?}");

    // Tokens: each answer reports 10; 15 allow the first step only.
    let tokens = AskedLimits {
        tokens: Some(15),
        ..Default::default()
    };
    let (record, _) = stopped_by(Scripted::new(capable), tokens, "tokens").await;
    assert!(record.usage.tokens <= 20, "{:?}", record.usage);
}

#[tokio::test]
async fn a_deadline_stops_a_slow_model_and_the_node_says_what_was_found() {
    let model = Scripted::new(|request| match request.asked {
        Asked::Call if request.now().contains("quick") => Answer::Later(
            Duration::from_secs(30),
            Box::new(Answer::Text("late".into())),
        ),
        _ => capable(request),
    });
    let limits = AskedLimits {
        deadline: Some(Duration::from_millis(1500)),
        ..Default::default()
    };
    let started = Instant::now();
    let (record, _) = stopped_by(model, limits, "deadline").await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let text = record.conclusion.unwrap();
    assert!(text.starts_with("add(1200, 345) = 1545\n"), "{text}");
}

#[tokio::test]
async fn cancel_stops_the_goal_while_the_model_works() {
    let model = Scripted::new(|request| match request.asked {
        Asked::Call => Answer::Later(Duration::from_secs(60), Box::new(good_call(request))),
        _ => capable(request),
    });
    let h = harness(model.clone(), GoalsConfig::default()).await;
    let record = h
        .goals
        .start(goal("What is 6 times 7?", &["calculator"]), &tester())
        .await
        .unwrap();
    support::eventually_async(
        Duration::from_secs(30),
        "the model is asked",
        async || match model.asked(Asked::Call).len() {
            0 => Err("not yet".to_owned()),
            _ => Ok(()),
        },
    )
    .await;
    let started = Instant::now();
    h.goals.cancel(&record.id).unwrap();
    let (record, messages) = h.finish(&record.id).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(record.state, GoalState::Cancelled);
    assert!(
        matches!(&messages.last().unwrap().body, Body::Notice { text } if text.contains("cancelled"))
    );
    assert_eq!(record.usage.tool_calls, 0);
    assert!(matches!(
        h.goals.cancel(&record.id),
        Err(GoalError::Conflict(_))
    ));
}

#[tokio::test]
async fn a_person_continues_a_finished_goal() {
    let h = harness(Scripted::new(capable), GoalsConfig::default()).await;
    let (first, _) = h.run(goal("Add 6 and 10.", &["calculator"])).await;
    assert_eq!(first.conclusion.as_deref(), Some("Found: add(6, 10) = 16."));
    h.goals
        .say(&first.id, "Now multiply 16 by 2.".into())
        .await
        .unwrap();
    let (record, messages) = h.finish(&first.id).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    assert_eq!(
        record.conclusion.as_deref(),
        Some("Found: multiply(16, 2) = 32.")
    );
    assert!(record.usage.turns > first.usage.turns);
    let says = messages.iter().filter(|m| m.body.kind() == "say").count();
    assert_eq!(says, 1);
    // Task numbers go on from the first round's.
    assert!(messages.iter().any(|m| matches!(
        &m.body,
        Body::Result {
            task: 2,
            ok: true,
            ..
        }
    )));
    let seqs: Vec<u64> = messages.iter().map(|m| m.seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
}

#[tokio::test]
async fn without_a_team_each_member_joins_for_the_tool_that_served_a_part() {
    let model = Scripted::new(|request| match request.asked {
        // The search reads the model's account of the goal too.
        Asked::How if request.user.contains("Add 23 and 19") => {
            Answer::Text("Add 23 and 19 with a calculator.".into())
        }
        _ => capable(request),
    });
    let h = harness(model, GoalsConfig::default()).await;
    let (record, messages) = h.run(goal("Add 23 and 19.", &[])).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    assert_eq!(record.team, ["calculator"]);
    let teams: Vec<_> = messages
        .iter()
        .filter_map(|m| match &m.body {
            Body::Team { members, queries } => Some((members.clone(), queries.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(teams.len(), 1, "{messages:#?}");
    let (members, queries) = &teams[0];
    assert_eq!(queries[0], "Add 23 and 19.");
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].name, "calculator");
    assert_eq!(members[0].reason, "its tool add serves: Add 23 and 19.");
    assert!(members[0].local);
}

#[tokio::test]
async fn values_no_member_can_take_bring_in_an_agent_that_can_as_the_depth_allows() {
    let goal_text = "Count the words in 'to be or not to be', then add 6 and 10.";
    // Depth 1: the node looks for an agent that adds, and it joins.
    let h = harness(Scripted::new(capable), GoalsConfig::default()).await;
    let (record, messages) = h.run(goal(goal_text, &["text"])).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    assert_eq!(record.team, ["text", "calculator"]);
    assert!(messages.iter().any(|m| matches!(
        &m.body,
        Body::Notice { text } if text.contains("looks for agents")
    )));
    let text = record.conclusion.unwrap();
    assert!(text.contains("words 6") && text.contains("16"), "{text}");

    // Depth 0: no one is looked for, and the conclusion says what was not done.
    let h = harness(Scripted::new(capable), GoalsConfig::default()).await;
    let mut new = goal(goal_text, &["text"]);
    new.limits.depth = Some(0);
    let (record, messages) = h.run(new).await;
    assert_eq!(record.state, GoalState::Partial, "{messages:#?}");
    assert_eq!(record.team, ["text"]);
    let text = record.conclusion.unwrap();
    assert!(text.contains("Not done: \"add 6 and 10.\""), "{text}");
}

#[tokio::test]
async fn a_goal_no_agent_can_do_fails_clearly() {
    let model = Scripted::new(|request| match request.asked {
        Asked::How => Answer::Text("Look at a weather forecast.".into()),
        _ => capable(request),
    });
    let h = harness(model, GoalsConfig::default()).await;
    let (record, _) = h.run(goal("tomorrow's weather in Lyon", &[])).await;
    assert_eq!(record.state, GoalState::Failed);
    // The search finds nothing; this node's own agents cannot do it.
    let reason = record.reason.unwrap();
    assert_eq!(
        reason, "no tool of calculator, text can do what the goal asks",
        "{reason}"
    );
    assert!(record.team.is_empty());
}

#[tokio::test]
async fn bad_goals_are_refused_with_a_reason() {
    let model = Scripted::new(|_| Answer::Text("unused".into()));
    let h = harness(model, GoalsConfig::default()).await;
    let refused = |result: Result<GoalRecord, GoalError>| match result {
        Err(GoalError::Invalid(why)) => why,
        other => panic!("{other:?}"),
    };
    assert!(refused(h.goals.start(goal("  ", &[]), &tester()).await).contains("no text"));
    let long = "x".repeat(agentsite::goals::MAX_TEXT + 1);
    assert!(refused(h.goals.start(goal(&long, &[]), &tester()).await).contains("over the limit"));
    assert!(
        refused(h.goals.start(goal("go", &["nosuch"]), &tester()).await)
            .contains("unknown team member \"nosuch\"")
    );
    let mut greedy = goal("go", &["text"]);
    greedy.limits = AskedLimits {
        turns: Some(1000),
        ..Default::default()
    };
    assert!(refused(h.goals.start(greedy, &tester()).await).contains("max_turns"));
    assert!(matches!(
        h.goals.record("gffffffffffffffff").await,
        Err(GoalError::NotFound(_))
    ));
}

/// The value of the metric `name` (without labels) in `node`'s scrape.
fn metric(node: &Node, name: &str) -> f64 {
    let scrape = node.audit().encode();
    scrape
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_goal_stops_the_call_it_started_on_another_node() {
    use support::testnet::{node_with_hub, node_with_hub_config};
    // The member's node would let the call spin for two minutes.
    let host_dir = tempfile::tempdir().unwrap();
    let mut config = agentsite::NodeConfig::default();
    config.limits.deadline = Duration::from_secs(120);
    let (host_node, host) = node_with_hub_config(host_dir.path(), &[], config).await;
    let spinner = host_node
        .add(&std::fs::read(support::wasm("hostile_loop")).unwrap())
        .await
        .unwrap();
    host.publish(&spinner.id.to_string()).await.unwrap();
    let entry = host.network().addresses().await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let (node, hub) = node_with_hub(dir.path(), &entry).await;
    let model = Scripted::new(capable);
    let goals = goals_for(dir.path(), &node, Some(hub), model, GoalsConfig::default());
    let record = goals
        .start(goal("spin", &[&spinner.id.to_string()]), &tester())
        .await
        .unwrap();
    support::eventually_async(
        Duration::from_secs(60),
        "the call runs there",
        async || match metric(&host_node, "agentsite_remote_calls_running") {
            1.0 => Ok(()),
            n => Err(format!("{n} remote calls running")),
        },
    )
    .await;
    goals.cancel(&record.id).unwrap();
    let record = tokio::time::timeout(Duration::from_secs(30), goals.finished(&record.id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.state, GoalState::Cancelled);
    // Stopped there too, long before its two minutes.
    support::eventually_async(Duration::from_secs(30), "the call stops", async || {
        let running = metric(&host_node, "agentsite_remote_calls_running");
        let scrape = host_node.audit().encode();
        match scrape.contains("agentsite_remote_calls_total{outcome=\"cancelled\"} 1") {
            true if running == 0.0 => Ok(()),
            _ => Err(format!("{running} running; {scrape}")),
        }
    })
    .await;
}

/// Who the goals of this file are given by.
fn tester() -> agentsite::requester::Requester {
    agentsite::requester::Requester::new("test", None)
}
