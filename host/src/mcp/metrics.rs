//! The MCP endpoints' sessions as `/metrics` counts them:
//!
//! | metric | labels | counts |
//! |---|---|---|
//! | `agentsite_mcp_sessions` | state | sessions kept (gauge): `awake` (their tasks running), `asleep` (only their `initialize` kept) |

use crate::audit::{Section, describe};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

/// The MCP endpoints' metric families.
pub struct SessionMetrics {
    sessions: Family<StateLabel, Gauge>,
}

impl Section for SessionMetrics {
    fn register(registry: &mut Registry) -> Self {
        let metrics = SessionMetrics {
            sessions: Family::default(),
        };
        describe(
            registry,
            "mcp_sessions",
            "MCP sessions kept, per state (awake: their tasks running; asleep: only their initialize kept)",
            metrics.sessions.clone(),
        );
        metrics
    }
}

impl SessionMetrics {
    /// Sets how many sessions are kept awake and asleep.
    pub fn kept(&self, awake: usize, asleep: usize) {
        for (state, count) in [("awake", awake), ("asleep", asleep)] {
            self.sessions
                .get_or_create(&StateLabel { state })
                .set(count as i64);
        }
    }
}
