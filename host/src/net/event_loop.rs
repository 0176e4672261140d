//! The one task that owns the swarm: turns commands from [`Network`] handles
//! into swarm calls, and swarm events into answers, stored records and
//! announcements. The loop only routes: each concern keeps its own state in
//! a file beside it ([`publishing`], [`lookups`], [`requests`], the
//! [`peer_table`] and [`relays`]).
//!
//! [`Network`]: super::Network
//! [`publishing`]: super::publishing
//! [`lookups`]: super::lookups
//! [`requests`]: super::requests
//! [`peer_table`]: super::peer_table
//! [`relays`]: super::relays

use super::behaviour::{Behaviour, BehaviourEvent};
use super::command::Command;
use super::listeners;
use super::lookups::Lookups;
use super::peer_table::PeerTable;
use super::publishing::Publishing;
use super::relays::Relays;
use super::requests::{Answer, Requests};
use super::{Library, NetConfig, NetError, dht, gossip, mesh, one_host, strikes};
use futures::StreamExt as _;
use libp2p::identity::Keypair;
use libp2p::kad;
use libp2p::multiaddr::Protocol;
use libp2p::swarm::{
    DialError, SwarmEvent,
    dial_opts::{DialOpts, PeerCondition},
};
use libp2p::{Multiaddr, PeerId, Swarm, gossipsub, identify, mdns, relay};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

pub(super) struct EventLoop {
    swarm: Swarm<Behaviour>,
    library: Arc<dyn Library>,
    commands: mpsc::Receiver<Command>,
    answered: mpsc::UnboundedReceiver<Answer>,
    publishing: Publishing,
    lookups: Lookups,
    requests: Requests,
    peers: PeerTable,
    relays: Relays,
    listen_addresses: Vec<Multiaddr>,
    /// Peers that left DHT requests unanswered, and those avoided for it.
    strikes: strikes::Strikes,
}

impl EventLoop {
    /// Listens, dials the bootstrap peers, and spawns the loop once every
    /// listener has an address.
    pub(super) async fn start(
        mut swarm: Swarm<Behaviour>,
        keypair: Keypair,
        config: NetConfig,
        library: Arc<dyn Library>,
        commands: mpsc::Receiver<Command>,
    ) -> anyhow::Result<()> {
        let interfaces = listeners::interface_addresses();
        let mut startup = listeners::Startup::default();
        for address in &config.listen {
            listeners::refuse_if_taken(address)?;
            let listener = swarm
                .listen_on(address.clone())
                .map_err(|e| anyhow::anyhow!("cannot listen on {address}: {e}"))?;
            startup.opened(listener, address, &interfaces);
        }
        let (requests, answered) = Requests::new(library.clone(), keypair.clone());
        let mut event_loop = EventLoop {
            swarm,
            publishing: Publishing::new(keypair, library.clone()),
            library,
            commands,
            answered,
            lookups: Lookups::new(config.bootstrap.is_empty() && !config.mdns),
            requests,
            peers: PeerTable::default(),
            relays: Relays::new(config.reachability, config.relay_service),
            listen_addresses: Vec::new(),
            strikes: strikes::Strikes::default(),
        };
        // The relay service's status is the node's to set, not the
        // external addresses' (every listen address counts as one).
        event_loop.reachability_changed();
        event_loop.wait_for_listeners(startup).await?;
        for address in &config.bootstrap {
            event_loop.join_through(address.clone())?;
        }
        let me = *event_loop.swarm.local_peer_id();
        for address in config.remembered {
            if address.iter().last() == Some(Protocol::P2p(me)) {
                continue;
            }
            if let Err(e) = event_loop.join_through(address) {
                tracing::debug!("{e}");
            }
        }
        tokio::spawn(event_loop.run());
        Ok(())
    }

    /// Waits until every listener has reported its addresses (see
    /// [`listeners`]), so that what the node says it listens on is whole.
    /// A listener with no address within 10 s is an error; one that has
    /// some but not yet each interface's within 3 s more (an interface went
    /// away since they were read, say) is left to report the rest later.
    async fn wait_for_listeners(&mut self, mut startup: listeners::Startup) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut rest_by = None;
        while !startup.complete() {
            if rest_by.is_none() && startup.each_has_an_address() {
                rest_by = Some(tokio::time::Instant::now() + Duration::from_secs(3));
            }
            let event = match tokio::time::timeout_at(
                rest_by.unwrap_or(deadline),
                self.swarm.select_next_some(),
            )
            .await
            {
                Ok(event) => event,
                Err(_) if rest_by.is_some() => {
                    tracing::debug!("not every interface's listen address reported at start");
                    break;
                }
                Err(_) => anyhow::bail!("the network listeners did not start within 10 s"),
            };
            match &event {
                SwarmEvent::NewListenAddr {
                    listener_id,
                    address,
                } => startup.reported(*listener_id, address),
                SwarmEvent::ListenerError { error, .. } => {
                    anyhow::bail!("cannot listen: {error}");
                }
                SwarmEvent::ListenerClosed {
                    reason: Err(error), ..
                } => {
                    anyhow::bail!("cannot listen: {error}");
                }
                _ => {}
            }
            self.on_swarm_event(event);
        }
        Ok(())
    }

    /// Adds a bootstrap address and dials it.
    fn join_through(&mut self, address: Multiaddr) -> anyhow::Result<()> {
        if let Some(Protocol::P2p(peer)) = address.iter().last() {
            let mut bare = address.clone();
            bare.pop();
            dht::learn(&mut self.swarm.behaviour_mut().kad, peer, bare);
        }
        self.swarm
            .dial(address.clone())
            .map_err(|e| anyhow::anyhow!("cannot dial bootstrap peer {address}: {e}"))
    }

    async fn run(mut self) {
        let mut mesh_check = tokio::time::interval(mesh::CHECK_EVERY);
        mesh_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                event = self.swarm.select_next_some() => self.on_swarm_event(event),
                due = mesh_check.tick() => {
                    let now = std::time::Instant::now();
                    self.strikes.checked(due.into_std(), now, now + mesh::CHECK_EVERY);
                    self.supply_gossip_mesh();
                    self.relays.seek(&mut self.swarm, &self.peers);
                }
                command = self.commands.recv() => match command {
                    Some(Command::Shutdown { reply }) => {
                        self.linger().await;
                        let _ = reply.send(());
                        break;
                    }
                    Some(command) => self.on_command(command),
                    None => break,
                },
                Some(answer) = self.answered.recv() => self.requests.send_answer(&mut self.swarm, answer),
            }
        }
        tracing::debug!("network task stopped");
    }

    /// Drives the connections until a while after the last provider
    /// announcement (see [`Publishing::linger_until`]), so that its
    /// messages are sent and read before the node leaves.
    async fn linger(&mut self) {
        let Some(until) = self.publishing.linger_until() else {
            return;
        };
        let deadline = tokio::time::sleep_until(until);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                event = self.swarm.select_next_some() => self.on_swarm_event(event),
                _ = &mut deadline => return,
            }
        }
    }

    /// Dials routing-table peers when gossip has too few to build its mesh
    /// from (see [`mesh`]).
    fn supply_gossip_mesh(&mut self) {
        let behaviour = self.swarm.behaviour_mut();
        let in_mesh = behaviour
            .gossip
            .0
            .mesh_peers(&gossip::topic().hash())
            .count();
        let wanted = mesh::shortfall(in_mesh);
        if wanted == 0 {
            return;
        }
        let connected: HashSet<PeerId> = behaviour.gossip.0.all_peers().map(|(p, _)| *p).collect();
        let mut known = dht::routing_table(&mut behaviour.kad);
        known.retain(|peer| !connected.contains(peer));
        let start = getrandom::u64().unwrap_or(0) as usize;
        for peer in mesh::peers_to_dial(wanted, &known, start) {
            let dial = DialOpts::peer_id(peer)
                .condition(PeerCondition::DisconnectedAndNotDialing)
                .build();
            if let Err(e) = self.swarm.dial(dial) {
                tracing::debug!(%peer, "cannot dial a gossip candidate: {e}");
            }
        }
    }

    fn on_command(&mut self, command: Command) {
        let swarm = &mut self.swarm;
        match command {
            Command::Addresses { reply } => {
                let me = *swarm.local_peer_id();
                let addresses = self
                    .listen_addresses
                    .iter()
                    .map(|a| a.clone().with(Protocol::P2p(me)))
                    .collect();
                let _ = reply.send(addresses);
            }
            Command::Reachability { reply } => {
                let _ = reply.send(self.relays.reachability(*swarm.local_peer_id()));
            }
            Command::Peers { reply } => {
                let _ = reply.send(self.peers.listing());
            }
            Command::Dial { address, reply } => {
                let result = self
                    .join_through(address)
                    .map_err(|e| NetError::Dht(e.to_string()));
                let _ = reply.send(result);
            }
            Command::RoutingTableSize { reply } => {
                let kad = &mut swarm.behaviour_mut().kad;
                let _ = reply.send(dht::routing_table_size(kad));
            }
            Command::PreferDirect { peer, reply } => {
                let _ = reply.send(self.prefer_direct(peer));
            }
            Command::RoutingTable { reply } => {
                let _ = reply.send(dht::routing_table(&mut swarm.behaviour_mut().kad));
            }
            Command::Joined { reply } => self.lookups.when_joined(reply),
            Command::Publish { manifest, reply } => {
                self.publishing.publish(swarm, *manifest, reply)
            }
            Command::Announce { manifest, reply } => {
                let _ = reply.send(self.publishing.announce(swarm, &manifest));
            }
            Command::Provide { keys, reply } => self.publishing.provide(swarm, keys, reply),
            Command::Providers { key, want, reply } => {
                self.lookups.providers(swarm, key, want, reply)
            }
            Command::Manifest { id, reply } => self.lookups.manifest(swarm, id, reply),
            Command::Fetch {
                peer,
                request,
                reply,
            } => self.requests.fetch(swarm, peer, request, reply),
            Command::Rpc {
                peer,
                message,
                reply,
            } => self.requests.call(swarm, peer, message, reply),
            Command::Penalise { peer, reason } => self.block(peer, &reason),
            Command::Shutdown { .. } => unreachable!("handled by run"),
        }
    }

    fn reachability_changed(&mut self) {
        self.relays.changed(&mut self.swarm, &self.peers);
    }

    /// Closes the relayed connections to `peer` if it has a direct one, so
    /// that what is sent to it next goes direct; whether it has one.
    fn prefer_direct(&mut self, peer: PeerId) -> bool {
        let Some(relayed) = self.peers.relayed_beside_direct(&peer) else {
            return false;
        };
        for connection in relayed {
            tracing::debug!(%peer, "closing a relayed connection: a direct one is open");
            self.swarm.close_connection(connection);
        }
        true
    }

    /// Adds `peer` at `address` to the routing table, unless it is being
    /// avoided (see [`dht::learn`] for when a bucket has room).
    fn learn(&mut self, peer: PeerId, address: Multiaddr) {
        if self.strikes.is_avoided(&peer, std::time::Instant::now()) {
            return;
        }
        dht::learn(&mut self.swarm.behaviour_mut().kad, peer, address);
    }

    /// A dial to `peer` failed: a peer that could not be reached at any of
    /// its addresses, or was another peer there, leaves the routing table,
    /// so that a node that left stops taking a place in a bucket and a path
    /// in lookups. Not while this node has no connection at all: then the
    /// fault is more likely its own, and a table emptied by it would leave
    /// the node nobody to rejoin through. A peer that comes back is learned
    /// again when it connects.
    fn dial_failed(&mut self, peer: PeerId, error: &DialError) {
        let gone = matches!(
            error,
            DialError::Transport(_) | DialError::WrongPeerId { .. } | DialError::NoAddresses
        );
        if gone && !self.swarm.is_connected(&peer) && self.swarm.connected_peers().next().is_some()
        {
            tracing::debug!(%peer, "unreachable: out of the routing table ({error})");
            self.swarm.behaviour_mut().kad.remove_peer(&peer);
        }
    }

    fn block(&mut self, peer: PeerId, reason: &str) {
        tracing::warn!(%peer, "blocking peer: {reason}");
        let behaviour = self.swarm.behaviour_mut();
        behaviour.blocked.block_peer(peer);
        behaviour.kad.remove_peer(&peer);
        self.peers.forget(&peer);
    }

    fn on_swarm_event(&mut self, event: SwarmEvent<BehaviourEvent>) {
        match event {
            SwarmEvent::NewListenAddr { address, .. } => {
                tracing::info!("listening on {address}");
                self.relays.listening(&mut self.swarm, &address);
                self.listen_addresses.push(address);
            }
            SwarmEvent::ExpiredListenAddr { address, .. } => {
                self.swarm.remove_external_address(&address);
                self.listen_addresses.retain(|a| *a != address);
            }
            SwarmEvent::ConnectionEstablished {
                peer_id,
                connection_id,
                endpoint,
                ..
            } => {
                self.peers.connected(peer_id, connection_id, &endpoint);
                self.library.connections_changed(self.peers.len());
            }
            SwarmEvent::ConnectionClosed {
                peer_id,
                connection_id,
                num_established,
                ..
            } => {
                let last = num_established == 0;
                self.peers.closed(peer_id, connection_id, last);
                if last {
                    self.library.connections_changed(self.peers.len());
                }
            }
            SwarmEvent::ListenerClosed {
                listener_id,
                reason,
                ..
            } => {
                let why = reason.err().map(|e| e.to_string());
                self.relays
                    .listener_closed(&mut self.swarm, &self.peers, listener_id, why);
            }
            SwarmEvent::ExternalAddrExpired { address } => {
                self.relays.expired(&mut self.swarm, &self.peers, &address);
            }
            SwarmEvent::OutgoingConnectionError {
                peer_id: Some(peer),
                error,
                ..
            } => {
                self.peers.direct_dial_failed(&peer, &error);
                self.dial_failed(peer, &error);
            }
            SwarmEvent::Behaviour(event) => self.on_behaviour_event(event),
            _ => {}
        }
    }

    fn on_behaviour_event(&mut self, event: BehaviourEvent) {
        match event {
            BehaviourEvent::Kad(strikes::Event::Kad(event)) => self.on_kad_event(event),
            BehaviourEvent::Kad(strikes::Event::Unanswered(peer)) => {
                if self.strikes.strike(peer, std::time::Instant::now()) {
                    tracing::info!(
                        %peer,
                        "avoiding peer for {} min: it left {} DHT requests unanswered",
                        strikes::AVOID_FOR.as_secs() / 60,
                        strikes::STRIKES_TO_AVOID
                    );
                    self.swarm.behaviour_mut().kad.remove_peer(&peer);
                }
            }
            BehaviourEvent::Gossip(event) => self.on_gossip_event(event),
            BehaviourEvent::Identify(identify::Event::Received {
                peer_id,
                connection_id,
                info,
            }) => self.identified(peer_id, connection_id, info),
            BehaviourEvent::Identify(identify::Event::Pushed { peer_id, info, .. }) => {
                tracing::debug!(
                    %peer_id,
                    "told it what this node offers: {}",
                    info.protocols.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ")
                );
            }
            BehaviourEvent::Identify(identify::Event::Error { peer_id, error, .. }) => {
                tracing::debug!(%peer_id, "identify failed: {error}");
            }
            BehaviourEvent::Identify(_) => {}
            BehaviourEvent::Fetch(event) => self.requests.on_fetch_event(&mut self.swarm, event),
            BehaviourEvent::Rpc(event) => self.requests.on_rpc_event(&mut self.swarm, event),
            BehaviourEvent::Mdns(mdns::Event::Discovered(found)) => {
                for (peer, address) in found {
                    self.learn(peer, address.clone());
                    let _ = self
                        .swarm
                        .dial(DialOpts::peer_id(peer).addresses(vec![address]).build());
                }
            }
            BehaviourEvent::Mdns(_) => {}
            BehaviourEvent::Blocked(never) => match never {},
            BehaviourEvent::Autonat(event) => {
                self.relays.tested(&mut self.swarm, &self.peers, event)
            }
            BehaviourEvent::AutonatServer(event) => {
                tracing::debug!(
                    client = %event.client,
                    "dial-back to {}: {:?}",
                    event.tested_addr,
                    event.result
                );
            }
            BehaviourEvent::RelayClient(relay::client::Event::ReservationReqAccepted {
                relay_peer_id,
                renewal,
                ..
            }) => self.relays.accepted(relay_peer_id, renewal),
            BehaviourEvent::RelayClient(event) => tracing::debug!("relay client: {event:?}"),
            BehaviourEvent::Relay(event) => tracing::debug!("relay service: {event:?}"),
            BehaviourEvent::Dcutr(event) => {
                let failed = event.result.is_err();
                match event.result {
                    Ok(_) => tracing::info!(
                        peer = %event.remote_peer_id,
                        "relayed connection upgraded to a direct one"
                    ),
                    Err(e) => tracing::debug!(peer = %event.remote_peer_id, "{e}"),
                }
                self.peers.hole_punched(&event.remote_peer_id, failed);
            }
        }
    }

    /// A peer identified itself: what it offers and where it listens.
    fn identified(
        &mut self,
        peer_id: PeerId,
        connection_id: libp2p::swarm::ConnectionId,
        info: identify::Info,
    ) {
        self.relays.dialed_in(
            &mut self.swarm,
            &self.peers,
            (peer_id, connection_id),
            &info.observed_addr,
        );
        let speaks_dht = info.protocols.contains(&dht::PROTOCOL);
        // A node behind a NAT serves the DHT as a client only: still an
        // agentsite node.
        let agentsite = speaks_dht || info.protocol_version == super::behaviour::PROTOCOL_VERSION;
        if !speaks_dht && agentsite {
            // It stopped answering DHT queries (it found itself
            // unreachable): peers must not be sent to it.
            self.swarm.behaviour_mut().kad.remove_peer(&peer_id);
        }
        if speaks_dht
            && let Some(ip) = self
                .swarm
                .behaviour_mut()
                .one_host
                .dht_server_past_limit(peer_id)
        {
            tracing::debug!(
                %peer_id,
                "disconnecting: already connected to {} DHT peers at {ip}",
                one_host::PEERS_PER_HOST
            );
            self.swarm.behaviour_mut().kad.remove_peer(&peer_id);
            let _ = self.swarm.disconnect_peer_id(peer_id);
            return;
        }
        if speaks_dht {
            // A peer's loopback addresses are this machine's unless it is
            // on this machine: not worth keeping, nor handing to others who
            // would dial themselves.
            let local_peer = self.peers.is_on_this_machine(&peer_id);
            for address in info.listen_addrs.iter().take(dht::ADDRESSES_PER_PEER) {
                if super::reach::is_loopback(address) && !local_peer {
                    continue;
                }
                self.learn(peer_id, address.clone());
            }
            self.lookups.met_dht_peer(&mut self.swarm);
        }
        tracing::debug!(%peer_id, "identified; it sees this node at {}", info.observed_addr);
        self.peers.identified(&peer_id, &info, agentsite);
        self.relays.seek(&mut self.swarm, &self.peers);
    }

    fn on_kad_event(&mut self, event: kad::Event) {
        match event {
            // A connected peer speaks the DHT and can be reached at `address`.
            kad::Event::RoutablePeer { peer, address }
            | kad::Event::PendingRoutablePeer { peer, address } => {
                self.learn(peer, address);
            }
            kad::Event::OutboundQueryProgressed {
                id,
                result,
                stats,
                step,
            } => {
                let swarm = &mut self.swarm;
                let Some(result) =
                    self.publishing
                        .progressed(swarm, id, result, step.last, &self.strikes)
                else {
                    return;
                };
                if let Some((liar, why)) =
                    self.lookups
                        .progressed(swarm, id, result, stats, step.last, &self.strikes)
                {
                    self.block(liar, &why);
                }
            }
            kad::Event::InboundRequest { request } => {
                let kad = &mut self.swarm.behaviour_mut().kad;
                if let Err((liar, why)) = dht::on_inbound(kad.store_mut(), request) {
                    self.block(liar, &why);
                }
            }
            _ => {}
        }
    }

    fn on_gossip_event(&mut self, event: gossipsub::Event) {
        if let Some(heard) = gossip::received(&mut self.swarm.behaviour_mut().gossip.0, event) {
            self.library.announced(heard.manifest, heard.host);
        }
    }
}
