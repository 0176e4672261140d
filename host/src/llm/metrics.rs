//! The node's language models as `/metrics` counts them:
//!
//! | metric | labels | counts |
//! |---|---|---|
//! | `agentsite_llm_requests_total` | model, agent | requests (`agent` is who asked: an agent's name, `http` for `/v1`, `peer:…` for another node) |
//! | `agentsite_llm_tokens_total` | model, agent, kind | tokens read (`prompt`) and written (`completion`) |
//! | `agentsite_llm_errors_total` | model, agent, kind | requests that failed, by the failure's kind |
//! | `agentsite_llm_time_to_first_token_seconds` | model, agent | time to the first streamed token (histogram) |

use crate::audit::{Section, TARGET, describe};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::time::Duration;

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

/// How one request to a language model ended, as the metrics count it.
pub enum LlmOutcome<'a> {
    Answered {
        prompt_tokens: u32,
        completion_tokens: u32,
        /// How long the first token took, when it was streamed.
        first_token: Option<Duration>,
    },
    Failed {
        /// The failure's kind, a metric label.
        kind: &'static str,
        error: &'a dyn std::fmt::Display,
    },
}

/// The models' metric families.
pub struct ModelMetrics {
    requests: Family<ModelLabels, Counter>,
    tokens: Family<ModelTokenLabels, Counter>,
    errors: Family<ModelErrorLabels, Counter>,
    first_token: Family<ModelLabels, Histogram>,
}

impl Section for ModelMetrics {
    fn register(registry: &mut Registry) -> Self {
        let metrics = ModelMetrics {
            requests: Family::default(),
            tokens: Family::default(),
            errors: Family::default(),
            // 10 ms to about 80 s: a hosted model answers in tens of
            // milliseconds, a small CPU one after a long prompt in tens of
            // seconds.
            first_token: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.01, 2.0, 14))
            }),
        };
        describe(
            registry,
            "llm_requests",
            "Requests to the node's language models, per model and requester",
            metrics.requests.clone(),
        );
        describe(
            registry,
            "llm_tokens",
            "Tokens the node's language models read (prompt) and wrote (completion), per model and requester",
            metrics.tokens.clone(),
        );
        describe(
            registry,
            "llm_errors",
            "Requests to the node's language models that failed, per model, requester and kind",
            metrics.errors.clone(),
        );
        describe(
            registry,
            "llm_time_to_first_token_seconds",
            "Time from a request to its first generated token, per model and requester",
            metrics.first_token.clone(),
        );
        metrics
    }
}

impl ModelMetrics {
    /// Records one finished request of `agent` to the language model `model`.
    pub fn request(&self, model: &str, agent: &str, outcome: LlmOutcome<'_>) {
        let labels = ModelLabels {
            model: model.to_owned(),
            agent: agent.to_owned(),
        };
        self.requests.get_or_create(&labels).inc();
        match outcome {
            LlmOutcome::Answered {
                prompt_tokens,
                completion_tokens,
                first_token,
            } => {
                for (kind, tokens) in [("prompt", prompt_tokens), ("completion", completion_tokens)]
                {
                    self.tokens
                        .get_or_create(&ModelTokenLabels {
                            model: model.to_owned(),
                            agent: agent.to_owned(),
                            kind,
                        })
                        .inc_by(u64::from(tokens));
                }
                if let Some(first) = first_token {
                    self.first_token
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
                self.errors
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Audit;

    #[test]
    fn the_models_families_are_described_before_a_request_and_count_one() {
        let audit = Audit::new();
        let metrics = audit.section::<ModelMetrics>();
        let text = audit.encode();
        for family in [
            "llm_requests counter",
            "llm_tokens counter",
            "llm_errors counter",
            "llm_time_to_first_token_seconds histogram",
        ] {
            let line = format!("# TYPE agentsite_{family}\n");
            assert!(text.contains(&line), "missing {line:?} in\n{text}");
        }
        // Asked again, the same families: nothing is registered twice.
        let again = audit.section::<ModelMetrics>();
        again.request(
            "local",
            "calculator",
            LlmOutcome::Answered {
                prompt_tokens: 12,
                completion_tokens: 3,
                first_token: Some(Duration::from_millis(40)),
            },
        );
        metrics.request(
            "local",
            "http",
            LlmOutcome::Failed {
                kind: "overloaded",
                error: &"busy",
            },
        );
        let text = audit.encode();
        assert_eq!(
            text.matches("# TYPE agentsite_llm_requests counter")
                .count(),
            1
        );
        for line in [
            r#"agentsite_llm_requests_total{model="local",agent="calculator"} 1"#,
            r#"agentsite_llm_tokens_total{model="local",agent="calculator",kind="prompt"} 12"#,
            r#"agentsite_llm_time_to_first_token_seconds_count{model="local",agent="calculator"} 1"#,
            r#"agentsite_llm_errors_total{model="local",agent="http",kind="overloaded"} 1"#,
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }
}
