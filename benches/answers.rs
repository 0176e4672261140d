//! What a person reads, on the node's default model: the requests of
//! `benches/answers/requests.toml` (each in three phrasings) put to goals,
//! to chat and to agents over A2A, each answer sorted into
//!
//! - **right**: answered (a goal concluded, a reply that says it answered,
//!   a completed task) and stating every fact the request expects;
//! - **confidently wrong**: answered, and a fact missing or another said
//!   in its place;
//! - **honestly not answered**: partial, failed, "not answered", a problem
//!   named: the person is told it was not done (and why);
//!
//! and timed. The requests no agent at hand can answer are right only
//! when honestly not answered.
//!
//! - **Goals**: no team named (the node finds the agents among its own).
//! - **Chat**: a new conversation; the message @mentions its agents.
//! - **A2A**: a text message to the agent's card, over HTTP, of a node
//!   run as a process (requests of one agent).
//! - **`/v1` tools**: an OpenAI client's tool loop against that node: the
//!   tools of the request's agents offered as functions, each call the
//!   model makes run over the agent's MCP endpoint and its result sent
//!   back, until the model answers in words (an answer that is empty or
//!   says a call failed reads as not answered).
//!
//! The agents: the calculator, the text agent, a unit converter with
//! symbol units, a country almanac and the notes agent (Rust); statistics
//! (Python) and a JSON picker (JavaScript), built from source; an MCP
//! server in Python (unit conversion) and an A2A agent in Python (the
//! wordsmith), attached.
//!
//! Targets (issue 60): confidently wrong ≤ 2%, none of the unanswerable
//! answered; right ≥ 85%; median ≤ 5 s.
//!
//! `cargo bench -p agentsite --bench answers` prints the tables for
//! BENCHMARKS.md; `-- --outside DIR` asks another set of agents and
//! requests, kept outside the repository (see [`outside`]); `-- goals`, `-- chat`, `-- a2a` or `-- v1` runs one surface,
//! `-- --agent NAME` the requests of one agent, `-- --only TEXT` those
//! whose phrasing holds TEXT, `-- -v` prints each answer (`BAD`:
//! confidently wrong, `no `: honestly not answered) and a goal's calls;
//! `-- --model FILE.gguf` asks that model instead of the default.

#[path = "../tests/support/mod.rs"]
mod support;

use agentsite::bridge::Attachment;
use agentsite::chat::{Answered, ChatEvent, Chats, EntryBody};
use agentsite::goals::config::GoalsConfig;
use agentsite::goals::{GoalState, NewGoal};
use agentsite::llm::grounding::numbers_in;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use support::scripted::goals_for;

/// The agents of the benchmark written in Rust, as their wasm files are
/// named.
const AGENTS: [&str; 5] = ["calculator", "text", "unit_convert", "almanac", "notes"];

/// The agents written in Python and JavaScript with the SDKs, as their
/// folders in examples/ are named (built from source).
const LANGUAGE_AGENTS: [(&str, Language); 2] = [
    ("python-stats", Language::Python),
    ("js-json", Language::Js),
];

#[derive(Clone, Copy)]
enum Language {
    Python,
    Js,
}

/// The component of a language agent, built from its source.
fn language_agent(name: &str, language: Language) -> std::path::PathBuf {
    match language {
        Language::Python => support::python_agent(name),
        Language::Js => support::js_agent(name),
    }
}

/// The attached MCP server's command line: unit conversion in Python,
/// over stdio.
fn units_command() -> Vec<String> {
    vec![
        support::installed_tool("venv/bin/python")
            .display()
            .to_string(),
        support::repo()
            .join("examples/python-mcp-units/server.py")
            .display()
            .to_string(),
    ]
}

/// The attached A2A agent (Python, the a2a-sdk): a process on a loopback
/// port, stopped when dropped.
struct Wordsmith {
    child: std::process::Child,
    base: String,
}

impl Wordsmith {
    fn start() -> Wordsmith {
        use std::io::BufRead as _;
        let mut child = std::process::Command::new(support::installed_tool("venv/bin/python"))
            .arg(support::repo().join("examples/python-a2a-wordsmith/agent.py"))
            .arg("0")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the wordsmith starts");
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .expect("the wordsmith says where it listens");
        let base = first
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_owned();
        Wordsmith { child, base }
    }
}

impl Drop for Wordsmith {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Notes the notes agent holds before the requests read them.
const NOTES: [(&str, &str); 3] = [
    ("groceries", "milk, eggs, bread"),
    ("wifi", "network agentsite-home on channel 6"),
    ("monday", "dentist at 9"),
];

#[derive(Deserialize)]
struct Requests {
    ask: Vec<Ask>,
    cannot: Vec<Cannot>,
}

/// A request with known facts, in three phrasings.
#[derive(Deserialize)]
struct Ask {
    agents: Vec<String>,
    facts: Vec<String>,
    said: Vec<String>,
}

/// A request no agent at hand can answer.
#[derive(Deserialize)]
struct Cannot {
    agents: Vec<String>,
    said: String,
}

/// One request as a surface is asked it.
struct Case {
    agents: Vec<String>,
    /// `None`: no agent can answer it.
    facts: Option<Vec<String>>,
    said: String,
}

/// The folder of another set of agents and requests, kept outside the
/// repository (`-- --outside DIR`): its `requests.toml`, of the same form
/// as the benchmark's, is asked in place of the benchmark's, and the MCP
/// servers of its `agents.toml` are attached beside the benchmark's
/// agents:
///
/// ```toml
/// [[attach]]
/// name = "tips"
/// command = ["python", "tips.py"]  # "python": the one with the MCP SDK
/// ```
/// The GGUF file `--model PATH` names: the model every surface asks
/// instead of the node's default.
fn model_file() -> Option<std::path::PathBuf> {
    std::env::args()
        .skip_while(|a| a != "--model")
        .nth(1)
        .map(|file| std::fs::canonicalize(&file).expect("the --model file exists"))
}

/// The name `/v1` asks for: the node's default model's, which the
/// `--model` file takes in its place.
const MODEL: &str = "local";

/// The node's models with `--model`: that file alone, as the default.
fn models_config(file: &std::path::Path) -> agentsite::llm::config::LlmConfig {
    agentsite::llm::config::LlmConfig {
        default: Some(MODEL.into()),
        models: vec![agentsite::llm::config::ModelConfig {
            name: MODEL.into(),
            backend: agentsite::llm::config::Backend::Gguf(agentsite::llm::config::GgufConfig {
                path: file.to_owned(),
                context: agentsite::llm::embedded::DEFAULT_CONTEXT,
            }),
            max_concurrent: 2,
            queue: 64,
        }],
        ..Default::default()
    }
}

fn outside() -> Option<std::path::PathBuf> {
    std::env::args()
        .skip_while(|a| a != "--outside")
        .nth(1)
        .map(|dir| std::fs::canonicalize(&dir).expect("the --outside folder exists"))
}

#[derive(Deserialize)]
struct OutsideAgents {
    attach: Vec<OutsideAgent>,
}

/// An MCP server of the outside set, run over stdio.
#[derive(Deserialize)]
struct OutsideAgent {
    name: String,
    command: Vec<String>,
}

/// The outside set's agents, each with its command line: "python" is the
/// Python with the MCP SDK, and a file of the folder is named by its
/// whole path.
fn outside_agents() -> Vec<(String, Vec<String>)> {
    let Some(dir) = outside() else {
        return Vec::new();
    };
    let text = std::fs::read_to_string(dir.join("agents.toml")).expect("agents.toml");
    let agents: OutsideAgents = toml::from_str(&text).expect("agents.toml parses");
    agents
        .attach
        .into_iter()
        .map(|agent| {
            let command = agent
                .command
                .iter()
                .map(|word| match word.as_str() {
                    "python" => support::installed_tool("venv/bin/python")
                        .display()
                        .to_string(),
                    _ if dir.join(word).is_file() => dir.join(word).display().to_string(),
                    _ => word.clone(),
                })
                .collect();
            (agent.name, command)
        })
        .collect()
}

fn cases() -> Vec<Case> {
    let requests = match outside() {
        Some(dir) => dir.join("requests.toml"),
        None => support::repo().join("benches/answers/requests.toml"),
    };
    let text = std::fs::read_to_string(&requests)
        .unwrap_or_else(|e| panic!("{}: {e}", requests.display()));
    let requests: Requests = toml::from_str(&text).expect("the requests parse");
    let agent = std::env::args().skip_while(|a| a != "--agent").nth(1);
    let mut cases = Vec::new();
    for ask in requests.ask {
        for said in ask.said {
            cases.push(Case {
                agents: ask.agents.clone(),
                facts: Some(ask.facts.clone()),
                said,
            });
        }
    }
    for cannot in requests.cannot {
        cases.push(Case {
            agents: cannot.agents,
            facts: None,
            said: cannot.said,
        });
    }
    let only = std::env::args().skip_while(|a| a != "--only").nth(1);
    cases.retain(|c| agent.as_ref().is_none_or(|a| c.agents.contains(a)));
    cases.retain(|c| only.as_ref().is_none_or(|o| c.said.contains(o.as_str())));
    cases
}

/// How an answer ended, as a person reads it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Verdict {
    Right,
    ConfidentlyWrong,
    NotAnswered,
}

/// The verdict on `answer`, which the surface marked `answered` (else
/// it said it was not done), for `case`.
fn verdict(case: &Case, answered: bool, answer: &str) -> Verdict {
    match (&case.facts, answered) {
        (_, false) => Verdict::NotAnswered,
        (None, true) => Verdict::ConfidentlyWrong,
        (Some(facts), true) if states(answer, facts) => Verdict::Right,
        (Some(_), true) => Verdict::ConfidentlyWrong,
    }
}

/// Whether `answer` states every fact: numbers among its numbers (a fact
/// written with decimals is stated by a number that rounds to it: 42.16
/// by 42.1648128), texts within it.
fn states(answer: &str, facts: &[String]) -> bool {
    let numbers = numbers_in(answer);
    facts.iter().all(|fact| match fact.parse::<f64>() {
        Ok(n) if fact.len() < 20 => {
            let decimals = fact.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
            let scale = 10f64.powi(decimals);
            numbers
                .iter()
                .any(|m| *m == n || (decimals > 0 && (m * scale).round() == (n * scale).round()))
        }
        _ => answer.contains(fact.as_str()),
    })
}

/// The figures of one surface, per agent and in all.
#[derive(Default)]
struct Tally {
    /// (right, confidently wrong, not answered, times) per agent.
    rows: BTreeMap<String, Row>,
    cannot: Row,
}

#[derive(Default, Clone)]
struct Row {
    right: usize,
    wrong: usize,
    honest: usize,
    times: Vec<Duration>,
}

impl Row {
    fn add(&mut self, verdict: Verdict, took: Duration) {
        match verdict {
            Verdict::Right => self.right += 1,
            Verdict::ConfidentlyWrong => self.wrong += 1,
            Verdict::NotAnswered => self.honest += 1,
        }
        self.times.push(took);
    }

    fn merge(&mut self, other: &Row) {
        self.right += other.right;
        self.wrong += other.wrong;
        self.honest += other.honest;
        self.times.extend(other.times.iter().copied());
    }

    fn line(&self, surface: &str, what: &str) -> String {
        let asked = self.right + self.wrong + self.honest;
        let pct = |n: usize| 100.0 * n as f64 / asked.max(1) as f64;
        let mut times = self.times.clone();
        times.sort();
        format!(
            "| {surface} | {what} | {asked} | {} ({:.0}%) | {} ({:.1}%) | {} ({:.0}%) | {:.1} s |",
            self.right,
            pct(self.right),
            self.wrong,
            pct(self.wrong),
            self.honest,
            pct(self.honest),
            support::percentile(&times, 0.5).as_secs_f64(),
        )
    }
}

impl Tally {
    fn add(&mut self, case: &Case, verdict: Verdict, took: Duration) {
        if case.facts.is_none() {
            self.cannot.add(verdict, took);
        } else {
            self.rows
                .entry(case.agents[0].clone())
                .or_default()
                .add(verdict, took);
        }
    }

    fn lines(&self, surface: &str) -> Vec<String> {
        let mut lines: Vec<String> = self
            .rows
            .iter()
            .map(|(agent, row)| row.line(surface, agent))
            .collect();
        let mut all = Row::default();
        for row in self.rows.values() {
            all.merge(row);
        }
        lines.push(all.line(surface, "**all answerable**"));
        let cannot = &self.cannot;
        let asked = cannot.right + cannot.wrong + cannot.honest;
        if asked > 0 {
            lines.push(format!(
                "| {surface} | **unanswerable** | {asked} | — | {} answered | {} honestly not | {:.1} s |",
                cannot.wrong,
                cannot.honest,
                support::percentile(&sorted(&cannot.times), 0.5).as_secs_f64()
            ));
        }
        lines
    }
}

fn sorted(times: &[Duration]) -> Vec<Duration> {
    let mut times = times.to_vec();
    times.sort();
    times
}

fn verbose() -> bool {
    std::env::args().any(|a| a == "-v")
}

fn show(verdict: Verdict, took: Duration, case: &Case, answer: &str) {
    if verbose() {
        let mark = match verdict {
            Verdict::Right => "ok ",
            Verdict::ConfidentlyWrong => "BAD",
            Verdict::NotAnswered => "no ",
        };
        println!(
            "{mark} [{:.1} s] {} ({})\n      {}",
            took.as_secs_f64(),
            case.said,
            case.agents.join(", "),
            answer.replace('\n', " · ")
        );
    }
}

/// Puts back the notes of [`NOTES`] as they were: each request starts from
/// them, whatever an earlier one saved or deleted.
async fn restore_notes(node: &agentsite::Node) {
    let notes = node.resolve("notes").unwrap();
    for (title, text) in NOTES {
        let arguments = json!({"title": title, "text": text}).to_string();
        let grants = node.grants(&notes).unwrap();
        node.call_record(&notes, "put", &arguments, grants, None)
            .await
            .unwrap();
    }
}

/// [`restore_notes`] on a node run as a process, over its MCP endpoint.
async fn restore_notes_over_mcp(node: &support::Server) {
    use rmcp::ServiceExt as _;
    let transport =
        rmcp::transport::StreamableHttpClientTransport::from_uri(node.url("/agents/notes/mcp"));
    let client = ().serve(transport).await.expect("the notes agent answers");
    for (title, text) in NOTES {
        let arguments = json!({"title": title, "text": text});
        let put = rmcp::model::CallToolRequestParams::new("put")
            .with_arguments(arguments.as_object().unwrap().clone());
        client.call_tool(put).await.unwrap();
    }
    let _ = client.cancel().await;
}

/// A node with the benchmark's agents, the notes agent granted its store
/// and holding [`NOTES`], the MCP server and the A2A agent attached.
async fn node() -> (
    std::sync::Arc<agentsite::Node>,
    tempfile::TempDir,
    Wordsmith,
) {
    let config = agentsite::NodeConfig {
        llm: model_file()
            .map(|file| models_config(&file))
            .unwrap_or_default(),
        ..Default::default()
    };
    let (node, dir) = support::hostile::node_configured(&AGENTS, config).await;
    for (name, language) in LANGUAGE_AGENTS {
        let bytes = std::fs::read(language_agent(name, language)).unwrap();
        node.add(&bytes).await.unwrap();
    }
    let units = Attachment::from_command_line(&units_command(), None, support::repo()).unwrap();
    node.attach("units", units).await.unwrap();
    let wordsmith = Wordsmith::start();
    node.attach(
        "wordsmith",
        Attachment::Http {
            url: wordsmith.base.clone(),
        },
    )
    .await
    .unwrap();
    for (name, command) in outside_agents() {
        let attachment = Attachment::from_command_line(&command, None, support::repo()).unwrap();
        node.attach(&name, attachment).await.unwrap();
    }
    support::hostile::grant(&node, "notes", &["kv=1MiB"]);
    restore_notes(&node).await;
    node.models().get(None).unwrap().prepare().await.unwrap();
    (node, dir, wordsmith)
}

async fn goals(cases: &[Case], tally: &mut Tally) {
    let (node, dir, _wordsmith) = node().await;
    let goals = goals_for(
        dir.path(),
        &node,
        None,
        node.models().clone(),
        GoalsConfig::default(),
    );
    for case in cases {
        restore_notes(&node).await;
        let started = Instant::now();
        let record = goals
            .start(
                NewGoal {
                    text: case.said.clone(),
                    ..Default::default()
                },
                &tester(),
            )
            .await
            .unwrap();
        let record = goals.finished(&record.id).await.unwrap();
        let took = started.elapsed();
        let said = record
            .conclusion
            .clone()
            .or(record.reason.clone())
            .unwrap_or_default();
        let verdict = verdict(case, record.state == GoalState::Concluded, &said);
        tally.add(case, verdict, took);
        let mut calls = String::new();
        if verbose() {
            for message in goals.messages(&record.id, 0, 200).await.unwrap() {
                if let agentsite::goals::message::Body::Progress {
                    call: Some(call), ..
                } = message.body
                {
                    calls.push_str(&format!(
                        " · {}({}) -> {}",
                        call.tool,
                        call.arguments,
                        agentsite::text::one_line(&call.result, 80)
                    ));
                }
            }
        }
        show(
            verdict,
            took,
            case,
            &format!("{} · {said}{calls}", record.state.as_str()),
        );
    }
}

async fn chat(cases: &[Case], tally: &mut Tally) {
    let (node, _dir, _wordsmith) = node().await;
    let chats = Chats::open(node.clone(), None, None).unwrap();
    for case in cases {
        restore_notes(&node).await;
        // A new conversation; the message brings its agents in by @name.
        let conversation = chats.create(None, None).await.unwrap();
        let mentions: Vec<String> = case.agents.iter().map(|a| format!("@{a}")).collect();
        let message = format!("{} {}", mentions.join(" "), case.said);
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
        let mut reply = String::new();
        let mut answered = false;
        // The calls behind the reply, shown after it as the goal surface
        // shows its own.
        let mut calls: Vec<String> = Vec::new();
        for entry in chats.entries(&conversation.id, 0).await.unwrap() {
            match entry.body {
                EntryBody::ToolUse {
                    tool,
                    arguments,
                    output,
                    ..
                } => calls.push(format!(
                    "{tool}({arguments}) -> {}",
                    agentsite::text::excerpt(&output.text(), 80)
                )),
                EntryBody::Reply {
                    text, answered: a, ..
                } => {
                    // A reply with no tools behind it states an answer too.
                    answered = matches!(a, None | Some(Answered::Answered));
                    reply = text;
                }
                EntryBody::Problem { text } => {
                    answered = false;
                    reply = format!("problem: {text}");
                }
                _ => {}
            }
        }
        let verdict = verdict(case, answered, &reply);
        tally.add(case, verdict, took);
        calls.insert(0, reply);
        show(verdict, took, case, &calls.join("\n"));
    }
}

/// A node run as a process, as a person serves one, with the benchmark's
/// agents; the A2A agent it attached runs while the returned guard lives.
fn served() -> (support::Cli, support::Server, Wordsmith) {
    let cli = support::Cli::new();
    cli.add(&AGENTS);
    for (name, language) in LANGUAGE_AGENTS {
        cli.run(&["add", language_agent(name, language).to_str().unwrap()])
            .success();
    }
    let mut units = vec!["attach".to_owned(), "units".to_owned(), "--".to_owned()];
    units.extend(units_command());
    cli.run(&units.iter().map(String::as_str).collect::<Vec<_>>())
        .success();
    let wordsmith = Wordsmith::start();
    cli.run(&["attach", "wordsmith", &wordsmith.base]).success();
    for (name, command) in outside_agents() {
        let mut attach = vec!["attach", name.as_str(), "--"];
        attach.extend(command.iter().map(String::as_str));
        cli.run(&attach).success();
    }
    cli.grant("notes", &["kv=1MiB"]);
    if let Some(file) = model_file() {
        // The file as the only model and the default, in the config the
        // commands above wrote.
        let path = cli.data().join("config.toml");
        let mut config: toml::Table = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .parse()
            .unwrap();
        config.insert(
            "llm".into(),
            toml::Value::try_from(models_config(&file)).unwrap(),
        );
        std::fs::write(&path, config.to_string()).unwrap();
    }
    let node = support::Server::start(cli.data(), &[]);
    (cli, node, wordsmith)
}

fn a2a(cases: &[Case], tally: &mut Tally) {
    let (_cli, node, _wordsmith) = served();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = reqwest::Client::new();
    for case in cases.iter().filter(|c| c.agents.len() == 1) {
        runtime.block_on(restore_notes_over_mcp(&node));
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": case.said}]}}
        });
        let started = Instant::now();
        let answer: Value = runtime.block_on(async {
            client
                .post(node.url(&format!("/agents/{}/a2a", case.agents[0])))
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
        let completed = task["status"]["state"] == "TASK_STATE_COMPLETED";
        let verdict = verdict(case, completed, &said);
        tally.add(case, verdict, took);
        show(
            verdict,
            took,
            case,
            &format!("{} · {said}", task["status"]["state"]),
        );
    }
}

/// Most rounds of tool calls an OpenAI client's loop makes for one request.
const V1_ROUNDS: usize = 4;

/// Whether an answer of `/v1` tells the person the work was not done:
/// empty, saying a call failed, naming a part not done, or the model
/// saying in its own words that it cannot ("I don't have the ability to
/// access personal data"). This is how a person reads it: `/v1` has no
/// state of its own to say so.
fn v1_declines(content: &str) -> bool {
    let lower = content.to_lowercase().replace('’', "'");
    lower.trim().is_empty()
        || [
            "error",
            "failed",
            "could not",
            "cannot",
            "unknown",
            "not done",
            "i don't have",
            "i do not have",
            "unable to",
            "not able to",
        ]
        .iter()
        .any(|w| lower.contains(w))
}

/// A tool as an OpenAI client offers it: under a function name of its
/// own (the agent's prefixed where two share a name), run over the
/// agent's MCP endpoint.
struct V1Tool {
    function: String,
    agent: String,
    tool: String,
    spec: Value,
}

/// `case` put to `/v1` the way an OpenAI client with tools does it: the
/// tools of the case's agents offered, each call the model makes run over
/// MCP and its result sent back, until the model answers in words.
/// Whether the answer says it answered, and the answer.
async fn v1_answer(http: &reqwest::Client, node: &support::Server, case: &Case) -> (bool, String) {
    use rmcp::ServiceExt as _;
    let mut clients = BTreeMap::new();
    let mut tools: Vec<V1Tool> = Vec::new();
    for agent in &case.agents {
        let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(
            node.url(&format!("/agents/{agent}/mcp")),
        );
        let client = ().serve(transport).await.expect("the agent's MCP answers");
        for tool in client.list_all_tools().await.unwrap() {
            tools.push(V1Tool {
                function: tool.name.to_string(),
                agent: agent.clone(),
                tool: tool.name.to_string(),
                spec: json!({
                    "description": tool.description.as_deref().unwrap_or_default(),
                    "parameters": Value::Object((*tool.input_schema).clone()),
                }),
            });
        }
        clients.insert(agent.clone(), client);
    }
    let names: Vec<String> = tools.iter().map(|t| t.tool.clone()).collect();
    for tool in &mut tools {
        if names.iter().filter(|n| **n == tool.tool).count() > 1 {
            tool.function = format!("{}_{}", tool.agent.replace('-', "_"), tool.tool);
        }
    }
    let specs: Vec<Value> = tools
        .iter()
        .map(|t| {
            let mut function = t.spec.clone();
            function["name"] = json!(t.function);
            json!({"type": "function", "function": function})
        })
        .collect();
    let mut messages = vec![json!({"role": "user", "content": case.said})];
    for _ in 0..V1_ROUNDS {
        let response: Value = http
            .post(node.url("/v1/chat/completions"))
            .json(&json!({
                "model": MODEL, "messages": messages, "tools": specs,
                "temperature": 0, "max_tokens": 200,
            }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let message = response["choices"][0]["message"].clone();
        if message.is_null() {
            return (false, format!("error: {}", response["error"]["message"]));
        }
        let calls = message["tool_calls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if calls.is_empty() {
            let content = message["content"].as_str().unwrap_or_default().to_owned();
            return (!v1_declines(&content), content);
        }
        messages.push(message);
        for call in calls {
            let name = call["function"]["name"].as_str().unwrap_or_default();
            let arguments: Value =
                serde_json::from_str(call["function"]["arguments"].as_str().unwrap_or("{}"))
                    .unwrap_or_else(|_| json!({}));
            let content = match tools.iter().find(|t| t.function == name) {
                Some(tool) => {
                    let asked = rmcp::model::CallToolRequestParams::new(tool.tool.clone())
                        .with_arguments(arguments.as_object().cloned().unwrap_or_default());
                    match clients[&tool.agent].call_tool(asked).await {
                        Ok(result) if result.is_error == Some(true) => {
                            format!("error: {}", support::tool_text(&result))
                        }
                        Ok(result) => support::tool_text(&result),
                        Err(e) => format!("error: {e}"),
                    }
                }
                None => format!("error: there is no tool {name:?}"),
            };
            messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": content}));
        }
    }
    (
        false,
        format!("no answer after {V1_ROUNDS} rounds of calls"),
    )
}

fn v1(cases: &[Case], tally: &mut Tally) {
    let (_cli, node, _wordsmith) = served();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let http = reqwest::Client::new();
    for case in cases {
        runtime.block_on(restore_notes_over_mcp(&node));
        let started = Instant::now();
        let (answered, said) = runtime.block_on(v1_answer(&http, &node, case));
        let took = started.elapsed();
        let verdict = verdict(case, answered, &said);
        tally.add(case, verdict, took);
        show(verdict, took, case, &said);
    }
}

fn main() {
    // The goal and chat surfaces run in this process: their traces
    // (`AGENTSITE_LOG=agentsite::answers=debug`) go to stderr as the
    // node's do.
    if let Ok(filter) = std::env::var("AGENTSITE_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    let only = std::env::args()
        .skip(1)
        .find(|a| ["goals", "chat", "a2a", "v1"].contains(&a.as_str()));
    let wants = |part: &str| only.as_deref().is_none_or(|o| o == part);
    // Without the model every request reads as "not done": figures of
    // nothing. Said at once instead.
    let model = model_file().unwrap_or_else(|| {
        agentsite::llm::embedded::models_dir().join(agentsite::llm::embedded::DEFAULT_FILE)
    });
    if !model.is_file() {
        eprintln!(
            "error: the default model is not at {}: run `bash scripts/model.sh` first",
            model.display()
        );
        std::process::exit(2);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cases = cases();
    let mut lines = Vec::new();
    if wants("goals") {
        let mut tally = Tally::default();
        runtime.block_on(goals(&cases, &mut tally));
        lines.extend(tally.lines("goal"));
    }
    if wants("chat") {
        let mut tally = Tally::default();
        runtime.block_on(chat(&cases, &mut tally));
        lines.extend(tally.lines("chat"));
    }
    if wants("a2a") {
        let mut tally = Tally::default();
        a2a(&cases, &mut tally);
        lines.extend(tally.lines("A2A"));
    }
    if wants("v1") {
        let mut tally = Tally::default();
        v1(&cases, &mut tally);
        lines.extend(tally.lines("/v1 tools"));
    }
    match model_file() {
        Some(file) => println!(
            "\n## Answers on {}\n",
            file.file_name().unwrap_or_default().to_string_lossy()
        ),
        None => println!("\n## Answers on the default model (SmolLM2-135M, embedded)\n"),
    }
    println!(
        "| surface | agent | asked | right | confidently wrong | honestly not answered | median |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for line in lines {
        println!("{line}");
    }
}

/// Who the goals of this file are given by.
fn tester() -> agentsite::requester::Requester {
    agentsite::requester::Requester::new("test", None)
}
