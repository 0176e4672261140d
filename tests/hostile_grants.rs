//! Hostile agents against what they were granted: a folder they try to
//! leave, an HTTP allowlist they try to get around, a storage quota they try
//! to exhaust, and results forged to break the tool contract. Each attack is
//! denied or contained with a clear error, nothing lands outside the grant,
//! and normal calls running beside it keep succeeding.

use crate::support;

use agentsite::runtime::CallError;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use support::hostile::{
    call_error, error_of, grant, node_with, result_of, test_limits, while_serving,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_folder_cannot_be_left_by_dotdot_symlink_or_absolute_path() {
    let (node, _dir) = node_with(&["calculator", "hostile_escape"], test_limits()).await;
    // base/secret.txt is next to the granted folder, base/granted; a
    // read-only folder sits beside both.
    let base = tempfile::tempdir().unwrap();
    let secret = base.path().join("secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    let granted = base.path().join("granted");
    let read_only = base.path().join("read-only");
    std::fs::create_dir_all(&granted).unwrap();
    std::fs::create_dir_all(&read_only).unwrap();
    std::fs::write(granted.join("inside.txt"), "inside").unwrap();
    std::fs::write(read_only.join("notice.txt"), "read me").unwrap();
    // Links planted in the granted folder, pointing out of it.
    std::os::unix::fs::symlink(&secret, granted.join("link-absolute")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", granted.join("link-relative")).unwrap();
    std::os::unix::fs::symlink(base.path(), granted.join("link-folder")).unwrap();
    grant(
        &node,
        "hostile-escape",
        &[
            &format!("fs={}:/data:rw", granted.display()),
            &format!("fs={}:/ro", read_only.display()),
        ],
    );

    // What was granted works.
    let read = |path: &str| json!({ "path": path });
    assert_eq!(
        result_of(&node, "hostile-escape", "read", read("/data/inside.txt")).await,
        "inside"
    );
    assert_eq!(
        result_of(&node, "hostile-escape", "read", read("/ro/notice.txt")).await,
        "read me"
    );
    node.call(
        "hostile-escape",
        "write",
        &json!({"path": "/data/new.txt", "text": "mine"}).to_string(),
        None,
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(granted.join("new.txt")).unwrap(),
        "mine"
    );

    let secret_path = secret.to_str().unwrap().to_owned();
    let node2 = node.clone();
    let escapes = while_serving(&node, async move {
        let mut errors = Vec::new();
        for path in [
            "/data/../secret.txt",       // up through ..
            "/data/../../../etc/passwd", // further up
            "/data/link-absolute",       // a symlink to an absolute host path
            "/data/link-relative",       // a symlink through ..
            "/data/link-folder/secret.txt",
            &secret_path,  // the host path itself
            "/etc/passwd", // any absolute host path
        ] {
            let args = json!({ "path": path }).to_string();
            errors.push((
                path.to_owned(),
                error_of(&node2, "hostile-escape", "read", &args).await,
            ));
        }
        let climbed = result_of(
            &node2,
            "hostile-escape",
            "climb",
            json!({"start": "/data", "levels": 6, "name": "secret.txt"}),
        )
        .await;
        (errors, climbed)
    })
    .await;
    let (errors, climbed) = escapes;
    for (path, error) in errors {
        assert!(
            error.contains(&format!("cannot read {path}")),
            "{path}: {error}"
        );
        assert!(
            !error.contains("top secret") && !error.contains("root:"),
            "{path}: {error}"
        );
    }
    assert_eq!(
        climbed,
        json!([]),
        "climbing through .. reads nothing outside"
    );

    // Writes outside the grant, or into the read-only folder, land nowhere.
    for path in [
        "/data/../planted.txt",
        "/data/link-folder/planted.txt",
        "/ro/planted.txt",
        "/planted.txt",
    ] {
        let args = json!({ "path": path, "text": "planted" }).to_string();
        let error = error_of(&node, "hostile-escape", "write", &args).await;
        assert!(
            error.contains(&format!("cannot write {path}")),
            "{path}: {error}"
        );
    }
    assert!(!base.path().join("planted.txt").exists());
    assert!(!read_only.join("planted.txt").exists());
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_granted_environment_variables_are_visible() {
    let (node, _dir) = node_with(&["calculator", "hostile_snoop"], test_limits()).await;
    // SAFETY: set before any other thread of this test reads the environment.
    unsafe {
        std::env::set_var("SNOOP_TEST_GRANTED", "shared");
        std::env::set_var("SNOOP_TEST_PRIVATE", "hunter2");
    }
    grant(&node, "hostile-snoop", &["env=SNOOP_TEST_GRANTED"]);
    let env = |name: &str| json!({ "name": name });
    assert_eq!(
        result_of(&node, "hostile-snoop", "env", env("SNOOP_TEST_GRANTED")).await,
        "shared"
    );
    assert_eq!(
        result_of(&node, "hostile-snoop", "env", env("SNOOP_TEST_PRIVATE")).await,
        json!(null)
    );
    assert_eq!(
        result_of(&node, "hostile-snoop", "env_all", json!({})).await,
        json!(["SNOOP_TEST_GRANTED=shared"])
    );
}

/// Two HTTP servers on loopback: the granted one answers `/hello` and
/// redirects `/redirect` to the other, which counts every request it gets.
struct HttpServers {
    granted: String,
    forbidden: String,
    forbidden_hits: Arc<AtomicU32>,
}

async fn http_servers() -> HttpServers {
    use axum::routing::get;
    let forbidden_hits = Arc::new(AtomicU32::new(0));
    let hits = forbidden_hits.clone();
    let forbidden = axum::Router::new().fallback(move || {
        hits.fetch_add(1, Ordering::SeqCst);
        async { "you should not be here" }
    });
    let forbidden_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let forbidden_url = format!("http://{}", forbidden_listener.local_addr().unwrap());
    let target = format!("{forbidden_url}/steal?data=secret");
    let granted = axum::Router::new()
        .route("/hello", get(|| async { "hello" }))
        .route(
            "/redirect",
            get(move || async move { axum::response::Redirect::temporary(&target) }),
        );
    let granted_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let granted_url = format!("http://{}", granted_listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(forbidden_listener, forbidden).await });
    tokio::spawn(async move { axum::serve(granted_listener, granted).await });
    HttpServers {
        granted: granted_url,
        forbidden: forbidden_url,
        forbidden_hits,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_reaches_granted_origins_only_and_redirects_are_checked_again() {
    let (node, _dir) = node_with(&["calculator", "hostile_exfil"], test_limits()).await;
    let servers = http_servers().await;
    let fetch = |url: String| json!({ "url": url, "redirects": 3 }).to_string();

    // Nothing granted: not even the friendly server.
    let error = error_of(
        &node,
        "hostile-exfil",
        "fetch",
        &fetch(format!("{}/hello", servers.granted)),
    )
    .await;
    assert!(error.contains("HttpRequestDenied"), "{error}");

    grant(
        &node,
        "hostile-exfil",
        &[&format!("http={}", servers.granted)],
    );
    let answer = result_of(
        &node,
        "hostile-exfil",
        "fetch",
        json!({ "url": format!("{}/hello", servers.granted), "redirects": 0 }),
    )
    .await;
    assert_eq!(
        (answer["status"].clone(), answer["body"].clone()),
        (json!(200), json!("hello"))
    );

    let node2 = node.clone();
    let (direct, redirected) = while_serving(&node, {
        let (forbidden, granted) = (servers.forbidden.clone(), servers.granted.clone());
        async move {
            let direct = error_of(
                &node2,
                "hostile-exfil",
                "fetch",
                &fetch(format!("{forbidden}/steal")),
            )
            .await;
            let redirected = error_of(
                &node2,
                "hostile-exfil",
                "fetch",
                &fetch(format!("{granted}/redirect")),
            )
            .await;
            (direct, redirected)
        }
    })
    .await;
    assert!(direct.contains("HttpRequestDenied"), "{direct}");
    // The redirect itself arrived; following it was refused.
    assert!(redirected.contains("HttpRequestDenied"), "{redirected}");
    assert!(
        redirected.contains(&format!("{}/steal", servers.forbidden)),
        "{redirected}"
    );
    assert_eq!(
        servers.forbidden_hits.load(Ordering::SeqCst),
        0,
        "nothing reached the forbidden server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_hoarder_stops_at_its_quota() {
    let (node, dir) = node_with(&["calculator", "hostile_hoard"], test_limits()).await;
    let fill = json!({"prefix": "a/", "size": 4096, "max": 10_000});

    let error = result_of(&node, "hostile-hoard", "fill", fill.clone()).await;
    assert_eq!(error["stored"], 0, "no store without a grant");
    assert!(
        error["refusal"].as_str().unwrap().contains("NotGranted"),
        "{error}"
    );

    grant(&node, "hostile-hoard", &["kv=64KiB"]);
    let node2 = node.clone();
    let hoarded = while_serving(&node, async move {
        result_of(&node2, "hostile-hoard", "fill", fill).await
    })
    .await;
    let stored = stored_until_quota(&hoarded);
    // 64 KiB holds 15 values of 4 KiB and their keys, not 16.
    assert_eq!(stored, 15, "{hoarded}");
    // Again, under new keys: the quota holds across calls.
    let more = json!({"prefix": "b/", "size": 4096, "max": 10});
    let again = result_of(&node, "hostile-hoard", "fill", more).await;
    assert_eq!(again["stored"], 0, "{again}");
    assert_kv_files_small(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_out_of_a_granted_folder_cannot_be_planted() {
    let (node, _dir) = node_with(&["calculator", "hostile_escape"], test_limits()).await;
    let granted = tempfile::tempdir().unwrap();
    std::fs::create_dir(granted.path().join("sub")).unwrap();
    std::fs::write(granted.path().join("inside.txt"), "inside").unwrap();
    grant(
        &node,
        "hostile-escape",
        &[&format!("fs={}:/data:rw", granted.path().display())],
    );
    let plant = |target: &str, link: &str| {
        json!({"folder": "/data", "target": target, "link": link}).to_string()
    };
    for (target, link) in [
        ("../../etc/passwd", "trap"),
        ("/etc/passwd", "absolute"),
        ("../../inside.txt", "sub/climb"),
        ("sub/../../x", "sneaky"),
    ] {
        let error = error_of(&node, "hostile-escape", "plant", &plant(target, link)).await;
        assert!(error.contains("not-permitted"), "{target}: {error}");
        assert!(
            std::fs::symlink_metadata(granted.path().join(link)).is_err(),
            "{link} -> {target} was created"
        );
    }
    // Links that stay inside the folder are an agent's own business.
    for (target, link) in [("inside.txt", "alias"), ("../inside.txt", "sub/up")] {
        let made = result_of(
            &node,
            "hostile-escape",
            "plant",
            serde_json::from_str(&plant(target, link)).unwrap(),
        )
        .await;
        assert_eq!(made, format!("{link} -> {target}"));
        let resolved = std::fs::read_to_string(granted.path().join(link)).unwrap();
        assert_eq!(resolved, "inside");
    }
    support::hostile::assert_serving(&node).await;
}

/// How many values a hoarding run stored before the quota refused one.
fn stored_until_quota(hoarded: &serde_json::Value) -> u64 {
    let refusal = hoarded["refusal"].as_str().unwrap();
    assert!(refusal.contains("QuotaExceeded"), "{hoarded}");
    hoarded["stored"].as_u64().unwrap()
}

/// The kv databases in the data directory `data` stay small.
fn assert_kv_files_small(data: &std::path::Path) {
    let kv_bytes: u64 = std::fs::read_dir(data.join("kv"))
        .unwrap()
        .map(|f| f.unwrap().metadata().unwrap().len())
        .sum();
    assert!(kv_bytes < 4 << 20, "the kv files hold {kv_bytes} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_values_do_not_slip_past_the_kv_quota() {
    let (node, dir) = node_with(&["calculator", "hostile_hoard"], test_limits()).await;
    grant(&node, "hostile-hoard", &["kv=8KiB"]);
    // Keys of 10 bytes with nothing in them: counted by bytes alone, 8 KiB
    // would hold 819 of them.
    let fill = json!({"prefix": "e/", "size": 0, "max": 100_000});
    let hoarded = result_of(&node, "hostile-hoard", "fill", fill).await;
    let stored = stored_until_quota(&hoarded);
    let per_entry = 10 + agentsite::testing::ENTRY_OVERHEAD;
    assert_eq!(stored, 8 * 1024 / per_entry, "{hoarded}");
    assert_kv_files_small(dir.path());
    support::hostile::assert_serving(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_results_are_refused_as_malformed() {
    let (node, _dir) = node_with(&["calculator", "hostile_forger"], test_limits()).await;
    let node2 = node.clone();
    let errors = while_serving(&node, async move {
        let mut errors = Vec::new();
        for (tool, arguments) in [
            ("not_json", "{}"),
            ("not_an_object", "{}"),
            ("bad_uri", "{}"),
            ("too_deep", r#"{"levels": 100000}"#),
        ] {
            let error = node2
                .call("hostile-forger", tool, arguments, None)
                .await
                .expect_err("a forged result is refused");
            errors.push((tool, error));
        }
        errors
    })
    .await;
    for (tool, error) in errors {
        assert!(
            matches!(call_error(&error), Some(CallError::MalformedResult(_))),
            "{tool}: {error}"
        );
        assert!(
            error
                .to_string()
                .starts_with("agent returned a malformed result"),
            "{tool}: {error}"
        );
    }
    // As deep as clients read is passed on.
    let fine = node
        .call("hostile-forger", "too_deep", r#"{"levels": 64}"#, None)
        .await
        .unwrap();
    assert!(fine.structured_content.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_sets_one_agents_limits_for_its_next_call() {
    let limits = agentsite::config::Limits {
        deadline: std::time::Duration::from_secs(2),
        ..agentsite::config::Limits::default()
    };
    let (node, _dir) = node_with(&["calculator", "hostile_loop", "hostile_bomb"], limits).await;
    grant(&node, "hostile-loop", &["deadline=300ms"]);
    grant(&node, "hostile-bomb", &["memory=8MiB"]);
    let started = std::time::Instant::now();
    let error = error_of(&node, "hostile-loop", "spin", "{}").await;
    assert_eq!(error, "deadline exceeded after 300ms");
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    let error = error_of(&node, "hostile-bomb", "explode", "{}").await;
    assert_eq!(error, "memory limit of 8.0 MiB exceeded");
    // Revoked: the node's own deadline applies again, from the next call.
    let id = node.resolve("hostile-loop").unwrap().id;
    node.policy()
        .update(|policy| Ok(policy.agents.remove(&agentsite::AgentKey::Id(id))))
        .unwrap();
    let error = error_of(&node, "hostile-loop", "spin", "{}").await;
    assert_eq!(error, "deadline exceeded after 2s");
    support::hostile::assert_serving(&node).await;
}
