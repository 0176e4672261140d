//! Publisher keys and trust between two `agentsite serve` processes: an
//! author's node signs with a key made by `agentsite keygen`; the other
//! node runs that author's agents as pure computation until it trusts the
//! key, then with its grants, and refuses to fetch them at all when its
//! policy refuses unknown publishers.

use crate::support;

use std::time::Duration;
use support::{Cli, Server, eventually};

/// Runs `fetch` until it answers something other than "not found yet" (the
/// manifest spreads through the DHT in its own time); returns that run.
fn fetch_settled(cli: &Cli, id: &str) -> support::Run {
    eventually(Duration::from_secs(30), "the fetch settles", || {
        let run = cli.run(&["fetch", id]);
        let settled = run.ok() || run.stderr().contains("refused by policy");
        if settled { Ok(run) } else { Err(run.stderr()) }
    })
}

#[test]
fn agents_run_by_how_much_their_publisher_is_trusted() {
    let (author, operator) = (Cli::new(), Cli::new());

    // The author makes a publisher key, once.
    let key = author.run(&["keygen"]).success().trim().to_owned();
    assert!(key.starts_with("12D3KooW"), "{key}");
    author
        .run(&["keygen"])
        .failure("already holds publisher key");
    let ids = author.add(&["notes", "calculator"]);
    let (notes, calculator) = (&ids[0], &ids[1]);
    let author_node = Server::start(author.data(), &["--p2p-listen", "/ip4/127.0.0.1/tcp/0"]);
    let address = author_node.p2p.clone().unwrap();
    assert!(
        !address.ends_with(&key),
        "the publisher key is not the node's identity"
    );
    author.run(&["publish", "notes"]).success();
    author.run(&["publish", "calculator"]).success();

    // The operator gives every agent a small store by default.
    operator.run(&["grant", "--defaults", "kv=64KiB"]).success();
    let _operator_node = Server::start(
        operator.data(),
        &[
            "--p2p-listen",
            "/ip4/127.0.0.1/tcp/0",
            "--bootstrap",
            &address,
        ],
    );

    // Untrusted publisher: the agent runs, as pure computation only.
    fetch_settled(&operator, notes).success();
    let metrics = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(author_node.metrics());
    let peers: u32 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("agentsite_peers_connected "))
        .and_then(|count| count.parse().ok())
        .expect("the peers gauge");
    assert!(peers >= 1, "the operator's node is connected:\n{metrics}");
    let inspect = operator.run(&["inspect", "notes"]).success();
    assert!(
        inspect.contains(&format!("published by {key}")),
        "{inspect}"
    );
    operator
        .call("notes", "put", r#"{"title": "t", "text": "x"}"#)
        .failure("has not granted this agent a key-value store");

    // Trusted: the defaults apply, and what is granted to the key.
    operator.run(&["trust", &key]).success();
    operator
        .call("notes", "put", r#"{"title": "t", "text": "x"}"#)
        .success();
    let policy = operator.run(&["policy", "show"]).success();
    assert!(policy.contains(&format!("[publishers.{key}]")), "{policy}");

    // Refusing unknown publishers: not trusted, not even downloaded.
    operator.run(&["untrust", &key]).success();
    let policy_file = operator.data().join("policy.toml");
    let text = std::fs::read_to_string(&policy_file).unwrap();
    std::fs::write(
        &policy_file,
        text.replace(
            "unknown_publisher = \"pure\"",
            "unknown_publisher = \"refuse\"",
        ),
    )
    .unwrap();
    let refused = fetch_settled(&operator, calculator);
    let error = refused.failure("refused by policy");
    assert!(error.contains(&key), "{error}");
    assert!(
        !operator
            .data()
            .join("blobs/sha256")
            .join(calculator.strip_prefix("sha256:").unwrap())
            .exists(),
        "a refused agent is not stored"
    );
    operator
        .call("notes", "get", r#"{"title": "t"}"#)
        .failure("refused by policy");

    // Trusting the key again lets it in.
    operator.run(&["trust", &key]).success();
    fetch_settled(&operator, calculator).success();
    let sum = operator
        .call("calculator", "add", r#"{"a": 20, "b": 22}"#)
        .json();
    assert_eq!(sum["structuredContent"]["result"], 42.0);
}
