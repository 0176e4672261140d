//! A node's serving side, assembled in one place: the hosted agents, the
//! node on the network (with `p2p`), goals, chats, and every HTTP surface
//! (MCP, `/v1`, A2A, the goals API, the pages, the control API) merged into
//! one router behind the front end of [`crate::http`].
//!
//! `agentsite serve` is [`Server::start`] then [`Server::serve`]; a test or
//! a benchmark that wants the node as a user meets it builds it the same
//! way. A new HTTP surface is a router of its own domain's, merged here.

pub mod config;

use crate::Node;
use crate::a2a::server::A2a;
use crate::chat::Chats;
use crate::goals::Goals;
use crate::http::connections::ConnectionLimits;
use crate::http::guard::Rules;
use crate::http::token::Family;
use crate::http::{HttpOptions, connections};
use crate::hub::{Hub, HubOptions};
use crate::mcp::Hosted;
use crate::net::NetConfig;
use crate::web::control::{NodeFile, NodeFiles, Serving};
use crate::web::site::{Site, session::Sessions};
use anyhow::Context as _;
use axum::Router;
use config::Config;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How a node joins the network, when it does.
pub struct P2pOptions {
    pub net: NetConfig,
    pub hub: HubOptions,
}

/// A node's serving side, listening but not yet serving.
pub struct Server {
    listener: TcpListener,
    address: SocketAddr,
    router: Router,
    rules: Arc<Rules>,
    connections: ConnectionLimits,
    hosted: Arc<Hosted>,
    hub: Option<Arc<Hub>>,
    /// Where the node listens on the network (empty off it).
    p2p_addresses: Vec<String>,
    stop: CancellationToken,
    /// Follows the catalog, so that agents added or removed are served.
    watcher: JoinHandle<()>,
    /// The files the command line finds the node by, removed when it ends.
    _node_files: NodeFiles,
    /// This node's claim on its data directory, let go when it ends.
    _serving: Serving,
}

impl Server {
    /// Binds `options.listen`, joins the network with `p2p`, writes the
    /// node's files for the command line and assembles every route, each
    /// domain with its section of `config`.
    pub async fn start(
        node: Arc<Node>,
        config: &Config,
        options: HttpOptions,
        p2p: Option<P2pOptions>,
    ) -> anyhow::Result<Server> {
        // What is wrong with the command itself is said first.
        options.check()?;
        let serving = crate::web::control::claim(node.data_dir())?;
        let listener = bind(&options).await?;
        let hub = match p2p {
            Some(p2p) => {
                let keypair = crate::net::identity::load_or_create(&node.data_dir().identity())?;
                Some(
                    Hub::start(node.clone(), keypair, p2p.net, p2p.hub)
                        .await
                        .context("cannot join the network")?,
                )
            }
            None => None,
        };
        Server::assemble(serving, listener, node, config, options, hub).await
    }

    /// The same for a node already on the network as `hub` (a test's or a
    /// benchmark's network, say).
    pub async fn on_network(
        node: Arc<Node>,
        config: &Config,
        options: HttpOptions,
        hub: Arc<Hub>,
    ) -> anyhow::Result<Server> {
        options.check()?;
        let serving = crate::web::control::claim(node.data_dir())?;
        let listener = bind(&options).await?;
        Server::assemble(serving, listener, node, config, options, Some(hub)).await
    }

    async fn assemble(
        serving: Serving,
        listener: TcpListener,
        node: Arc<Node>,
        config: &Config,
        options: HttpOptions,
        hub: Option<Arc<Hub>>,
    ) -> anyhow::Result<Server> {
        let address = listener.local_addr()?;
        // Every domain's families are described from the first scrape,
        // goals' and the network's also where those are missing.
        node.audit().section::<crate::goals::metrics::GoalMetrics>();
        node.audit()
            .section::<crate::hub::metrics::NetworkMetrics>();
        let hosted = Hosted::new(node.clone())?;
        let stop = CancellationToken::new();
        let watcher = tokio::spawn(hosted.clone().watch(stop.clone()));
        let node_file = NodeFile {
            api: format!("http://{}", reachable(address)),
            peer_id: hub
                .as_ref()
                .map(|hub| hub.peer_id().to_string())
                .unwrap_or_default(),
            addresses: match &hub {
                Some(hub) => hub
                    .network()
                    .addresses()
                    .await?
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
                None => Vec::new(),
            },
            pid: std::process::id(),
            config: config.source.as_deref().map(crate::web::control::absolute),
            policy: Some(crate::web::control::absolute(node.policy().path())),
        };
        // The command line finds the node by these files, on the network or not.
        let (node_files, control_token) = NodeFiles::write(node.data_dir(), &node_file)?;
        // Every surface takes the node's token or the command line's (whose
        // `agentsite mcp` relays to this node's MCP endpoint).
        let gate = options
            .gate(Family::OpenAi)
            .also_accepting(control_token.clone());
        let sessions = Sessions::new(
            options.token.clone(),
            address.port(),
            config.web.public_read,
        )?;
        let token_required = options.token.as_deref().is_some_and(|t| !t.is_empty());
        let mut router = crate::mcp::http::router(
            hosted.clone(),
            gate.clone(),
            stop.clone(),
            config.serve.mcp_session_dormant_after,
        )
        .merge(crate::v1::router(node.models().clone(), gate.clone()));
        router = router.merge(crate::web::api::node_router(
            node.clone(),
            hub.clone(),
            control_token.clone(),
        ));
        if let Some(hub) = &hub {
            router = router.merge(crate::web::api::router(hub.clone(), control_token.clone()));
        }

        let goals = Goals::for_node(&node, hub.clone(), config.goals.clone());
        let chats =
            Chats::open(node.clone(), hub.clone(), goals.as_ref().ok().cloned()).map_err(|e| {
                tracing::warn!("chat is unavailable on this node: {e}");
                format!("chat is unavailable on this node: {e}")
            });
        router = router.merge(match &chats {
            Ok(chats) => crate::chat::api::router(chats.clone(), gate.clone()),
            Err(why) => crate::chat::api::unavailable(why.clone(), gate.clone()),
        });
        router = router.merge(crate::web::site::router(Site::new(
            node.clone(),
            hub.clone(),
            sessions,
            chats,
        )));
        // The cards are signed with the node's identity, which also
        // names it on the network.
        let signer = crate::net::identity::load_or_create(&node.data_dir().identity())
            .map_err(|e| tracing::warn!("the A2A cards go unsigned: {e:#}"))
            .ok();
        let a2a = A2a::new(
            hosted.clone(),
            goals.as_ref().ok().cloned(),
            token_required,
            signer,
        );
        router = router.merge(crate::a2a::server::router(a2a, gate.clone()));
        router = router.merge(match goals {
            Ok(goals) => {
                hosted.offer_goals(goals.clone());
                crate::goals::api::router(goals, gate)
            }
            // Another node serving the same data directory holds the goals:
            // this one serves everything else and says why goals are missing.
            Err(e) => {
                tracing::warn!("goals are unavailable on this node: {e:#}");
                crate::goals::api::unavailable(format!("{e:#}"), gate)
            }
        });
        Ok(Server {
            listener,
            address,
            router,
            rules: Arc::new(options.rules()),
            connections: options.connections,
            hosted,
            hub,
            p2p_addresses: node_file.addresses,
            stop,
            watcher,
            _node_files: node_files,
            _serving: serving,
        })
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// How many agents it serves now.
    pub fn agents(&self) -> usize {
        self.hosted.records().len()
    }

    /// What it serves: told of a change to the catalog, it serves it at
    /// once instead of at its next look.
    pub fn hosted(&self) -> Arc<Hosted> {
        self.hosted.clone()
    }

    /// The node on the network, when it joined one.
    pub fn hub(&self) -> Option<&Arc<Hub>> {
        self.hub.as_ref()
    }

    /// The addresses it listens on for other nodes (none off the network).
    pub fn p2p_addresses(&self) -> &[String] {
        &self.p2p_addresses
    }

    /// Cancelling it stops the server: connections finish their requests.
    pub fn stopper(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Serves until stopped, then leaves the network.
    pub async fn serve(self) -> anyhow::Result<()> {
        let served = connections::serve(
            self.listener,
            self.router,
            self.rules,
            self.connections,
            self.stop.clone(),
        )
        .await;
        self.stop.cancel();
        let _ = self.watcher.await;
        if let Some(hub) = self.hub {
            hub.network().shutdown().await;
        }
        served
    }
}

/// The listener `options` ask for, once they pass their own check (no
/// public address without a token).
async fn bind(options: &HttpOptions) -> anyhow::Result<TcpListener> {
    options.check()?;
    TcpListener::bind(options.listen).await.map_err(|e| {
        crate::http::options::cannot_listen(&options.listen.to_string(), &e, "--listen")
    })
}

/// An address the command line on this machine reaches `address` at.
fn reachable(address: SocketAddr) -> SocketAddr {
    if address.ip().is_unspecified() {
        SocketAddr::new(Ipv4Addr::LOCALHOST.into(), address.port())
    } else {
        address
    }
}
