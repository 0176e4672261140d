//! The network of nodes, tested with real `agentsite serve` processes on
//! loopback: publish, search, fetch, remote calls and delegation between
//! agents on different nodes.

use crate::support;

use serde_json::json;
use std::time::Duration;
use support::{Cli, Server, eventually, eventually_async, mcp_call};

fn join(cli: &Cli, bootstrap: Option<&Server>) -> Server {
    Server::join(cli.data(), bootstrap)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_in_a_chain_publish_find_fetch_and_call() {
    let [a, b, c, d, e] = [(); 5].map(|_| Cli::new());
    let calculator = a.add(&["calculator"]).remove(0);
    c.add(&["text"]);
    d.add(&["accountant"]);
    d.grant("accountant", &["peers=2/4"]);

    // Each node knows only the one before it.
    let mut node_a = join(&a, None);
    let node_b = join(&b, Some(&node_a));
    let node_c = join(&c, Some(&node_b));
    let node_d = join(&d, Some(&node_c));
    let node_e = join(&e, Some(&node_d));

    // `id` reports the running node's identity and addresses.
    let id = e.run(&["id", "--json"]).json();
    assert_eq!(id["running"], true);
    assert!(
        node_e
            .p2p
            .as_deref()
            .unwrap()
            .ends_with(id["peer_id"].as_str().unwrap())
    );
    let peers = b.run(&["peers", "--json"]).json();
    assert!(
        peers.as_array().unwrap().len() >= 2,
        "B sees A and C: {peers}"
    );
    // The table says for each how long it has been connected, and who dialed:
    // B dialed A, its bootstrap peer, and C dialed B.
    let table = b.run(&["peers"]).success();
    assert!(table.contains("CONNECTED FOR"), "{table}");
    assert!(
        table.contains("s (dialed)") || table.contains("m (dialed)"),
        "{table}"
    );
    assert!(table.contains("(it dialed)"), "{table}");

    // A publishes; C publishes too.
    assert_eq!(
        a.run(&["publish", "calculator"]).success().trim(),
        calculator
    );
    c.run(&["publish", "text"]).success();

    // E, four hops from A, finds the calculator by keyword...
    let found = eventually(Duration::from_secs(30), "E finds the calculator", || {
        let found = e.run(&["search", "arithmetic", "--json"]).json();
        found
            .as_array()
            .and_then(|found| found.iter().find(|f| f["id"] == calculator.as_str()))
            .cloned()
            .ok_or(found)
    });
    assert_eq!(found["card"]["name"], "calculator");
    assert!(found["providers"].as_u64().unwrap() >= 1);
    let tools: Vec<&str> = found["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"add"), "{tools:?}");
    // ...and the table a person reads names it too.
    // It fits a terminal of 100 columns, with the id as `ls` shows it...
    let table = e.run(&["search", "math"]).success();
    let short = &calculator["sha256:".len()..][..12];
    assert!(
        table.contains("calculator") && table.contains(short),
        "{table}"
    );
    assert!(table.lines().all(|l| l.chars().count() <= 100), "{table}");
    // ...and whole when asked.
    let wide = e.run(&["search", "math", "--wide"]).success();
    assert!(wide.contains(&calculator), "{wide}");
    // The short id is enough to call it where it lives.
    let sum = e
        .run(&["call", short, "add", r#"{"a": 1, "b": 2}"#, "--remote"])
        .json();
    assert_eq!(sum["structuredContent"]["result"], 3.0, "{sum}");

    // E fetches it by id, verified, and calls its own copy.
    let fetched = e.run(&["fetch", &calculator]);
    assert_eq!(fetched.success().trim(), calculator);
    assert!(
        fetched.stderr().contains("verified"),
        "{}",
        fetched.stderr()
    );
    let sum = e.call("calculator", "add", r#"{"a": 20, "b": 22}"#).json();
    assert_eq!(sum["structuredContent"]["result"], 42.0);

    // A leaves; E's copy still answers.
    node_a.kill();
    let product = e
        .call("calculator", "multiply", r#"{"a": 6, "b": 7}"#)
        .json();
    assert_eq!(product["structuredContent"]["result"], 42.0);

    // B calls a tool of the text agent, which only C hosts.
    let upper = b
        .run(&["call", "text", "upper", r#"{"text": "planet"}"#, "--remote"])
        .json();
    assert_eq!(upper["content"][0]["text"], "PLANET", "{upper}");
    assert!(
        b.run(&["ls", "--json"])
            .json()
            .as_array()
            .unwrap()
            .is_empty()
    );

    // D's accountant does no arithmetic itself: it discovers a calculator
    // and calls it on another node (E now hosts the only live copy).
    let total = mcp_call(
        node_d.url("/mcp"),
        "accountant.total",
        json!({"amounts": [1.5, 2.5, 38]}),
    )
    .await;
    assert_eq!(total["total"], 42.0, "{total}");
    assert_eq!(total["calculator"], calculator.as_str());
    assert_eq!(total["calls"], 3);

    // B's call of C's text agent, checked: C signed a receipt of a
    // replayable call, and B, fetching the agent by hash and running it
    // itself, gets the same result.
    let checked = b
        .run(&[
            "call",
            "text",
            "upper",
            r#"{"text": "planet"}"#,
            "--remote",
            "--verify",
            "--json",
        ])
        .json();
    assert_eq!(checked["content"][0]["text"], "PLANET", "{checked}");
    let meta = &checked["_meta"];
    assert_eq!(meta["agentsite/receipt"]["replayable"], true, "{checked}");
    assert!(
        meta["agentsite/receipt"]["node"]
            .as_str()
            .is_some_and(|node| node.starts_with("did:key:z6Mk")),
        "{checked}"
    );
    assert_eq!(meta["agentsite/check"]["check"], "confirmed", "{checked}");
    // The receipt with the call's arguments and result is evidence any
    // node can check by running the agent; altered, it does not hold.
    let mut result = checked.clone();
    result.as_object_mut().unwrap().remove("_meta");
    let evidence = json!({
        "receipt": meta["agentsite/receipt"],
        "arguments": {"text": "planet"},
        "result": result,
    });
    let file = b.data().join("evidence.json");
    std::fs::write(&file, evidence.to_string()).unwrap();
    let holds = d.run(&["check-evidence", file.to_str().unwrap()]).success();
    assert!(holds.contains("the answer holds"), "{holds}");
    let mut altered = evidence.clone();
    altered["result"]["content"][0]["text"] = json!("PLANE");
    std::fs::write(&file, altered.to_string()).unwrap();
    d.run(&["check-evidence", file.to_str().unwrap()])
        .failure("not checked: the evidence does not hold: the receipt is for another result");

    drop((node_b, node_c, node_d, node_e));
}

#[test]
fn network_commands_need_a_running_node() {
    let cli = Cli::new();
    let run = cli.run(&["search", "math"]);
    run.failure("no node is running");
    let run = cli.run(&["fetch", "sha256:zz"]);
    run.failure("is not an agent id");
    // The identity exists before the node ever runs, and stays.
    let first = cli.run(&["id"]).success();
    let second = cli.run(&["id"]).success();
    assert_eq!(first, second);
    assert!(first.starts_with("12D3Koo"), "{first}");
}

#[test]
fn a_port_another_node_holds_is_refused_at_start_p2p_as_http() {
    let first = Cli::new();
    let node = Server::start(first.data(), &["--p2p-listen", "/ip4/127.0.0.1/tcp/0"]);
    // `/ip4/127.0.0.1/tcp/PORT/p2p/ID`: the same address without the id.
    let p2p = node.p2p.clone().expect("the node is on the network");
    let p2p = &p2p[..p2p.find("/p2p/").unwrap()];
    let http = node.base.trim_start_matches("http://").to_owned();
    let second = Cli::new();
    second
        .run(&["serve", "--listen", "127.0.0.1:0", "--p2p-listen", p2p])
        .failure(&format!(
            "cannot listen on {p2p}: the port is in use by another process (another `agentsite serve`?); stop it or choose another port with --p2p-listen"
        ));
    second
        .run(&["serve", "--listen", &http, "--no-p2p"])
        .failure(&format!(
            "cannot listen on {http}: the port is in use by another process (another `agentsite serve`?); stop it or choose another port with --listen"
        ));
    // The first node still holds its port.
    std::net::TcpStream::connect(&http).expect("the first node still listens");
    drop(node);
}

#[test]
fn the_start_banner_names_every_address_and_says_peers_are_open_on_the_defaults() {
    // A host of its own (a network namespace): the defaults listen for
    // peers on every interface, which here are its loopback and 203.0.113.1.
    let Some(mut internet) = support::netns::Internet::new() else {
        return;
    };
    let host = internet.public_host(1);
    let cli = Cli::new();
    let mut command = host.command(env!("CARGO_BIN_EXE_agentsite"));
    command
        .arg("--data-dir")
        .arg(cli.data())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("AGENTSITE_CONFIG")
        .env_remove("AGENTSITE_TOKEN");
    let node = Server::spawn(command, "banner");
    let log = eventually(Duration::from_secs(30), "the banner's last line", || {
        let log = node.log();
        match log.contains("  HTTP: ") {
            true => Ok(log),
            false => Err(log),
        }
    });
    let peer_id = node.peer_id().unwrap().to_owned();
    let listening = log
        .lines()
        .find(|line| line.starts_with("peer id "))
        .unwrap();
    for address in [
        "/ip4/127.0.0.1/tcp/4077",
        "/ip4/203.0.113.1/tcp/4077",
        "/ip4/127.0.0.1/udp/4077/quic-v1",
        "/ip4/203.0.113.1/udp/4077/quic-v1",
    ] {
        assert!(
            listening.contains(&format!("{address}/p2p/{peer_id}")),
            "{address} missing from {listening}"
        );
    }
    assert!(
        log.contains(
            "  peers: other machines can connect (/ip4/0.0.0.0/tcp/4077, /ip4/0.0.0.0/udp/4077/quic-v1); to keep peers on this machine: agentsite serve --p2p-listen /ip4/127.0.0.1/tcp/4077 --p2p-listen /ip4/127.0.0.1/udp/4077/quic-v1"
        ),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "at {}/mcp and the node's models at {}/v1",
            node.base, node.base
        )),
        "{log}"
    );
    assert!(log.contains("  HTTP: this machine only"), "{log}");
    drop(node);
    // Told to keep peers here, it says so.
    let here = Server::start(cli.data(), &["--p2p-listen", "/ip4/127.0.0.1/tcp/0"]);
    let log = eventually(Duration::from_secs(30), "the banner's last line", || {
        let log = here.log();
        match log.contains("  HTTP: ") {
            true => Ok(log),
            false => Err(log),
        }
    });
    assert!(log.contains("  peers: this machine only"), "{log}");
}

#[test]
fn a_second_node_on_one_data_directory_is_refused_with_the_first_ones_address() {
    let cli = Cli::new();
    let first = Server::start(cli.data(), &["--p2p-listen", "/ip4/127.0.0.1/tcp/0"]);
    let peer_id = first.p2p.as_deref().unwrap().rsplit('/').next().unwrap();
    // Another port and no network: only the data directory is shared.
    cli.run(&["serve", "--listen", "127.0.0.1:0", "--no-p2p"])
        .failure(&format!(
            "another agentsite node serves {} (pid {}) at {} as peer {peer_id}; stop it, or give this one another --data-dir",
            cli.data().display(),
            first.pid(),
            first.base,
        ));
    // The first one still serves, and the command line still finds it
    // (`peers` asks the running node, and says when none runs).
    cli.run(&["peers"]).success();
    drop(first);
    // Once it has stopped, the directory is free again.
    let second = Server::start(cli.data(), &[]);
    drop(second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_published_alone_is_announced_when_the_first_peer_comes() {
    let (a, b) = (Cli::new(), Cli::new());
    let calculator = a.add(&["calculator"]).remove(0);
    let node_a = join(&a, None);
    // Alone, the node says so plainly instead of warning.
    let published = a.run(&["publish", "calculator"]);
    assert_eq!(published.success().trim(), calculator);
    assert_eq!(
        published.stderr().trim(),
        "published calculator on this node; it has no peers yet, and announces it to the network when the first one connects"
    );
    // B joins; the calculator becomes known to it without another publish.
    let node_b = join(&b, Some(&node_a));
    let found = eventually(Duration::from_secs(30), "B finds the calculator", || {
        let found = b.run(&["search", "arithmetic", "--json"]).json();
        match found
            .as_array()
            .into_iter()
            .flatten()
            .any(|f| f["id"] == calculator.as_str())
        {
            true => Ok(found),
            false => Err(found),
        }
    });
    assert!(
        found
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["providers"].as_u64() >= Some(1)),
        "{found}"
    );
    // A announced it by gossip once B came: B's network page lists it
    // among what peers announced.
    let page = node_b.url("/network");
    eventually_async(
        Duration::from_secs(30),
        "B hears A's announcement",
        async || {
            let html = reqwest::get(&page)
                .await
                .map_err(|e| e.to_string())?
                .text()
                .await
                .map_err(|e| e.to_string())?;
            match html.contains(&calculator) {
                true => Ok(()),
                false => Err("not on B's network page yet".to_owned()),
            }
        },
    )
    .await;
    // Not installed on B, B's `call` says where it is.
    b.call("calculator", "add", r#"{"a": 1, "b": 2}"#).failure(&format!(
        "no installed agent matches \"calculator\"; the network has an agent of that name: `agentsite call --remote calculator …` runs it where it lives, `agentsite fetch {calculator}` installs it here"
    ));
    // With a peer, publishing reports what the network confirmed, in words.
    let again = a.run(&["publish", "calculator"]);
    let said = again.stderr();
    assert!(
        said.starts_with("published calculator: manifest stored on 1 peer, found by ")
            && !said.contains("arithmet,"),
        "{said}"
    );
    drop((node_a, node_b));
}

/// Two nodes on loopback find out that each can dial the other (AutoNAT:
/// each asks the other to dial it back), and `id` says so. A node
/// restarted with no bootstrap peer rejoins through the peers it knew, and
/// a bootstrap peer may be named by DNS.
#[test]
fn nodes_learn_they_are_reachable_and_a_restarted_node_rejoins_through_the_peers_it_knew() {
    let [a, b] = [(); 2].map(|_| Cli::new());
    let node_a = join(&a, None);
    let mut node_b = join(&b, Some(&node_a));
    let a_id = node_a.peer_id().unwrap().to_owned();

    for (cli, name) in [(&a, "A"), (&b, "B")] {
        let reachable = eventually(
            Duration::from_secs(60),
            &format!("{name} is found reachable"),
            || {
                let id = cli.run(&["id", "--json"]).json();
                match id["reachability"]["state"].as_str() {
                    Some("public") => Ok(id),
                    _ => Err(id.to_string()),
                }
            },
        );
        assert!(
            reachable["reachability"]["addresses"][0]
                .as_str()
                .is_some_and(|a| a.starts_with("/ip4/127.0.0.1/tcp/")),
            "{reachable}"
        );
    }
    let said = b.run(&["id"]);
    assert!(
        said.stderr()
            .contains("reachability: public, dialed back at /ip4/127.0.0.1/tcp/"),
        "{}",
        said.stderr()
    );
    let table = b.run(&["peers"]).success();
    assert!(table.contains("VIA") && table.contains("tcp"), "{table}");

    // B writes down A within a few seconds of knowing it.
    let remembered = b.data().join("peers.json");
    eventually(Duration::from_secs(30), "B remembers A", || {
        let text = std::fs::read_to_string(&remembered).unwrap_or_default();
        if text.contains(&a_id) {
            Ok(())
        } else {
            Err(text)
        }
    });
    node_b.kill();

    // Restarted with no --bootstrap, B is back among A's peers.
    let node_b = join(&b, None);
    let b_id = node_b.peer_id().unwrap().to_owned();
    let a_sees = |id: &str, what: &str| {
        eventually(Duration::from_secs(30), what, || {
            let peers = a.run(&["peers", "--json"]).json();
            match peers
                .as_array()
                .is_some_and(|peers| peers.iter().any(|p| p["peer_id"] == id))
            {
                true => Ok(()),
                false => Err(peers.to_string()),
            }
        })
    };
    a_sees(&b_id, "A sees B again");

    // A bootstrap peer may be named by DNS (here `localhost`, from /etc/hosts).
    let by_name = node_a
        .p2p
        .as_deref()
        .unwrap()
        .replace("/ip4/127.0.0.1/", "/dns4/localhost/");
    assert!(by_name.starts_with("/dns4/localhost/tcp/"), "{by_name}");
    let c = Cli::new();
    let node_c = Server::start(
        c.data(),
        &[
            "--p2p-listen",
            "/ip4/127.0.0.1/tcp/0",
            "--bootstrap",
            &by_name,
        ],
    );
    a_sees(
        node_c.peer_id().unwrap(),
        "A sees C, which joined through /dns4/localhost",
    );
}
