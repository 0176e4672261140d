//! Goals and teams: what the node adds to each step of a goal, and a
//! whole goal on the embedded model across three nodes.
//!
//! 1. **Step overhead.** Goals of six steps ("add 1 and 2, then add 3 and
//!    4, …") with a model double that answers at once, the calculator as
//!    the team: the time from a model's answer to the next request is what
//!    the node adds per step (the call on the agent, storing and
//!    broadcasting the messages, the budget, the next step's values and
//!    prompt).
//! 2. **The embedded model, end to end.** Calculator and text agent on two
//!    nodes; a third node finds them on the network and runs the demo's goal
//!    to its conclusion on SmolLM2-135M: total time and the model's share.
//!
//! What people read (the facts each answer states, over many goals, chat
//! messages and A2A tasks) is measured by `benches/answers.rs`.
//!
//! `cargo bench -p agentsite --bench goals` prints the tables for
//! BENCHMARKS.md.

#[path = "../tests/support/mod.rs"]
mod support;

use agentsite::goals::GoalState;
use agentsite::goals::NewGoal;
use agentsite::goals::ask::GoalModel;
use agentsite::goals::config::GoalsConfig;
use agentsite::llm::{ChatRequest, Completion, LlmFailure};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::percentile;
use support::scripted::{capable, completion, goals_for, read};
use support::testnet::node_with_hub;

/// A capable model double that answers at once, noting when each request
/// came and each answer left.
struct Double {
    times: Mutex<Vec<(Instant, Instant)>>,
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
        let answer = capable(&read(&request));
        self.times.lock().unwrap().push((asked_at, Instant::now()));
        Ok(completion(answer, 10))
    }

    fn resolve(&self, model: Option<&str>) -> Result<String, String> {
        Ok(model.unwrap_or("double").to_owned())
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// 1: the node's own time per step.
async fn step_overhead() {
    const GOALS: usize = 50;
    let (node, dir) =
        support::hostile::node_with(&["calculator"], agentsite::config::Limits::default()).await;
    let model = Arc::new(Double {
        times: Mutex::new(Vec::new()),
    });
    let goals = goals_for(
        dir.path(),
        &node,
        None,
        model.clone(),
        GoalsConfig::default(),
    );
    let text = "Add 1 and 2, then add 3 and 4, then add 5 and 6, then add 7 and 8, \
                then add 9 and 10, then add 11 and 12.";
    let mut gaps: Vec<Duration> = Vec::new();
    let mut wholes: Vec<Duration> = Vec::new();
    for _ in 0..GOALS {
        model.times.lock().unwrap().clear();
        let started = Instant::now();
        let record = goals
            .start(
                NewGoal {
                    text: text.into(),
                    team: vec!["calculator".into()],
                    ..Default::default()
                },
                &tester(),
            )
            .await
            .unwrap();
        let record = goals.finished(&record.id).await.unwrap();
        wholes.push(started.elapsed());
        assert_eq!(record.state, GoalState::Concluded, "{record:?}");
        assert_eq!(record.usage.tool_calls, 6, "{record:?}");
        let times = model.times.lock().unwrap().clone();
        gaps.extend(
            times
                .windows(2)
                .map(|pair| pair[1].0.duration_since(pair[0].1)),
        );
    }
    gaps.sort();
    wholes.sort();
    println!("\n## 1. Node overhead per step (model double answering at once)\n");
    println!("| goals × steps | p50 | p90 | p99 | max | whole goal (p50) |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| {GOALS} × 6 | {} | {} | {} | {} | {} |",
        ms(percentile(&gaps, 0.5)),
        ms(percentile(&gaps, 0.9)),
        ms(percentile(&gaps, 0.99)),
        ms(*gaps.last().unwrap()),
        ms(percentile(&wholes, 0.5)),
    );
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
}

/// 2: a goal on the embedded model across three nodes.
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
    println!("\n## 2. A goal on the embedded model across three nodes\n");
    println!(
        "| run | outcome | team | turns | tasks | tool calls | model requests | tokens generated | whole goal | model busy | model share | the rest | conclusion |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for run in 1..=RUNS {
        *timed.spent.lock().unwrap() = Spent::default();
        let started = Instant::now();
        let new = NewGoal {
            text: "Add 1200 and 345, then count the words in 'the quick brown fox'.".into(),
            ..Default::default()
        };
        let record = goals.start(new, &tester()).await.unwrap();
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
            "| {run} | {} | {} | {} | {} | {} | {requests} | {generated} | {:.1} s | {:.1} s | {:.1}% | {:.0} ms | {} |",
            outcome.replace('|', "/"),
            record.team.join(", "),
            record.usage.turns,
            record.usage.tasks,
            record.usage.tool_calls,
            total.as_secs_f64(),
            model_time.as_secs_f64(),
            100.0 * model_time.as_secs_f64() / total.as_secs_f64(),
            (total.saturating_sub(model_time)).as_secs_f64() * 1000.0,
            record
                .conclusion
                .unwrap_or_default()
                .replace('|', "/")
                .replace('\n', " · "),
        );
    }
    drop(hosts);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let only = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let wants = |part: &str| only.as_deref().is_none_or(|o| o == part);
    if wants("steps") {
        step_overhead().await;
    }
    if wants("embedded") {
        embedded_goal().await;
    }
}

/// Who the goals of this file are given by.
fn tester() -> agentsite::requester::Requester {
    agentsite::requester::Requester::new("test", None)
}
