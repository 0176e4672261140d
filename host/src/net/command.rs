//! What a [`Network`] handle asks of the event loop: one command per
//! question or deed, each with the channel its answer goes back on.
//!
//! [`Network`]: super::Network

use super::fetch::{FetchRequest, FetchResponse};
use super::{NetError, PeerInfo, ProviderLookup, PublishReport, reach};
use crate::AgentId;
use crate::store::manifest::SignedManifest;
use libp2p::kad::RecordKey;
use libp2p::{Multiaddr, PeerId};
use serde_json::Value;
use tokio::sync::oneshot;

type Reply<T> = oneshot::Sender<T>;

pub(super) enum Command {
    Addresses {
        reply: Reply<Vec<Multiaddr>>,
    },
    Peers {
        reply: Reply<Vec<PeerInfo>>,
    },
    Reachability {
        reply: Reply<reach::Reachability>,
    },
    Dial {
        address: Multiaddr,
        reply: Reply<Result<(), NetError>>,
    },
    RoutingTableSize {
        reply: Reply<usize>,
    },
    RoutingTable {
        reply: Reply<Vec<PeerId>>,
    },
    PreferDirect {
        peer: PeerId,
        reply: Reply<bool>,
    },
    Joined {
        reply: Reply<()>,
    },
    Publish {
        manifest: Box<SignedManifest>,
        reply: Reply<PublishReport>,
    },
    Announce {
        manifest: Box<SignedManifest>,
        reply: Reply<usize>,
    },
    /// Makes this node a provider of `keys` (no record, no announcement).
    Provide {
        keys: Vec<RecordKey>,
        reply: Reply<PublishReport>,
    },
    Providers {
        key: RecordKey,
        want: usize,
        reply: Reply<Result<ProviderLookup, NetError>>,
    },
    Manifest {
        id: AgentId,
        reply: Reply<Result<SignedManifest, NetError>>,
    },
    Fetch {
        peer: PeerId,
        request: FetchRequest,
        reply: Reply<Result<FetchResponse, NetError>>,
    },
    Rpc {
        peer: PeerId,
        message: Value,
        reply: Reply<Result<Value, NetError>>,
    },
    Penalise {
        peer: PeerId,
        reason: String,
    },
    Shutdown {
        reply: Reply<()>,
    },
}
