//! What a person reads, on the node's default model: questions with known
//! answers put to goals, to chat and to agents over A2A, each answer
//! checked for the facts it must state, and timed.
//!
//! - **Goals** (no team named: the node finds the agents): an answer is
//!   right when the conclusion states every expected fact, and the goal
//!   concluded.
//! - **Chat** (a new conversation; the message @mentions the agents it is
//!   for): right when the reply states the facts; *consistent* when it states every
//!   result its tool calls returned and no number that neither the
//!   question nor a call gave.
//! - **A2A** (a text message to an agent's card, over HTTP, to a node
//!   started as a process): right when the task completed and its message
//!   states the facts.
//!
//! Targets (issue 40): goals right ≥ 90% with a median ≤ 30 s; chat and
//! A2A consistent ≥ 95%.
//!
//! `cargo bench -p agentsite --bench answers` prints the tables for
//! BENCHMARKS.md; `-- goals`, `-- chat` or `-- a2a` runs one part, and
//! `-- … -v` prints each answer.

#[path = "../tests/support/mod.rs"]
mod support;

use agentsite::chat::{ChatEvent, Chats, EntryBody};
use agentsite::goals::config::GoalsConfig;
use agentsite::goals::{GoalState, NewGoal};
use agentsite::llm::grounding::{numbers_in, values_in};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::scripted::goals_for;

/// A question, the agent it is for, and the facts a right answer states.
type Question = (&'static str, &'static str, &'static [&'static str]);

const SHA_ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
const SHA_UPPER_ABC: &str = "b5d4045c3f466fa91fe2cc6abe79232a1a57cdf104f7a26e716e0a1e2789df78";

/// Questions of one agent each: goals, chat and A2A ask them.
const SINGLE: &[Question] = &[
    ("What is 23 plus 19?", "calculator", &["42"]),
    ("What is 6 times 7?", "calculator", &["42"]),
    ("Divide 100 by 4.", "calculator", &["25"]),
    ("Subtract 8 from 50.", "calculator", &["42"]),
    ("Multiply 12 by 11", "calculator", &["132"]),
    ("How much is 144 divided by 12?", "calculator", &["12"]),
    (
        "What do you get when you take 7 away from 30?",
        "calculator",
        &["23"],
    ),
    ("Compute 3.5 plus 4.25", "calculator", &["7.75"]),
    ("What is the product of 9 and 8?", "calculator", &["72"]),
    ("What is the sum of 250 and 750?", "calculator", &["1000"]),
    ("What is 81 minus 9?", "calculator", &["72"]),
    ("What is half of 64?", "calculator", &["32"]),
    ("What is 7 times 7?", "calculator", &["49"]),
    ("Double 21", "calculator", &["42"]),
    ("Add 17 and 25.", "calculator", &["42"]),
    ("What is 1000 divided by 8?", "calculator", &["125"]),
    (
        "Please add 0.1 and 0.2",
        "calculator",
        &["0.30000000000000004"],
    ),
    ("What is 99 plus 1?", "calculator", &["100"]),
    ("What is 15 multiplied by 4?", "calculator", &["60"]),
    ("Take 13 from 100.", "calculator", &["87"]),
    (
        "How many words are in 'the quick brown fox'?",
        "text",
        &["4"],
    ),
    ("Count the words in 'to be or not to be'", "text", &["6"]),
    ("Make 'hello world' upper case", "text", &["HELLO WORLD"]),
    ("Shout 'good morning'", "text", &["GOOD MORNING"]),
    (
        "Write 'LOUD NOISES' in lower case",
        "text",
        &["loud noises"],
    ),
    ("What is the SHA-256 hash of 'abc'?", "text", &[SHA_ABC]),
    ("Convert 'MiXeD' to lowercase", "text", &["mixed"]),
    ("How many words does 'a b c d e' have?", "text", &["5"]),
    ("Upper-case 'agentsite'", "text", &["AGENTSITE"]),
    ("Give me the sha256 of 'abc'", "text", &[SHA_ABC]),
];

/// Questions that take two calls, maybe of two agents (goals and chat).
const TWO_STEPS: &[Question] = &[
    (
        "Add 1200 and 345, then count the words in 'the quick brown fox'.",
        "calculator text",
        &["1545", "4"],
    ),
    (
        "Count the words in 'to be or not to be', then multiply the count by 3.",
        "text calculator",
        &["18"],
    ),
    (
        "Convert 'hello world' to upper case and hash 'abc' with sha256.",
        "text",
        &["HELLO WORLD", SHA_ABC],
    ),
    (
        "Multiply 12 by 11 and subtract 8 from 50.",
        "calculator",
        &["132", "42"],
    ),
    (
        "Add 2 and 3, then multiply the result by 4.",
        "calculator",
        &["20"],
    ),
    (
        "Convert 'abc' to upper case, then give its SHA-256.",
        "text",
        &[SHA_UPPER_ABC],
    ),
    (
        "Add 10 and 20, then add 30 and 40.",
        "calculator",
        &["30", "70"],
    ),
    (
        "Multiply 3 by 4 and then add 5 to it.",
        "calculator",
        &["17"],
    ),
    (
        "Upper-case 'abc' and lower-case 'XYZ'.",
        "text",
        &["ABC", "xyz"],
    ),
    (
        "Divide 50 by 2, then subtract 5 from the result.",
        "calculator",
        &["20"],
    ),
];

/// Whether `answer` states every fact: numbers among its numbers, texts
/// within it.
fn states(answer: &str, facts: &[&str]) -> bool {
    let numbers = numbers_in(answer);
    facts.iter().all(|fact| match fact.parse::<f64>() {
        Ok(n) if fact.len() < 20 => numbers.contains(&n),
        _ => answer.contains(fact),
    })
}

/// Whether `answer` rests on its calls: it states a value of each
/// successful result, and every number in it is one the question, the
/// calls' arguments or their results gave.
fn consistent(answer: &str, question: &str, calls: &[(Value, String)]) -> bool {
    let mut known: Vec<f64> = numbers_in(question);
    for (arguments, result) in calls {
        known.extend(numbers_in(&arguments.to_string()));
        known.extend(numbers_in(result));
    }
    let stray = numbers_in(answer).into_iter().any(|n| !known.contains(&n));
    let stated = calls.iter().all(|(_, result)| {
        let values = values_in(result);
        let numbers = numbers_in(result);
        numbers.iter().any(|n| numbers_in(answer).contains(n))
            || answer.contains(result.trim())
            || values.is_empty() && numbers.is_empty()
    });
    !stray && stated
}

struct Tally {
    name: &'static str,
    right: usize,
    consistent: usize,
    asked: usize,
    times: Vec<Duration>,
}

impl Tally {
    fn new(name: &'static str) -> Tally {
        Tally {
            name,
            right: 0,
            consistent: 0,
            asked: 0,
            times: Vec::new(),
        }
    }

    fn row(&mut self) -> String {
        self.times.sort();
        let pct = |n: usize| 100.0 * n as f64 / self.asked.max(1) as f64;
        format!(
            "| {} | {} | {} ({:.0}%) | {} ({:.0}%) | {:.1} s | {:.1} s |",
            self.name,
            self.asked,
            self.right,
            pct(self.right),
            self.consistent,
            pct(self.consistent),
            support::percentile(&self.times, 0.5).as_secs_f64(),
            support::percentile(&self.times, 0.9).as_secs_f64(),
        )
    }
}

fn verbose() -> bool {
    std::env::args().any(|a| a == "-v")
}

fn show(ok: bool, took: Duration, question: &str, answer: &str) {
    if verbose() {
        println!(
            "{} [{:.1} s] {question}\n      {}",
            if ok { "ok " } else { "BAD" },
            took.as_secs_f64(),
            answer.replace('\n', " · ")
        );
    }
}

async fn goals(tally: &mut Tally) {
    let (node, dir) = support::hostile::node_with(
        &["calculator", "text"],
        agentsite::config::Limits::default(),
    )
    .await;
    node.models().get(None).unwrap().prepare().await.unwrap();
    let goals = goals_for(
        dir.path(),
        &node,
        None,
        node.models().clone(),
        GoalsConfig::default(),
    );
    for (question, _, facts) in SINGLE.iter().chain(TWO_STEPS) {
        let started = Instant::now();
        let record = goals
            .start(
                NewGoal {
                    text: (*question).into(),
                    ..Default::default()
                },
                &tester(),
            )
            .await
            .unwrap();
        let record = goals.finished(&record.id).await.unwrap();
        let took = started.elapsed();
        let said = record.conclusion.clone().unwrap_or_default();
        let ok = record.state == GoalState::Concluded && states(&said, facts);
        // The calls the goal made, as its messages recorded them.
        let messages = goals.messages(&record.id, 0, 1000).await.unwrap();
        let calls: Vec<(Value, String)> = messages
            .iter()
            .filter_map(|m| match &m.body {
                agentsite::goals::Body::Progress {
                    call: Some(call), ..
                } if !call.is_error => Some((call.arguments.clone(), call.result.clone())),
                _ => None,
            })
            .collect();
        tally.asked += 1;
        tally.right += usize::from(ok);
        tally.consistent += usize::from(consistent(&said, question, &calls));
        tally.times.push(took);
        show(
            ok,
            took,
            question,
            &format!("{} · {said}", record.state.as_str()),
        );
    }
}

async fn chat(tally: &mut Tally) {
    let (node, _dir) = support::hostile::node_with(
        &["calculator", "text"],
        agentsite::config::Limits::default(),
    )
    .await;
    node.models().get(None).unwrap().prepare().await.unwrap();
    let chats = Chats::open(node.clone(), None, None).unwrap();
    for (question, agent, facts) in SINGLE.iter().chain(TWO_STEPS) {
        // A new conversation; the message brings its agent in by @name.
        let conversation = chats.create(None, None).await.unwrap();
        let mentions: Vec<String> = agent.split(' ').map(|a| format!("@{a}")).collect();
        let message = format!("{} {question}", mentions.join(" "));
        let (sender, mut events) = tokio::sync::mpsc::channel(256);
        tokio::spawn(chats.clone().follow(conversation.id.clone(), 0, sender));
        let started = Instant::now();
        chats
            .send(&conversation.id, &message, false, &tester())
            .await
            .unwrap();
        // Past the idle of the empty conversation: the person's entry, then
        // the answer's idle.
        let mut asked = false;
        while let Some(event) = events.recv().await {
            match event {
                ChatEvent::Entry(entry) if matches!(entry.body, EntryBody::Person { .. }) => {
                    asked = true
                }
                ChatEvent::Idle if asked => break,
                _ => {}
            }
        }
        let took = started.elapsed();
        let entries = chats.entries(&conversation.id, 0).await.unwrap();
        let mut reply = String::new();
        let mut calls = Vec::new();
        for entry in entries {
            match entry.body {
                EntryBody::Reply { text, .. } => reply = text,
                EntryBody::Problem { text } => reply = format!("problem: {text}"),
                EntryBody::ToolUse {
                    arguments, output, ..
                } if !output.is_error => {
                    let result = match &output.structured_content {
                        Some(structured) => structured.to_string(),
                        None => output.text(),
                    };
                    calls.push((arguments, result));
                }
                _ => {}
            }
        }
        let ok = states(&reply, facts);
        tally.asked += 1;
        tally.right += usize::from(ok);
        tally.consistent += usize::from(!calls.is_empty() && consistent(&reply, question, &calls));
        tally.times.push(took);
        show(ok, took, question, &reply);
    }
}

fn a2a(tally: &mut Tally) {
    let cli = support::Cli::new();
    cli.add(&["calculator", "text"]);
    let node = support::Server::start(cli.data(), &[]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = reqwest::Client::new();
    // Twenty of the one-agent questions, spread over both agents.
    let picked = (0..20).map(|i| &SINGLE[i * SINGLE.len() / 20]);
    for (question, agent, facts) in picked {
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": question}]}}
        });
        let started = Instant::now();
        let answer: Value = runtime.block_on(async {
            client
                .post(node.url(&format!("/agents/{agent}/a2a")))
                .header("A2A-Version", "1.0")
                .json(&body)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap()
        });
        let took = started.elapsed();
        let task = &answer["result"]["task"];
        let said = task["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let results: Vec<(Value, String)> = task["artifacts"]
            .as_array()
            .map(|artifacts| {
                artifacts
                    .iter()
                    .filter_map(|a| {
                        // A result's text, or its structured content.
                        let part = &a["parts"][0];
                        part["text"]
                            .as_str()
                            .map(str::to_owned)
                            .or_else(|| part.get("data").map(Value::to_string))
                    })
                    .map(|text| (Value::Null, text))
                    .collect()
            })
            .unwrap_or_default();
        let completed = task["status"]["state"] == "TASK_STATE_COMPLETED";
        let ok = completed && states(&said, facts);
        tally.asked += 1;
        tally.right += usize::from(ok);
        tally.consistent +=
            usize::from(completed && !results.is_empty() && consistent(&said, question, &results));
        tally.times.push(took);
        show(
            ok,
            took,
            question,
            &format!("{} · {said}", task["status"]["state"]),
        );
    }
}

fn main() {
    let only = std::env::args()
        .skip(1)
        .find(|a| ["goals", "chat", "a2a"].contains(&a.as_str()));
    let wants = |part: &str| only.as_deref().is_none_or(|o| o == part);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    if wants("goals") {
        let mut tally = Tally::new("goals");
        runtime.block_on(goals(&mut tally));
        rows.push(tally.row());
    }
    if wants("chat") {
        let mut tally = Tally::new("chat");
        runtime.block_on(chat(&mut tally));
        rows.push(tally.row());
    }
    if wants("a2a") {
        let mut tally = Tally::new("A2A");
        a2a(&mut tally);
        rows.push(tally.row());
    }
    println!("\n## Answers on the default model (SmolLM2-135M, embedded)\n");
    println!(
        "| asked of | questions | right (all facts) | consistent with the calls | median | p90 |"
    );
    println!("|---|---|---|---|---|---|");
    for row in rows {
        println!("{row}");
    }
}

/// Who the goals of this file are given by.
fn tester() -> agentsite::requester::Requester {
    agentsite::requester::Requester::new("test", None)
}
