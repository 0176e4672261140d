//! A2A v1.0 both ways, with the official Python `a2a-sdk` on the other
//! side: its client reads a serving node's Agent Cards, sends messages to
//! an agent (a call chosen by the node's model, or named in a data part;
//! answered at once and streamed), reads, lists and cancels tasks, and
//! gives the node a goal. The node's model is scripted and reached over the
//! OpenAI API as a hosted one would be.

mod support;

use agentsite::llm::{ChatRequest, Role};
use serde_json::{Value, json};
use std::process::Command;
use std::time::Duration;
use support::scripted::{Answer, ModelServer, turn};
use support::{Cli, Server, installed_tool, repo, run_bounded};

fn python() -> String {
    installed_tool("venv/bin/python").display().to_string()
}

/// The node's model: for a message to the calculator it chooses `add`
/// (slowly when told to take its time); in a goal the calculator
/// multiplies 6 by 7 and the team concludes.
fn model(request: &ChatRequest) -> Answer {
    let system = request.messages.first().map_or("", |m| m.content.as_str());
    let last = request.messages.last().expect("a request has messages");
    if system.contains("You act for the agent calculator") {
        let call = Answer::Call("add", json!({"a": 2, "b": 3}));
        return if last.content.contains("Take your time") {
            Answer::Later(Duration::from_secs(120), Box::new(call))
        } else {
            call
        };
    }
    let tool_results: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    if system.contains("Do the task") {
        return match tool_results.last() {
            Some(result) => Answer::Text(format!("6 times 7 is {result}")),
            None => Answer::Call("multiply", json!({"a": 6, "b": 7})),
        };
    }
    let transcript: String = request
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    if transcript.contains("result of #") {
        turn("conclude", "6 times 7 is 42.", &[], "calculator")
    } else {
        turn(
            "assign_sync",
            "The calculator multiplies",
            &[("calculator", "multiply 6 by 7")],
            "calculator",
        )
    }
}

fn client_run(base: &str) -> Value {
    let script = repo().join("tests/python/a2a_client.py");
    let output = run_bounded(
        Command::new(python()).arg(&script).arg(base),
        Duration::from_secs(240),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the a2a-sdk client failed\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
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

    // The model chose add(2, 3).
    let chosen = &seen["chosen"];
    assert_eq!(chosen["state"], "TASK_STATE_COMPLETED", "{seen}");
    assert_eq!(chosen["artifacts"], json!(["5.0"]));
    assert_eq!(chosen["data"], json!([{"result": 5.0}]));
    assert_eq!(chosen["said"], "5.0");
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
    assert_eq!(goal["artifacts"], json!(["6 times 7 is 42."]));
    assert!(seen["goal_updates"].as_u64().unwrap() >= 3, "{seen}");
    drop(node);
}
