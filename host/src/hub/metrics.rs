//! The node on the network as `/metrics` counts it:
//!
//! | metric | labels | counts |
//! |---|---|---|
//! | `agentsite_peers_connected` | | peers connected on the network (gauge; 0 off the network) |
//! | `agentsite_remote_calls_total` | outcome | tool calls other nodes asked of this one that ended: `answered`, `cancelled` |
//! | `agentsite_remote_calls_running` | | such calls running now (gauge) |

use crate::audit::{OutcomeLabel, Section, TARGET, describe};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The network's metric families.
pub struct NetworkMetrics {
    peers_connected: Gauge,
    remote_calls: Family<OutcomeLabel, Counter>,
    remote_calls_running: Gauge,
}

impl Section for NetworkMetrics {
    fn register(registry: &mut Registry) -> Self {
        let metrics = NetworkMetrics {
            peers_connected: Gauge::default(),
            remote_calls: Family::default(),
            remote_calls_running: Gauge::default(),
        };
        describe(
            registry,
            "peers_connected",
            "Peers this node is connected to on the network",
            metrics.peers_connected.clone(),
        );
        describe(
            registry,
            "remote_calls",
            "Tool calls other nodes asked of this one that ended, per outcome (answered, cancelled)",
            metrics.remote_calls.clone(),
        );
        describe(
            registry,
            "remote_calls_running",
            "Tool calls other nodes asked of this one, running now",
            metrics.remote_calls_running.clone(),
        );
        metrics
    }
}

impl NetworkMetrics {
    /// Sets how many peers the node is connected to.
    pub fn peers_connected(&self, count: usize) {
        self.peers_connected.set(count as i64);
    }

    /// Counts a tool call another node asked for as running until the
    /// returned guard is dropped: as answered if it was told so, else as
    /// cancelled (its caller stopped waiting).
    pub fn remote_call(&self) -> RemoteCall<'_> {
        self.remote_calls_running.inc();
        RemoteCall {
            metrics: self,
            answered: false,
        }
    }
}

/// A tool call another node asked for, while it runs (see
/// [`NetworkMetrics::remote_call`]).
pub struct RemoteCall<'a> {
    metrics: &'a NetworkMetrics,
    answered: bool,
}

impl RemoteCall<'_> {
    pub fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for RemoteCall<'_> {
    fn drop(&mut self) {
        self.metrics.remote_calls_running.dec();
        let outcome = if self.answered {
            "answered"
        } else {
            tracing::info!(target: TARGET, "a remote call was cancelled by its caller");
            "cancelled"
        };
        self.metrics
            .remote_calls
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Audit;

    #[test]
    fn peers_are_zero_until_told_and_a_dropped_call_is_cancelled() {
        let audit = Audit::new();
        let metrics = audit.section::<NetworkMetrics>();
        assert!(audit.encode().contains("agentsite_peers_connected 0\n"));
        metrics.peers_connected(7);
        metrics.remote_call().answered();
        drop(metrics.remote_call());
        let text = audit.encode();
        for line in [
            "agentsite_peers_connected 7\n",
            "agentsite_remote_calls_total{outcome=\"answered\"} 1\n",
            "agentsite_remote_calls_total{outcome=\"cancelled\"} 1\n",
            "agentsite_remote_calls_running 0\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }
}
