//! `[goals]` in the node's configuration: what a goal may spend unless it
//! asks for less, and the most it may ask for.
//!
//! ```toml
//! [goals]
//! enabled = true
//! fetch_members = false  # call members where they live; true: fetch them first
//! verify = "sampled"     # check other nodes' answers: "none", "sampled", "all"
//! deadline = "5m"        # a goal's wall-clock time, unless it asks otherwise
//! max_deadline = "30m"   # the most a goal may ask for
//! turns = 12             # requests to the model: each step's call, the conclusion
//! max_turns = 40
//! tokens = 60000         # tokens of the node's model (prompt and answer)
//! max_tokens = 400000
//! tool_calls = 24        # tool calls of all members together
//! max_tool_calls = 200
//! depth = 1              # times a goal may look for more agents (0: never)
//! max_depth = 3
//! running = 4            # goals running at once
//! ```

use crate::config::humantime_serde_compat;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How goals run on this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GoalsConfig {
    /// Whether the node takes goals at all.
    pub enabled: bool,
    /// Fetch a team member from the network and run it here, rather than
    /// calling it where it lives.
    pub fetch_members: bool,
    /// How goals check answers from other nodes, unless a goal says.
    pub verify: Verify,
    #[serde(with = "humantime_serde_compat")]
    pub deadline: Duration,
    #[serde(with = "humantime_serde_compat")]
    pub max_deadline: Duration,
    pub turns: u32,
    pub max_turns: u32,
    pub tokens: u64,
    pub max_tokens: u64,
    pub tool_calls: u32,
    pub max_tool_calls: u32,
    pub depth: u32,
    pub max_depth: u32,
    /// Goals that may run at the same time; more are refused.
    pub running: u32,
}

impl Default for GoalsConfig {
    fn default() -> Self {
        GoalsConfig {
            enabled: true,
            fetch_members: false,
            verify: Verify::default(),
            deadline: Duration::from_secs(5 * 60),
            max_deadline: Duration::from_secs(30 * 60),
            turns: 12,
            max_turns: 40,
            tokens: 60_000,
            max_tokens: 400_000,
            tool_calls: 24,
            max_tool_calls: 200,
            depth: 1,
            max_depth: 3,
            running: 4,
        }
    }
}

/// How a goal checks its members' answers from other nodes: a replayable
/// call (one that read no clock, randomness, network, stored data or
/// model) is run again, here after fetching the agent by hash or on a
/// second host, and compared (see `hub::checks`). A node caught answering
/// wrongly is blocked, its receipt kept as evidence, and the step asked of
/// another host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verify {
    /// Take every answer as it comes (its receipt is still kept).
    None,
    /// Check each node's first replayable answer in the goal, and one in
    /// [`SAMPLE_EVERY`] after it.
    #[default]
    Sampled,
    /// Check every replayable answer.
    All,
}

/// With [`Verify::Sampled`], after a node's first answer, one answer in
/// this many from it is checked.
pub const SAMPLE_EVERY: u32 = 4;

impl Verify {
    /// Whether to check the `nth` answer (1 for the first) a goal took
    /// from one node: the first, then every [`SAMPLE_EVERY`]-th, when
    /// sampled. A node cannot tell a checked answer from another, and one
    /// that lies often is caught early.
    pub fn checks(self, nth: u32) -> bool {
        match self {
            Verify::None => false,
            Verify::All => true,
            Verify::Sampled => nth.saturating_sub(1).is_multiple_of(SAMPLE_EVERY),
        }
    }
}

/// The bounds of one goal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalLimits {
    /// Wall-clock time from the start of a round (the goal, or a person's
    /// message that continues it) to its conclusion.
    #[serde(with = "humantime_serde_compat")]
    pub deadline: Duration,
    pub turns: u32,
    pub tokens: u64,
    pub tool_calls: u32,
    pub depth: u32,
}

/// What a goal asks for; `None` takes the node's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskedLimits {
    #[serde(
        default,
        with = "optional_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub deadline: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
}

impl GoalsConfig {
    /// Checks that the defaults fit under the maxima.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.deadline.is_zero() && self.deadline <= self.max_deadline,
            "goals.deadline must be above zero and at most goals.max_deadline"
        );
        anyhow::ensure!(
            self.turns >= 1 && self.turns <= self.max_turns,
            "goals.turns must be at least 1 and at most goals.max_turns"
        );
        anyhow::ensure!(
            self.tokens >= 1 && self.tokens <= self.max_tokens,
            "goals.tokens must be at least 1 and at most goals.max_tokens"
        );
        anyhow::ensure!(
            self.tool_calls <= self.max_tool_calls,
            "goals.tool_calls must be at most goals.max_tool_calls"
        );
        anyhow::ensure!(
            self.depth <= self.max_depth,
            "goals.depth must be at most goals.max_depth"
        );
        anyhow::ensure!(self.running >= 1, "goals.running must be at least 1");
        Ok(())
    }

    /// The limits of a goal that asks for `asked`, or why it may not.
    pub fn limits(&self, asked: &AskedLimits) -> Result<GoalLimits, String> {
        fn within<T: PartialOrd + std::fmt::Display>(
            asked: Option<T>,
            default: T,
            max: T,
            what: &str,
            key: &str,
        ) -> Result<T, String> {
            match asked {
                None => Ok(default),
                Some(value) if value <= max => Ok(value),
                Some(value) => Err(format!(
                    "{what} {value} is above this node's limit of {max} ([goals] {key})"
                )),
            }
        }
        let deadline = match asked.deadline {
            None => self.deadline,
            Some(d) if d.is_zero() => return Err("a goal's deadline must be above zero".into()),
            Some(d) if d <= self.max_deadline => d,
            Some(d) => {
                return Err(format!(
                    "a deadline of {} is above this node's limit of {} ([goals] max_deadline)",
                    humantime::format_duration(d),
                    humantime::format_duration(self.max_deadline)
                ));
            }
        };
        let turns = within(
            asked.turns,
            self.turns,
            self.max_turns,
            "max-turns",
            "max_turns",
        )?;
        if turns == 0 {
            return Err("max-turns must be at least 1".into());
        }
        Ok(GoalLimits {
            deadline,
            turns,
            tokens: within(
                asked.tokens,
                self.tokens,
                self.max_tokens,
                "a token budget of",
                "max_tokens",
            )?,
            tool_calls: within(
                asked.tool_calls,
                self.tool_calls,
                self.max_tool_calls,
                "a tool-call budget of",
                "max_tool_calls",
            )?,
            depth: within(
                asked.depth,
                self.depth,
                self.max_depth,
                "depth",
                "max_depth",
            )?,
        })
    }
}

mod optional_duration {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => serializer.collect_str(&humantime::format_duration(*d)),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        match Option::<String>::deserialize(deserializer)? {
            Some(text) => humantime::parse_duration(&text)
                .map(Some)
                .map_err(serde::de::Error::custom),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sampled_goal_checks_each_nodes_first_answer_and_one_in_four() {
        let checked: Vec<u32> = (1..=12).filter(|&n| Verify::Sampled.checks(n)).collect();
        assert_eq!(checked, [1, 5, 9]);
        assert!((1..=12).all(|n| Verify::All.checks(n)));
        assert!(!(1..=12).any(|n| Verify::None.checks(n)));
        assert_eq!(GoalsConfig::default().verify, Verify::Sampled);
        let read: GoalsConfig = toml::from_str("verify = \"all\"").unwrap();
        assert_eq!(read.verify, Verify::All);
        assert!(toml::from_str::<GoalsConfig>("verify = \"some\"").is_err());
    }

    #[test]
    fn a_goal_gets_the_defaults_and_may_ask_within_the_maxima() {
        let config = GoalsConfig::default();
        config.validate().unwrap();
        let limits = config.limits(&AskedLimits::default()).unwrap();
        assert_eq!(limits.turns, 12);
        assert_eq!(limits.depth, 1);
        let asked = AskedLimits {
            turns: Some(3),
            deadline: Some(Duration::from_secs(60)),
            depth: Some(0),
            ..Default::default()
        };
        let limits = config.limits(&asked).unwrap();
        assert_eq!((limits.turns, limits.depth), (3, 0));
        assert_eq!(limits.deadline, Duration::from_secs(60));
        let too_many = AskedLimits {
            turns: Some(41),
            ..Default::default()
        };
        let error = config.limits(&too_many).unwrap_err();
        assert!(error.contains("max_turns"), "{error}");
        let too_long = AskedLimits {
            deadline: Some(Duration::from_secs(3600)),
            ..Default::default()
        };
        assert!(
            config
                .limits(&too_long)
                .unwrap_err()
                .contains("max_deadline")
        );
    }

    #[test]
    fn defaults_above_the_maxima_are_refused() {
        let config = GoalsConfig {
            turns: 50,
            ..Default::default()
        };
        assert!(config.validate().is_err());
    }
}
