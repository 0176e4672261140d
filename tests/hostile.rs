//! Hostile agents are contained: each attack ends in a clear error naming
//! the limit or fault, the node keeps serving, and a normal call right
//! after the attack (and calls running during it) succeed. Hostile HTTP
//! clients meet the front end's bounds the same way.

use crate::support;

use agentsite::NodeCallError;
use agentsite::config::Limits;
use bytesize::ByteSize;
use serde_json::json;
use std::time::{Duration, Instant};
use support::hostile::{assert_serving, error_of, node_with, test_limits};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_infinite_loop_is_stopped_at_the_deadline() {
    let (node, _dir) = node_with(&["calculator", "hostile_loop"], test_limits()).await;
    let started = Instant::now();
    let error = error_of(&node, "hostile-loop", "spin", "{}").await;
    assert_eq!(error, "deadline exceeded after 1s");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_serving(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_hits_the_memory_cap() {
    let limits = Limits {
        memory: ByteSize::mib(32),
        ..test_limits()
    };
    let (node, _dir) = node_with(&["calculator", "hostile_bomb"], limits).await;
    let error = error_of(&node, "hostile-bomb", "explode", "{}").await;
    assert_eq!(error, "memory limit of 32.0 MiB exceeded");
    assert_serving(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_recursion_is_a_stack_overflow_not_a_crash() {
    let (node, _dir) = node_with(&["calculator", "hostile_recurse"], test_limits()).await;
    let error = error_of(&node, "hostile-recurse", "dive", "{}").await;
    assert_eq!(error, "stack overflow: the agent recursed too deeply");
    assert_serving(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_output_is_refused_and_output_floods_are_cut() {
    let (node, _dir) = node_with(&["calculator", "hostile_flood"], flood_limits()).await;
    let error = error_of(&node, "hostile-flood", "huge", r#"{"mib": 8}"#).await;
    assert_eq!(error, "output of 8.0 MiB exceeds the limit of 1.0 MiB");
    // A flood of stdout and log lines finishes; the excess is dropped, not kept.
    let output = node
        .call("hostile-flood", "shout", r#"{"lines": 20000}"#, None)
        .await
        .unwrap();
    assert_eq!(output.text(), "printed 20000 lines");
    assert_serving(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_cap_bounds_the_result_as_sent() {
    let (node, _dir) = node_with(&["calculator", "hostile_flood"], flood_limits()).await;
    // Empty blocks: no text at all, 22 MiB once each has its JSON framing.
    let error = error_of(
        &node,
        "hostile-flood",
        "blocks",
        r#"{"count": 800000, "text": ""}"#,
    )
    .await;
    assert_eq!(
        error,
        "output of 800000 content blocks exceeds the limit of 1024"
    );
    // Under 1 MiB of text, but every quote is escaped on the wire: twice
    // the cap as sent.
    let quotes = json!({"count": 1000, "text": "\"".repeat(1000)}).to_string();
    let error = error_of(&node, "hostile-flood", "blocks", &quotes).await;
    assert_eq!(error, "output of 1.9 MiB exceeds the limit of 1.0 MiB");
    // An error message is a payload too: cut, and said so.
    let error = error_of(&node, "hostile-flood", "grievance", r#"{"mib": 8}"#).await;
    assert!(error.len() < 4200, "an error of {} bytes", error.len());
    assert!(
        error.ends_with(&format!("… ({} more bytes)", (8 << 20) - 4096)),
        "{}",
        &error[4000..]
    );
    assert_serving(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_exits_is_reported_with_its_status_alone() {
    let (node, _dir) = node_with(&["calculator", "hostile_trap"], test_limits()).await;
    // WASI 0.2 carries only success or failure of an exit: a status of 3
    // must not be reported as "status 1", nor with a wasm backtrace.
    let error = error_of(&node, "hostile-trap", "quit", r#"{"status": 3}"#).await;
    assert_eq!(
        error,
        "the agent exited with a failure status instead of returning a result"
    );
    let error = error_of(&node, "hostile-trap", "quit", r#"{"status": 0}"#).await;
    assert_eq!(error, "the agent exited instead of returning a result");
    assert_serving(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_in_the_middle_of_a_call_reports_the_panic() {
    let (node, _dir) = node_with(&["calculator", "hostile_trap"], test_limits()).await;
    let error = error_of(&node, "hostile-trap", "crash", r#"{"value": 10}"#).await;
    assert!(error.starts_with("agent trapped: "), "{error}");
    assert!(
        error.contains("crashed halfway through with 5"),
        "the panic message is in the error: {error}"
    );
    assert_serving(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_files_and_environment_are_invisible_without_a_grant() {
    let (node, _dir) = node_with(&["calculator", "hostile_snoop"], test_limits()).await;
    // SAFETY: set before any other thread of this test reads the environment.
    unsafe { std::env::set_var("AGENTSITE_TEST_SECRET", "hunter2") };
    let secret_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret_file.path(), "top secret").unwrap();

    for path in [
        "/etc/passwd",
        secret_file.path().to_str().unwrap(),
        "../../etc/passwd",
    ] {
        let args = json!({ "path": path }).to_string();
        let error = error_of(&node, "hostile-snoop", "read_file", &args).await;
        assert!(error.starts_with(&format!("cannot read {path}")), "{error}");
        assert!(
            !error.contains("top secret") && !error.contains("root:"),
            "{error}"
        );
    }
    let error = error_of(&node, "hostile-snoop", "list_dir", r#"{"path": "/"}"#).await;
    assert!(error.starts_with("cannot list /"), "{error}");

    let env = node
        .call(
            "hostile-snoop",
            "env",
            r#"{"name": "AGENTSITE_TEST_SECRET"}"#,
            None,
        )
        .await
        .unwrap();
    assert_eq!(env.structured_content.unwrap(), json!({"result": null}));
    let all = node
        .call("hostile-snoop", "env_all", "{}", None)
        .await
        .unwrap();
    assert_eq!(all.structured_content.unwrap(), json!({"result": []}));
    assert_serving(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_state_survives_from_one_call_to_the_next() {
    let (node, _dir) = node_with(&["hostile_snoop"], test_limits()).await;
    for secret in ["first caller's secret", "second caller's secret"] {
        let args = json!({ "secret": secret }).to_string();
        let output = node
            .call("hostile-snoop", "swap_secret", &args, None)
            .await
            .unwrap();
        assert_eq!(
            output.structured_content.map(|s| s.to_value()),
            Some(json!({"result": null})),
            "a fresh instance never sees an earlier caller's globals"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_bytes_of_an_earlier_call_remain_in_a_reused_memory() {
    // Pool slots are reset in place between calls; whatever a call left in
    // its linear memory must be gone for the next one, which may reuse the
    // same slot.
    let (node, _dir) = node_with(&["hostile_snoop"], test_limits()).await;
    let call = |tool: &'static str, secret: &'static str| {
        let node = node.clone();
        async move {
            let args = json!({ "secret": secret }).to_string();
            node.call("hostile-snoop", tool, &args, None)
                .await
                .unwrap()
                .structured_content
                .map(|s| s.to_value())
        }
    };
    for round in 0..20 {
        let secret = if round % 2 == 0 {
            "kiwi-4417-secret"
        } else {
            "plum-9031-secret"
        };
        assert_eq!(
            call("plant", secret).await,
            Some(json!({"result": true})),
            "the scan finds what this call planted"
        );
        assert_eq!(
            call("find_planted", secret).await,
            Some(json!({"result": false})),
            "round {round}: a later call found an earlier call's bytes"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn normal_calls_keep_succeeding_while_attacks_run() {
    let (node, _dir) = node_with(
        &[
            "calculator",
            "hostile_loop",
            "hostile_bomb",
            "hostile_recurse",
        ],
        test_limits(),
    )
    .await;
    let attacks: Vec<_> = [
        ("hostile-loop", "spin"),
        ("hostile-bomb", "explode"),
        ("hostile-recurse", "dive"),
        ("hostile-loop", "spin"),
    ]
    .into_iter()
    .map(|(agent, tool)| {
        let node = node.clone();
        tokio::spawn(async move { node.call(agent, tool, "{}", None).await })
    })
    .collect();

    // Calls made during the attacks, while the loops are still spinning.
    let started = Instant::now();
    let mut served = 0;
    while started.elapsed() < Duration::from_millis(600) {
        assert_serving(&node).await;
        served += 1;
    }
    assert!(
        served >= 10,
        "only {served} normal calls completed during the attacks"
    );

    for attack in attacks {
        let error = attack.await.unwrap().expect_err("every attack fails");
        assert!(
            matches!(error, NodeCallError::Call(ref e) if e.limit().is_some()),
            "{error}"
        );
    }
    assert_serving(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_beyond_the_slots_wait_and_then_report_busy() {
    let limits = Limits {
        max_concurrent_calls: 1,
        deadline: Duration::from_millis(400),
        ..Limits::default()
    };
    let (node, _dir) = node_with(&["hostile_loop"], limits).await;
    let record = node.resolve("hostile-loop").unwrap();
    let agent = node.load(&record).unwrap();
    let mut long = node.grants(&record).unwrap();
    long.limits.deadline = Duration::from_secs(2);
    let holder = {
        let (node, record) = (node.clone(), record.clone());
        tokio::spawn(async move { node.call_record(&record, "spin", "{}", long, None).await })
    };
    support::eventually_async(
        Duration::from_secs(5),
        "the slot is taken",
        async || match agent.calls_running() {
            1 => Ok(()),
            running => Err(format!("{running} calls running")),
        },
    )
    .await;
    // The only slot is taken for longer than this call's deadline.
    let error = error_of(&node, "hostile-loop", "spin", "{}").await;
    assert_eq!(
        error,
        "agent is busy: its 1 concurrent call slots stayed taken until the deadline"
    );
    let held = holder.await.unwrap().unwrap_err().to_string();
    assert_eq!(held, "deadline exceeded after 2s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_memory_outside_the_instance_is_bounded_per_call() {
    use agentsite::testing::{MAX_FIELDS_BYTES, MAX_HANDLES};
    let (node, _dir) = node_with(&["calculator", "hostile_hog"], test_limits()).await;
    // Header fields need no grant: one set filled past its size.
    let error = error_of(
        &node,
        "hostile-hog",
        "fields",
        r#"{"sets": 1, "per_set": 1000, "kib": 1}"#,
    )
    .await;
    assert_eq!(
        error,
        format!(
            "host resource limit exceeded: HTTP header fields over {} per set",
            ByteSize(MAX_FIELDS_BYTES as u64)
        )
    );
    // Sets kept open by the thousand, each just under its size.
    let error = error_of(
        &node,
        "hostile-hog",
        "fields",
        r#"{"sets": 100000, "per_set": 3, "kib": 4}"#,
    )
    .await;
    assert!(
        error.starts_with(&format!(
            "host resource limit exceeded: more than {MAX_HANDLES} handles open at once"
        )),
        "{error}"
    );
    let error = error_of(&node, "hostile-hog", "handles", r#"{"count": 1000000}"#).await;
    assert!(error.contains("handles open at once"), "{error}");
    // Within the bounds the same agent works.
    let kept = node
        .call("hostile-hog", "handles", r#"{"count": 100}"#, None)
        .await
        .unwrap();
    assert_eq!(kept.text(), "kept 100 handles");
    assert_serving(&node).await;
}

/// Limits for the flooding agent: it does real work (hundreds of thousands
/// of blocks), which a busy machine may stretch past `test_limits`' one
/// second; the limits under test are the output caps, so the deadline is
/// one that cannot be what stops it.
fn flood_limits() -> Limits {
    Limits {
        deadline: Duration::from_secs(60),
        ..test_limits()
    }
}

/// Connections that never finish their request (issue 41, class 1): a
/// flood of them from two addresses, one the same as an honest client's.
/// The node holds no more than its caps (the newest push out the oldest
/// that sent nothing), answers the honest client each time it asks during
/// the flood, closes the rest at the head deadline, and ends a request
/// whose body stops arriving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_finish_their_request_are_capped_and_closed() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    const FLOOD: usize = 200;
    const TOTAL: usize = 64;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.toml"),
        format!(
            "[serve]\nmax_connections = {TOTAL}\nmax_connections_per_address = 32\n\
             request_head_timeout = \"6s\"\nrequest_body_idle_timeout = \"2s\"\n"
        ),
    )
    .unwrap();
    let server = support::Server::start(dir.path(), &[]);
    let address: std::net::SocketAddr = server.base.trim_start_matches("http://").parse().unwrap();
    let connect_from = |source: &str| {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
        socket.connect(address)
    };
    let started = Instant::now();
    let mut flood = Vec::new();
    for i in 0..FLOOD {
        let source = if i % 2 == 0 { "127.0.0.1" } else { "127.0.0.2" };
        let mut stream = connect_from(source).await.unwrap();
        stream
            .write_all(
                format!("GET /health HTTP/1.1\r\nHost: {address}\r\nX-Never-Ends: ").as_bytes(),
            )
            .await
            .unwrap();
        flood.push(stream);
    }
    // During the flood an honest client is answered, each time.
    let client = reqwest::Client::new();
    for _ in 0..5 {
        let response = tokio::time::timeout(
            Duration::from_secs(5),
            client.get(server.url("/health")).send(),
        )
        .await
        .expect("answered during the flood")
        .unwrap();
        assert!(response.status().is_success());
    }
    // Whether the node ended a connection of the flood (closed it, or
    // answered what it had of the request).
    async fn closed(stream: &mut tokio::net::TcpStream) -> bool {
        let mut bytes = [0u8; 1024];
        tokio::time::timeout(Duration::from_millis(1), stream.read(&mut bytes))
            .await
            .is_ok()
    }
    // Before the head deadline, all but the caps' worth were closed.
    let held = loop {
        let mut open = 0;
        for stream in &mut flood {
            if !closed(stream).await {
                open += 1;
            }
        }
        if open <= TOTAL || started.elapsed() > Duration::from_secs(5) {
            break open;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        held <= TOTAL,
        "{held} of {FLOOD} unfinished requests held open, past the cap of {TOTAL}"
    );
    // At the head deadline the rest are closed too.
    let deadline = Instant::now() + Duration::from_secs(30);
    'waiting: loop {
        for stream in &mut flood {
            if !closed(stream).await {
                assert!(
                    Instant::now() < deadline,
                    "an unfinished request outlived the head deadline"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue 'waiting;
            }
        }
        break;
    }
    // A body that stops arriving ends its request.
    let mut stalled = connect_from("127.0.0.1").await.unwrap();
    stalled
        .write_all(
            format!(
                "POST /v1/chat/completions HTTP/1.1\r\nHost: {address}\r\n\
                 Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"model\":"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stalled.read_to_end(&mut answer))
        .await
        .expect("a stalled body ends its request")
        .ok();
    let client_after = reqwest::Client::new();
    let response = client_after
        .get(server.url("/health"))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
}

/// A2A's JSON-RPC request `method` with `params` to `url`, from `client`.
async fn a2a(
    client: &reqwest::Client,
    url: &str,
    method: &str,
    params: serde_json::Value,
) -> serde_json::Value {
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let response = client.post(url).json(&request).send().await.unwrap();
    let body = response.bytes().await.unwrap();
    serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{e}: {} bytes", body.len()))
}

/// A message to the text agent that names its call.
fn text_call(tool: &str, text: &str) -> serde_json::Value {
    json!({"message": {
        "messageId": format!("m-{}", rand_suffix()),
        "role": "ROLE_USER",
        "parts": [{"data": {"tool": tool, "arguments": {"text": text}}}],
    }})
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A client whose connections come from `source` (a loopback address).
fn client_from(source: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(Some(source.parse().unwrap()))
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// Stores capped by count (issue 41, class 3) and kept results bounded by
/// bytes (class 4), on A2A's tasks: one client floods an agent with more
/// tasks than the node keeps, then with tasks that hold a MiB each. The
/// operator's earlier task outlives the flood (the flood gives up its own
/// oldest tasks first); the flood keeps at most its share; past the byte
/// budget the oldest results say they were dropped while the newest are
/// whole; and a listing page stays within its bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_a2a_tasks_keeps_to_its_share_and_its_bytes() {
    use support::{Cli, Server};
    const FLOOD: usize = 1010;
    const SHARE: u64 = 250;
    let cli = Cli::new();
    cli.add(&["text"]);
    let server = Server::start(cli.data(), &[]);
    let url = server.url("/agents/text/a2a");
    let operator = client_from("127.0.0.1");
    let flood = client_from("127.0.0.2");
    let mine = a2a(
        &operator,
        &url,
        "SendMessage",
        text_call("word_count", "one two three"),
    )
    .await;
    let mine = mine["result"]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_owned();

    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let (flood, url, sent) = (flood.clone(), url.clone(), sent.clone());
            tokio::spawn(async move {
                while sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < FLOOD {
                    let answer = a2a(&flood, &url, "SendMessage", text_call("upper", "x")).await;
                    let state = &answer["result"]["task"]["status"]["state"];
                    assert_eq!(
                        state, "TASK_STATE_COMPLETED",
                        "the flood's own tasks make room: {answer}"
                    );
                }
            })
        })
        .collect();
    for sender in senders {
        sender.await.unwrap();
    }
    let kept = a2a(&operator, &url, "GetTask", json!({"id": mine})).await;
    assert_eq!(
        kept["result"]["id"], mine,
        "the operator's task outlived {FLOOD} of another client's: {kept}"
    );
    let listed = a2a(&operator, &url, "ListTasks", json!({"pageSize": 1})).await;
    let total = listed["result"]["totalSize"].as_u64().unwrap();
    assert!(
        total <= SHARE + 1,
        "{total} tasks kept: the flood kept more than its share"
    );

    // Tasks that hold a MiB each: the oldest results go, with a marker.
    let big = "b".repeat(400 << 10);
    let mut ids = Vec::new();
    for _ in 0..100 {
        let answer = a2a(&flood, &url, "SendMessage", text_call("upper", &big)).await;
        assert_eq!(
            answer["result"]["task"]["status"]["state"],
            "TASK_STATE_COMPLETED",
            "{}",
            answer.to_string().chars().take(300).collect::<String>()
        );
        ids.push(answer["result"]["task"]["id"].as_str().unwrap().to_owned());
    }
    let text_of = |task: &serde_json::Value| {
        task["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let oldest = a2a(&flood, &url, "GetTask", json!({"id": ids[0]})).await;
    let dropped = text_of(&oldest["result"]);
    assert!(
        dropped.contains("was dropped"),
        "the oldest result: {}",
        dropped.chars().take(200).collect::<String>()
    );
    let newest = a2a(&flood, &url, "GetTask", json!({"id": ids.last().unwrap()})).await;
    assert_eq!(
        text_of(&newest["result"]).len(),
        big.len(),
        "the newest result is whole"
    );
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks",
        "params": {"pageSize": 100, "includeArtifacts": true}});
    let page = operator
        .post(&url)
        .json(&request)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert!(
        page.len() < 6 << 20,
        "a listing page of {} bytes",
        page.len()
    );
    let page: serde_json::Value = serde_json::from_slice(&page).unwrap();
    assert!(
        !page["result"]["nextPageToken"].as_str().unwrap().is_empty(),
        "the rest is on the next pages"
    );
    let health = operator.get(server.url("/health")).send().await.unwrap();
    assert!(health.status().is_success());
}

/// A card's `kid` is anyone's text: one of 300,000 base58 digits took 20 s
/// to decode before did:keys were bounded; it is refused by its length,
/// named in the one-line error, and nothing is attached.
#[tokio::test(flavor = "multi_thread")]
async fn a_card_signed_by_a_kid_longer_than_any_did_key_is_refused_by_its_length() {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let kid = format!("did:key:z{}", "2".repeat(300_000));
    let header = json!({"alg": "EdDSA", "typ": "JOSE", "kid": kid});
    let card = json!({
        "name": "calc",
        "description": "Adds numbers.",
        "version": "1.0.0",
        "supportedInterfaces": [{"url": "http://127.0.0.1:9/a2a", "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0"}],
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "add", "name": "add", "description": "Adds numbers.", "tags": []}],
        "signatures": [{"protected": b64.encode(header.to_string()), "signature": b64.encode([0u8; 64])}],
    });
    let app = axum::Router::new().route(
        "/.well-known/agent-card.json",
        axum::routing::get(move || {
            let card = card.clone();
            async move { axum::Json(card) }
        }),
    );
    let served = support::served::Served::start(app);
    let url = format!("http://{}", served.address);
    let cli = support::Cli::new();
    let (refused, listed) = tokio::task::spawn_blocking(move || {
        let refused = cli.run(&["attach", "calc", &url]);
        (refused, cli.run(&["ls", "--json"]))
    })
    .await
    .unwrap();
    refused.failure("a did:key of 300009 bytes is longer than an ed25519 did:key (64 at most)");
    assert_eq!(listed.json(), json!([]));
}

/// A silent agent's listing deadline is no client's wait: `resources/list`,
/// its templates and `prompts/list` answer from the agents that answered,
/// the first time too, while an agent that never lists runs out its
/// deadline in the background. A listing that waited for it would take the
/// 120 s it is given; each is bounded at half that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_never_wait_out_a_silent_agents_deadline() {
    use crate::mcp::{http_client, prompt_names, resource_uris};
    use support::{Cli, Server};
    let cli = Cli::new();
    cli.add(&["notes", "hostile_stall"]);
    cli.grant("notes", &["kv=1MiB"]);
    cli.call("notes", "put", r#"{"title": "todo", "text": "ship it"}"#)
        .success();
    std::fs::write(
        cli.data().join("config.toml"),
        "[limits]\ndeadline = \"120s\"\nlisting_deadline = \"120s\"\n",
    )
    .unwrap();
    let server = Server::start(cli.data(), &[]);
    let client = http_client(server.url("/mcp")).await;
    // Each listing is bounded at half the deadline a wait would take.
    let bound = Duration::from_secs(60);
    async fn answered<T>(what: &str, listing: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(60), listing)
            .await
            .unwrap_or_else(|_| panic!("{what} waited for the silent agent"))
    }
    answered("resources/list", resource_uris(&client)).await;
    answered(
        "resources/templates/list",
        client.list_all_resource_templates(),
    )
    .await
    .unwrap();
    answered("prompts/list", prompt_names(&client)).await;
    // The agents that answer are listed, once their first answer is in.
    support::eventually_async(bound, "notes listed beside the silent agent", async || {
        let uris = answered("resources/list", resource_uris(&client)).await;
        let prompts = answered("prompts/list", prompt_names(&client)).await;
        if uris.contains(&"note://todo".to_owned())
            && prompts.contains(&"notes.summarize".to_owned())
        {
            Ok(())
        } else {
            Err(format!("{uris:?} {prompts:?}"))
        }
    })
    .await;
    client.cancel().await.unwrap();
}

/// Numbers at the edges. JSON writes an infinite or not-a-number float as
/// `null`, so `add(1e308, 1e308)` answered `{"result": null}`, which reads
/// as "nothing". A result that overflowed is said as such, by an SDK agent
/// and a plain component alike; a goal that writes a number beyond any
/// float (`10^400`) gives that part up saying so, and names each part it
/// could not do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_infinite_result_is_said_as_such_and_a_goal_names_what_it_could_not_do() {
    let cli = support::Cli::new();
    cli.add(&["calculator", "shapes"]);
    for (agent, tool, args, said) in [
        (
            "calculator",
            "add",
            r#"{"a": 1e308, "b": 1e308}"#,
            "the result is infinite",
        ),
        (
            "calculator",
            "add",
            r#"{"a": -1e308, "b": -1e308}"#,
            "the result is minus infinite",
        ),
        (
            "shapes",
            "area",
            r#"{"shape": {"tag": "circle", "val": 1e200}}"#,
            "the result is infinite",
        ),
    ] {
        let line = cli.call(agent, tool, args).failure(said);
        assert!(
            line.contains("which JSON cannot carry"),
            "{agent}.{tool}: {line}"
        );
    }
    let finite = cli
        .call("calculator", "add", r#"{"a": 1e307, "b": 1e307}"#)
        .json();
    assert_eq!(finite["structuredContent"]["result"], json!(2e307));

    let _server = support::Server::start(cli.data(), &[]);
    let goal = cli.run(&["goal", "Add 10^400 and 1, then add 1e308 and 1e308"]);
    let line = format!("{}{}", goal.stdout(), goal.stderr());
    assert!(line.contains("failed: not done"), "{line}");
    for said in [
        "\"Add 10^400 and 1\": 10^400 is beyond the largest number a tool takes",
        "add(1e+308, 1e+308) failed: the result is infinite",
    ] {
        assert!(line.contains(said), "{said} not in {line}");
    }
}

/// On a node that asks for no token, every loopback client was one
/// requester with the operator: 1,001 goals from HTTP made room by dropping
/// the operator's own. A request that presents the node's token or the
/// command line's control token is the operator's, whose goals no one
/// else's make room by dropping (`requester::make_room`'s tests show the
/// choice; this shows who is who).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_goals_are_kept_apart_from_anonymous_clients() {
    let cli = support::Cli::new();
    cli.add(&["calculator"]);
    let server = support::Server::start(cli.data(), &[]);
    let cli = tokio::task::spawn_blocking(move || {
        cli.run(&["goal", "Add 2 and 3"]).success();
        cli
    })
    .await
    .unwrap();
    let http = reqwest::Client::new();
    for authorization in [None, Some("Bearer not-the-token")] {
        let mut request = http
            .post(server.url("/api/goals"))
            .json(&json!({"text": "Add 4 and 5", "team": ["calculator"]}));
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        let created = request.send().await.unwrap();
        assert_eq!(created.status(), 201);
    }
    let goals: serde_json::Value = http
        .get(server.url("/api/goals"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut requesters: Vec<String> = goals
        .as_array()
        .unwrap()
        .iter()
        .map(|goal| goal["requester"].as_str().unwrap().to_owned())
        .collect();
    requesters.sort();
    assert_eq!(
        requesters,
        ["http 127.0.0.1", "http 127.0.0.1", "operator"],
        "{goals}"
    );
    drop(cli);
}

/// The HTTP status a `ping` in session `id` gets.
async fn ping_in(client: &reqwest::Client, url: &str, id: &str) -> u16 {
    client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", id)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// One client opened 30,007 MCP sessions with `initialize` alone in 7 s
/// (1.7 GB), and after it named 64 `/mcp?agents=` sets every new set got
/// 503 until the node restarted. Now a requester past its share of
/// sessions or sets closes its own least recently used; another's session
/// and set keep serving, and a new set is never refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_cannot_pile_up_sessions_or_sets_and_lock_others_out() {
    use agentsite::mcp::http::{MAX_CHOSEN_SETS, SETS_PER_REQUESTER};
    use agentsite::mcp::sessions::PER_REQUESTER;
    let cli = support::Cli::new();
    // Seven agents: 127 sets to name, past the 64 that locked others out.
    let ids = cli.add(&[
        "calculator",
        "text",
        "notes",
        "timer",
        "accountant",
        "almanac",
        "research",
    ]);
    let agents: Vec<&str> = ids.iter().map(String::as_str).collect();
    let server = support::Server::start(cli.data(), &[]);
    let from = |address: &str| {
        reqwest::Client::builder()
            .local_address(address.parse::<std::net::IpAddr>().unwrap())
            .build()
            .unwrap()
    };
    let (calm, flood) = (from("127.0.0.2"), from("127.0.0.1"));
    let all = server.url("/mcp");

    // Sessions.
    let calm_session = support::mcp_session(&calm, &all).await;
    let first_flooded = support::mcp_session(&flood, &all).await;
    for _ in 0..PER_REQUESTER + 10 {
        support::mcp_session(&flood, &all).await;
    }
    assert_eq!(ping_in(&flood, &all, &first_flooded).await, 404);
    assert_eq!(ping_in(&calm, &all, &calm_session).await, 200);

    // Sets: what `agentsite mcp calculator notes` serves from.
    let set = |names: &[&str]| server.url(&format!("/mcp?agents={}", names.join(",")));
    let calm_set = set(&[agents[0], agents[2]]);
    let calm_set_session = support::mcp_session(&calm, &calm_set).await;
    // Every set of two agents or more but the last ones: 100 sets.
    let subsets: Vec<Vec<&str>> = (1..128u32)
        .filter(|bits| bits.count_ones() > 1)
        .take(100)
        .map(|bits| {
            (0..7)
                .filter(|i| bits & (1 << i) != 0)
                .map(|i| agents[i])
                .collect()
        })
        .collect();
    assert!(subsets.len() > MAX_CHOSEN_SETS && MAX_CHOSEN_SETS > SETS_PER_REQUESTER);
    for names in &subsets {
        support::mcp_session(&flood, &set(names)).await;
    }
    assert_eq!(ping_in(&calm, &calm_set, &calm_set_session).await, 200);
    // Anyone's new set is served: one of a single agent, not named yet.
    support::mcp_session(&calm, &set(&[agents[6]])).await;
}

/// How many MCP sessions `server` keeps awake and asleep, as its
/// `/metrics` says.
async fn sessions_kept(client: &reqwest::Client, server: &support::Server) -> (u64, u64) {
    let text = client
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let count = |state: &str| {
        let prefix = format!("agentsite_mcp_sessions{{state=\"{state}\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map_or(0, |n| n.trim().parse().unwrap())
    };
    (count("awake"), count("asleep"))
}

/// `method` with `params` in session `id`: the result (the answer's JSON,
/// or the last JSON-RPC message of its event stream).
async fn request_in(
    client: &reqwest::Client,
    url: &str,
    id: &str,
    method: &str,
    params: serde_json::Value,
) -> serde_json::Value {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", id)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{method} in {id}");
    let text = response.text().await.unwrap();
    let last = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .rfind(|data| !data.trim().is_empty())
        .unwrap_or(&text);
    let message: serde_json::Value =
        serde_json::from_str(last.trim()).unwrap_or_else(|e| panic!("no message in {text:?}: {e}"));
    message["result"].clone()
}

/// An idle session kept a live one's tasks and channels, about 60 KB, for
/// five minutes. Now a session with no request open for
/// `mcp_session_dormant_after` is put to sleep, with only its `initialize`
/// kept (2.3 KiB of resident set: BENCHMARKS.md), and its next request wakes it and is
/// served as any other. One that set a log level keeps it, awake; one its
/// client ended is not woken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_sleep_and_their_next_request_wakes_them() {
    let cli = support::Cli::new();
    cli.add(&["calculator"]);
    std::fs::write(
        cli.data().join("config.toml"),
        "[serve]\nmcp_session_dormant_after = \"300ms\"\n",
    )
    .unwrap();
    let server = support::Server::start(cli.data(), &[]);
    let client = reqwest::Client::new();
    let all = server.url("/mcp");
    let mut sleepers = Vec::new();
    for _ in 0..20 {
        sleepers.push(support::mcp_session(&client, &all).await);
    }
    let keeps_a_level = support::mcp_session(&client, &all).await;
    request_in(
        &client,
        &all,
        &keeps_a_level,
        "logging/setLevel",
        json!({"level": "error"}),
    )
    .await;

    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (awake, asleep) = sessions_kept(&client, &server).await;
        if asleep == 20 {
            assert_eq!(awake, 1, "the session with a log level stays awake");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{asleep} asleep, {awake} awake"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for id in &sleepers {
        let sum = request_in(
            &client,
            &all,
            id,
            "tools/call",
            json!({"name": "calculator.add", "arguments": {"a": 20, "b": 22}}),
        )
        .await;
        assert_eq!(sum["structuredContent"]["result"], json!(42.0), "{sum}");
    }
    // Ended by its client while asleep: gone for good.
    let ended = client
        .delete(&all)
        .header("mcp-session-id", &sleepers[0])
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 200);
    assert_eq!(ping_in(&client, &all, &sleepers[0]).await, 404);
    assert_eq!(ping_in(&client, &all, &sleepers[1]).await, 200);
}

/// Calls whose answers are larger than the sockets' buffers can hold
/// (each "ΐ" of 3 MB is three letters of six bytes in upper case), sent on
/// `n` connections to `server` and never read.
async fn unread_calls(server: &support::Server, n: usize) -> Vec<tokio::net::TcpStream> {
    use tokio::io::AsyncWriteExt as _;
    let address: std::net::SocketAddr = server.base.trim_start_matches("http://").parse().unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "text.upper", "arguments": {"text": "ΐ".repeat(3 << 19)},
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "unread", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    }}})
    .to_string();
    let mut unread = Vec::new();
    for _ in 0..n {
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: tools/call\r\nMcp-Name: text.upper\r\nContent-Length: {}\r\n\r\n",
            call.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(call.as_bytes()).await.unwrap();
        unread.push(stream);
    }
    unread
}

/// A node with the text agent, an allowance of `per_address` connections
/// an address and `write_idle` for a response nobody reads.
fn node_for_unread(per_address: usize, write_idle: &str) -> (support::Cli, support::Server) {
    let cli = support::Cli::new();
    cli.add(&["text"]);
    std::fs::write(
        cli.data().join("config.toml"),
        format!(
            "[limits]\nmax_output = \"32 MiB\"\n\n[serve]\nmax_connections_per_address = {per_address}\n\
             request_head_timeout = \"120s\"\nresponse_write_idle_timeout = \"{write_idle}\"\n"
        ),
    )
    .unwrap();
    let server = support::Server::start(cli.data(), &[]);
    (cli, server)
}

/// Slow readers: `/v1` streams from one address that were never read kept
/// their connections and shut that address's other requests out for the
/// whole minute. A response whose client reads none of it makes way for a
/// newcomer of its address once it has waited a moment, long before its
/// write-idle timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_left_unread_make_way_for_their_addresss_next_request() {
    const ALLOWANCE: usize = 4;
    let (_cli, server) = node_for_unread(ALLOWANCE, "10m");
    let _unread = unread_calls(&server, ALLOWANCE).await;
    let client = reqwest::Client::new();

    support::eventually_async(
        Duration::from_secs(30),
        "a request beside unread responses is served",
        async || {
            let response = client
                .get(server.url("/health"))
                .send()
                .await
                .map_err(|e| e.to_string())?;
            if response.status().is_success() {
                Ok(())
            } else {
                Err(response.status().to_string())
            }
        },
    )
    .await;
}

/// A response nobody reads ends its connection at the write-idle timeout:
/// reading afterwards finds a cut-off response and the connection's end,
/// not a whole response on a connection kept open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_left_unread_ends_at_the_write_idle_timeout() {
    use tokio::io::AsyncReadExt as _;
    let (_cli, server) = node_for_unread(8, "2s");
    let unread = unread_calls(&server, 2).await;
    // The timeout is what is tested: it runs on the node's clock, and
    // reading before it passed would let the response go out.
    tokio::time::sleep(Duration::from_secs(12)).await;
    for mut stream in unread {
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut answer))
            .await
            .expect("an unread response's connection ends")
            .ok();
        assert!(
            answer.len() < 9 << 20,
            "the whole response ({} bytes) went out",
            answer.len()
        );
    }
}
