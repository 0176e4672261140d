//! Calls itself through `peers`: once per call in an endless loop, and
//! `width` times per call in an exponential fan-out. The node's depth limit
//! and the grant's fan-out must end both, however the agent is written.

use agentsite_sdk::{agent, peers};
use serde::{Deserialize, Serialize};

struct Spiral;

/// How a chain of calls ended.
#[derive(Serialize, Deserialize, schemars::JsonSchema, Default)]
struct Chain {
    /// Calls that went through below this one.
    hops: u32,
    /// Why the deepest call could not go on.
    stopped_by: String,
}

/// What a fan-out tree of calls did.
#[derive(Serialize, Deserialize, schemars::JsonSchema, Default)]
struct Tree {
    /// Calls that ran, in this call's whole subtree.
    calls: u32,
    /// Calls the node refused, in the whole subtree.
    refused: u32,
    /// One of the refusals, as the node worded it.
    refusal: String,
}

/// The structured result of a call to another agent, parsed as `T`.
fn parse<T: for<'de> Deserialize<'de>>(result: &agentsite_sdk::ToolResult) -> Option<T> {
    let value: serde_json::Value =
        serde_json::from_str(result.structured_content.as_ref()?).ok()?;
    serde_json::from_value(value.get("result").cloned().unwrap_or(value)).ok()
}

/// Spirals.
#[agent]
impl Spiral {
    /// Call this same tool of the agent `self_id` (this agent) and report
    /// how many hops the loop went.
    #[tool]
    fn recurse(self_id: String) -> Chain {
        let args = serde_json::json!({ "self_id": self_id }).to_string();
        match peers::call(&self_id, "recurse", &args) {
            Ok(result) => {
                let below: Chain = parse(&result).unwrap_or_default();
                Chain {
                    hops: below.hops + 1,
                    stopped_by: below.stopped_by,
                }
            }
            Err(e) => Chain {
                hops: 0,
                stopped_by: format!("{e:?}"),
            },
        }
    }

    /// Call this same tool `width` times, each of which does the same.
    #[tool]
    fn fan_out(self_id: String, width: u32) -> Tree {
        let args = serde_json::json!({ "self_id": self_id, "width": width }).to_string();
        let mut tree = Tree::default();
        for _ in 0..width {
            match peers::call(&self_id, "fan_out", &args) {
                Ok(result) => {
                    let below: Tree = parse(&result).unwrap_or_default();
                    tree.calls += 1 + below.calls;
                    tree.refused += below.refused;
                    if tree.refusal.is_empty() {
                        tree.refusal = below.refusal;
                    }
                }
                Err(e) => {
                    tree.refused += 1;
                    tree.refusal = format!("{e:?}");
                }
            }
        }
        tree
    }
}
