//! What a goal may still spend, shared by its teams and their tasks: turns,
//! model tokens, tool calls and time. Every spending is checked here; the
//! first limit reached is remembered so the conclusion can name it.

use super::config::GoalLimits;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

/// A limit a goal can hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Turns,
    Tokens,
    ToolCalls,
    Deadline,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Turns => "turns",
            Limit::Tokens => "tokens",
            Limit::ToolCalls => "tool calls",
            Limit::Deadline => "deadline",
        }
    }

    /// Whether a conclusion can still be asked of the model once it is hit.
    pub fn leaves_the_model(self) -> bool {
        matches!(self, Limit::Turns | Limit::ToolCalls)
    }
}

/// One round's budget (a goal, or a person's message continuing it).
pub struct Budget {
    pub limits: GoalLimits,
    pub deadline: Instant,
    turns: AtomicU32,
    tokens: AtomicU64,
    tool_calls: AtomicU32,
    tasks: AtomicU32,
    hit: Mutex<Option<Limit>>,
}

impl Budget {
    pub fn new(limits: GoalLimits) -> Budget {
        Budget {
            deadline: Instant::now() + limits.deadline,
            limits,
            turns: AtomicU32::new(0),
            tokens: AtomicU64::new(0),
            tool_calls: AtomicU32::new(0),
            tasks: AtomicU32::new(0),
            hit: Mutex::new(None),
        }
    }

    fn note(&self, limit: Limit) -> Limit {
        let mut hit = self
            .hit
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *hit.get_or_insert(limit)
    }

    /// The limit that was hit first, if any; the deadline counts as hit
    /// once it has passed.
    pub fn exhausted(&self) -> Option<Limit> {
        if Instant::now() >= self.deadline {
            self.note(Limit::Deadline);
        }
        *self
            .hit
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes a turn, or says which limit forbids it.
    pub fn take_turn(&self) -> Result<(), Limit> {
        if let Some(limit) = self.exhausted() {
            return Err(limit);
        }
        let taken = self.turns.fetch_add(1, Ordering::AcqRel);
        if taken >= self.limits.turns {
            self.turns.fetch_sub(1, Ordering::AcqRel);
            return Err(self.note(Limit::Turns));
        }
        Ok(())
    }

    /// Takes a tool call, or says which limit forbids it.
    pub fn take_tool_call(&self) -> Result<(), Limit> {
        if let Some(limit) = self.exhausted().filter(|l| *l != Limit::Turns) {
            return Err(limit);
        }
        let taken = self.tool_calls.fetch_add(1, Ordering::AcqRel);
        if taken >= self.limits.tool_calls {
            self.tool_calls.fetch_sub(1, Ordering::AcqRel);
            self.note(Limit::ToolCalls);
            return Err(Limit::ToolCalls);
        }
        Ok(())
    }

    /// Tokens a model request may still generate at most, or the limit
    /// that forbids another request.
    pub fn tokens_left(&self) -> Result<u64, Limit> {
        if Instant::now() >= self.deadline {
            self.note(Limit::Deadline);
            return Err(Limit::Deadline);
        }
        let used = self.tokens.load(Ordering::Acquire);
        if used >= self.limits.tokens {
            self.note(Limit::Tokens);
            return Err(Limit::Tokens);
        }
        Ok(self.limits.tokens - used)
    }

    /// Counts tokens a model request used.
    pub fn spend_tokens(&self, tokens: u64) {
        let before = self.tokens.fetch_add(tokens, Ordering::AcqRel);
        if before + tokens >= self.limits.tokens {
            self.note(Limit::Tokens);
        }
    }

    /// Numbers a new task.
    pub fn count_task(&self) {
        self.tasks.fetch_add(1, Ordering::AcqRel);
    }

    /// Turns, tokens, tool calls and tasks spent so far.
    pub fn spent(&self) -> super::message::GoalUsage {
        super::message::GoalUsage {
            turns: self.turns.load(Ordering::Acquire),
            tokens: self.tokens.load(Ordering::Acquire),
            tool_calls: self.tool_calls.load(Ordering::Acquire),
            tasks: self.tasks.load(Ordering::Acquire),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits() -> GoalLimits {
        GoalLimits {
            deadline: Duration::from_secs(60),
            turns: 2,
            tokens: 100,
            tool_calls: 1,
            depth: 1,
        }
    }

    #[test]
    fn each_limit_is_enforced_and_the_first_one_hit_is_remembered() {
        let budget = Budget::new(limits());
        budget.take_turn().unwrap();
        budget.take_turn().unwrap();
        assert_eq!(budget.take_turn(), Err(Limit::Turns));
        // Tasks already running may finish their tool calls.
        budget.take_tool_call().unwrap();
        assert_eq!(budget.take_tool_call(), Err(Limit::ToolCalls));
        assert_eq!(budget.exhausted(), Some(Limit::Turns));
        assert_eq!(budget.spent().turns, 2);
    }

    #[test]
    fn tokens_run_out() {
        let budget = Budget::new(limits());
        assert_eq!(budget.tokens_left(), Ok(100));
        budget.spend_tokens(60);
        assert_eq!(budget.tokens_left(), Ok(40));
        budget.spend_tokens(60);
        assert_eq!(budget.tokens_left(), Err(Limit::Tokens));
        assert_eq!(budget.exhausted(), Some(Limit::Tokens));
    }

    #[test]
    fn a_passed_deadline_is_a_hit_limit() {
        let budget = Budget::new(GoalLimits {
            deadline: Duration::ZERO,
            ..limits()
        });
        assert_eq!(budget.take_turn(), Err(Limit::Deadline));
        assert_eq!(budget.take_tool_call(), Err(Limit::Deadline));
    }
}
