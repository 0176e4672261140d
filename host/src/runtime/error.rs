//! Why a call did not return a result. Each variant is one line a person can
//! act on; a limit hit names the limit.

use bytesize::ByteSize;
use std::time::Duration;

/// A failed tool call.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The agent has no tool of this name.
    #[error("{agent} has no tool named {tool:?}")]
    UnknownTool { agent: String, tool: String },
    /// The agent has no prompt of this name.
    #[error("{agent} has no prompt named {prompt:?}")]
    UnknownPrompt { agent: String, prompt: String },
    /// The agent offers no resource at this URI.
    #[error("no resource at {0}")]
    ResourceNotFound(String),
    /// The arguments are not JSON or do not fit the tool's input schema.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool ran and reported a failure.
    #[error("{0}")]
    Failed(String),
    /// The call ran past its deadline and was interrupted.
    #[error("deadline exceeded after {}", humantime::format_duration(*.0))]
    DeadlineExceeded(Duration),
    /// The instance tried to grow its memory past the cap.
    #[error("memory limit of {0} exceeded")]
    MemoryExceeded(ByteSize),
    /// The guest's call stack overflowed.
    #[error("stack overflow: the agent recursed too deeply")]
    StackOverflow,
    /// The call made the host hold more on its behalf than allowed: open
    /// handles, table elements, HTTP header fields.
    #[error("host resource limit exceeded: {0}")]
    HostLimit(String),
    /// The result is larger than allowed: `size` where it was measured
    /// whole, none where writing it stopped at the limit.
    #[error("output {}exceeds the limit of {limit}", size_of_output(.size))]
    OutputTooLarge {
        size: Option<ByteSize>,
        limit: ByteSize,
    },
    /// The result has more items (content blocks, resources, prompt
    /// messages) than allowed.
    #[error("output of {count} {what} exceeds the limit of {limit}")]
    TooManyItems {
        what: &'static str,
        count: usize,
        limit: usize,
    },
    /// The guest ended its program (`exit`, as `std::process::exit` does)
    /// instead of returning. WASI 0.2's `exit` says only whether the
    /// program succeeded (a status of 3 arrives as 1), so that is all that
    /// is reported.
    #[error(
        "the agent exited{} instead of returning a result",
        if *.0 == 0 { "" } else { " with a failure status" }
    )]
    Exited(i32),
    /// The guest trapped (a panic, an `unreachable`, an out-of-bounds access).
    #[error("agent trapped: {0}")]
    Trapped(String),
    /// All of the agent's call slots stayed taken until the deadline.
    #[error("agent is busy: its {0} concurrent call slots stayed taken until the deadline")]
    Busy(u32),
    /// The guest returned something that breaks the contract.
    #[error("agent returned a malformed result: {0}")]
    MalformedResult(String),
    /// An attached server could not take the call: it is not running, is
    /// being started again, or cannot be reached. The text says why.
    #[error("{0}")]
    Unavailable(String),
    /// The host itself failed (for example, an instance could not be created).
    #[error("host error: {0}")]
    Host(String),
}

impl CallError {
    /// The limit that stopped the call, by name, if a limit did.
    pub fn limit(&self) -> Option<&'static str> {
        Some(match self {
            CallError::DeadlineExceeded(_) => "deadline",
            CallError::MemoryExceeded(_) => "memory",
            CallError::StackOverflow => "stack",
            CallError::HostLimit(_) => "host",
            CallError::OutputTooLarge { .. } | CallError::TooManyItems { .. } => "output",
            CallError::Busy(_) => "concurrency",
            _ => return None,
        })
    }

    /// The failure as the audit counts it.
    pub fn audited(&self) -> crate::audit::Failure<'_> {
        use crate::audit::Failure;
        match self.limit() {
            Some(limit) => Failure::Limit(limit, self),
            // The tool ran and said no: the agent's own answer.
            None if matches!(self, CallError::Failed(_) | CallError::InvalidArguments(_)) => {
                Failure::Tool(self)
            }
            None => Failure::Fault(self),
        }
    }
}

/// `of 2.0 MiB ` for an output of known size, nothing otherwise.
fn size_of_output(size: &Option<ByteSize>) -> String {
    size.map(|size| format!("of {size} ")).unwrap_or_default()
}
