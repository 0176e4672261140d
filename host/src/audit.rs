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
//! | `agentsite_listing_failures_total` | agent, list | agents left out of a resource or prompt list |
//! | `agentsite_agents_installed` | | agents installed (gauge) |
//! | `agentsite_build_info` | version | the node's version (info) |
//!
//! Each domain above counts its own in a [`Section`] of the same registry:
//! the models' in [`crate::llm::metrics`], goals' in
//! [`crate::goals::metrics`], the network's in [`crate::hub::metrics`].
//! Every family is described (`# HELP`, `# TYPE`) from the first scrape,
//! before anything was counted, so a scraper and its alerts see them: the
//! server builder registers every section when it starts.

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Metric, Registry};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
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
#[derive(Clone, Copy)]
pub enum Outcome<'a> {
    Ok,
    /// The tool ran and reported an error.
    ToolError,
    /// The call failed: a limit, a fault of the agent or a host failure.
    Failed(Failure<'a>),
    /// The call never reached the agent (bad arguments, unknown tool, ...).
    Rejected,
}

/// Why a call failed, as the audit counts it; each says what happened.
#[derive(Clone, Copy)]
pub enum Failure<'a> {
    /// A limit the node enforced, by name (`deadline`, `memory`, ...).
    Limit(&'static str, &'a dyn std::fmt::Display),
    /// The tool's own answer: it refused, or the arguments were bad.
    Tool(&'a dyn std::fmt::Display),
    /// A trap, a malformed result or a failure of the host.
    Fault(&'a dyn std::fmt::Display),
}

impl std::fmt::Display for Failure<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Limit(_, why) | Failure::Tool(why) | Failure::Fault(why) => why.fmt(f),
        }
    }
}

/// The node's audit trail and metrics.
pub struct Audit {
    /// Every family of the node's: the calls' below, and each domain's
    /// [`Section`].
    registry: Mutex<Registry>,
    sections: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
    calls: Family<AgentLabel, Counter>,
    errors: Family<ErrorLabels, Counter>,
    limit_hits: Family<LimitLabels, Counter>,
    denials: Family<DenialLabels, Counter>,
    latency: Family<AgentLabel, Histogram>,
    listing_failures: Family<ListingLabels, Counter>,
    agents_installed: Gauge,
    /// Every agent's calls and failed calls together, for the node's own
    /// charts (the families above keep them per agent).
    calls_total: AtomicU64,
    call_errors_total: AtomicU64,
}

/// A family's one label: how something ended (`answered`, `done`, ...).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: &'static str,
}

/// A family that is described even while it has no member yet:
/// prometheus-client leaves empty families out of a scrape entirely.
#[derive(Debug)]
struct Described(Box<dyn Metric>);

/// Registers `metric` as `name` so that a scrape describes it (`# HELP`,
/// `# TYPE`) before anything was counted.
pub fn describe(registry: &mut Registry, name: &str, help: &str, metric: impl Metric) {
    registry.register(name, help, Described::new(metric));
}

/// A domain's metric families (the models', goals', the network's): made
/// and registered once per node, on first use, into the node's registry;
/// the domain keeps the handles and counts through them.
pub trait Section: Send + Sync + 'static {
    fn register(registry: &mut Registry) -> Self;
}

impl Described {
    fn new(metric: impl Metric) -> Self {
        Described(Box::new(metric))
    }
}

impl EncodeMetric for Described {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }
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
        let listing_failures = Family::<ListingLabels, Counter>::default();
        let agents_installed = Gauge::default();
        describe(
            &mut registry,
            "calls",
            "Tool calls, per agent",
            calls.clone(),
        );
        describe(
            &mut registry,
            "call_errors",
            "Tool calls that failed, per agent and kind (tool, limit, fault)",
            errors.clone(),
        );
        describe(
            &mut registry,
            "limit_hits",
            "Calls stopped by a limit, per agent and limit",
            limit_hits.clone(),
        );
        describe(
            &mut registry,
            "denials",
            "Requests of agents refused by the policy, per agent and capability",
            denials.clone(),
        );
        describe(
            &mut registry,
            "call_duration_seconds",
            "Tool call latency, per agent",
            latency.clone(),
        );
        describe(
            &mut registry,
            "listing_failures",
            "Agents left out of a resource or prompt list (too slow, or a bad answer), per agent and list",
            listing_failures.clone(),
        );
        describe(
            &mut registry,
            "agents_installed",
            "Agents installed on this node",
            agents_installed.clone(),
        );
        registry.register(
            "build",
            "The node's version",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        Audit {
            registry: Mutex::new(registry),
            sections: Mutex::new(HashMap::new()),
            listing_failures,
            calls,
            errors,
            limit_hits,
            denials,
            latency,
            agents_installed,
            calls_total: AtomicU64::new(0),
            call_errors_total: AtomicU64::new(0),
        }
    }

    /// Tool calls finished since the node started, and how many failed.
    pub fn call_totals(&self) -> (u64, u64) {
        (
            self.calls_total.load(Ordering::Relaxed),
            self.call_errors_total.load(Ordering::Relaxed),
        )
    }

    /// Sets how many agents are installed, as a scrape reports it.
    pub fn agents_installed(&self, count: usize) {
        self.agents_installed.set(count as i64);
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
        self.calls_total.fetch_add(1, Ordering::Relaxed);
        self.latency
            .get_or_create(&label)
            .observe(elapsed.as_secs_f64());
        let error = |kind| {
            self.call_errors_total.fetch_add(1, Ordering::Relaxed);
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
                match failure {
                    Failure::Limit(limit, _) => {
                        error("limit");
                        self.limit_hits
                            .get_or_create(&LimitLabels {
                                agent: agent.to_owned(),
                                limit,
                            })
                            .inc();
                    }
                    Failure::Tool(_) => error("tool"),
                    Failure::Fault(_) => error("fault"),
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

    /// The domain's metric families `S`, registered on first use.
    pub fn section<S: Section>(&self) -> Arc<S> {
        let mut sections = self.sections.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(section) = sections.get(&TypeId::of::<S>()) {
            return section
                .clone()
                .downcast()
                .expect("a section is kept by its type");
        }
        let mut registry = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        let section = Arc::new(S::register(&mut registry));
        sections.insert(TypeId::of::<S>(), section.clone());
        section
    }

    /// The metrics in the Prometheus text format.
    pub fn encode(&self) -> String {
        let registry = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
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

    /// The agent whose call this is.
    pub fn agent(&self) -> &str {
        &self.agent
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
    fn every_family_is_described_before_anything_is_counted() {
        let audit = Audit::new();
        let text = audit.encode();
        for family in [
            "calls counter",
            "call_errors counter",
            "limit_hits counter",
            "denials counter",
            "call_duration_seconds histogram",
            "listing_failures counter",
            "agents_installed gauge",
            "build info",
        ] {
            let line = format!("# TYPE agentsite_{family}\n");
            assert!(text.contains(&line), "missing {line:?} in\n{text}");
        }
        let version = format!(
            "agentsite_build_info{{version=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.contains(&version), "{text}");
        audit.agents_installed(3);
        let text = audit.encode();
        assert!(text.contains("agentsite_agents_installed 3\n"), "{text}");
    }

    #[test]
    fn calls_errors_limits_and_denials_are_counted_per_agent() {
        let audit = Audit::new();
        let ms = Duration::from_millis;
        audit.call("calculator", "add", ms(1), Outcome::Ok);
        audit.call("calculator", "divide", ms(2), Outcome::ToolError);
        let deadline = Failure::Limit("deadline", &"deadline exceeded after 1s");
        audit.call("loop", "spin", ms(1000), Outcome::Failed(deadline));
        let trap = Failure::Fault(&"unreachable");
        audit.call("trap", "crash", ms(3), Outcome::Failed(trap));
        let refused = Failure::Tool(&"division by zero");
        audit.call("calculator", "divide", ms(1), Outcome::Failed(refused));
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
