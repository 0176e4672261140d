//! Hostile peers against a node's network side (`support::hostile_peer`):
//! libp2p swarms of the test's own that flood a relay with reservations and
//! circuits from many peer ids at one host, aim AutoNAT dial-backs at a
//! third party, advertise ten thousand addresses and identify themselves
//! with huge protocol lists and long names. Each test names the bound that
//! holds; the README's hostile-suite section lists them.

use crate::support;

use agentsite::net::dht::ADDRESSES_PER_PEER;
use agentsite::net::reach::RelayLimits;
use futures::StreamExt as _;
use libp2p::multiaddr::Protocol;
use libp2p::swarm::SwarmEvent;
use libp2p::{autonat, identify, kad};
use support::hostile_peer::{
    Answer, Disguise, Hostile, HostileBehaviourEvent, STEP, Target, in_routing_table, listed,
    target,
};

/// Peer ids one host runs in the floods: more than any per-host limit.
const PEER_IDS: usize = 40;

/// Where the hostile peers listen, and so the host they dial from (a
/// dial leaves from the listening port): the flooding host, 127.0.0.1,
/// and another, IPv6's loopback.
const AT_ONE_HOST: &str = "/ip4/127.0.0.1/tcp/0";
const AT_ANOTHER_HOST: &str = "/ip6/::1/tcp/0";

/// Asks `ask` of the relay `target` from [`PEER_IDS`] peer ids at one host,
/// then from a peer at another: how many of the flood's asks were granted,
/// and what the other peer was answered. The flood stays connected (what
/// it was granted lives on) until the other peer has asked.
async fn flood_then_another_host(
    target: &Target,
    mut ask: impl AsyncFnMut(&mut Hostile, &libp2p::Multiaddr) -> Answer,
) -> (usize, Answer) {
    let mut flood = Vec::new();
    let mut granted = 0;
    for _ in 0..PEER_IDS {
        let mut peer = Hostile::start(AT_ONE_HOST, Disguise::default()).await;
        peer.connect(&target.address).await;
        if ask(&mut peer, &target.address).await == Answer::Granted {
            granted += 1;
        }
        flood.push(peer);
    }
    let mut other = Hostile::start(AT_ANOTHER_HOST, Disguise::default()).await;
    other.connect(&target.address6).await;
    (granted, ask(&mut other, &target.address6).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_grants_one_host_its_share_of_reservations_whatever_its_peer_ids() {
    let target = target().await;
    let (granted, other) =
        flood_then_another_host(&target, async |peer, relay| peer.reserve(relay).await).await;
    assert_eq!(
        granted,
        RelayLimits::default().reservations_per_ip,
        "one host's peer ids were granted {granted} reservations"
    );
    // A node behind a NAT at another host still gets its reservation.
    assert_eq!(other, Answer::Granted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_opens_one_host_its_share_of_circuits_whatever_its_peer_ids() {
    let target = target().await;
    // Circuits to a peer that holds no reservation: past the relay's
    // limits it says so ("resource limit exceeded"), within them that it
    // has no reservation for the destination.
    let nobody = libp2p::PeerId::random();
    let (granted, other) = flood_then_another_host(&target, async |peer, relay| {
        peer.open_circuit(relay, nobody).await
    })
    .await;
    assert_eq!(
        granted,
        RelayLimits::default().circuits_per_ip,
        "one host's peer ids were let through for {granted} circuits"
    );
    assert_eq!(other, Answer::Granted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_dials_out_while_another_program_holds_its_port_at_another_address() {
    let target = target().await;
    // Linux lets a program at 127.0.0.2 take the port the node listens on
    // at 127.0.0.1; libp2p's port-reusing dial collided with it, and every
    // dial of the node failed ("Address already in use", `net::tcp`).
    let port = target
        .address
        .iter()
        .find_map(|p| match p {
            Protocol::Tcp(port) => Some(port),
            _ => None,
        })
        .unwrap();
    let _elsewhere =
        std::net::TcpListener::bind(("127.0.0.2", port)).expect("127.0.0.2 takes the node's port");
    let mut peer = Hostile::start(AT_ONE_HOST, Disguise::default()).await;
    target
        .network
        .dial(peer.address.clone())
        .await
        .expect("the dial starts");
    peer.run_until(|event| {
        matches!(event, SwarmEvent::ConnectionEstablished { peer_id, .. } if *peer_id == target.peer_id)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autonat_dials_back_only_the_address_the_asker_is_connected_from() {
    let target = target().await;
    // A third party at another loopback address, counting who dials it.
    let victim = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let victim_port = victim.local_addr().unwrap().port();
    let dialed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counting = {
        let dialed = dialed.clone();
        tokio::spawn(async move {
            while victim.accept().await.is_ok() {
                dialed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        })
    };

    let mut asker = Hostile::start(AT_ONE_HOST, Disguise::default()).await;
    asker.connect(&target.address).await;
    let third_party: libp2p::Multiaddr =
        format!("/ip4/127.0.0.2/tcp/{victim_port}").parse().unwrap();
    let own: libp2p::Multiaddr = asker
        .address
        .iter()
        .filter(|p| !matches!(p, Protocol::P2p(_)))
        .collect();
    asker
        .swarm
        .behaviour_mut()
        .candidates
        .0
        .extend([third_party.clone(), own.clone()]);
    let mut results = std::collections::HashMap::new();
    while results.len() < 2 {
        if let SwarmEvent::Behaviour(HostileBehaviourEvent::Autonat(autonat::v2::client::Event {
            tested_addr,
            result,
            ..
        })) = asker
            .run_until(|event| {
                matches!(
                    event,
                    SwarmEvent::Behaviour(HostileBehaviourEvent::Autonat(_))
                )
            })
            .await
        {
            results.insert(tested_addr, result.is_ok());
        }
    }
    // Its own address is dialed back (the server works), the third
    // party's is refused and never dialed.
    assert_eq!(results.get(&own), Some(&true), "{results:?}");
    assert_eq!(results.get(&third_party), Some(&false), "{results:?}");
    assert_eq!(dialed.load(std::sync::atomic::Ordering::SeqCst), 0);
    counting.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_advertising_ten_thousand_addresses_is_kept_and_passed_on_with_a_few() {
    let target = target().await;
    let mut liar = Hostile::start(
        AT_ONE_HOST,
        Disguise {
            dht_server: true,
            ..Disguise::default()
        },
    )
    .await;
    liar.connect(&target.address).await;
    in_routing_table(&target, liar.peer_id).await;
    // Ten thousand addresses in identify pushes of 250 (one push holds
    // about 300 at most: identify messages are 4 KiB), each push naming
    // new ones. Port 9 on 127.1.x.y: a dial there is refused at once.
    let address = |n: usize| -> libp2p::Multiaddr {
        format!("/ip4/127.1.{}.{}/tcp/9", n / 250, n % 250)
            .parse()
            .unwrap()
    };
    let mut said: Vec<libp2p::Multiaddr> = Vec::new();
    for batch in 0..40 {
        for old in said.drain(..) {
            liar.swarm.remove_external_address(&old);
        }
        for n in batch * 250..(batch + 1) * 250 {
            liar.swarm.add_external_address(address(n));
            said.push(address(n));
        }
        liar.swarm.behaviour_mut().identify.push([target.peer_id]);
        liar.run_until(|event| {
            matches!(
                event,
                SwarmEvent::Behaviour(HostileBehaviourEvent::Identify(
                    identify::Event::Pushed { .. }
                ))
            )
        })
        .await;
    }
    let kept = listed(&target, liar.peer_id)
        .await
        .expect("the liar is listed");
    assert!(kept.addresses.len() <= ADDRESSES_PER_PEER, "{kept:?}");
    // Gone: the asker's dials to it are refused at once.
    let liar = {
        let id = liar.peer_id;
        drop(liar);
        id
    };

    // Ask the target, as any peer may, for the peers closest to the liar:
    // it answers with what its routing table holds, and the asker (plain
    // libp2p Kademlia) dials the liar at every address it was given.
    let mut asker = Hostile::start(AT_ONE_HOST, Disguise::default()).await;
    asker.connect(&target.address).await;
    asker
        .swarm
        .behaviour_mut()
        .kad
        .add_address(&target.peer_id, target.address.clone());
    asker.swarm.behaviour_mut().kad.get_closest_peers(liar);
    let mut heard = std::collections::HashSet::new();
    asker
        .run_until(|event| match event {
            SwarmEvent::OutgoingConnectionError {
                peer_id: Some(peer),
                error: libp2p::swarm::DialError::Transport(attempts),
                ..
            } => {
                if *peer == liar {
                    heard.extend(attempts.iter().map(|(address, _)| address.clone()));
                }
                false
            }
            SwarmEvent::Behaviour(HostileBehaviourEvent::Kad(
                kad::Event::OutboundQueryProgressed {
                    result: kad::QueryResult::GetClosestPeers(_),
                    step,
                    ..
                },
            )) => step.last,
            _ => false,
        })
        .await;
    assert!(!heard.is_empty(), "the target did not name the liar");
    assert!(
        heard.len() <= ADDRESSES_PER_PEER,
        "the target passed on {} addresses of the liar",
        heard.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identify_with_a_huge_protocol_list_or_a_long_name_is_cut_short() {
    let target = target().await;
    // Ten thousand protocols: an identify message of about 150 KiB, past
    // identify's 4 KiB. The target takes nothing of it.
    let mut claims = Hostile::start(
        AT_ONE_HOST,
        Disguise {
            claimed_protocols: 10_000,
            ..Disguise::default()
        },
    )
    .await;
    claims.connect(&target.address).await;

    // A name of a thousand characters, with terminal escapes and line
    // breaks: kept short and printable.
    let mut named = Hostile::start(
        AT_ONE_HOST,
        Disguise {
            name: format!("\u{1b}[2J\u{1b}[31mrelay\r\n{}", "A".repeat(1000)),
            ..Disguise::default()
        },
    )
    .await;
    named.connect(&target.address).await;
    // The target's side of identify may land after the hostile's.
    let deadline = tokio::time::Instant::now() + STEP;
    let name = loop {
        let kept = listed(&target, named.peer_id).await;
        if let Some(name) = kept.and_then(|p| p.agent_version) {
            break name;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the name never came"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(name.chars().count() <= 64, "{name}");
    assert!(!name.chars().any(char::is_control), "{name:?}");
    assert!(name.starts_with("[2J[31mrelayAAA"), "{name}");

    // By now the target has read the first peer's identify, which began
    // before the second peer connected: it kept nothing of it, and still
    // has the peer connected.
    let kept = listed(&target, claims.peer_id)
        .await
        .expect("it stays connected");
    assert_eq!(kept.agent_version, None, "{kept:?}");
    assert!(!kept.agentsite);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_named_with_many_addresses_in_kademlia_answers_is_dialed_at_a_few() {
    let target = target().await;
    // Forty listeners on loopback, each counting the connections it gets
    // (and closing them: they speak no libp2p, so each dial fails at once).
    const NAMED: usize = 40;
    let dialed = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
    let mut addresses = Vec::new();
    let mut listeners = Vec::new();
    for n in 0..NAMED {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        addresses.push(
            format!("/ip4/127.0.0.1/tcp/{port}")
                .parse::<libp2p::Multiaddr>()
                .unwrap(),
        );
        let dialed = dialed.clone();
        listeners.push(tokio::spawn(async move {
            while let Ok((connection, _)) = listener.accept().await {
                dialed.lock().unwrap().insert(n);
                drop(connection);
            }
        }));
    }
    // A DHT server that answers every lookup with one peer (made up) at
    // all forty addresses.
    let mut liar = Hostile::start(
        AT_ONE_HOST,
        Disguise {
            dht_server: true,
            ..Disguise::default()
        },
    )
    .await;
    let made_up = libp2p::PeerId::random();
    for address in &addresses {
        liar.swarm
            .behaviour_mut()
            .kad
            .add_address(&made_up, address.clone());
    }
    liar.connect(&target.address).await;
    let liar_id = liar.peer_id;
    let liar_driven = tokio::spawn(async move {
        loop {
            liar.swarm.select_next_some().await;
        }
    });
    // Once the target has the liar in its routing table (it learns so from
    // identify), a lookup asks the liar, hears of the made-up peer and
    // dials it.
    in_routing_table(&target, liar_id).await;
    let lookup = tokio::time::timeout(
        STEP * 2,
        target
            .network
            .providers(kad::RecordKey::new(&"anything at all"), 1),
    )
    .await
    .expect("the lookup ends in time");
    let dialed = dialed.lock().unwrap().len();
    assert!(dialed > 0, "the made-up peer was never dialed ({lookup:?})");
    assert!(
        dialed <= ADDRESSES_PER_PEER,
        "the target dialed {dialed} of the made-up peer's addresses"
    );
    liar_driven.abort();
    for listener in listeners {
        listener.abort();
    }
}
