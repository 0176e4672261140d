//! Goals across real nodes: `agentsite serve` processes on loopback with
//! the embedded model. The calculator lives on one node and the text agent
//! on another; a goal given to a third node, which hosts no agent, forms
//! its team from the network, calls the members where they live and
//! concludes: handed over MCP (the `goal` tool, its progress notifications)
//! and over the HTTP API (its event stream). A member's node killed while
//! its task runs fails that task with the reason, and the goal still
//! concludes.
//!
//! The embedded model is tiny: these tests hold the node to what it must
//! do whatever the model says (a team from the network, provenance, every
//! limit, a clear end), not to the quality of the model's prose.

use crate::support;

use futures::StreamExt as _;
use rmcp::model::{CallToolRequestParams, ProgressNotificationParam};
use rmcp::service::NotificationContext;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Cli, Server, eventually};

const GOAL: &str = "Add 1200 and 345, then count the words in 'the quick brown fox'.";

/// Three nodes: A hosts the calculator, B the text agent, both published;
/// C hosts nothing and has found both on the network.
struct Planet {
    a: Server,
    b: Server,
    c: Server,
    cli_c: Cli,
    _clis: [Cli; 2],
}

fn planet() -> Planet {
    let [cli_a, cli_b, cli_c] = [(); 3].map(|_| Cli::new());
    cli_a.add(&["calculator"]);
    cli_b.add(&["text"]);
    let a = Server::join(cli_a.data(), None);
    let b = Server::join(cli_b.data(), Some(&a));
    let c = Server::join(cli_c.data(), Some(&b));
    cli_a.run(&["publish", "calculator"]).success();
    cli_b.run(&["publish", "text"]).success();
    for (query, name) in [("add numbers", "calculator"), ("count words", "text")] {
        eventually(Duration::from_secs(60), "C finds the agents", || {
            let found = cli_c.run(&["search", query, "--json"]).json();
            match found
                .as_array()
                .is_some_and(|found| found.iter().any(|f| f["card"]["name"] == name))
            {
                true => Ok(()),
                false => Err(format!("{query:?} finds {found}")),
            }
        });
    }
    Planet {
        a,
        b,
        c,
        cli_c,
        _clis: [cli_a, cli_b],
    }
}

impl Planet {
    fn member_nodes(&self) -> [String; 2] {
        [&self.a, &self.b].map(|s| s.peer_id().unwrap().to_owned())
    }
}

/// An MCP client that keeps the progress messages it is sent.
#[derive(Clone, Default)]
struct Watcher {
    progress: Arc<Mutex<Vec<String>>>,
}

impl rmcp::ClientHandler for Watcher {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(message) = params.message {
            self.progress.lock().unwrap().push(message);
        }
    }
}

/// The messages of goal `id` as `agentsite goal show --json` gives them.
fn shown(cli: &Cli, id: &str) -> (Value, Vec<Value>) {
    let answer = cli.run(&["goal", "show", id, "--json"]).json();
    let messages = answer["messages"].as_array().unwrap().clone();
    (answer["record"].clone(), messages)
}

/// The main team's members: (name, node).
fn team(messages: &[Value]) -> Vec<(String, String)> {
    let formed = messages
        .iter()
        .find(|m| m["type"] == "team" && m.get("team").is_none())
        .unwrap_or_else(|| panic!("no team in {messages:#?}"));
    formed["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_owned(),
                m["node"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_handed_over_mcp_forms_a_team_from_the_network_and_concludes() {
    let planet = planet();
    let members_live_on = planet.member_nodes();

    let watcher = Watcher::default();
    let client = watcher
        .clone()
        .serve(StreamableHttpClientTransport::from_uri(
            planet.c.url("/mcp"),
        ))
        .await
        .expect("MCP client connects");
    let tools = client.list_all_tools().await.unwrap();
    let goal_tool = tools
        .iter()
        .find(|t| t.name == "goal")
        .expect("a goal tool");
    assert!(goal_tool.input_schema["properties"]["text"].is_object());

    let params = CallToolRequestParams::new("goal").with_arguments(
        json!({"text": GOAL, "depth": 0, "max_turns": 3})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let result = tokio::time::timeout(Duration::from_secs(600), client.call_tool(params))
        .await
        .expect("the goal ends within its deadline")
        .expect("tools/call answers");
    client.cancel().await.ok();
    let outcome = result
        .structured_content
        .clone()
        .expect("a structured result");
    assert_eq!(outcome["state"], "concluded", "{result:#?}");
    assert_ne!(result.is_error, Some(true));
    let id = outcome["goal"].as_str().unwrap().to_owned();

    // The team came from the network: every member lives on A or B.
    let members = outcome["team"].as_array().unwrap();
    assert!(!members.is_empty() && members.len() <= 4, "{outcome}");
    for member in members {
        let node = member["node"].as_str().unwrap();
        assert!(members_live_on.iter().any(|n| n == node), "{member}");
        assert!(member["agent"].as_str().unwrap().starts_with("sha256:"));
    }
    let text = result.content[0].as_text().unwrap().text.clone();
    assert!(text.contains(&id), "{text}");

    // The client saw the conversation as it happened.
    let progress = watcher.progress.lock().unwrap().clone();
    let said = |kind: &str| progress.iter().any(|p| p.contains(&format!("[{kind}]")));
    assert!(
        said("goal") && said("team") && said("conclusion"),
        "{progress:#?}"
    );

    // The node kept it all, with provenance: each tool call names the node
    // that ran it, and that node is one of the members'.
    let (record, messages) = shown(&planet.cli_c, &id);
    assert_eq!(record["state"], "concluded");
    let calls: Vec<&Value> = messages
        .iter()
        .filter(|m| m["type"] == "progress" && m.get("call").is_some())
        .map(|m| &m["call"])
        .collect();
    assert!(!calls.is_empty(), "no tool call in {messages:#?}");
    for call in &calls {
        let node = call["node"].as_str().unwrap();
        assert!(members_live_on.iter().any(|n| n == node), "{call}");
    }
    for message in messages.iter().filter(|m| m["speaker"]["kind"] == "member") {
        assert!(
            message["speaker"]["agent"]
                .as_str()
                .unwrap()
                .starts_with("sha256:")
        );
    }
    let listed = planet.cli_c.run(&["goals", "--json"]).json();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["id"] == id.as_str() && g["state"] == "concluded"),
        "{listed}"
    );
    let metrics = planet.c.metrics().await;
    assert!(
        metrics.contains("agentsite_goals_total{outcome=\"concluded\"} 1"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_node_killed_mid_task_fails_its_task_and_the_goal_ends_partial() {
    let mut planet = planet();
    // A, the calculator's node, is frozen before the goal is given: it keeps
    // its connections but answers nothing. When the calculator's task is
    // handed out, A is killed with the call in hand. However late this test
    // reads the goal's stream (it replays what happened before it came),
    // that task cannot have been done before A is gone.
    planet.a.freeze();
    let id = planet
        .cli_c
        .run(&["goal", GOAL, "--depth", "0", "--max-turns", "3", "--detach"])
        .success()
        .trim()
        .to_owned();

    let response = reqwest::Client::new()
        .get(planet.c.url(&format!("/api/goals/{id}/events")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let bytes = response
        .bytes_stream()
        .map(|c| c.map_err(std::io::Error::other));
    let mut events = sse_stream::SseStream::from_bytes_stream(bytes);
    let calculator_node = planet.a.peer_id().unwrap().to_owned();
    let mut members: Vec<(String, String)> = Vec::new();
    let mut killed: Option<String> = None;
    let mut last_state = Value::Null;
    let follow = async {
        while let Some(event) = events.next().await {
            let event = event.expect("the stream holds events");
            let Some(data) = event.data else { continue };
            let data: Value = serde_json::from_str(&data).unwrap();
            match event.event.as_deref() {
                Some("message") if data["type"] == "team" && data.get("team").is_none() => {
                    members = team(std::slice::from_ref(&data));
                }
                Some("message")
                    if killed.is_none()
                        && data["type"]
                            .as_str()
                            .is_some_and(|t| t.starts_with("assign")) =>
                {
                    for task in data["tasks"].as_array().unwrap() {
                        let assignee = task["assignee"].as_str().unwrap();
                        let (_, node) = members.iter().find(|(name, _)| name == assignee).unwrap();
                        if *node == calculator_node {
                            planet.a.kill();
                            killed = Some(assignee.to_owned());
                        }
                    }
                }
                Some("state") => {
                    last_state = data.clone();
                    if !matches!(data["state"].as_str(), Some("forming" | "running")) {
                        break;
                    }
                }
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(600), follow)
        .await
        .expect("the goal ends within its deadline");
    let killed = killed.expect("the calculator was given a task");
    assert_eq!(last_state["state"], "partial", "{last_state}");

    // The dead member's task failed, saying why; the other part was done,
    // and the goal ends partial, naming the part not done.
    let (record, messages) = shown(&planet.cli_c, &id);
    assert_eq!(record["state"], "partial");
    let conclusion = record["conclusion"].as_str().unwrap();
    assert!(
        conclusion.contains("Not done: \"Add 1200 and 345\"")
            && conclusion.contains("could not be run"),
        "{conclusion}"
    );
    let failed: Vec<&Value> = messages
        .iter()
        .filter(|m| {
            m["type"] == "result" && m["ok"] == false && m["speaker"]["name"] == killed.as_str()
        })
        .collect();
    assert!(
        !failed.is_empty(),
        "no failed task of {killed} in {messages:#?}"
    );
    let why = failed[0]["text"].as_str().unwrap();
    assert!(why.contains("could not be run"), "{why}");
    assert!(messages.iter().any(|m| m["type"] == "conclusion"));
    // C serves on.
    let health = planet.c.health().await;
    assert_eq!(health["status"], "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_goals_api_refuses_bad_requests_with_one_line_reasons() {
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let node = Server::start(cli.data(), &[]);
    let http = reqwest::Client::new();
    let post = |path: &str, body: Value| http.post(node.url(path)).json(&body).send();
    let refused = async |response: reqwest::Response| -> (u16, String) {
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        let error = body["error"].as_str().unwrap().to_owned();
        assert!(!error.contains('\n'), "{error}");
        (status, error)
    };
    let cases = [
        (json!({"text": "  "}), 400, "has no text"),
        (json!({"text": "x".repeat(9000)}), 400, "over the limit"),
        (
            json!({"text": "add", "team": ["nobody-here"]}),
            400,
            "unknown team member",
        ),
        (
            json!({"text": "add", "limits": {"turns": 1000}}),
            400,
            "turns",
        ),
        (json!({"goal": "add"}), 400, "not what this endpoint takes"),
    ];
    for (body, status, reason) in cases {
        let (got, error) = refused(post("/api/goals", body.clone()).await.unwrap()).await;
        assert_eq!(got, status, "{body}: {error}");
        assert!(error.contains(reason), "{body}: {error}");
    }
    let (status, error) = refused(
        http.get(node.url("/api/goals/g0123456789abcdef"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, error.contains("no goal")), (404, true), "{error}");
    let (status, _) = refused(
        post("/api/goals/g0123456789abcdef/cancel", json!({}))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404);
    // A page elsewhere may not start goals on this node.
    let cross_site = http
        .post(node.url("/api/goals"))
        .header("origin", "https://evil.example")
        .json(&json!({"text": "add 1 and 2"}))
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), 403);

    // A second node on the same data directory is refused: the first
    // keeps its goals.
    cli.run(&["serve", "--listen", "127.0.0.1:0", "--no-p2p"])
        .failure("another agentsite node serves");
    // The first still takes goals.
    let listed = http.get(node.url("/api/goals")).send().await.unwrap();
    assert_eq!(listed.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_that_goes_away_cancels_its_goal() {
    use support::scripted::{Answer, Asked, ModelServer, capable, read};
    // A model that takes its time over the call: the goal is still
    // running when the client leaves.
    let model = tokio::task::spawn_blocking(|| {
        ModelServer::start(|request| {
            let read = read(request);
            match read.asked {
                Asked::Call => Answer::Later(Duration::from_secs(600), Box::new(capable(&read))),
                _ => capable(&read),
            }
        })
    })
    .await
    .unwrap();
    let cli = Cli::new();
    cli.add(&["calculator"]);
    std::fs::write(cli.data().join("config.toml"), model.node_config()).unwrap();
    let node = Server::start(cli.data(), &[]);
    let client = ().serve(StreamableHttpClientTransport::from_uri(node.url("/mcp"))).await.unwrap();
    let params = CallToolRequestParams::new("goal").with_arguments(
        json!({"text": "add 1200 and 345", "team": ["calculator"], "depth": 0})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let peer = client.peer().clone();
    let call = tokio::spawn(async move { peer.call_tool(params).await });
    let goals = async || -> Vec<Value> {
        let listed: Value = reqwest::get(node.url("/api/goals"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        listed.as_array().unwrap().clone()
    };
    let id =
        support::eventually_async(
            Duration::from_secs(30),
            "the goal runs",
            async || match goals().await.first() {
                Some(goal) if goal["state"] == "running" || goal["state"] == "forming" => {
                    Ok(goal["id"].as_str().unwrap().to_owned())
                }
                other => Err(format!("{other:?}")),
            },
        )
        .await;
    // The client leaves mid-goal: its session ends, and the goal with it.
    client.cancel().await.ok();
    call.abort();
    support::eventually_async(
        Duration::from_secs(30),
        "the goal is cancelled",
        async || {
            let state = goals()
                .await
                .into_iter()
                .find(|g| g["id"] == id.as_str())
                .map(|g| g["state"].clone());
            match state {
                Some(state) if state == "cancelled" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}
