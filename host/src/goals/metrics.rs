//! Goals as `/metrics` counts them:
//!
//! | metric | labels | counts |
//! |---|---|---|
//! | `agentsite_goals_total` | outcome | goal rounds that ended: `concluded`, `stopped` (by a limit), `failed`, `cancelled` |
//! | `agentsite_goal_turns_total` | | requests goals made to the model (each step's call, the conclusion) |
//! | `agentsite_goal_tasks_total` | outcome | goals' tasks that ended: `done`, `failed` |
//! | `agentsite_goal_tokens_total` | | model tokens goals used |
//! | `agentsite_goal_tool_calls_total` | | tool calls goals' members made |

use crate::audit::{OutcomeLabel, Section, describe};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Goals' metric families.
pub struct GoalMetrics {
    rounds: Family<OutcomeLabel, Counter>,
    turns: Counter,
    tasks: Family<OutcomeLabel, Counter>,
    tokens: Counter,
    tool_calls: Counter,
}

impl Section for GoalMetrics {
    fn register(registry: &mut Registry) -> Self {
        let metrics = GoalMetrics {
            rounds: Family::default(),
            turns: Counter::default(),
            tasks: Family::default(),
            tokens: Counter::default(),
            tool_calls: Counter::default(),
        };
        describe(
            registry,
            "goals",
            "Goal rounds that ended, per outcome (concluded, stopped by a limit, failed, cancelled)",
            metrics.rounds.clone(),
        );
        describe(
            registry,
            "goal_turns",
            "Requests goals made to the model (each step's call, the conclusion)",
            metrics.turns.clone(),
        );
        describe(
            registry,
            "goal_tasks",
            "Tasks of goals that ended, per outcome (done, failed)",
            metrics.tasks.clone(),
        );
        describe(
            registry,
            "goal_tokens",
            "Tokens of the node's models that goals used",
            metrics.tokens.clone(),
        );
        describe(
            registry,
            "goal_tool_calls",
            "Tool calls members of goals' teams made",
            metrics.tool_calls.clone(),
        );
        metrics
    }
}

impl GoalMetrics {
    /// Records a turn of a goal's member.
    pub fn turn(&self) {
        self.turns.inc();
    }

    /// Records a goal's task that ended (`done` or `failed`).
    pub fn task(&self, outcome: &'static str) {
        self.tasks.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    /// Records a round of a goal that ended, and the model's tokens and
    /// the tool calls it used.
    pub fn ended(&self, outcome: &'static str, tokens: u64, tool_calls: u32) {
        self.rounds.get_or_create(&OutcomeLabel { outcome }).inc();
        self.tokens.inc_by(tokens);
        self.tool_calls.inc_by(u64::from(tool_calls));
    }
}
