//! Whose grants and stored data: one build of an agent, by its content
//! id, or every build the operator installs under one name.
//!
//! An operator who edits an agent, builds it again and adds the new build
//! means the same agent: its grants and its key-value data follow the name
//! ([`AgentKey::Name`]). An agent from the network is the exact bytes its
//! publisher signed; a stranger's agent that happens to share a name must
//! not inherit what the operator gave another, so it is keyed by its id
//! ([`AgentKey::Id`]). Which key an installed agent has is its record's
//! to say (`store::AgentRecord::key`).

use super::id::AgentId;
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AgentKey {
    /// One build, by content id (`sha256:…`).
    Id(AgentId),
    /// Every build the operator installs under this agent name.
    Name(String),
}

impl fmt::Display for AgentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentKey::Id(id) => write!(f, "{id}"),
            AgentKey::Name(name) => f.write_str(name),
        }
    }
}

/// Text that names neither an agent id nor an agent name.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is neither an agent id (sha256:<64 hex digits>) nor an agent name (a-z 0-9 - _)")]
pub struct ParseAgentKeyError(String);

impl FromStr for AgentKey {
    type Err = ParseAgentKeyError;

    /// `sha256:…` is an id; anything else must be an agent name.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.starts_with(super::id::PREFIX) {
            return text
                .parse()
                .map(AgentKey::Id)
                .map_err(|_| ParseAgentKeyError(text.to_owned()));
        }
        super::tool::validate_agent_name(text)
            .map(|()| AgentKey::Name(text.to_owned()))
            .map_err(|_| ParseAgentKeyError(text.to_owned()))
    }
}

super::serde_as_text!(AgentKey);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_are_told_apart_and_round_trip() {
        let id = AgentId::of(b"notes");
        let key: AgentKey = id.to_string().parse().unwrap();
        assert_eq!(key, AgentKey::Id(id));
        assert_eq!(key.to_string(), id.to_string());
        let name: AgentKey = "unit-convert".parse().unwrap();
        assert_eq!(name, AgentKey::Name("unit-convert".into()));
        for bad in ["sha256:abc", "Unit Convert", "", "../etc"] {
            assert!(bad.parse::<AgentKey>().is_err(), "{bad}");
        }
    }
}
