//! Never finishes listing: its resources, resource templates and prompts
//! are computed by loops that do not end. On a shared `/mcp` endpoint every
//! listing asks every agent; this one must not hold up the others' lists,
//! nor a read of another agent's resource.

use agentsite_sdk::{
    Prompt, PromptArguments, PromptError, PromptResult, Prompts, Resource, ResourceContents,
    ResourceError, ResourceTemplate, Resources, agent,
};

struct Stall;

/// Stalls every listing.
#[agent(resources, prompts)]
impl Stall {
    /// A tool that answers at once, so that the agent is otherwise normal.
    #[tool]
    fn ping() -> String {
        "pong".into()
    }
}

/// Spins until the node stops it.
fn forever<T>() -> T {
    let mut n: u64 = 0;
    loop {
        n = std::hint::black_box(n.wrapping_add(1));
    }
}

impl Resources for Stall {
    fn list() -> Vec<Resource> {
        forever()
    }

    fn templates() -> Vec<ResourceTemplate> {
        forever()
    }

    fn read(_uri: &str) -> Result<Vec<ResourceContents>, ResourceError> {
        forever()
    }
}

impl Prompts for Stall {
    fn list() -> Vec<Prompt> {
        forever()
    }

    fn get(_name: &str, _arguments: &PromptArguments) -> Result<PromptResult, PromptError> {
        forever()
    }
}
