//! The audit trail: every tool call, the grants it ran under and every
//! denial, logged as structured events (tracing target `agentsite::audit`)
//! and counted in Prometheus metrics, which `agentsite serve` offers at
//! `/metrics`:
//!
//! | metric | labels | counts |
//! |---|---|---|
//! | `agentsite_calls_total` | agent | tool calls |
//! | `agentsite_call_errors_total` | agent, kind | calls that failed: `tool` (the tool's own error or bad arguments), `limit`, `fault` (a trap, a malformed result, the host) |
//! | `agentsite_limit_hits_total` | agent, limit | `deadline`, `memory`, `stack`, `output`, `concurrency` |
//! | `agentsite_denials_total` | agent, capability | requests refused by the policy: `kv`, `http`, `peers`, `llm`, `policy` |
//! | `agentsite_call_duration_seconds` | agent | latency histogram |

use crate::runtime::CallError;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::time::Duration;

/// Where audit events go. They are `info` events (grant decisions `debug`),
/// so that a one-shot command's own one-line error is not said twice:
/// `-v` or `AGENTSITE_LOG=agentsite::audit=info` shows them.
pub const TARGET: &str = "agentsite::audit";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentLabel {
    agent: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    agent: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabels {
    agent: String,
    limit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DenialLabels {
    agent: String,
    capability: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListingLabels {
    agent: String,
    list: &'static str,
}

/// How a call ended, as the audit counts it.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    Ok,
    /// The tool ran and reported an error.
    ToolError,
    /// The call failed: a limit, a fault of the agent or a host failure.
    Failed(&'a CallError),
    /// The call never reached the agent (bad arguments, unknown tool, ...).
    Rejected,
}

/// The node's audit trail and metrics.
pub struct Audit {
    registry: Registry,
    calls: Family<AgentLabel, Counter>,
    errors: Family<ErrorLabels, Counter>,
    limit_hits: Family<LimitLabels, Counter>,
    denials: Family<DenialLabels, Counter>,
    latency: Family<AgentLabel, Histogram>,
    listing_failures: Family<ListingLabels, Counter>,
}

impl Default for Audit {
    fn default() -> Self {
        Self::new()
    }
}

impl Audit {
    pub fn new() -> Audit {
        let mut registry = Registry::with_prefix("agentsite");
        let calls = Family::<AgentLabel, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let limit_hits = Family::<LimitLabels, Counter>::default();
        let denials = Family::<DenialLabels, Counter>::default();
        // 100 µs to about 55 s: warm calls take tens of microseconds, the
        // longest deadline operators set is minutes.
        let latency = Family::<AgentLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0001, 2.0, 20))
        });
        registry.register("calls", "Tool calls, per agent", calls.clone());
        registry.register(
            "call_errors",
            "Tool calls that failed, per agent and kind (tool, limit, fault)",
            errors.clone(),
        );
        registry.register(
            "limit_hits",
            "Calls stopped by a limit, per agent and limit",
            limit_hits.clone(),
        );
        registry.register(
            "denials",
            "Requests of agents refused by the policy, per agent and capability",
            denials.clone(),
        );
        registry.register(
            "call_duration_seconds",
            "Tool call latency, per agent",
            latency.clone(),
        );
        let listing_failures = Family::<ListingLabels, Counter>::default();
        registry.register(
            "listing_failures",
            "Agents left out of a resource or prompt list (too slow, or a bad answer), per agent and list",
            listing_failures.clone(),
        );
        Audit {
            registry,
            listing_failures,
            calls,
            errors,
            limit_hits,
            denials,
            latency,
        }
    }

    /// Records that `agent` was left out of a list of `what` (resources,
    /// prompts) because it did not answer in time or answered badly.
    pub fn listing_failed(&self, agent: &str, what: &'static str) {
        self.listing_failures
            .get_or_create(&ListingLabels {
                agent: agent.to_owned(),
                list: what,
            })
            .inc();
    }

    /// Records one finished tool call of `agent`.
    pub fn call(&self, agent: &str, tool: &str, elapsed: Duration, outcome: Outcome<'_>) {
        let label = AgentLabel {
            agent: agent.to_owned(),
        };
        self.calls.get_or_create(&label).inc();
        self.latency
            .get_or_create(&label)
            .observe(elapsed.as_secs_f64());
        let error = |kind| {
            self.errors
                .get_or_create(&ErrorLabels {
                    agent: agent.to_owned(),
                    kind,
                })
                .inc();
        };
        let micros = elapsed.as_micros() as u64;
        match outcome {
            Outcome::Ok => {
                tracing::info!(target: TARGET, agent, tool, micros, outcome = "ok", "call")
            }
            Outcome::ToolError => {
                error("tool");
                tracing::info!(target: TARGET, agent, tool, micros, outcome = "tool-error", "call");
            }
            Outcome::Failed(failure) => {
                match failure.limit() {
                    Some(limit) => {
                        error("limit");
                        self.limit_hits
                            .get_or_create(&LimitLabels {
                                agent: agent.to_owned(),
                                limit,
                            })
                            .inc();
                    }
                    // The tool ran and said no: the agent's own answer.
                    None if matches!(
                        failure,
                        CallError::Failed(_) | CallError::InvalidArguments(_)
                    ) =>
                    {
                        error("tool")
                    }
                    None => error("fault"),
                }
                tracing::info!(target: TARGET, agent, tool, micros, outcome = "failed", error = %failure, "call");
            }
            Outcome::Rejected => {
                tracing::info!(target: TARGET, agent, tool, micros, outcome = "rejected", "call")
            }
        }
    }

    /// Records that the policy refused `agent` a `capability`.
    pub fn denied(&self, agent: &str, capability: &'static str, reason: &str) {
        self.denials
            .get_or_create(&DenialLabels {
                agent: agent.to_owned(),
                capability,
            })
            .inc();
        tracing::info!(target: TARGET, agent, capability, reason, "denied");
    }

    /// The metrics in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// What one call's capabilities use to report denials.
#[derive(Clone)]
pub struct Denials {
    audit: Arc<Audit>,
    agent: Arc<str>,
}

impl Denials {
    pub fn new(audit: Arc<Audit>, agent: Arc<str>) -> Self {
        Denials { audit, agent }
    }

    /// Records that this call's agent was refused `capability`.
    pub fn record(&self, capability: &'static str, reason: &str) {
        self.audit.denied(&self.agent, capability, reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_errors_limits_and_denials_are_counted_per_agent() {
        let audit = Audit::new();
        let ms = Duration::from_millis;
        audit.call("calculator", "add", ms(1), Outcome::Ok);
        audit.call("calculator", "divide", ms(2), Outcome::ToolError);
        let deadline = CallError::DeadlineExceeded(Duration::from_secs(1));
        audit.call("loop", "spin", ms(1000), Outcome::Failed(&deadline));
        let trap = CallError::Trapped("unreachable".into());
        audit.call("trap", "crash", ms(3), Outcome::Failed(&trap));
        let refused = CallError::Failed("division by zero".into());
        audit.call("calculator", "divide", ms(1), Outcome::Failed(&refused));
        audit.denied("notes", "kv", "not granted");
        let text = audit.encode();
        for line in [
            "agentsite_calls_total{agent=\"calculator\"} 3",
            "agentsite_call_errors_total{agent=\"calculator\",kind=\"tool\"} 2",
            "agentsite_call_errors_total{agent=\"loop\",kind=\"limit\"} 1",
            "agentsite_limit_hits_total{agent=\"loop\",limit=\"deadline\"} 1",
            "agentsite_call_errors_total{agent=\"trap\",kind=\"fault\"} 1",
            "agentsite_denials_total{agent=\"notes\",capability=\"kv\"} 1",
            "agentsite_call_duration_seconds_count{agent=\"calculator\"} 3",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }
}
