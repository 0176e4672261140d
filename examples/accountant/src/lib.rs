//! An agent that delegates: it does no arithmetic itself. It finds an agent
//! with an `add` tool through `peers.discover` and sums by calling it once
//! per amount through `peers.call`, on this node if the calculator is
//! installed here and on another node otherwise.

use agentsite_sdk::{agent, peers};
use schemars::JsonSchema;
use serde::Serialize;

struct Accountant;

/// What a total came to, and who did the sums.
#[derive(Serialize, JsonSchema)]
struct Total {
    /// The sum of the amounts.
    total: f64,
    /// The id of the agent whose `add` tool did the arithmetic.
    calculator: String,
    /// How many calls went to it.
    calls: u32,
}

/// Totals amounts by delegating the arithmetic to a calculator agent on the network.
#[agent(tags = ["finance", "delegation"])]
impl Accountant {
    /// Add up a list of amounts, one `add` call per amount to a calculator agent.
    #[tool(read_only, open_world)]
    fn total(
        /// The amounts to add up.
        amounts: Vec<f64>,
    ) -> Result<Total, String> {
        let calculator = find_calculator()?;
        let mut total = 0.0;
        let mut calls = 0;
        for amount in amounts {
            total = add(&calculator, total, amount)?;
            calls += 1;
        }
        Ok(Total {
            total,
            calculator,
            calls,
        })
    }
}

/// The id of an agent tagged `arithmetic` that has an `add` tool.
fn find_calculator() -> Result<String, String> {
    let found = peers::discover("arithmetic", 10).map_err(|e| format!("discover failed: {e}"))?;
    found
        .into_iter()
        .find(|agent| agent.tools.iter().any(|tool| tool.name == "add"))
        .map(|agent| agent.id)
        .ok_or_else(|| "no calculator agent (tag `arithmetic`, tool `add`) was found".into())
}

fn add(calculator: &str, a: f64, b: f64) -> Result<f64, String> {
    let arguments = serde_json::json!({ "a": a, "b": b }).to_string();
    let result = peers::call(calculator, "add", &arguments)
        .map_err(|e| format!("calling {calculator} failed: {e}"))?;
    if result.is_error {
        return Err(format!("the calculator refused {a} + {b}"));
    }
    let structured = result
        .structured_content
        .ok_or("the calculator returned no structured result")?;
    let value: serde_json::Value =
        serde_json::from_str(&structured).map_err(|e| format!("bad calculator result: {e}"))?;
    value["result"]
        .as_f64()
        .ok_or_else(|| format!("the calculator's result is not a number: {structured}"))
}
