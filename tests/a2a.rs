//! A2A v1.0 both ways, with the official Python `a2a-sdk` on the other
//! side. Its client reads a serving node's Agent Cards, sends messages to
//! an agent (a call chosen by the node's model, or named in a data part;
//! answered at once and streamed), reads, lists and cancels tasks, and
//! gives the node a goal (the node's model is scripted and reached over the
//! OpenAI API as a hosted one would be). Its server, the wordsmith example,
//! is attached to a node by URL: listed, called through the CLI and the
//! node's `/mcp`, and a member of a goal's team; peers that never finish a
//! task, answer malformed JSON, answer without end or too much are each a
//! clear error within the call's deadline.

use crate::support;

use agentsite::NodeCallError;
use agentsite::bridge::Attachment;
use agentsite::config::Limits;
use agentsite::llm::ChatRequest;
use agentsite::runtime::CallError;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::scripted::{Answer, Asked, ModelServer, capable, read};
use support::{Cli, Server, installed_tool, mcp_call, node, repo};

fn python() -> String {
    installed_tool("venv/bin/python").display().to_string()
}

/// The Python of the A2A SDK's last 0.3 release (tests/python/requirements-a2a-0.3.txt).
fn python_0_3() -> String {
    installed_tool("venv-a2a-0.3/bin/python")
        .display()
        .to_string()
}

/// The node's model: a capable one (see [`support::scripted::capable`]),
/// slow to choose a call when told to take its time.
fn model(request: &ChatRequest) -> Answer {
    let read = read(request);
    let answer = capable(&read);
    match read.asked {
        Asked::Call if request.messages[1].content.contains("Take your time") => {
            Answer::Later(Duration::from_secs(120), Box::new(answer))
        }
        _ => answer,
    }
}

/// What tests/python/a2a_0_3.py printed as JSON, run in `mode` against
/// the node at `base` with the 0.3 SDK.
fn client_0_3(mode: &str, base: &str) -> Value {
    let output = support::run_bounded(
        Command::new(python_0_3())
            .arg(repo().join("tests/python/a2a_0_3.py"))
            .arg(mode)
            .arg(base),
        Duration::from_secs(240),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn client_run(base: &str) -> Value {
    python_json("a2a_client.py", &[base])
}

/// What the Python script `script` (of tests/python) printed as JSON, run
/// with `args` (the node's base URL first).
fn python_json(script: &str, args: &[&str]) -> Value {
    let stdout = support::python_script(script, args, Duration::from_secs(240));
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn the_a2a_sdk_verifies_the_nodes_signed_cards_and_refuses_changed_ones() {
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let did = cli.run(&["id", "--json"]).json()["did"]
        .as_str()
        .expect("the node's did:key")
        .to_owned();
    assert!(did.starts_with("did:key:z6Mk"), "{did}");
    let node = Server::start(cli.data(), &[]);
    let seen = python_json("a2a_signed_card.py", &[&node.base, "calculator"]);
    for card in ["node", "agent"] {
        assert_eq!(seen[card]["verified"], true, "{seen}");
        assert_eq!(seen[card]["signatures"], 1, "{seen}");
        assert_eq!(seen[card]["tampered_refused"], true, "{seen}");
    }
    assert_eq!(seen["agent"]["name"], "calculator");
    // Every signature names the node's own key.
    let kid = format!("{did}#{}", did.trim_start_matches("did:key:"));
    for named in seen["kids"].as_array().unwrap() {
        assert_eq!(named, &json!(kid));
    }
}

#[test]
fn the_a2a_sdk_client_talks_to_a_node() {
    let model = ModelServer::start(model);
    let cli = Cli::new();
    cli.add(&["calculator"]);
    std::fs::write(cli.data().join("config.toml"), model.node_config()).unwrap();
    let node = Server::start(cli.data(), &[]);
    let seen = client_run(&node.base);

    let node_card = &seen["node_card"];
    assert_eq!(node_card["name"], "agentsite node");
    assert_eq!(node_card["url"], format!("{}/a2a", node.base));
    assert_eq!(node_card["streaming"], true);
    let skills: Vec<&str> = node_card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(skills[0], "goal", "{skills:?}");
    assert!(skills.contains(&"calculator/add"), "{skills:?}");
    let card = &seen["agent_card"];
    assert_eq!(card["name"], "calculator");
    assert_eq!(card["url"], format!("{}/agents/calculator/a2a", node.base));
    assert_eq!(
        card["skills"],
        json!(["add", "subtract", "multiply", "divide"])
    );

    // The model chose add(2, 3); the answer states its result.
    let chosen = &seen["chosen"];
    assert_eq!(chosen["state"], "TASK_STATE_COMPLETED", "{seen}");
    assert_eq!(chosen["artifacts"], json!(["5.0"]));
    assert_eq!(chosen["data"], json!([{"result": 5.0}]));
    assert_eq!(chosen["said"], "Found: add(2, 3) = 5.");
    assert_eq!(chosen["history"], 2, "the question and the answer");

    // multiply(6, 7) streamed: the task, working, the call, its result, done.
    let streamed = seen["streamed"].as_array().unwrap();
    assert_eq!(
        streamed.first().unwrap(),
        &json!(["task", "TASK_STATE_SUBMITTED"]),
        "{streamed:?}"
    );
    assert!(
        streamed.contains(&json!(["artifact", "42.0"])),
        "{streamed:?}"
    );
    assert_eq!(
        streamed.last().unwrap(),
        &json!(["status", "TASK_STATE_COMPLETED"]),
        "{streamed:?}"
    );

    assert_eq!(
        seen["got"],
        json!({"state": "TASK_STATE_COMPLETED", "artifacts": ["5.0"]})
    );
    assert_eq!(seen["listed"]["count"], 2, "{seen}");
    assert_eq!(seen["missing"], "TaskNotFoundError");

    // Answered at once (returnImmediately), before the model has chosen.
    let started = seen["slow_started"].as_str().unwrap();
    assert!(
        ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"].contains(&started),
        "{seen}"
    );
    assert_eq!(seen["cancelled"], "TASK_STATE_CANCELED", "{seen}");
    assert_eq!(seen["cancel_again"], "TaskNotCancelableError");

    let goal = &seen["goal"];
    assert_eq!(goal["state"], "TASK_STATE_COMPLETED", "{seen}");
    assert_eq!(goal["artifacts"], json!(["Found: multiply(6, 7) = 42."]));
    assert!(seen["goal_updates"].as_u64().unwrap() >= 3, "{seen}");

    // What is not a request of A2A 1.0 gets a JSON-RPC error saying why.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let endpoint = node.url("/agents/calculator/a2a");
    let error = |body: &'static str, version: &'static str| {
        let endpoint = endpoint.clone();
        runtime.block_on(async move {
            let answer: Value = reqwest::Client::new()
                .post(endpoint)
                .header("A2A-Version", version)
                .body(body)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            (
                answer["error"]["code"].as_i64().unwrap(),
                answer["error"]["message"].to_string(),
            )
        })
    };
    assert_eq!(error("nope", "1.0").0, -32700);
    assert_eq!(error("[1]", "1.0").0, -32600);
    // 0.3's methods are answered as 0.3 (tests below), but not sent as 1.0.
    let (code, said) = error(r#"{"jsonrpc":"2.0","id":1,"method":"message/send"}"#, "1.0");
    assert_eq!(code, -32009);
    assert!(said.contains("A2A 0.3 method"), "{said}");
    let (code, _) = error(
        r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}"#,
        "2.0",
    );
    assert_eq!(code, -32009, "a version this node does not speak");
    let (code, said) = error(
        r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"url":"http://x/f.png"}]}}}"#,
        "1.0",
    );
    assert_eq!(code, -32005, "{said}");
    drop(node);
}

/// The default A2A client (its HTTP client's read timeout is a few
/// seconds) follows a goal through ten quiet seconds: the node's keep-alive
/// comments hold the stream open. A client that goes away mid-goal stops
/// the goal, so the node's model is free for the next caller.
#[test]
fn a_default_a2a_client_waits_out_a_slow_goal_and_leaving_stops_one() {
    let model = ModelServer::start(|request: &ChatRequest| {
        let read = read(request);
        let answer = capable(&read);
        let asked = request.messages.get(1).map_or("", |m| m.content.as_str());
        match read.asked {
            Asked::Call if asked.contains("Slowly") => {
                Answer::Later(Duration::from_secs(10), Box::new(answer))
            }
            Asked::Call if asked.contains("Forever") => {
                Answer::Later(Duration::from_secs(600), Box::new(answer))
            }
            _ => answer,
        }
    });
    let cli = Cli::new();
    cli.add(&["calculator"]);
    std::fs::write(cli.data().join("config.toml"), model.node_config()).unwrap();
    let node = Server::start(cli.data(), &[]);
    let seen = python_json("a2a_patient.py", &[&node.base]);
    let slow = &seen["slow"];
    assert_eq!(slow["last_state"], "TASK_STATE_COMPLETED", "{seen}");
    assert!(slow["seconds"].as_f64().unwrap() >= 10.0, "{seen}");
    assert_eq!(seen["artifact"], "Found: multiply(6, 7) = 42.", "{seen}");

    // The abandoned goal is cancelled within a few seconds of the client
    // leaving, long before its model would have answered.
    let abandoned = seen["abandoned"].as_str().unwrap().to_owned();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let endpoint = node.url("/a2a");
    runtime.block_on(support::eventually_async(
        Duration::from_secs(15),
        "the abandoned goal is cancelled",
        async || {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": abandoned}});
            let answer: Value = reqwest::Client::new()
                .post(&endpoint)
                .header("A2A-Version", "1.0")
                .json(&body)
                .send()
                .await
                .map_err(|e| e.to_string())?
                .json()
                .await
                .map_err(|e| e.to_string())?;
            match answer["result"]["status"]["state"].as_str() {
                Some("TASK_STATE_CANCELED") => Ok(()),
                other => Err(format!("{other:?}: {answer}")),
            }
        },
    ));
}

/// A Python A2A agent on a free port, stopped when dropped; what it prints
/// after its address comes through `lines`.
struct Peer {
    child: Child,
    base: String,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Peer {
    /// The wordsmith example, or (with a mode) a misbehaving peer.
    fn start(mode: Option<&str>) -> Peer {
        let mut command = Command::new(python());
        match mode {
            None => command
                .arg(repo().join("examples/python-a2a-wordsmith/agent.py"))
                .arg("0"),
            Some(mode) => command
                .arg(repo().join("tests/python/a2a_peer.py"))
                .arg(mode),
        };
        Peer::spawn(command)
    }

    /// An agent of the A2A SDK's last 0.3 release, which speaks only 0.3.
    fn start_0_3() -> Peer {
        let mut command = Command::new(python_0_3());
        command
            .arg(repo().join("tests/python/a2a_0_3.py"))
            .arg("serve");
        Peer::spawn(command)
    }

    /// Runs `command`, an agent that says where it listens first.
    fn spawn(mut command: Command) -> Peer {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (sender, lines) = std::sync::mpsc::channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        let first = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the A2A agent says where it listens within 60 s");
        let base = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_owned();
        Peer { child, base, lines }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn url(base: &str) -> Attachment {
    Attachment::Http {
        url: base.to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_a2a_agent_attached_by_url_is_an_agent_of_the_node() {
    let peer = Peer::start(None);
    let cli = Cli::new();
    cli.run(&["attach", "wordsmith", &peer.base]).success();
    let listed = cli.run(&["ls", "--json"]).json();
    let record = &listed.as_array().unwrap()[0];
    assert_eq!(record["attached"]["transport"], "a2a", "{record}");
    let inspected = cli.run(&["inspect", "wordsmith"]).success();
    assert!(inspected.contains("A2A agent"), "{inspected}");
    assert!(
        inspected.contains("not sandboxed by this node"),
        "{inspected}"
    );
    assert!(
        inspected.contains("Says the words of the message in reverse order"),
        "{inspected}"
    );

    let reversed = cli.call("wordsmith", "reverse", r#"{"message": "one two three"}"#);
    assert!(reversed.success().contains("three two one"));
    let counted = cli
        .call("wordsmith", "count", r#"{"message": "one two three"}"#)
        .json();
    assert_eq!(counted["structuredContent"]["words"], 3.0, "{counted}");
    cli.call("wordsmith", "count", "{}").failure("\"message\"");

    // Served on the node's /mcp, and as an A2A agent of the node in turn.
    let server = Server::start(cli.data(), &[]);
    let counted = mcp_call(
        server.url("/agents/wordsmith/mcp"),
        "count",
        json!({"message": "a b c d"}),
    )
    .await;
    assert_eq!(counted["words"], 4.0, "{counted}");
    let card: Value = reqwest::get(server.url("/agents/wordsmith/.well-known/agent-card.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        card["description"]
            .as_str()
            .unwrap()
            .contains("an attached A2A agent, not sandboxed"),
        "{card}"
    );

    cli.run(&["detach", "wordsmith"]).success();
    assert!(
        cli.run(&["ls", "--json"])
            .json()
            .as_array()
            .unwrap()
            .is_empty()
    );
    drop(server);

    // A URL with neither an MCP server nor an Agent Card is not attached.
    let refused = cli.run(&["attach", "nothing", "http://127.0.0.1:9/"]);
    refused.failure("cannot reach");
}

/// The failure of a call that did not return a result.
fn failure(outcome: Result<agentsite::agent::tool::ToolOutput, NodeCallError>) -> CallError {
    match outcome {
        Err(NodeCallError::Call(failure)) => failure,
        other => panic!("expected a failed call, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_a2a_peers_are_clear_errors_within_the_deadline() {
    let deadline = Duration::from_secs(3);
    let limits = Limits {
        deadline,
        ..Limits::default()
    };
    let (node, _dir) = node(limits);
    let message = r#"{"message": "one two"}"#;
    let bound = deadline + Duration::from_secs(5);

    // A task that never finishes: the deadline, and the peer is told.
    let stuck = Peer::start(Some("stuck"));
    node.attach("stuck", url(&stuck.base)).await.unwrap();
    let started = Instant::now();
    let outcome = node.call("stuck", "reverse", message, None).await;
    assert!(matches!(failure(outcome), CallError::DeadlineExceeded(_)));
    assert!(started.elapsed() < bound, "{:?}", started.elapsed());
    let told = stuck
        .lines
        .recv_timeout(Duration::from_secs(30))
        .expect("the peer is asked to cancel the task");
    assert!(told.starts_with("cancelled "), "{told}");

    for (mode, says) in [
        ("malformed", "answered SendMessage with malformed JSON"),
        ("huge", "its answer is larger than"),
    ] {
        let peer = Peer::start(Some(mode));
        node.attach(mode, url(&peer.base)).await.unwrap();
        let started = Instant::now();
        let error = failure(node.call(mode, "count", message, None).await).to_string();
        assert!(error.contains(says), "{mode}: {error}");
        assert!(started.elapsed() < bound, "{mode}: {:?}", started.elapsed());
    }

    let endless = Peer::start(Some("endless"));
    node.attach("endless", url(&endless.base)).await.unwrap();
    let started = Instant::now();
    let outcome = node.call("endless", "count", message, None).await;
    assert!(matches!(failure(outcome), CallError::DeadlineExceeded(_)));
    assert!(started.elapsed() < bound, "{:?}", started.elapsed());

    // A peer that went away.
    drop(endless);
    let error = failure(node.call("endless", "count", message, None).await);
    assert!(
        matches!(&error, CallError::Unavailable(why) if why.contains("cannot reach")),
        "{error}"
    );

    // The node keeps serving: a good peer answers beside them.
    let good = Peer::start(None);
    node.attach("wordsmith", url(&good.base)).await.unwrap();
    let reversed = node
        .call("wordsmith", "reverse", message, None)
        .await
        .unwrap();
    assert_eq!(reversed.text(), "two one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_a2a_agent_does_a_task_in_a_goal() {
    use agentsite::goals::ask::GoalModel;
    use agentsite::goals::config::GoalsConfig;
    use agentsite::goals::{GoalState, NewGoal};
    use agentsite::llm::{Completion, LlmFailure};
    use support::scripted::{Asked, completion, first_call, goals_for, read, run_goal};

    /// The team's one member reverses the words with the attached agent's
    /// skill, and the answer states what it found.
    struct Scripted;

    #[async_trait::async_trait]
    impl GoalModel for Scripted {
        async fn complete(
            &self,
            _model: Option<&str>,
            request: ChatRequest,
            _deadline: std::time::Instant,
        ) -> Result<Completion, LlmFailure> {
            let answer = match read(&request).asked {
                Asked::Call => Answer::Call("reverse", json!({"message": "alpha beta gamma"})),
                Asked::Answer => Answer::Text("Reversed, it reads gamma beta alpha.".into()),
                _ => Answer::Text("Reverse the words.".into()),
            };
            Ok(completion(answer, 10))
        }

        fn resolve(&self, model: Option<&str>) -> Result<String, String> {
            Ok(model.unwrap_or("scripted").to_owned())
        }
    }

    let peer = Peer::start(None);
    let (node, dir) = node(Limits::default());
    node.attach("wordsmith", url(&peer.base)).await.unwrap();
    let goals = goals_for(
        dir.path(),
        &node,
        None,
        Arc::new(Scripted),
        GoalsConfig::default(),
    );
    let new = NewGoal {
        text: "Reverse alpha beta gamma".into(),
        team: vec!["wordsmith".into()],
        ..Default::default()
    };
    let (record, messages) = run_goal(&goals, new, Duration::from_secs(60)).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    let call = first_call(&messages);
    assert_eq!(call.tool, "reverse");
    assert!(call.result.contains("gamma beta alpha"), "{}", call.result);
    assert_eq!(
        record.conclusion.as_deref(),
        Some("Reversed, it reads gamma beta alpha.")
    );
}

/// Serves `card` at /.well-known/agent-card.json on a loopback port.
fn serve_card(card: Value) -> support::served::Served {
    let app = axum::Router::new().route(
        "/.well-known/agent-card.json",
        axum::routing::get(move || {
            let card = card.clone();
            async move { axum::Json(card) }
        }),
    );
    support::served::Served::start(app)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_signed_card_of_an_agent_attached_by_url_must_verify() {
    let other = Cli::new();
    other.add(&["calculator"]);
    let node = Server::start(other.data(), &[]);
    let card: Value = reqwest::get(format!(
        "{}/agents/calculator/.well-known/agent-card.json",
        node.base
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(
        card["signatures"].as_array().map(Vec::len),
        Some(1),
        "{card}"
    );
    let mut changed = card.clone();
    changed["description"] = json!("A calculator that sends your numbers elsewhere.");
    // The copies are served elsewhere than the node that answers: the
    // operator names that endpoint.
    let endpoint = card["supportedInterfaces"][0]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    let (honest, tampered) = (serve_card(card), serve_card(changed));
    let honest_url = format!("http://{}", honest.address);
    let tampered_url = format!("http://{}", tampered.address);

    let cli = Cli::new();
    let attached = tokio::task::spawn_blocking(move || {
        let ok = cli.run(&["attach", "calc", "--endpoint", &endpoint, &honest_url]);
        let refused = cli.run(&["attach", "calc2", "--endpoint", &endpoint, &tampered_url]);
        (ok, refused, cli)
    });
    let (ok, refused, cli) = attached.await.unwrap();
    ok.success();
    refused.failure("its card is signed, but no signature verifies");
    let names: Vec<Value> = cli
        .run(&["ls", "--json"])
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["card"]["name"].clone())
        .collect();
    assert_eq!(names, vec![json!("calc")]);
}

/// A 0.3 client's task methods end to end: a message sent without
/// blocking, followed with `tasks/resubscribe` to its end; another
/// cancelled with `tasks/cancel`, refused when cancelled again (0.3's
/// -32002), and read back cancelled.
#[test]
fn a_client_of_a2a_0_3_follows_and_cancels_tasks() {
    let cli = Cli::new();
    cli.add(&["courier"]);
    let server = Server::start(cli.data(), &[]);
    let seen = client_0_3("tasks", &server.url(""));
    for started in ["followed_started", "cancel_started"] {
        assert!(
            ["submitted", "working"].contains(&seen[started].as_str().unwrap()),
            "answered before the wait ended: {seen}"
        );
    }
    let followed = &seen["followed"];
    assert_eq!(followed["state"], "completed", "{seen}");
    assert_eq!(
        followed["states"].as_array().unwrap().last().unwrap(),
        "completed",
        "{seen}"
    );
    assert!(
        followed["data"][0]["result"].as_u64().unwrap() >= 1500,
        "{seen}"
    );
    assert_eq!(seen["cancelled"], "canceled", "{seen}");
    assert!(
        seen["cancel_again"].as_str().unwrap().contains("-32002"),
        "{seen}"
    );
    assert_eq!(seen["read_back"], "canceled", "{seen}");
}

#[test]
fn a_client_of_a2a_0_3_calls_an_agent_of_the_node() {
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let server = Server::start(cli.data(), &[]);
    let seen = client_0_3("client", &server.url(""));
    // The card a 0.3 client reads: 0.3's version, endpoint and transport.
    assert_eq!(seen["card"]["protocol_version"], "0.3.0", "{seen}");
    assert!(
        seen["card"]["url"]
            .as_str()
            .unwrap()
            .ends_with("/agents/calculator/a2a"),
        "{seen}"
    );
    assert_eq!(seen["card"]["transport"], "JSONRPC", "{seen}");
    assert!(seen["card"]["skills"].to_string().contains("add"), "{seen}");
    // message/send answered with the task, tasks/get reads it back.
    assert_eq!(seen["sent"]["kind"], "task", "{seen}");
    assert_eq!(seen["sent"]["state"], "completed", "{seen}");
    assert_eq!(seen["sent"]["data"], json!([{"result": 5.0}]), "{seen}");
    assert_eq!(
        seen["read_back"],
        json!({"id": true, "state": "completed"}),
        "{seen}"
    );
    // message/stream: the task, then its updates, the last one final.
    assert_eq!(seen["streamed"]["state"], "completed", "{seen}");
    assert_eq!(
        seen["streamed"]["data"],
        json!([{"result": 42.0}]),
        "{seen}"
    );
    let kinds = seen["streamed"]["kinds"].to_string();
    assert!(kinds.contains("status-update"), "{seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_a2a_0_3_agent_is_attached_and_called_in_its_own_binding() {
    let peer = Peer::start_0_3();
    let cli = Cli::new();
    cli.run(&["attach", "echo", &peer.base]).success();
    let listed = cli.run(&["ls", "--json"]).json();
    let record = &listed.as_array().unwrap()[0];
    assert_eq!(record["attached"]["transport"], "a2a", "{record}");
    assert_eq!(record["attached"]["protocol"], "0.3.0", "{record}");
    let tools = cli.run(&["tools", "echo"]).success();
    assert!(tools.contains("shout"), "{tools}");
    let shouted = cli.call("echo", "shout", r#"{"message": "hello there"}"#);
    assert!(shouted.success().contains("HELLO THERE"));
}
