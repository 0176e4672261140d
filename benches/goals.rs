//! Goals and teams: what the conversation's controller costs per turn, how
//! tasks spread over nodes run side by side, and a whole goal on the
//! embedded model across three nodes.
//!
//! 1. **Turn overhead.** A goal of 300 turns with a model double that
//!    answers at once (every turn a discussion, with the calculator and the
//!    text agent as the team): the time from a model's answer to the next
//!    turn's request is what the node adds per turn (checking the answer,
//!    storing and broadcasting the message, the budget, building the next
//!    prompt from the transcript).
//! 2. **Parallel tasks.** Four nodes of an in-process network (real libp2p
//!    on the memory transport) each host a copy of the timer agent; a fifth
//!    node's goal hands out eight asynchronous tasks of `wait 200 ms`, two
//!    per member, and waits for them. The time from the first assignment to
//!    the last result is compared with the same goal handing out one task.
//! 3. **The embedded model, end to end.** Calculator and text agent on two
//!    nodes; a third node forms a team from the network and runs the goal
//!    to its conclusion on SmolLM2-135M: total time and the model's share.
//!
//! `cargo bench -p agentsite --bench goals` prints the tables for
//! BENCHMARKS.md.

#[path = "../tests/support/mod.rs"]
mod support;

use agentsite::goals::ask::GoalModel;
use agentsite::goals::config::GoalsConfig;
use agentsite::goals::{Body, GoalEvent, GoalState, Goals, NewGoal};
use agentsite::llm::{ChatRequest, Completion, LlmFailure, Role};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::percentile;
use support::scripted::{Answer, completion, goals_for, turn};
use support::testnet::node_with_hub;

/// Answers of the model double, by what the request asks.
type Rules = dyn Fn(&Asked) -> Answer + Send + Sync;

/// A request as the rules read it.
struct Asked {
    /// Members the turn may name (empty for a task step).
    names: Vec<String>,
    /// The kinds of turn allowed.
    kinds: Vec<String>,
    opening: bool,
    turns_so_far: usize,
    task_step: bool,
    tool_results: usize,
}

/// A model that answers at once by rules, and notes when each request came
/// and each answer left.
struct Double {
    rules: Box<Rules>,
    turns: Mutex<usize>,
    /// (asked at, answered at) of each turn request.
    turn_times: Mutex<Vec<(Instant, Instant)>>,
}

#[async_trait::async_trait]
impl GoalModel for Double {
    async fn complete(
        &self,
        _model: Option<&str>,
        request: ChatRequest,
        _deadline: Instant,
    ) -> Result<Completion, LlmFailure> {
        let asked_at = Instant::now();
        let schema = request.response_schema.clone().unwrap_or(Value::Null);
        let names: Vec<String> = schema["properties"]["next"]["enum"]
            .as_array()
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let kinds: Vec<String> = schema["properties"]["type"]["enum"]
            .as_array()
            .map(|kinds| {
                kinds
                    .iter()
                    .filter_map(|k| k.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let is_turn = !kinds.is_empty();
        let turns_so_far = *self.turns.lock().unwrap();
        let asked = Asked {
            opening: request
                .messages
                .iter()
                .any(|m| m.content.contains("This is the first turn")),
            names,
            kinds,
            turns_so_far,
            task_step: !request.tools.is_empty(),
            tool_results: request
                .messages
                .iter()
                .filter(|m| m.role == Role::Tool)
                .count(),
        };
        let answer = (self.rules)(&asked);
        if is_turn {
            *self.turns.lock().unwrap() += 1;
            self.turn_times
                .lock()
                .unwrap()
                .push((asked_at, Instant::now()));
        }
        Ok(completion(answer, 10))
    }

    fn resolve(&self, model: Option<&str>) -> Result<String, String> {
        Ok(model.unwrap_or("double").to_owned())
    }
}

fn instant_model(rules: impl Fn(&Asked) -> Answer + Send + Sync + 'static) -> Arc<Double> {
    Arc::new(Double {
        rules: Box::new(rules),
        turns: Mutex::new(0),
        turn_times: Mutex::new(Vec::new()),
    })
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn named(text: &str, team: &[String]) -> NewGoal {
    NewGoal {
        text: text.into(),
        team: team.to_vec(),
        ..Default::default()
    }
}

/// 1: the node's own time per turn.
async fn turn_overhead() {
    const TURNS: u32 = 300;
    let (node, dir) = support::hostile::node_with(
        &["calculator", "text"],
        agentsite::config::Limits::default(),
    )
    .await;
    let model = instant_model(|asked| {
        if asked.task_step {
            return if asked.tool_results == 0 {
                Answer::Call("add", json!({"a": 6, "b": 10}))
            } else {
                Answer::Text("16".into())
            };
        }
        if asked.opening {
            return turn(
                "assign_sync",
                "go",
                &[("calculator", "add 6 and 10")],
                "text",
            );
        }
        let next = if asked.turns_so_far % 2 == 0 {
            "text"
        } else {
            "calculator"
        };
        turn(
            "discussion",
            "The sum is 16; checking the words next.",
            &[],
            next,
        )
    });
    let config = GoalsConfig {
        turns: TURNS,
        max_turns: TURNS,
        tokens: 10_000_000,
        max_tokens: 10_000_000,
        ..GoalsConfig::default()
    };
    let goals = goals_for(dir.path(), &node, None, model.clone(), config);
    let started = Instant::now();
    let record = goals
        .start(named(
            "add 6 and 10 and talk about it",
            &["calculator".into(), "text".into()],
        ))
        .await
        .unwrap();
    let record = goals.finished(&record.id).await.unwrap();
    let total = started.elapsed();
    assert_eq!(record.state, GoalState::Concluded, "{record:?}");
    let times = model.turn_times.lock().unwrap().clone();
    // From one answer to the next request, past the opening and its task.
    let mut gaps: Vec<Duration> = times
        .windows(2)
        .skip(2)
        .map(|pair| pair[1].0.duration_since(pair[0].1))
        .collect();
    gaps.sort();
    println!("\n## 1. Controller overhead per turn (model double answering at once)\n");
    println!("| turns | p50 | p90 | p99 | max | whole goal |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {} | {} | {} | {} |",
        times.len(),
        ms(percentile(&gaps, 0.5)),
        ms(percentile(&gaps, 0.9)),
        ms(percentile(&gaps, 0.99)),
        ms(*gaps.last().unwrap()),
        ms(total),
    );
}

/// The time from the first assignment to the last result of goal `id`.
async fn task_span(goals: &Arc<Goals>, new: NewGoal) -> (Duration, usize) {
    let mut events = goals.subscribe();
    let record = goals.start(new).await.unwrap();
    let mut first_assign = None;
    let mut last_result = None;
    let mut results = 0;
    loop {
        match events.recv().await.unwrap() {
            GoalEvent::Message { goal, message } if goal == record.id => match message.body {
                Body::Assign { .. } => {
                    first_assign.get_or_insert_with(Instant::now);
                }
                Body::Result { ok, text, .. } => {
                    assert!(ok, "a task failed: {text}");
                    results += 1;
                    last_result = Some(Instant::now());
                }
                _ => {}
            },
            GoalEvent::State { goal, record: now }
                if goal == record.id && !now.state.is_active() =>
            {
                assert_eq!(now.state, GoalState::Concluded, "{now:?}");
                break;
            }
            _ => {}
        }
    }
    let span = last_result.unwrap().duration_since(first_assign.unwrap());
    (span, results)
}

/// 2: eight 200 ms tasks on four nodes against one.
async fn parallel_tasks() {
    const MEMBERS: usize = 4;
    const ROUNDS: usize = 5;
    let dirs: Vec<tempfile::TempDir> = (0..=MEMBERS)
        .map(|_| tempfile::tempdir().unwrap())
        .collect();
    let (home, home_hub) = node_with_hub(dirs[0].path(), &[]).await;
    let entry = home_hub.network().addresses().await.unwrap();
    let mut ids = Vec::new();
    let mut members = Vec::new();
    for (i, dir) in dirs.iter().enumerate().skip(1) {
        let (node, hub) = node_with_hub(dir.path(), &entry).await;
        // A copy of the timer with an id of its own on each node.
        let bytes = support::padded_agent("timer", 200_000 + i * 1000);
        let record = node.add(&bytes).await.unwrap();
        hub.publish(&record.id.to_string()).await.unwrap();
        ids.push(record.id.to_string());
        members.push((node, hub));
    }
    let model = instant_model(|asked| {
        if asked.task_step {
            return if asked.tool_results == 0 {
                Answer::Call("wait", json!({"millis": 200}))
            } else {
                Answer::Text("waited".into())
            };
        }
        let names: Vec<&str> = asked.names.iter().map(String::as_str).collect();
        let every = |names: &[&str]| -> Vec<(String, &'static str)> {
            names
                .iter()
                .map(|n| (n.to_string(), "wait 200 ms"))
                .collect()
        };
        let tasks = every(&names);
        let tasks: Vec<(&str, &str)> = tasks.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        if asked.opening {
            return turn("assign_async", "all of you, wait", &tasks, names[0]);
        }
        if names.len() > 1 && asked.turns_so_far == 1 {
            return turn("assign_async", "once more", &tasks, names[0]);
        }
        if asked.kinds.iter().any(|k| k == "pause") {
            return Answer::Json(
                json!({"type": "pause", "text": "wait for all", "tasks": [], "wait_for": [], "next": names[0]}),
            );
        }
        turn("conclude", "all waited", &[], names[0])
    });
    let goals = goals_for(
        dirs[0].path(),
        &home,
        Some(home_hub.clone()),
        model.clone(),
        GoalsConfig::default(),
    );
    let mut one = Vec::new();
    let mut eight = Vec::new();
    for _ in 0..ROUNDS {
        *model.turns.lock().unwrap() = 0;
        let (span, results) = task_span(&goals, named("wait", &ids[..1])).await;
        assert_eq!(results, 1);
        one.push(span);
        *model.turns.lock().unwrap() = 0;
        let (span, results) = task_span(&goals, named("wait", &ids)).await;
        assert_eq!(results, 2 * MEMBERS);
        eight.push(span);
    }
    one.sort();
    eight.sort();
    let (one, eight) = (percentile(&one, 0.5), percentile(&eight, 0.5));
    println!("\n## 2. Eight asynchronous 200 ms tasks on four nodes\n");
    println!(
        "| tasks | members (nodes) | first assignment to last result, median of {ROUNDS} | ratio to one task |"
    );
    println!("|---|---|---|---|");
    println!("| 1 | 1 (1) | {} | 1.00 |", ms(one));
    println!(
        "| 8 | {MEMBERS} ({MEMBERS}) | {} | {:.2} |",
        ms(eight),
        eight.as_secs_f64() / one.as_secs_f64()
    );
    drop(members);
}

/// The node's model, timing its requests: the wall time during which at
/// least one request ran (tasks ask the model side by side), requests and
/// tokens generated.
struct Timed {
    inner: Arc<agentsite::llm::models::Models>,
    spent: Mutex<Spent>,
}

#[derive(Default, Clone, Copy)]
struct Spent {
    busy: Duration,
    running: usize,
    since: Option<Instant>,
    requests: usize,
    generated: u64,
}

#[async_trait::async_trait]
impl GoalModel for Timed {
    async fn complete(
        &self,
        model: Option<&str>,
        request: ChatRequest,
        deadline: Instant,
    ) -> Result<Completion, LlmFailure> {
        {
            let mut spent = self.spent.lock().unwrap();
            if spent.running == 0 {
                spent.since = Some(Instant::now());
            }
            spent.running += 1;
        }
        let answer = GoalModel::complete(&*self.inner, model, request, deadline).await;
        let mut spent = self.spent.lock().unwrap();
        spent.running -= 1;
        if spent.running == 0
            && let Some(since) = spent.since.take()
        {
            spent.busy += since.elapsed();
        }
        spent.requests += 1;
        if let Ok(completion) = &answer {
            spent.generated += u64::from(completion.usage.completion_tokens);
        }
        answer
    }

    fn resolve(&self, model: Option<&str>) -> Result<String, String> {
        GoalModel::resolve(&*self.inner, model)
    }

    fn context_window(&self, model: Option<&str>) -> Option<usize> {
        GoalModel::context_window(&*self.inner, model)
    }
}

/// 3: a goal on the embedded model across three nodes.
async fn embedded_goal() {
    const RUNS: usize = 3;
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (home, home_hub) = node_with_hub(dirs[0].path(), &[]).await;
    let entry = home_hub.network().addresses().await.unwrap();
    let mut hosts = Vec::new();
    for (dir, agent) in dirs[1..].iter().zip(["calculator", "text"]) {
        let (node, hub) = node_with_hub(dir.path(), &entry).await;
        let record = node
            .add(&std::fs::read(support::wasm(agent)).unwrap())
            .await
            .unwrap();
        hub.publish(&record.id.to_string()).await.unwrap();
        hosts.push((node, hub));
    }
    let timed = Arc::new(Timed {
        inner: home.models().clone(),
        spent: Mutex::new(Spent::default()),
    });
    // The model is read once, before the first goal: reading it is not
    // the goal's work.
    timed.inner.get(None).unwrap().prepare().await.unwrap();
    let goals = goals_for(
        dirs[0].path(),
        &home,
        Some(home_hub.clone()),
        timed.clone(),
        GoalsConfig::default(),
    );
    println!("\n## 3. A goal on the embedded model across three nodes\n");
    println!(
        "| run | outcome | team | turns | tasks | tool calls | model requests | tokens generated | whole goal | model busy | model share | the rest |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for run in 1..=RUNS {
        *timed.spent.lock().unwrap() = Spent::default();
        let started = Instant::now();
        let new = NewGoal {
            text: "Add 1200 and 345, then count the words in 'the quick brown fox'.".into(),
            limits: agentsite::goals::config::AskedLimits {
                turns: Some(3),
                depth: Some(0),
                ..Default::default()
            },
            ..Default::default()
        };
        let record = goals.start(new).await.unwrap();
        let record = goals.finished(&record.id).await.unwrap();
        let total = started.elapsed();
        let Spent {
            busy: model_time,
            requests,
            generated,
            ..
        } = *timed.spent.lock().unwrap();
        let outcome = match &record.reason {
            Some(reason) => format!("{} ({})", record.state.as_str(), reason),
            None => record.state.as_str().to_owned(),
        };
        println!(
            "| {run} | {} | {} | {} | {} | {} | {requests} | {generated} | {:.1} s | {:.1} s | {:.1}% | {:.0} ms |",
            outcome.replace('|', "/"),
            record.team.join(", "),
            record.usage.turns,
            record.usage.tasks,
            record.usage.tool_calls,
            total.as_secs_f64(),
            model_time.as_secs_f64(),
            100.0 * model_time.as_secs_f64() / total.as_secs_f64(),
            (total.saturating_sub(model_time)).as_secs_f64() * 1000.0,
        );
    }
    drop(hosts);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let only = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let wants = |part: &str| only.as_deref().is_none_or(|o| o == part);
    if wants("turns") {
        turn_overhead().await;
    }
    if wants("parallel") {
        parallel_tasks().await;
    }
    if wants("embedded") {
        embedded_goal().await;
    }
}
