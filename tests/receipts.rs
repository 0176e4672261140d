//! Calls a stranger can check: a node that runs a remote call signs a
//! receipt of it; a replayable call (one that read no clock, randomness,
//! network or stored data) is run again by the caller, after fetching the
//! agent by its hash, and compared; a node that signs a wrong answer is
//! caught, blocked, and its receipt proves the lie to a third node that
//! runs the agent itself; a goal whose member's host lies takes the step
//! from another host. In-process nodes on the memory transport.

use crate::support;

use agentsite::capabilities::peers::Hop;
use agentsite::config::Limits;
use agentsite::goals::ask::GoalModel;
use agentsite::goals::config::GoalsConfig;
use agentsite::goals::message::CheckOutcome;
use agentsite::goals::{Body, GoalState, NewGoal, Verify};
use agentsite::hub::{Hub, Verdict};
use agentsite::llm::{ChatRequest, Completion, LlmFailure};
use agentsite::net::Multiaddr;
use agentsite::net::fetch::{FetchRequest, FetchResponse};
use agentsite::net::rpc::{CallRequest, RpcError, code};
use agentsite::net::{Keypair, Library, Network, PeerId};
use agentsite::receipt::{Evidence, Ran};
use agentsite::store::manifest::SignedManifest;
use agentsite::{AgentId, Node};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::hostile::node_with;
use support::scripted::{capable, completion, first_call, goals_for, read, run_goal};
use support::testnet::{manifest_from_dht, memory_config, node_with_hub};

/// How long any one network step of these tests may take.
const STEP: Duration = Duration::from_secs(60);

fn hop() -> Hop {
    Hop {
        depth: 0,
        deadline: Instant::now() + Duration::from_secs(30),
    }
}

/// Adds the example agent `name` to `node` and publishes it; its id.
async fn publish(node: &Node, hub: &Hub, name: &str) -> AgentId {
    let bytes = std::fs::read(support::wasm(name)).unwrap();
    let id = AgentId::of(&bytes);
    node.add(&bytes).await.unwrap();
    hub.publish(&id.to_string()).await.unwrap();
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_call_carries_a_receipt_the_caller_checks_by_running_it_again() {
    let (host_dir, caller_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (host_node, host) = node_with_hub(host_dir.path(), &[]).await;
    let calculator = publish(&host_node, &host, "calculator").await;
    let timer = publish(&host_node, &host, "timer").await;
    let entry = host.network().addresses().await.unwrap();
    let (_caller_node, caller) = node_with_hub(caller_dir.path(), &entry).await;

    let arguments = json!({"a": 40, "b": 2.5});
    let (answer, ran_on) = tokio::time::timeout(
        STEP,
        caller.call_remote_at(calculator, "add", arguments.clone(), hop()),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(ran_on, host.peer_id());
    let receipt = answer.receipt.clone().expect("the host signs a receipt");
    assert_eq!(
        receipt.node,
        agentsite::did::of_peer(&host.peer_id()).unwrap()
    );
    assert_eq!(receipt.agent, calculator);
    assert_eq!(receipt.tool, "add");
    assert!(
        receipt.replayable,
        "adding reads nothing but its arguments: {receipt:?}"
    );
    assert!(receipt.used.is_empty());
    let deadline = Instant::now() + STEP;
    let verdict = caller
        .check_answer(calculator, "add", &arguments, &answer, ran_on, deadline)
        .await;
    assert!(
        matches!(&verdict, Verdict::Confirmed { by } if by == "this node"),
        "{verdict:?}"
    );

    // The time is not the same twice: the receipt says the call read the
    // clock, and a check says why it cannot be made.
    let (answer, ran_on) = caller
        .call_remote_at(timer, "now", json!({}), hop())
        .await
        .unwrap();
    let receipt = answer.receipt.clone().expect("a receipt");
    assert!(!receipt.replayable);
    assert_eq!(receipt.used, ["clock"]);
    let verdict = caller
        .check_answer(timer, "now", &json!({}), &answer, ran_on, deadline)
        .await;
    match verdict {
        Verdict::Unchecked { why } => assert!(why.contains("clock"), "{why}"),
        other => panic!("a call that read the clock was checked: {other:?}"),
    }
    host.network().shutdown().await;
    caller.network().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_source_a_call_reads_is_named_granted_or_not() {
    let (node, _dir) = node_with(&["calculator", "timer", "notes"], Limits::default()).await;
    let used = async |agent: &str, tool: &str, arguments: &str| {
        let record = node.resolve(agent).unwrap();
        let ran = node
            .call_at_hop_recorded(&record, tool, arguments, hop())
            .await
            .unwrap();
        ran.used.names()
    };
    assert!(
        used("calculator", "add", r#"{"a": 1, "b": 2}"#)
            .await
            .is_empty()
    );
    assert_eq!(used("timer", "now", "{}").await, ["clock"]);
    assert_eq!(used("timer", "wait", r#"{"millis": 1}"#).await, ["clock"]);
    // Not granted here, refused, and still named: where kv is granted the
    // call would read what is stored.
    assert_eq!(used("notes", "list", "{}").await, ["kv"]);
}

/// A node that runs its calls for real and signs what it answers, but
/// answers one more than the truth to `add`: the lie the tests catch.
struct Liar {
    node: Arc<Node>,
}

#[async_trait::async_trait]
impl Library for Liar {
    fn answer(&self, _from: PeerId, _request: FetchRequest) -> FetchResponse {
        FetchResponse::NotFound
    }

    async fn call(&self, _from: PeerId, request: &CallRequest) -> Result<Ran, RpcError> {
        let unavailable = |e: String| RpcError {
            code: code::INTERNAL,
            message: e,
        };
        let record = self
            .node
            .resolve(&request.agent.to_string())
            .map_err(|e| unavailable(e.to_string()))?;
        let mut ran = self
            .node
            .call_at_hop_recorded(
                &record,
                &request.tool,
                &request.arguments.to_string(),
                hop(),
            )
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        if request.tool == "add" {
            let mut result = serde_json::to_value(&ran.output).unwrap();
            let sum = result["structuredContent"]["result"].as_f64().unwrap() + 1.0;
            result["structuredContent"]["result"] = json!(sum);
            result["content"][0]["text"] = json!(sum.to_string());
            ran.output = serde_json::from_value(result).unwrap();
        }
        Ok(ran)
    }

    fn announced(&self, _manifest: SignedManifest, _host: PeerId) {}
}

/// A liar under `keypair`, joining through `entry`, with the calculator
/// in a node of its own (its data in the folder returned).
async fn liar_through(entry: &[Multiaddr], keypair: Keypair) -> (Network, tempfile::TempDir) {
    let (node, dir) = node_with(&["calculator"], Limits::default()).await;
    let liar = Network::start(
        keypair,
        memory_config(entry.to_vec()),
        Arc::new(Liar { node }),
    )
    .await
    .unwrap();
    (liar, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_node_is_caught_and_its_receipt_proves_the_lie_to_a_third_node() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    // The honest publisher.
    let (honest_node, honest) = node_with_hub(dirs[0].path(), &[]).await;
    let calculator = publish(&honest_node, &honest, "calculator").await;
    let entry = honest.network().addresses().await.unwrap();
    // The liar runs the same agent.
    let (liar, _liar_dir) = liar_through(&entry, Keypair::generate_ed25519()).await;
    let mut both = entry.clone();
    both.extend(liar.addresses().await.unwrap());
    let (_caller_node, caller) = node_with_hub(dirs[1].path(), &both).await;

    // Asked directly, the liar answers 43 to 40 + 2, under a receipt that
    // holds: signed by it, of this call and this result.
    let arguments = json!({"a": 40, "b": 2});
    let request = CallRequest {
        agent: calculator,
        tool: "add".into(),
        arguments: arguments.clone(),
        depth: 0,
        deadline: Duration::from_secs(30),
    };
    let answer = caller
        .network()
        .call(liar.peer_id(), request, STEP)
        .await
        .expect("the liar answers")
        .expect("with a result");
    assert_eq!(answer.result["structuredContent"]["result"], 43.0);
    let receipt = answer.receipt.clone().expect("the liar's network signs");
    assert!(receipt.replayable);

    // Checked, the lie is found: the agent run here says 42.
    let deadline = Instant::now() + STEP;
    let verdict = caller
        .check_answer(
            calculator,
            "add",
            &arguments,
            &answer,
            liar.peer_id(),
            deadline,
        )
        .await;
    let Verdict::Refuted {
        node,
        expected,
        evidence,
        why,
    } = verdict
    else {
        panic!("the lie was not caught: {verdict:?}");
    };
    assert_eq!(node, agentsite::did::of_peer(&liar.peer_id()).unwrap());
    assert_eq!(expected["structuredContent"]["result"], 42.0, "{why}");
    let kept = evidence.expect("the evidence is kept");
    assert!(kept.starts_with(dirs[1].path().join("evidence")));

    // The liar is blocked: the caller drops it and refuses to ask it again.
    support::eventually_async(Duration::from_secs(10), "the liar is dropped", async || {
        let peers = caller.network().peers().await.unwrap();
        let liar = liar.peer_id().to_string();
        match peers.iter().any(|p| p.peer_id == liar) {
            false => Ok(()),
            true => Err("still connected".to_owned()),
        }
    })
    .await;

    // A third node, handed the evidence file, checks it by itself: the
    // receipt is the liar's signature on a result the agent does not give.
    let evidence: Evidence = serde_json::from_slice(&std::fs::read(&kept).unwrap()).unwrap();
    let (_judge_node, judge) = node_with_hub(dirs[2].path(), &entry).await;
    let verdict = judge.check_evidence(&evidence, Instant::now() + STEP).await;
    assert!(
        matches!(&verdict, Verdict::Refuted { node, .. } if *node == agentsite::did::of_peer(&liar.peer_id()).unwrap()),
        "{verdict:?}"
    );
    // Evidence altered to blame the liar for a result it never signed does
    // not hold.
    let mut forged = evidence.clone();
    forged.result["structuredContent"]["result"] = json!(44.0);
    let verdict = judge.check_evidence(&forged, Instant::now() + STEP).await;
    assert!(
        matches!(&verdict, Verdict::Unchecked { why } if why.contains("does not hold")),
        "{verdict:?}"
    );
    // And an honest answer's evidence is confirmed.
    let (honest_answer, _) = judge
        .call_remote_at(calculator, "add", arguments.clone(), hop())
        .await
        .unwrap();
    let honest_evidence = Evidence {
        receipt: honest_answer.receipt.unwrap(),
        arguments,
        result: honest_answer.result,
    };
    let verdict = judge
        .check_evidence(&honest_evidence, Instant::now() + STEP)
        .await;
    assert!(matches!(verdict, Verdict::Confirmed { .. }), "{verdict:?}");

    for network in [honest.network(), caller.network(), judge.network(), &liar] {
        network.shutdown().await;
    }
}

/// A capable model (a test double for the node's model, which goals ask
/// for the calls to make): the tool each step names, with its values.
struct Capable;

#[async_trait::async_trait]
impl GoalModel for Capable {
    async fn complete(
        &self,
        _model: Option<&str>,
        request: ChatRequest,
        _deadline: Instant,
    ) -> Result<Completion, LlmFailure> {
        Ok(completion(capable(&read(&request)), 10))
    }

    fn resolve(&self, model: Option<&str>) -> Result<String, String> {
        Ok(model.unwrap_or("scripted").to_owned())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_catches_a_lying_member_node_and_recovers_with_another() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let (honest_node, honest) = node_with_hub(dirs[0].path(), &[]).await;
    let calculator = publish(&honest_node, &honest, "calculator").await;
    let entry = honest.network().addresses().await.unwrap();
    // A caller asks a member's hosts in the order of their peer ids: the
    // liar's comes first, so its answer is the one the goal gets first.
    let keypair = std::iter::repeat_with(Keypair::generate_ed25519)
        .find(|k| k.public().to_peer_id() < honest.peer_id())
        .unwrap();
    let (liar, _liar_dir) = liar_through(&entry, keypair).await;
    liar.publish(manifest_from_dht(&liar, calculator).await)
        .await
        .unwrap();
    let mut both = entry.clone();
    both.extend(liar.addresses().await.unwrap());
    let (caller_node, caller) = node_with_hub(dirs[1].path(), &both).await;
    support::eventually_async(STEP, "the caller sees both hosts", async || {
        let (_, hosts) = caller.lookup(calculator).await.map_err(|e| e.to_string())?;
        match hosts.len() {
            2 => Ok(()),
            n => Err(format!("{n} hosts")),
        }
    })
    .await;

    let goals = goals_for(
        dirs[1].path(),
        &caller_node,
        Some(caller.clone()),
        Arc::new(Capable),
        GoalsConfig::default(),
    );
    let new = NewGoal {
        text: "Add 40 and 2.".into(),
        team: vec![calculator.to_string()],
        verify: Some(Verify::Sampled),
        ..Default::default()
    };
    let (record, messages) = run_goal(&goals, new, STEP).await;
    assert_eq!(record.verify, Verify::Sampled);
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    let call = first_call(&messages);
    // The step's answer is the honest host's, checked; the liar's is not
    // used, and the step says who was caught.
    assert_eq!(call.node, honest.peer_id().to_string(), "{call:#?}");
    assert_eq!(
        call.result.trim().parse::<f64>().ok(),
        Some(42.0),
        "{call:#?}"
    );
    let receipt = call.receipt.as_ref().expect("the honest host's receipt");
    assert_eq!(
        receipt.node,
        agentsite::did::of_peer(&honest.peer_id()).unwrap()
    );
    let check = call.check.as_ref().expect("the step was checked");
    assert_eq!(check.outcome, CheckOutcome::Confirmed, "{check:#?}");
    assert_eq!(check.caught.len(), 1, "{check:#?}");
    let liar_did = agentsite::did::of_peer(&liar.peer_id()).unwrap();
    assert!(check.caught[0].starts_with(&liar_did), "{check:#?}");
    assert!(check.caught[0].contains("evidence"), "{check:#?}");
    // The person reads 42, never 43.
    let read: Vec<&str> = messages
        .iter()
        .filter_map(|m| match &m.body {
            Body::Progress { text, .. } | Body::Result { text, .. } => Some(text.as_str()),
            Body::Conclusion { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(read.iter().any(|t| t.contains("42")), "{read:?}");
    assert!(
        !read.iter().any(|t| t.contains("43")),
        "the wrong answer reached the goal: {read:?}"
    );

    for network in [honest.network(), caller.network(), &liar] {
        network.shutdown().await;
    }
}
