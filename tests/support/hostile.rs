//! Shared by the hostile-agent tests: an in-process node with agents added,
//! grants written into its policy, and the checks that it keeps serving.

use agentsite::config::{DataDir, Limits};
use agentsite::runtime::Capacity;
use agentsite::{Node, NodeCallError, NodeConfig};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// A node in a fresh data directory with the example `agents` added.
pub async fn node_with(agents: &[&str], limits: Limits) -> (Arc<Node>, tempfile::TempDir) {
    let config = NodeConfig {
        limits,
        ..NodeConfig::default()
    };
    node_configured(agents, config).await
}

/// [`node_with`], the node configured by `config`.
pub async fn node_configured(
    agents: &[&str],
    config: NodeConfig,
) -> (Arc<Node>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::open(DataDir::new(dir.path()), config, Capacity::SERVER).unwrap();
    for agent in agents {
        let bytes = std::fs::read(super::wasm(agent)).unwrap();
        node.add(&bytes).await.unwrap();
    }
    (Arc::new(node), dir)
}

/// Short deadlines, so that attacks that run until stopped end quickly.
pub fn test_limits() -> Limits {
    Limits {
        deadline: Duration::from_secs(1),
        ..Limits::default()
    }
}

/// Grants `items` (as `agentsite grant` takes them) to the installed `agent`.
pub fn grant(node: &Node, agent: &str, items: &[&str]) {
    let id = node.resolve(agent).unwrap().id;
    let items: Vec<String> = items.iter().map(|s| s.to_string()).collect();
    node.policy()
        .update(|policy| {
            agentsite::policy::edit::apply_grants(
                policy
                    .agents
                    .entry(agentsite::AgentKey::Id(id))
                    .or_default(),
                &items,
            )
        })
        .unwrap();
}

/// The error a call that must fail fails with.
pub async fn error_of(node: &Node, agent: &str, tool: &str, args: &str) -> String {
    match node.call(agent, tool, args, None).await {
        Ok(output) => panic!("{agent}.{tool} should fail, returned {output:?}"),
        Err(error) => error.to_string(),
    }
}

/// The structured result of a call that must succeed.
pub async fn result_of(
    node: &Node,
    agent: &str,
    tool: &str,
    args: serde_json::Value,
) -> serde_json::Value {
    let output = node
        .call(agent, tool, &args.to_string(), None)
        .await
        .unwrap_or_else(|e| panic!("{agent}.{tool} failed: {e}"));
    assert!(
        !output.is_error,
        "{agent}.{tool} reported an error: {output:?}"
    );
    match output.structured_content.map(|s| s.to_value()) {
        Some(structured) => structured.get("result").cloned().unwrap_or(structured),
        // Text results (a `String` returned) have no structured form.
        None => match output.content.as_slice() {
            [agentsite::agent::tool::Content::Text { text }] => {
                serde_json::Value::String(text.clone())
            }
            other => panic!("{agent}.{tool} returned neither JSON nor one text: {other:?}"),
        },
    }
}

/// A normal call succeeds: the node is still healthy.
pub async fn assert_serving(node: &Node) {
    let output = node
        .call("calculator", "add", r#"{"a": 20, "b": 22}"#, None)
        .await
        .expect("a normal call succeeds");
    assert_eq!(output.structured_content.unwrap(), json!({"result": 42.0}));
}

/// Runs `attack` while normal calls go on beside it; checks that at least
/// one normal call completed during it and that all of them succeeded.
pub async fn while_serving<T: Send + 'static>(
    node: &Arc<Node>,
    attack: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    let attack = tokio::spawn(attack);
    let mut served = 0;
    while !attack.is_finished() || served == 0 {
        assert_serving(node).await;
        served += 1;
    }
    attack.await.unwrap()
}

/// A call's error, when it failed as a call (a limit, a fault, a malformed result).
pub fn call_error(error: &NodeCallError) -> Option<&agentsite::runtime::CallError> {
    match error {
        NodeCallError::Call(error) => Some(error),
        _ => None,
    }
}
