//! The network page (`/network`): this node's peer id and addresses, the
//! peers it is connected to, the agents it hosts and publishes, agents
//! announced by peers as they arrive, and its calls per second and failed
//! calls over the last ten minutes, sampled from its own counters.

use super::session::Access;
use super::{Site, failure};
use crate::audit::Audit;
use crate::hub::Hub;
use axum::Extension;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use minijinja::value::Serde;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

/// Seconds of call rates kept: the chart's ten minutes.
const WINDOW: usize = 600;
/// Peers listed on the page at most; past that, a count.
const MAX_PEERS_SHOWN: usize = 200;

/// Calls and failed calls in one second.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Rate {
    /// Unix seconds.
    pub at: u64,
    pub calls: u64,
    pub errors: u64,
}

/// The node's calls per second over the last [`WINDOW`] seconds, sampled
/// once a second from its audit's totals by a task that ends with the site.
pub struct CallRates {
    rates: Mutex<VecDeque<Rate>>,
}

impl CallRates {
    /// Starts sampling `audit`, when there is a runtime to sample on.
    pub fn start(audit: Arc<Audit>) -> Arc<CallRates> {
        let rates = Arc::new(CallRates {
            rates: Mutex::new(VecDeque::with_capacity(WINDOW)),
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(sample(Arc::downgrade(&rates), audit));
        }
        rates
    }

    pub fn rates(&self) -> Vec<Rate> {
        self.lock().iter().copied().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Rate>> {
        self.rates.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn sample(rates: Weak<CallRates>, audit: Arc<Audit>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // A busy node skips seconds rather than sampling twice at once.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last = audit.call_totals();
    loop {
        tick.tick().await;
        let Some(rates) = rates.upgrade() else { return };
        let now = audit.call_totals();
        let rate = Rate {
            at: crate::goals::message::unix_millis() / 1000,
            calls: now.0.saturating_sub(last.0),
            errors: now.1.saturating_sub(last.1),
        };
        last = now;
        let mut kept = rates.lock();
        if kept.len() == WINDOW {
            kept.pop_front();
        }
        kept.push_back(rate);
    }
}

/// Agents named per peer at most; past that, a count.
const MAX_AGENTS_PER_PEER: usize = 5;

#[derive(Serialize)]
struct PeerView {
    peer_id: String,
    agent_version: Option<String>,
    agentsite: bool,
    address: Option<String>,
    connected_at: u64,
    dialed: bool,
    /// How: `tcp`, `quic`, `relayed` (several joined by `+`).
    via: String,
    /// Some of the agents the index knows it hosts, and how many in all.
    agents: Vec<AgentLink>,
    agent_count: usize,
}

/// The peers as the page lists them, each with the agents the node's
/// index knows it to host.
fn peer_views(hub: &Hub, peers: Vec<crate::net::PeerInfo>) -> Vec<PeerView> {
    let mut views: Vec<PeerView> = peers
        .into_iter()
        .take(MAX_PEERS_SHOWN)
        .map(|p| PeerView {
            via: {
                let mut via: Vec<&str> =
                    p.connections.iter().map(|c| c.transport.as_str()).collect();
                via.sort_unstable();
                via.dedup();
                via.join("+")
            },
            address: p.shown_address().map(str::to_owned),
            peer_id: p.peer_id,
            agent_version: p.agent_version,
            agentsite: p.agentsite,
            connected_at: p.connected_at,
            dialed: p.dialed,
            agents: Vec::new(),
            agent_count: 0,
        })
        .collect();
    let by_id: HashMap<String, usize> = views
        .iter()
        .enumerate()
        .map(|(i, v)| (v.peer_id.clone(), i))
        .collect();
    hub.with_known(|known| {
        for agent in known {
            for host in &agent.hosts {
                let Some(&i) = by_id.get(&host.to_string()) else {
                    continue;
                };
                let view = &mut views[i];
                view.agent_count += 1;
                if view.agents.len() < MAX_AGENTS_PER_PEER {
                    view.agents.push(AgentLink {
                        name: agent.manifest.manifest().card.name.clone(),
                        id: agent.manifest.id().to_string(),
                    });
                }
            }
        }
    });
    for view in &mut views {
        view.agents.sort_by(|a, b| a.name.cmp(&b.name));
    }
    views
}

#[derive(Serialize)]
struct AgentLink {
    name: String,
    id: String,
}

/// `GET /network`
pub async fn page(State(site): State<Arc<Site>>, Extension(access): Extension<Access>) -> Response {
    let hosted: Vec<AgentLink> = match site.node.list() {
        Ok(records) => records
            .into_iter()
            .map(|r| AgentLink {
                name: r.card.name,
                id: r.id.to_string(),
            })
            .collect(),
        Err(e) => {
            return site.error_page(
                Some(access),
                StatusCode::INTERNAL_SERVER_ERROR,
                &e.to_string(),
            );
        }
    };
    let mut network = minijinja::Value::UNDEFINED;
    if let Some(hub) = &site.hub {
        // The network's event loop answers these; a node shutting down
        // may not, and the page says so rather than failing.
        let (addresses, peers, reachability) = tokio::join!(
            hub.network().addresses(),
            hub.network().peers(),
            hub.network().reachability()
        );
        let peers = peers.unwrap_or_default();
        let published: Vec<AgentLink> = hub
            .published()
            .into_iter()
            .map(|f| AgentLink {
                name: f.card.name,
                id: f.id.to_string(),
            })
            .collect();
        let (announced, _) = hub.announcements();
        network = minijinja::context! {
            peer_id => hub.peer_id().to_string(),
            addresses => addresses.map(|a| a.iter().map(ToString::to_string).collect::<Vec<_>>()).unwrap_or_default(),
            reachability => reachability.ok().map(Serde),
            peer_count => peers.len(),
            peers => Serde(peer_views(hub, peers)),
            published => Serde(published),
            announced => Serde(announced),
        };
    }
    let frame = site.frame(access, "network");
    site.pages.render(
        StatusCode::OK,
        "network.html",
        minijinja::context! {
            network,
            hosted => Serde(hosted),
            rates => Serde(site.call_rates.rates()),
            window => WINDOW,
            max_peers => MAX_PEERS_SHOWN,
            ..frame,
        },
    )
}

/// `GET /network/rates`: the call rates of the last ten minutes.
pub async fn rates(State(site): State<Arc<Site>>) -> Response {
    Json(site.call_rates.rates()).into_response()
}

/// `GET /network/announcements`: server-sent `announced` events, one per
/// agent a peer announces from now on.
pub async fn announcements(State(site): State<Arc<Site>>) -> Response {
    let Some(hub) = &site.hub else {
        return failure(
            StatusCode::SERVICE_UNAVAILABLE,
            "this node is not on the network",
        );
    };
    let (_, mut arriving) = hub.announcements();
    let (sender, receiver) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            // A page that went away ends the task, announcements or not.
            let arrived = tokio::select! {
                _ = sender.closed() => return,
                arrived = arriving.recv() => arrived,
            };
            let announced = match arrived {
                Ok(announced) => announced,
                // A follower too slow for the network misses some and
                // goes on with the newest.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            if sender.send(announced).await.is_err() {
                return;
            }
        }
    });
    crate::http::streams::event_stream(receiver, |view| {
        Event::default()
            .event("announced")
            .json_data(&view)
            .unwrap_or_default()
    })
}
