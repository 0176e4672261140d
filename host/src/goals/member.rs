//! A member at work: one call of one of its tools, made where the agent
//! lives, under the goal's budget and the grants and limits of any call.

use super::budget::Limit;
use super::message::{CheckOutcome, Member, StepCheck, ToolCallRecord};
use super::run::GoalRun;
use crate::agent::tool::ToolOutput;
use crate::capabilities::peers::{Hop, PeerFailure};
use crate::hub::{CHECK_DEADLINE, Verdict};
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

/// Nodes caught answering one step wrongly, at most, before the step takes
/// the result of the agent run here by the check.
const MAX_CAUGHT: usize = 2;

/// Calls `tool` of `member` with `arguments`, under `goal`'s budget. An
/// answer from another node is checked as the goal's `verify` says; a node
/// caught answering wrongly is blocked by the check, and the step is asked
/// again (of another host, as the blocked one is no longer reached).
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
    let mut caught = Vec::new();
    // The agent's own result, run here by the check that caught a node
    // answering wrongly: what the step takes if no other host answers.
    let mut own: Option<ToolOutput> = None;
    // The step answered with that result, after the nodes caught.
    let run_here = |output, detail: &str, caught| {
        let check = checked(CheckOutcome::Confirmed, detail, caught);
        let here = goal.directory.this_node();
        answered_record(tool, arguments, output, here, started, None, check)
    };
    loop {
        let answered = match goal.directory.call(member, tool, &text, hop).await {
            Ok(answered) => answered,
            Err(PeerFailure::DeadlineExceeded(_)) if Instant::now() >= goal.budget.deadline => {
                return Called::Limit(Limit::Deadline);
            }
            Err(failure) => match own.take() {
                Some(output) => {
                    let detail =
                        format!("no other host answered ({failure}): the agent run on this node");
                    return run_here(output, &detail, caught);
                }
                None => {
                    return Called::Unreachable(ToolOutput::failure(format!(
                        "{}'s {tool} could not be run: {failure}{}",
                        member.name,
                        caught_note(&caught)
                    )));
                }
            },
        };
        let verdict = match answered.remote.is_some() && goal.wants_check(&answered.node) {
            true => {
                let deadline = goal.budget.deadline.min(Instant::now() + CHECK_DEADLINE);
                goal.directory
                    .check(member, tool, arguments, &answered, deadline)
                    .await
            }
            false => None,
        };
        let check = match verdict {
            Some(Verdict::Refuted {
                node,
                expected,
                evidence,
                why,
            }) => {
                caught.push(caught_line(&node, &why, evidence.as_deref()));
                own = serde_json::from_value::<ToolOutput>(expected).ok();
                // The node is blocked: the step is asked again, of another
                // host, unless liars enough have been met.
                if caught.len() < MAX_CAUGHT {
                    continue;
                }
                let Some(output) = own.take() else {
                    return Called::Unreachable(ToolOutput::failure(format!(
                        "{}'s {tool} was answered wrongly{}",
                        member.name,
                        caught_note(&caught)
                    )));
                };
                return run_here(output, "the agent run on this node", caught);
            }
            Some(Verdict::Confirmed { by }) => checked(
                CheckOutcome::Confirmed,
                &format!("run again on {by}, the same result"),
                caught,
            ),
            Some(Verdict::Unchecked { why }) => checked(CheckOutcome::Unchecked, &why, caught),
            None if !caught.is_empty() => checked(
                CheckOutcome::Unchecked,
                "this answer was not checked",
                caught,
            ),
            None => None,
        };
        let receipt = answered.remote.and_then(|(answer, _)| answer.receipt);
        return answered_record(
            tool,
            arguments,
            answered.output,
            answered.node,
            started,
            receipt,
            check,
        );
    }
}

/// A step answered: its record, as the transcript keeps it, and the output.
fn answered_record(
    tool: &str,
    arguments: &Value,
    output: ToolOutput,
    node: String,
    started: Instant,
    receipt: Option<crate::receipt::Receipt>,
    check: Option<StepCheck>,
) -> Called {
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
        node,
        millis: started.elapsed().as_millis() as u64,
        receipt: receipt.map(Box::new),
        check: check.map(Box::new),
    };
    Called::Answered(record, output)
}

fn checked(outcome: CheckOutcome, detail: &str, caught: Vec<String>) -> Option<StepCheck> {
    Some(StepCheck {
        outcome,
        detail: detail.to_owned(),
        caught,
    })
}

/// One node caught answering wrongly, as the step records it.
fn caught_line(node: &str, why: &str, evidence: Option<&std::path::Path>) -> String {
    let kept = crate::hub::where_kept(evidence);
    format!("{node} answered wrongly ({why}); it is blocked and {kept}")
}

fn caught_note(caught: &[String]) -> String {
    match caught.is_empty() {
        true => String::new(),
        false => format!(" ({})", caught.join("; ")),
    }
}
