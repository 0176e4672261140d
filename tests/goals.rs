//! Goals and teams, driven by a scripted model: the controller's paths
//! (discussion, sync tasks, async tasks with a pause, a nested team, the
//! forced conclusions at each limit, a malformed answer, cancel, a person's
//! message continuing a goal) with real agents (calculator, text) called
//! on a real node. The model is the only double: it answers by rules over
//! the request it gets, as a fixed script would in order.

mod support;

use agentsite::goals::ask::GoalModel;
use agentsite::goals::config::{AskedLimits, GoalsConfig};
use agentsite::goals::{Body, GoalError, GoalRecord, GoalState, Goals, Message, NewGoal};
use agentsite::llm::{ChatRequest, Completion, LlmFailure, Role};
use agentsite::{Node, config::Limits};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::hostile::node_with;
use support::scripted::{Answer, completion, goals_for, turn};

type Rules = dyn Fn(&Request) -> Answer + Send + Sync;

/// A request as the rules read it.
struct Request {
    /// The member speaking or working ("You are NAME, ...").
    speaker: String,
    /// A turn (an answer of the turn schema), with the allowed types.
    turn: Option<Vec<String>>,
    /// The first turn, which may only assign tasks.
    opening: bool,
    /// The model is asked for search queries.
    queries: bool,
    /// The model is asked to pick members.
    pick: bool,
    /// A task step: its task text, and whether tool results came back.
    task: Option<String>,
    tool_results: usize,
    tools: Vec<String>,
    text: String,
}

fn read(request: &ChatRequest) -> Request {
    let system = request
        .messages
        .first()
        .map(|m| m.content.clone())
        .unwrap_or_default();
    let user = request
        .messages
        .get(1)
        .map(|m| m.content.clone())
        .unwrap_or_default();
    let speaker = system
        .strip_prefix("You are ")
        .and_then(|rest| rest.split(',').next())
        .unwrap_or("")
        .to_owned();
    let schema = request.response_schema.clone().unwrap_or(Value::Null);
    let turn = schema["properties"]["type"]["enum"]
        .as_array()
        .map(|kinds| {
            kinds
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        });
    let task = user
        .split("Your task: ")
        .nth(1)
        .filter(|_| system.contains("Do the task"))
        .map(str::to_owned);
    let opening = turn
        .as_ref()
        .is_some_and(|kinds: &Vec<String>| !kinds.iter().any(|k| k == "discussion"));
    Request {
        speaker,
        opening,
        turn,
        queries: !schema["properties"]["queries"].is_null(),
        pick: !schema["properties"]["members"].is_null(),
        task,
        tool_results: request
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .count(),
        tools: request.tools.iter().map(|t| t.name.clone()).collect(),
        text: request
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

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

/// The opening that hands the calculator "add 6 and 10", `next` speaking next.
fn add_six_and_ten(next: &str) -> Answer {
    turn("assign_sync", "go", &[("calculator", "add 6 and 10")], next)
}

/// A task step of a member that calls one tool, then reports its result.
fn work(request: &Request, tool: &'static str, arguments: Value) -> Answer {
    if request.tool_results == 0 {
        Answer::Call(tool, arguments)
    } else {
        Answer::Text(format!("{tool} done"))
    }
}

struct Harness {
    goals: Arc<Goals>,
    node: Arc<Node>,
    _dir: tempfile::TempDir,
}

async fn harness(model: Arc<Scripted>, config: GoalsConfig) -> Harness {
    let (node, dir) = node_with(&["calculator", "text"], Limits::default()).await;
    let goals = goals_for(dir.path(), &node, None, model, config);
    Harness {
        goals,
        node,
        _dir: dir,
    }
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
        let record = self.goals.start(new).await.unwrap();
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

/// Waits (up to 30 s) for a message of any goal that `matches`.
async fn until_message(
    events: &mut tokio::sync::broadcast::Receiver<agentsite::goals::GoalEvent>,
    what: &str,
    matches: impl Fn(&Message) -> bool,
) {
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Ok(agentsite::goals::GoalEvent::Message { message, .. }) = events.recv().await
                && matches(&message)
            {
                return;
            }
        }
    });
    found
        .await
        .unwrap_or_else(|_| panic!("{what}: not within 30 s"));
}

fn kinds(messages: &[Message]) -> Vec<&'static str> {
    messages.iter().map(|m| m.body.kind()).collect()
}

fn position(messages: &[Message], predicate: impl Fn(&Message) -> bool) -> usize {
    messages
        .iter()
        .position(predicate)
        .unwrap_or_else(|| panic!("no such message in {:?}", kinds(messages)))
}

fn conclusion(messages: &[Message]) -> (String, Option<String>) {
    messages
        .iter()
        .rev()
        .find_map(|m| match &m.body {
            Body::Conclusion { text, limit } => Some((text.clone(), limit.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no conclusion in {:?}", kinds(messages)))
}

/// The usual members' work: text counts words, calculator adds.
fn members_work(request: &Request) -> Option<Answer> {
    let task = request.task.as_ref()?;
    Some(if request.speaker == "text" {
        work(request, "word_count", json!({"text": "to be or not to be"}))
    } else if task.contains("multiply") {
        work(request, "multiply", json!({"a": 6, "b": 2}))
    } else {
        work(request, "add", json!({"a": 6, "b": 10}))
    })
}

#[tokio::test]
async fn a_team_discusses_runs_tasks_in_parallel_and_concludes_with_provenance() {
    let turns = Arc::new(AtomicUsize::new(0));
    let counter = turns.clone();
    let model = Scripted::new(move |request| {
        if let Some(answer) = members_work(request) {
            return answer;
        }
        match counter.fetch_add(1, Ordering::SeqCst) {
            0 => turn(
                "assign_sync",
                "text counts, calculator adds",
                &[
                    ("text", "count the words of 'to be or not to be'"),
                    ("calculator", "add 6 and 10"),
                ],
                "text",
            ),
            1 => turn(
                "discussion",
                "6 words; 16 with ten added",
                &[],
                "calculator",
            ),
            _ => turn(
                "conclude",
                "The text has 6 words; 6 + 10 = 16.",
                &[],
                "text",
            ),
        }
    });
    let h = harness(model, GoalsConfig::default()).await;
    let (record, messages) = h
        .run(goal(
            "count the words of 'to be or not to be' and add 10",
            &["calculator", "text"],
        ))
        .await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    assert_eq!(
        record.conclusion.as_deref(),
        Some("The text has 6 words; 6 + 10 = 16.")
    );
    assert_eq!(record.team, ["calculator", "text"]);
    // The turns in order; the two tasks' steps and results come in
    // between, in whichever order the tasks finish.
    let turns: Vec<&str> = kinds(&messages)
        .into_iter()
        .filter(|k| !["progress", "result"].contains(k))
        .collect();
    assert_eq!(
        turns,
        ["goal", "team", "assign_sync", "discussion", "conclusion"]
    );
    let assigned = position(&messages, |m| m.body.kind() == "assign_sync");
    let discussed = position(&messages, |m| m.body.kind() == "discussion");
    let results: Vec<&Message> = messages[assigned..discussed]
        .iter()
        .filter(|m| m.body.kind() == "result")
        .collect();
    assert_eq!(results.len(), 2, "a sync assignment waits for both results");
    // Provenance: every result and tool call names the member (agent id,
    // name, node) and the call its tool, arguments and result.
    let text_id = h.node.resolve("text").unwrap().id;
    let mut saw_count = false;
    for message in &messages {
        if let Body::Progress {
            call: Some(call), ..
        } = &message.body
        {
            let agentsite::goals::Speaker::Member { name, agent, node } = &message.speaker else {
                panic!("a tool call without its member: {message:?}");
            };
            assert_eq!(node, "this node");
            assert_eq!(call.node, "this node");
            if name == "text" {
                assert_eq!(*agent, text_id);
                assert_eq!(call.tool, "word_count");
                assert_eq!(call.arguments["text"], "to be or not to be");
                assert!(call.result.contains("\"words\":6"), "{}", call.result);
                saw_count = true;
            } else {
                assert_eq!(call.tool, "add");
                assert_eq!(call.result, "16.0");
            }
        }
    }
    assert!(saw_count);
    assert_eq!(record.usage.tasks, 2);
    assert_eq!(record.usage.tool_calls, 2);
    assert_eq!(record.usage.turns, 3);
}

#[tokio::test]
async fn async_tasks_report_later_while_the_talk_goes_on_and_a_pause_waits_for_them() {
    let turns = Arc::new(AtomicUsize::new(0));
    let counter = turns.clone();
    let model = Scripted::new(move |request| {
        if request.task.is_some() {
            // The task takes a while: the conversation goes on meanwhile.
            let answer = members_work(request).unwrap();
            return if request.tool_results == 0 {
                Answer::Later(Duration::from_millis(800), Box::new(answer))
            } else {
                answer
            };
        }
        match counter.fetch_add(1, Ordering::SeqCst) {
            0 => turn(
                "assign_async",
                "text, count in the background",
                &[("text", "count the words")],
                "calculator",
            ),
            1 => turn(
                "discussion",
                "while text counts: the answer will be a word count",
                &[],
                "text",
            ),
            2 => Answer::Json(
                json!({"type": "pause", "text": "waiting for the count", "tasks": [], "wait_for": [1], "next": "calculator"}),
            ),
            _ => turn("conclude", "6 words", &[], "text"),
        }
    });
    let h = harness(model, GoalsConfig::default()).await;
    let (record, messages) = h
        .run(goal("count the words", &["calculator", "text"]))
        .await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    let discussed = position(&messages, |m| m.body.kind() == "discussion");
    let paused = position(&messages, |m| m.body.kind() == "pause");
    let result = position(&messages, |m| m.body.kind() == "result");
    let concluded = position(&messages, |m| m.body.kind() == "conclusion");
    assert!(
        discussed < result,
        "the talk went on while the task ran: {:?}",
        kinds(&messages)
    );
    assert!(
        paused < result && result < concluded,
        "{:?}",
        kinds(&messages)
    );
    let Body::Pause { tasks, .. } = &messages[paused].body else {
        unreachable!()
    };
    assert_eq!(tasks, &[1]);
}

#[tokio::test]
async fn a_member_forms_a_sub_team_whose_conclusion_is_its_result() {
    let turns = Arc::new(AtomicUsize::new(0));
    let counter = turns.clone();
    let model = Scripted::new(move |request| {
        if request.queries {
            return Answer::Json(json!({"queries": ["add numbers"]}));
        }
        if request.pick {
            return Answer::Json(json!({"members": [{"name": "calculator", "reason": "it adds"}]}));
        }
        if let Some(task) = &request.task {
            if request.speaker == "text" && request.tool_results == 0 {
                assert!(
                    request.tools.iter().any(|t| t == "form_team"),
                    "{:?}",
                    request.tools
                );
                return Answer::Call("form_team", json!({"goal": "add 6 and 10"}));
            }
            assert!(
                !request.tools.iter().any(|t| t == "form_team"),
                "depth 1 allows one level only: {task}"
            );
            return members_work(request).unwrap();
        }
        let top_level = request.text.contains("Goal: sum it up");
        match (top_level, counter.fetch_add(1, Ordering::SeqCst)) {
            (true, 0) => turn(
                "assign_sync",
                "text, get the sum",
                &[("text", "find 6 + 10")],
                "text",
            ),
            (false, _)
                if request.turn.as_ref().is_some_and(|k| {
                    k.contains(&"assign_sync".to_owned()) && !k.contains(&"conclude".to_owned())
                }) =>
            {
                turn(
                    "assign_sync",
                    "I add",
                    &[("calculator", "add 6 and 10")],
                    "calculator",
                )
            }
            (false, _) => turn("conclude", "6 + 10 = 16", &[], "calculator"),
            (true, _) => turn("conclude", "the sum is 16", &[], "text"),
        }
    });
    let h = harness(model, GoalsConfig::default()).await;
    let (record, messages) = h.run(goal("sum it up", &["text"])).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    let nested: Vec<&Message> = messages.iter().filter(|m| m.team == Some(1)).collect();
    let nested_kinds: Vec<&str> = nested.iter().map(|m| m.body.kind()).collect();
    assert_eq!(nested_kinds.first(), Some(&"team"), "{nested_kinds:?}");
    assert!(
        nested_kinds.contains(&"assign_sync") && nested_kinds.contains(&"conclusion"),
        "{nested_kinds:?}"
    );
    let Body::Team { members, .. } = &nested[0].body else {
        unreachable!()
    };
    // One agent matched the sub-team's search: the model was not asked.
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].name, "calculator");
    assert_eq!(members[0].reason, "the only agent found");
    // The sub-team's conclusion is the task's result in the main team.
    let result = messages
        .iter()
        .find(|m| m.team.is_none() && matches!(&m.body, Body::Result { task: 1, .. }))
        .unwrap();
    assert!(
        matches!(&result.body, Body::Result { ok: true, text, .. } if text == "6 + 10 = 16"),
        "{result:?}"
    );
}

#[tokio::test]
async fn cancel_during_a_nested_team_stops_the_sub_team_and_its_tasks() {
    let model = Scripted::new(|request| {
        if request.queries {
            return Answer::Json(json!({"queries": ["add numbers"]}));
        }
        if let Some(_task) = &request.task {
            if request.speaker == "text" {
                return Answer::Call("form_team", json!({"goal": "add 6 and 10 slowly"}));
            }
            // The sub-team's member works for a minute.
            return Answer::Later(
                Duration::from_secs(60),
                Box::new(Answer::Text("late".into())),
            );
        }
        if request.text.contains("Goal: sum it up") {
            return turn(
                "assign_sync",
                "text, get the sum",
                &[("text", "find 6 + 10")],
                "text",
            );
        }
        add_six_and_ten("calculator")
    });
    let h = harness(model, GoalsConfig::default()).await;
    let mut events = h.goals.subscribe();
    let record = h.goals.start(goal("sum it up", &["text"])).await.unwrap();
    // Cancel once the sub-team has handed out its task.
    until_message(&mut events, "the sub-team assigns its task", |m| {
        m.team == Some(1) && m.body.kind() == "assign_sync"
    })
    .await;
    h.goals.cancel(&record.id).unwrap();
    let (record, messages) = tokio::time::timeout(Duration::from_secs(10), h.finish(&record.id))
        .await
        .expect("a cancelled goal stops at once, its sub-team too");
    assert_eq!(record.state, GoalState::Cancelled);
    assert!(
        !messages
            .iter()
            .any(|m| matches!(&m.body, Body::Conclusion { .. })),
        "{:?}",
        kinds(&messages)
    );
    assert!(
        matches!(&messages.last().unwrap().body, Body::Notice { text } if text.contains("cancelled"))
    );
}

#[tokio::test]
async fn a_failing_tool_goes_back_to_the_model_and_a_task_that_never_succeeds_fails() {
    let model = Scripted::new(|request| {
        if request.task.is_some() {
            // Every step divides by zero, whatever the tool said before.
            return Answer::Call("divide", json!({"a": 1, "b": 0}));
        }
        match request.turn.as_deref() {
            _ if request.opening => turn(
                "assign_sync",
                "go",
                &[("calculator", "divide 1 by 0")],
                "calculator",
            ),
            _ => turn("conclude", "1 / 0 has no value", &[], "calculator"),
        }
    });
    let h = harness(model.clone(), GoalsConfig::default()).await;
    let (record, messages) = h.run(goal("divide 1 by 0", &["calculator"])).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    // Each failed call is in the transcript with its error...
    let calls: Vec<_> = messages
        .iter()
        .filter_map(|m| match &m.body {
            Body::Progress {
                call: Some(call), ..
            } => Some(call),
            _ => None,
        })
        .collect();
    assert!(!calls.is_empty());
    assert!(
        calls
            .iter()
            .all(|c| c.is_error && c.result.contains("division by zero"))
    );
    // ...the model read the error on its next step...
    let seen = model.seen.lock().unwrap();
    assert!(seen.iter().any(|request| {
        request
            .messages
            .iter()
            .any(|m| m.role == Role::Tool && m.content.contains("division by zero"))
    }));
    // ...and a task whose calls never succeed fails with the reason.
    assert!(messages.iter().any(|m| matches!(
        &m.body,
        Body::Result { ok: false, text, .. } if text.contains("no result")
    )));
    assert_eq!(conclusion(&messages).0, "1 / 0 has no value");
}

#[tokio::test]
async fn depth_zero_offers_no_sub_team() {
    let model = Scripted::new(|request| {
        if let Some(task) = &request.task {
            assert!(!request.tools.iter().any(|t| t == "form_team"), "{task}");
            return members_work(request).unwrap();
        }
        match request.turn.as_deref() {
            Some(kinds) if kinds.contains(&"discussion".to_owned()) => {
                turn("conclude", "done", &[], "text")
            }
            _ => turn("assign_sync", "go", &[("text", "count")], "text"),
        }
    });
    let h = harness(model, GoalsConfig::default()).await;
    let mut new = goal("count", &["text"]);
    new.limits.depth = Some(0);
    let (record, _) = h.run(new).await;
    assert_eq!(record.state, GoalState::Concluded);
}

#[tokio::test]
async fn max_turns_forces_a_conclusion_that_names_the_limit() {
    let model = Scripted::new(|request| {
        if let Some(answer) = members_work(request) {
            return answer;
        }
        match request.turn.as_deref() {
            Some([only]) if only == "conclude" => {
                assert!(
                    request.text.contains("turns limit was hit"),
                    "{}",
                    request.text
                );
                turn("conclude", "out of turns: 16 so far", &[], "text")
            }
            _ if request.opening => add_six_and_ten("text"),
            _ => turn("discussion", "let us talk more", &[], "calculator"),
        }
    });
    let h = harness(model, GoalsConfig::default()).await;
    let mut new = goal("talk forever", &["calculator", "text"]);
    new.limits.turns = Some(3);
    let (record, messages) = h.run(new).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    assert_eq!(record.usage.turns, 3);
    assert_eq!(
        conclusion(&messages),
        ("out of turns: 16 so far".into(), Some("turns".into()))
    );
    assert!(record.reason.unwrap().contains("turns"));
}

#[tokio::test]
async fn a_token_budget_ends_the_goal_with_what_is_known() {
    let model = Scripted::new(|request| {
        if let Some(answer) = members_work(request) {
            return answer;
        }
        match request.turn.as_deref() {
            _ if request.opening => add_six_and_ten("text"),
            _ => turn("discussion", "more talk", &[], "calculator"),
        }
    });
    let h = harness(model, GoalsConfig::default()).await;
    let mut new = goal("spend tokens", &["calculator", "text"]);
    // Each answer costs 10 tokens: the opening, two task steps, two turns.
    new.limits.tokens = Some(45);
    let (record, messages) = h.run(new).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    let (text, limit) = conclusion(&messages);
    assert_eq!(limit.as_deref(), Some("tokens"));
    assert!(
        text.contains("tokens limit") && text.contains("16"),
        "{text}"
    );
    let last = messages.last().unwrap();
    assert_eq!(
        last.speaker,
        agentsite::goals::Speaker::Node,
        "no model was asked past the budget"
    );
}

#[tokio::test]
async fn a_tool_call_budget_stops_tasks_and_forces_a_conclusion() {
    let model = Scripted::new(|request| {
        if request.task.is_some() {
            // Keeps calling tools.
            return Answer::Call("add", json!({"a": 1, "b": request.tool_results}));
        }
        match request.turn.as_deref() {
            Some([only]) if only == "conclude" => {
                turn("conclude", "stopped early", &[], "calculator")
            }
            _ => turn(
                "assign_sync",
                "go",
                &[("calculator", "add forever")],
                "calculator",
            ),
        }
    });
    let h = harness(model, GoalsConfig::default()).await;
    let mut new = goal("add forever", &["calculator"]);
    new.limits.tool_calls = Some(2);
    let (record, messages) = h.run(new).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    assert_eq!(record.usage.tool_calls, 2);
    assert_eq!(conclusion(&messages).1.as_deref(), Some("tool calls"));
    assert!(messages.iter().any(
        |m| matches!(&m.body, Body::Result { text, .. } if text.contains("tool calls limit"))
    ));
}

#[tokio::test]
async fn a_deadline_stops_running_tasks_and_concludes_without_the_model() {
    let model = Scripted::new(|request| {
        if request.task.is_some() {
            return Answer::Later(
                Duration::from_secs(30),
                Box::new(Answer::Text("late".into())),
            );
        }
        turn("assign_sync", "go", &[("text", "count slowly")], "text")
    });
    let h = harness(model, GoalsConfig::default()).await;
    let mut new = goal("count slowly", &["text"]);
    new.limits.deadline = Some(Duration::from_millis(1500));
    let started = Instant::now();
    let (record, messages) = h.run(new).await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    let (text, limit) = conclusion(&messages);
    assert_eq!(limit.as_deref(), Some("deadline"));
    assert!(
        text.contains("No task had finished") || text.contains("deadline"),
        "{text}"
    );
    assert!(
        messages
            .iter()
            .any(|m| matches!(&m.body, Body::Result { ok: false, .. })),
        "the running task is reported stopped"
    );
}

#[tokio::test]
async fn a_malformed_answer_is_retried_once_then_the_turn_fails_and_the_goal_goes_on() {
    let model = Scripted::new(|request| {
        if let Some(answer) = members_work(request) {
            return answer;
        }
        match (request.speaker.as_str(), request.turn.as_deref()) {
            // text never answers in shape.
            ("text", _) => Answer::Text("Sure! Here is my plan: …".into()),
            _ if request.opening => add_six_and_ten("text"),
            _ => turn("conclude", "16", &[], "calculator"),
        }
    });
    let h = harness(model.clone(), GoalsConfig::default()).await;
    let (record, messages) = h.run(goal("add", &["text", "calculator"])).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    let failure = messages
        .iter()
        .find_map(|m| match &m.body {
            Body::Failure { text } => Some(text.clone()),
            _ => None,
        })
        .expect("the failed turn is in the conversation");
    assert!(failure.starts_with("text's turn failed"), "{failure}");
    assert!(failure.contains("not JSON"), "{failure}");
    // The retry carried the parser's error back to the model.
    let seen = model.seen.lock().unwrap();
    assert!(seen.iter().any(|r| {
        r.messages
            .iter()
            .any(|m| m.content.contains("That answer cannot be used"))
    }));
}

#[tokio::test]
async fn three_failed_turns_in_a_row_fail_the_goal() {
    let model = Scripted::new(|_| Answer::Text("no".into()));
    let h = harness(model.clone(), GoalsConfig::default()).await;
    let (record, messages) = h.run(goal("anything", &["text"])).await;
    assert_eq!(record.state, GoalState::Failed, "{messages:#?}");
    assert!(record.reason.unwrap().contains("3 turns in a row"));
    assert_eq!(
        model.requests.load(Ordering::SeqCst),
        6,
        "each turn asked twice"
    );
}

#[tokio::test]
async fn cancel_stops_the_goal_and_its_tasks() {
    let model = Scripted::new(|request| {
        if request.task.is_some() {
            return Answer::Later(
                Duration::from_secs(60),
                Box::new(Answer::Text("late".into())),
            );
        }
        turn("assign_sync", "go", &[("text", "count slowly")], "text")
    });
    let h = harness(model, GoalsConfig::default()).await;
    let mut events = h.goals.subscribe();
    let record = h
        .goals
        .start(goal("count slowly", &["text"]))
        .await
        .unwrap();
    // Cancel once the task is running.
    until_message(&mut events, "the task is assigned", |m| {
        m.body.kind() == "assign_sync"
    })
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
    assert!(matches!(
        h.goals.cancel(&record.id),
        Err(GoalError::Conflict(_))
    ));
}

#[tokio::test]
async fn a_person_continues_a_finished_goal() {
    let model = Scripted::new(|request| {
        if let Some(answer) = members_work(request) {
            return answer;
        }
        match request.turn.as_deref() {
            _ if request.opening => add_six_and_ten("calculator"),
            _ if request.text.contains("now multiply")
                && request.text.contains("multiply done") =>
            {
                turn("conclude", "16 * 2 = 32", &[], "calculator")
            }
            _ if request.text.contains("now multiply") => turn(
                "assign_sync",
                "multiplying",
                &[("calculator", "multiply 16 by 2")],
                "calculator",
            ),
            _ => turn("conclude", "16", &[], "calculator"),
        }
    });
    let h = harness(model, GoalsConfig::default()).await;
    let (first, _) = h.run(goal("add 6 and 10", &["calculator"])).await;
    assert_eq!(first.conclusion.as_deref(), Some("16"));
    h.goals
        .say(&first.id, "now multiply it by 2".into())
        .await
        .unwrap();
    let (record, messages) = h.finish(&first.id).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    assert_eq!(record.conclusion.as_deref(), Some("16 * 2 = 32"));
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
async fn bad_goals_are_refused_with_a_reason() {
    let model = Scripted::new(|_| Answer::Text("unused".into()));
    let h = harness(model, GoalsConfig::default()).await;
    let refused = |result: Result<GoalRecord, GoalError>| match result {
        Err(GoalError::Invalid(why)) => why,
        other => panic!("{other:?}"),
    };
    assert!(refused(h.goals.start(goal("  ", &[])).await).contains("no text"));
    let long = "x".repeat(agentsite::goals::MAX_TEXT + 1);
    assert!(refused(h.goals.start(goal(&long, &[])).await).contains("over the limit"));
    assert!(
        refused(h.goals.start(goal("go", &["nosuch"])).await)
            .contains("unknown team member \"nosuch\"")
    );
    let mut greedy = goal("go", &["text"]);
    greedy.limits = AskedLimits {
        turns: Some(1000),
        ..Default::default()
    };
    assert!(refused(h.goals.start(greedy).await).contains("max_turns"));
    assert!(matches!(
        h.goals.record("gffffffffffffffff").await,
        Err(GoalError::NotFound(_))
    ));
}

#[tokio::test]
async fn without_a_team_the_model_picks_members_among_what_search_finds() {
    let model = Scripted::new(|request| {
        if request.queries {
            return Answer::Json(json!({"queries": ["count words", "add numbers"]}));
        }
        if request.pick {
            assert!(
                request.text.contains("- text:") && request.text.contains("- calculator:"),
                "{}",
                request.text
            );
            return Answer::Json(json!({"members": [
                {"name": "text", "reason": "counts words"},
                {"name": "calculator", "reason": "adds"}
            ]}));
        }
        if let Some(answer) = members_work(request) {
            return answer;
        }
        match request.turn.as_deref() {
            _ if request.opening => turn(
                "assign_async",
                "go",
                &[("text", "count the words")],
                "calculator",
            ),
            _ => turn("conclude", "6 words", &[], "text"),
        }
    });
    let h = harness(model, GoalsConfig::default()).await;
    let (record, messages) = h.run(goal("count the words and add ten", &[])).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    let Body::Team { members, queries } = &messages[1].body else {
        panic!("{:?}", messages[1])
    };
    assert_eq!(
        queries[..2],
        ["count words".to_owned(), "add numbers".to_owned()]
    );
    let named: Vec<(&str, &str)> = members
        .iter()
        .map(|m| (m.name.as_str(), m.reason.as_str()))
        .collect();
    assert_eq!(named, [("text", "counts words"), ("calculator", "adds")]);
    assert!(members.iter().all(|m| m.local));
}

#[tokio::test]
async fn a_goal_no_agent_matches_fails_clearly() {
    let model = Scripted::new(|request| {
        if request.queries {
            return Answer::Json(json!({"queries": ["weather forecast"]}));
        }
        Answer::Text("unused".into())
    });
    let h = harness(model, GoalsConfig::default()).await;
    let (record, _) = h.run(goal("tomorrow's weather in Lyon", &[])).await;
    assert_eq!(record.state, GoalState::Failed);
    assert!(
        record
            .reason
            .unwrap()
            .contains("no agent on this node or the network matches")
    );
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
    let mut config = agentsite::config::Config::default();
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
    let name = spinner.card.name.clone();
    let model = Scripted::new(move |request| {
        if request.task.is_some() {
            return Answer::Call("spin", json!({}));
        }
        turn("assign_sync", "go", &[(name.as_str(), "spin")], &name)
    });
    let goals = goals_for(dir.path(), &node, Some(hub), model, GoalsConfig::default());
    let record = goals
        .start(goal("spin", &[&spinner.id.to_string()]))
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
