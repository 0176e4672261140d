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
//! | `agentsite_peers_connected` | | peers connected on the network (gauge; 0 off the network) |
//! | `agentsite_goals_total` | outcome | goal rounds that ended: `concluded`, `stopped` (by a limit), `failed`, `cancelled` |
//! | `agentsite_goal_turns_total` | | requests goals made to the model (each step's call, the conclusion) |
//! | `agentsite_goal_tasks_total` | outcome | goals' tasks that ended: `done`, `failed` |
//! | `agentsite_goal_tokens_total` | | model tokens goals used |
//! | `agentsite_goal_tool_calls_total` | | tool calls goals' members made |
//! | `agentsite_build_info` | version | the node's version (info) |
//!
//! Every family is described (`# HELP`, `# TYPE`) from the first scrape,
//! before anything was counted, so a scraper and its alerts see them.

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Metric, Registry};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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
struct ModelLabels {
    model: String,
    /// Who asked: an agent's name, `http` for the node's `/v1` endpoint,
    /// `peer` for another node.
    agent: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelTokenLabels {
    model: String,
    agent: String,
    /// `prompt` or `completion`.
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelErrorLabels {
    model: String,
    agent: String,
    kind: &'static str,
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

/// A tool call another node asked for, while it runs (see [`Audit::remote_call`]).
pub struct RemoteCall<'a> {
    audit: &'a Audit,
    answered: bool,
}

impl RemoteCall<'_> {
    pub fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for RemoteCall<'_> {
    fn drop(&mut self) {
        self.audit.remote_calls_running.dec();
        let outcome = if self.answered {
            "answered"
        } else {
            tracing::info!(target: TARGET, "a remote call was cancelled by its caller");
            "cancelled"
        };
        self.audit
            .remote_calls
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
    }
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
    llm_requests: Family<ModelLabels, Counter>,
    llm_tokens: Family<ModelTokenLabels, Counter>,
    llm_errors: Family<ModelErrorLabels, Counter>,
    llm_first_token: Family<ModelLabels, Histogram>,
    agents_installed: Gauge,
    peers_connected: Gauge,
    goals: Family<OutcomeLabel, Counter>,
    goal_turns: Counter,
    goal_tasks: Family<OutcomeLabel, Counter>,
    goal_tokens: Counter,
    goal_tool_calls: Counter,
    remote_calls: Family<OutcomeLabel, Counter>,
    remote_calls_running: Gauge,
    /// Every agent's calls and failed calls together, for the node's own
    /// charts (the families above keep them per agent).
    calls_total: AtomicU64,
    call_errors_total: AtomicU64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// A family that is described even while it has no member yet:
/// prometheus-client leaves empty families out of a scrape entirely.
#[derive(Debug)]
struct Described(Box<dyn Metric>);

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
        let llm_requests = Family::<ModelLabels, Counter>::default();
        let llm_tokens = Family::<ModelTokenLabels, Counter>::default();
        let llm_errors = Family::<ModelErrorLabels, Counter>::default();
        // 10 ms to about 80 s: a hosted model answers in tens of
        // milliseconds, a small CPU one after a long prompt in tens of seconds.
        let llm_first_token = Family::<ModelLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.01, 2.0, 14))
        });
        let agents_installed = Gauge::default();
        let peers_connected = Gauge::default();
        let goals = Family::<OutcomeLabel, Counter>::default();
        let goal_turns = Counter::default();
        let goal_tasks = Family::<OutcomeLabel, Counter>::default();
        let goal_tokens = Counter::default();
        let goal_tool_calls = Counter::default();
        let remote_calls = Family::<OutcomeLabel, Counter>::default();
        let remote_calls_running = Gauge::default();
        let mut describe = |name: &str, help: &str, metric: Described| {
            registry.register(name, help, metric);
        };
        describe(
            "calls",
            "Tool calls, per agent",
            Described::new(calls.clone()),
        );
        describe(
            "call_errors",
            "Tool calls that failed, per agent and kind (tool, limit, fault)",
            Described::new(errors.clone()),
        );
        describe(
            "limit_hits",
            "Calls stopped by a limit, per agent and limit",
            Described::new(limit_hits.clone()),
        );
        describe(
            "denials",
            "Requests of agents refused by the policy, per agent and capability",
            Described::new(denials.clone()),
        );
        describe(
            "call_duration_seconds",
            "Tool call latency, per agent",
            Described::new(latency.clone()),
        );
        describe(
            "listing_failures",
            "Agents left out of a resource or prompt list (too slow, or a bad answer), per agent and list",
            Described::new(listing_failures.clone()),
        );
        describe(
            "llm_requests",
            "Requests to the node's language models, per model and requester",
            Described::new(llm_requests.clone()),
        );
        describe(
            "llm_tokens",
            "Tokens the node's language models read (prompt) and wrote (completion), per model and requester",
            Described::new(llm_tokens.clone()),
        );
        describe(
            "llm_errors",
            "Requests to the node's language models that failed, per model, requester and kind",
            Described::new(llm_errors.clone()),
        );
        describe(
            "llm_time_to_first_token_seconds",
            "Time from a request to its first generated token, per model and requester",
            Described::new(llm_first_token.clone()),
        );
        describe(
            "agents_installed",
            "Agents installed on this node",
            Described::new(agents_installed.clone()),
        );
        describe(
            "peers_connected",
            "Peers this node is connected to on the network",
            Described::new(peers_connected.clone()),
        );
        describe(
            "goals",
            "Goal rounds that ended, per outcome (concluded, stopped by a limit, failed, cancelled)",
            Described::new(goals.clone()),
        );
        describe(
            "goal_turns",
            "Requests goals made to the model (each step's call, the conclusion)",
            Described::new(goal_turns.clone()),
        );
        describe(
            "goal_tasks",
            "Tasks of goals that ended, per outcome (done, failed)",
            Described::new(goal_tasks.clone()),
        );
        describe(
            "goal_tokens",
            "Tokens of the node's models that goals used",
            Described::new(goal_tokens.clone()),
        );
        describe(
            "goal_tool_calls",
            "Tool calls members of goals' teams made",
            Described::new(goal_tool_calls.clone()),
        );
        describe(
            "remote_calls",
            "Tool calls other nodes asked of this one that ended, per outcome (answered, cancelled)",
            Described::new(remote_calls.clone()),
        );
        describe(
            "remote_calls_running",
            "Tool calls other nodes asked of this one, running now",
            Described::new(remote_calls_running.clone()),
        );
        registry.register(
            "build",
            "The node's version",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        Audit {
            registry,
            listing_failures,
            llm_requests,
            llm_tokens,
            llm_errors,
            llm_first_token,
            calls,
            errors,
            limit_hits,
            denials,
            latency,
            agents_installed,
            peers_connected,
            goals,
            goal_turns,
            goal_tasks,
            goal_tokens,
            goal_tool_calls,
            remote_calls,
            remote_calls_running,
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

    /// Counts a tool call another node asked for as running until the
    /// returned guard is dropped: as answered if it was told so, else as
    /// cancelled (its caller stopped waiting).
    pub fn remote_call(&self) -> RemoteCall<'_> {
        self.remote_calls_running.inc();
        RemoteCall {
            audit: self,
            answered: false,
        }
    }

    /// Records a turn of a goal's member.
    pub fn goal_turn(&self) {
        self.goal_turns.inc();
    }

    /// Records a goal's task that ended (`done` or `failed`).
    pub fn goal_task(&self, outcome: &'static str) {
        self.goal_tasks
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
    }

    /// Records a round of a goal that ended, and the model's tokens and
    /// the tool calls it used.
    pub fn goal_ended(&self, outcome: &'static str, tokens: u64, tool_calls: u32) {
        self.goals.get_or_create(&OutcomeLabel { outcome }).inc();
        self.goal_tokens.inc_by(tokens);
        self.goal_tool_calls.inc_by(u64::from(tool_calls));
    }

    /// Sets how many agents are installed, as a scrape reports it.
    pub fn agents_installed(&self, count: usize) {
        self.agents_installed.set(count as i64);
    }

    /// Sets how many peers the node is connected to.
    pub fn peers_connected(&self, count: usize) {
        self.peers_connected.set(count as i64);
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

    /// Records one finished request of `agent` to the language model `model`.
    pub fn llm_request(&self, model: &str, agent: &str, outcome: LlmOutcome<'_>) {
        let labels = ModelLabels {
            model: model.to_owned(),
            agent: agent.to_owned(),
        };
        self.llm_requests.get_or_create(&labels).inc();
        match outcome {
            LlmOutcome::Answered {
                prompt_tokens,
                completion_tokens,
                first_token,
            } => {
                for (kind, tokens) in [("prompt", prompt_tokens), ("completion", completion_tokens)]
                {
                    self.llm_tokens
                        .get_or_create(&ModelTokenLabels {
                            model: model.to_owned(),
                            agent: agent.to_owned(),
                            kind,
                        })
                        .inc_by(u64::from(tokens));
                }
                if let Some(first) = first_token {
                    self.llm_first_token
                        .get_or_create(&labels)
                        .observe(first.as_secs_f64());
                }
                tracing::info!(
                    target: TARGET,
                    model,
                    agent,
                    prompt_tokens,
                    completion_tokens,
                    outcome = "ok",
                    "llm"
                );
            }
            LlmOutcome::Failed { kind, error } => {
                self.llm_errors
                    .get_or_create(&ModelErrorLabels {
                        model: model.to_owned(),
                        agent: agent.to_owned(),
                        kind,
                    })
                    .inc();
                tracing::info!(target: TARGET, model, agent, outcome = kind, error = %error, "llm");
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

/// How one request to a language model ended, as the metrics count it.
pub enum LlmOutcome<'a> {
    Answered {
        prompt_tokens: u32,
        completion_tokens: u32,
        /// How long the first token took, when it was streamed.
        first_token: Option<std::time::Duration>,
    },
    Failed {
        /// The failure's kind, a metric label.
        kind: &'static str,
        error: &'a dyn std::fmt::Display,
    },
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
            "llm_requests counter",
            "llm_tokens counter",
            "llm_errors counter",
            "llm_time_to_first_token_seconds histogram",
            "agents_installed gauge",
            "peers_connected gauge",
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
        assert!(text.contains("agentsite_peers_connected 0\n"), "{text}");
        audit.agents_installed(3);
        audit.peers_connected(7);
        let text = audit.encode();
        assert!(text.contains("agentsite_agents_installed 3\n"), "{text}");
        assert!(text.contains("agentsite_peers_connected 7\n"), "{text}");
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
