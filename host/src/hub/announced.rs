//! Announcements as they arrive from the network: the last few kept for a
//! page that opens, each told to whoever follows them live.

use crate::store::manifest::SignedManifest;
use libp2p::PeerId;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use tokio::sync::broadcast;

/// Announcements kept for a page that opens.
const RECENT: usize = 20;
/// Announcements a slow follower may fall behind by before it misses some
/// (it is told it lagged, and goes on with the newest).
const FOLLOWER_BACKLOG: usize = 64;

/// Bytes of an announced agent's description kept.
const DESCRIPTION_BYTES: usize = 300;

/// An agent a peer announced, when it arrived: what a list of them shows,
/// never the whole manifest (its tools' schemas stay in the index).
#[derive(Debug, Clone, Serialize)]
pub struct Announced {
    /// Unix milliseconds.
    pub at: u64,
    /// The node that announced it (a peer id).
    pub host: String,
    pub id: String,
    pub name: String,
    /// Its first line, at most [`DESCRIPTION_BYTES`].
    pub description: String,
    pub tools: usize,
}

impl Announced {
    pub(super) fn of(manifest: &SignedManifest, host: PeerId) -> Announced {
        let manifest = manifest.manifest();
        Announced {
            at: crate::clock::unix_millis(),
            host: host.to_string(),
            id: manifest.id.to_string(),
            name: manifest.card.name.clone(),
            description: crate::text::one_line(&manifest.card.description, DESCRIPTION_BYTES),
            tools: manifest.tools.len(),
        }
    }
}

pub(super) struct Announcements {
    recent: Mutex<VecDeque<Announced>>,
    live: broadcast::Sender<Announced>,
}

impl Default for Announcements {
    fn default() -> Self {
        Announcements {
            recent: Mutex::new(VecDeque::with_capacity(RECENT)),
            live: broadcast::channel(FOLLOWER_BACKLOG).0,
        }
    }
}

impl Announcements {
    pub(super) fn arrived(&self, announced: Announced) {
        {
            let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
            // A host announcing an agent again (it republishes when it
            // rejoins) moves it to the front, not into the list twice.
            recent.retain(|a| !(a.id == announced.id && a.host == announced.host));
            if recent.len() == RECENT {
                recent.pop_front();
            }
            recent.push_back(announced.clone());
        }
        // No follower is no error.
        let _ = self.live.send(announced);
    }

    /// The last announcements, newest first, and the ones that follow.
    pub(super) fn follow(&self) -> (Vec<Announced>, broadcast::Receiver<Announced>) {
        let recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        // Subscribed under the lock: nothing arrives between the two.
        (
            recent.iter().rev().cloned().collect(),
            self.live.subscribe(),
        )
    }
}
