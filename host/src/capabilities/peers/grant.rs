//! How `peers` is granted: calls of other agents, within bounds.
//!
//! ```toml
//! peers = { depth = 2, fanout = 4 }
//! ```

use crate::capabilities::grant::Capability;
use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// The longest chain of agents calling agents, whatever a grant says: the
/// node refuses a call deeper than this from anyone, on this node or from
/// another.
pub const MAX_DEPTH: u32 = 8;

/// Bounds on an agent's calls to other agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeersGrant {
    /// How deep in a chain of agents calling agents this agent's calls may
    /// be: 1 lets it call others only when a client called it directly.
    pub depth: u32,
    /// How many calls to other agents one call of this agent may make.
    pub fanout: u32,
}

impl Default for PeersGrant {
    fn default() -> Self {
        PeersGrant {
            depth: 2,
            fanout: 8,
        }
    }
}

/// The `peers` capability.
pub struct Peers;

impl Capability for Peers {
    const IMPORTS: &'static [&'static str] = &["agentsite:agent/peers"];
    type Grant = PeersGrant;
    type Granted = Option<PeersGrant>;

    fn validate(peers: &PeersGrant) -> Result<(), String> {
        if peers.depth == 0 || peers.depth > MAX_DEPTH {
            return Err(format!(
                "the depth of calls through peers must be 1 to {MAX_DEPTH}, such as peers=2/8"
            ));
        }
        if peers.fanout == 0 {
            return Err(
                "the fan-out of calls through peers must be at least 1, such as peers=2/8".into(),
            );
        }
        Ok(())
    }

    /// `peers` (the default bounds) or `peers=DEPTH/FANOUT`.
    fn parse(
        _item: &str,
        value: Option<&str>,
        _now: Option<&PeersGrant>,
    ) -> anyhow::Result<PeersGrant> {
        let Some(value) = value else {
            return Ok(PeersGrant::default());
        };
        let (depth, fanout) = value
            .split_once('/')
            .context("write it as peers=DEPTH/FANOUT, such as peers=2/8")?;
        let whole = |text: &str, what: &str| {
            text.trim().parse().map_err(|_| {
                anyhow::anyhow!("the {what} {text:?} is not a whole number, such as peers=2/8")
            })
        };
        Ok(PeersGrant {
            depth: whole(depth, "depth")?,
            fanout: whole(fanout, "fan-out")?,
        })
    }

    fn resolve(peers: &PeersGrant) -> Option<PeersGrant> {
        Some(*peers)
    }

    fn describe(peers: &Option<PeersGrant>) -> Vec<String> {
        peers
            .iter()
            .map(|p| format!("peers    depth {}, fan-out {}", p.depth, p.fanout))
            .collect()
    }

    fn revocable(peers: &PeersGrant) -> Vec<(String, String)> {
        vec![(
            format!("peers, depth {}, fan-out {}", peers.depth, peers.fanout),
            "peers".into(),
        )]
    }
}
