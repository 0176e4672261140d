//! A member at work: one call of one of its tools, made where the agent
//! lives, under the goal's budget and the grants and limits of any call.

use super::budget::Limit;
use super::message::{Member, ToolCallRecord};
use super::run::GoalRun;
use crate::agent::tool::ToolOutput;
use crate::capabilities::peers::{Hop, PeerFailure};
use crate::text::truncated;
use serde_json::Value;
use std::time::Instant;

/// A tool result as the transcript keeps it, at most.
const MAX_RESULT_KEPT: usize = 2000;

/// How a member's call ended.
pub enum Called {
    /// The agent answered (its answer may be a tool error).
    Answered(ToolCallRecord, ToolOutput),
    /// A limit of the goal forbids the call.
    Limit(Limit),
    /// The agent or its node could not be reached, or refused the call:
    /// the failure, as a tool error.
    Unreachable(ToolOutput),
}

/// Calls `tool` of `member` with `arguments`, under `goal`'s budget.
pub async fn call(goal: &GoalRun, member: &Member, tool: &str, arguments: &Value) -> Called {
    if let Err(limit) = goal.budget.take_tool_call() {
        return Called::Limit(limit);
    }
    let hop = Hop {
        depth: 1,
        deadline: goal.budget.deadline,
    };
    let started = Instant::now();
    let text = arguments.to_string();
    match goal.directory.call(member, tool, &text, hop).await {
        Ok(answered) => {
            let output = answered.output;
            let mut result = output.text();
            if result.is_empty()
                && let Some(structured) = &output.structured_content
            {
                result = structured.to_string();
            }
            let record = ToolCallRecord {
                tool: tool.to_owned(),
                arguments: arguments.clone(),
                result: truncated(result, MAX_RESULT_KEPT),
                is_error: output.is_error,
                node: answered.node,
                millis: started.elapsed().as_millis() as u64,
            };
            Called::Answered(record, output)
        }
        Err(PeerFailure::DeadlineExceeded(_)) if Instant::now() >= goal.budget.deadline => {
            Called::Limit(Limit::Deadline)
        }
        Err(failure) => Called::Unreachable(ToolOutput::failure(format!(
            "{}'s {tool} could not be run: {failure}",
            member.name
        ))),
    }
}
