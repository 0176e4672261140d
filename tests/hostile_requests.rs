//! Requests the node makes on someone else's word: the token service a
//! registry's challenge names, the endpoint an attached A2A card names.
//! Credentials go only where they were given for (the registry's own
//! domain, over TLS or the registry's own plain HTTP), no request goes to a
//! link-local or metadata address, and what such a request answers is not
//! relayed verbatim.

use crate::support;

use axum::http::{HeaderMap, StatusCode, Uri};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::Cli;
use support::served::Served;

const LIMIT: Duration = Duration::from_secs(60);

/// What a server saw: each request's path and its `Authorization` header.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

fn record(seen: &Seen, uri: &Uri, headers: &HeaderMap) {
    let authorization = headers
        .get("authorization")
        .map(|value| value.to_str().unwrap_or("?").to_owned());
    seen.lock()
        .unwrap()
        .push((uri.path().to_owned(), authorization));
}

/// A server that records every request and answers `/token` with a token.
fn recording() -> (Served, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
        record(&log, &uri, &headers);
        async { (StatusCode::OK, r#"{"token": "from-the-realm"}"#) }
    });
    (Served::start(app), seen)
}

/// A registry that answers everything but its own `/token` with a Bearer
/// challenge naming `realm` (`{self}` stands for its own address), and
/// records what reaches it.
fn challenging(realm: &str) -> (Served, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let realm = Arc::new(Mutex::new(realm.to_owned()));
    let named = realm.clone();
    let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
        record(&log, &uri, &headers);
        let realm = named.lock().unwrap().clone();
        async move {
            if uri.path() == "/token" {
                return (StatusCode::OK, HeaderMap::new(), r#"{"token": "t"}"#);
            }
            let mut challenge = HeaderMap::new();
            challenge.insert(
                "www-authenticate",
                format!(r#"Bearer realm="{realm}",service="registry""#)
                    .parse()
                    .unwrap(),
            );
            challenge.insert(
                "docker-distribution-api-version",
                "registry/2.0".parse().unwrap(),
            );
            (StatusCode::UNAUTHORIZED, challenge, "{}")
        }
    });
    let served = Served::start(app);
    let own = realm.lock().unwrap().replace("{self}", &served.address);
    *realm.lock().unwrap() = own;
    (served, seen)
}

fn add_with_password(cli: &Cli, registry: &Served) -> support::Run {
    let reference = format!("oci://{}/private/calculator:1", registry.address);
    cli.run_fed(
        &["add", &reference, "--username", "ann", "--password-stdin"],
        &[],
        "correct horse\n",
        LIMIT,
    )
}

#[test]
fn a_registrys_challenge_cannot_send_its_credentials_elsewhere() {
    let cli = Cli::new();
    let basic = |seen: &Seen| {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|(_, authorization)| {
                authorization
                    .as_deref()
                    .is_some_and(|a| a.starts_with("Basic"))
            })
            .count()
    };

    // A realm on another port of this machine, over plain HTTP: the
    // credentials are not sent there, and the error names the realm.
    let (realm, realm_seen) = recording();
    let (registry, _) = challenging(&format!("http://{}/token", realm.address));
    let line = add_with_password(&cli, &registry).failure("token realm http://127.0.0.1:");
    assert!(
        line.contains("is plain HTTP, and not the plain-HTTP registry")
            && line.contains("its credentials were not sent there")
            && !line.contains("correct horse"),
        "{line}"
    );
    assert_eq!(
        realm_seen.lock().unwrap().len(),
        0,
        "the realm was asked: {:?}",
        realm_seen.lock().unwrap()
    );

    // Without credentials there is nothing to leak: the realm is asked
    // anonymously.
    let anonymous = cli.run_fed(
        &[
            "add",
            &format!("oci://{}/public/calculator:1", registry.address),
        ],
        &[],
        "",
        LIMIT,
    );
    anonymous.failure("the registry asks for credentials");
    assert!(!realm_seen.lock().unwrap().is_empty());
    assert_eq!(basic(&realm_seen), 0);

    // A metadata address is never asked, with credentials or without.
    for realm in [
        "http://169.254.169.254/latest/api/token",
        "http://[fe80::1]/token",
        "http://metadata.google.internal/token",
    ] {
        let (registry, _) = challenging(realm);
        add_with_password(&cli, &registry).failure("is a link-local or cloud metadata address");
        cli.run_fed(
            &[
                "add",
                &format!("oci://{}/public/calculator:1", registry.address),
            ],
            &[],
            "",
            LIMIT,
        )
        .failure("is a link-local or cloud metadata address");
    }

    // The registry's own token service is sent them.
    let (registry, seen) = challenging("http://{self}/token");
    add_with_password(&cli, &registry).failure("oci://");
    assert_eq!(basic(&seen), 1, "{:?}", seen.lock().unwrap());
    assert_eq!(cli.run(&["ls", "--json"]).json(), serde_json::json!([]));
}

/// A card on a loopback port of its own naming `endpoint` as where its
/// agent takes JSON-RPC.
fn card_naming(endpoint: &str) -> Served {
    let card = serde_json::json!({
        "name": "calc",
        "description": "Adds numbers.",
        "version": "1.0.0",
        "supportedInterfaces": [{"url": endpoint, "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0"}],
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "add", "name": "add", "description": "Adds numbers.", "tags": []}],
    });
    Served::start(axum::Router::new().route(
        "/.well-known/agent-card.json",
        axum::routing::get(move || {
            let card = card.clone();
            async move { axum::Json(card) }
        }),
    ))
}

#[test]
fn an_a2a_card_cannot_point_the_node_at_another_service() {
    // A service of this machine that is no A2A agent: it answers with an
    // error page holding what it should not show.
    let hits = Arc::new(Mutex::new(0));
    let counted = hits.clone();
    let internal = Served::start(axum::Router::new().fallback(move || {
        *counted.lock().unwrap() += 1;
        async {
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "INTERNAL-SECRET admin page",
            )
        }
    }));
    let endpoint = format!("http://{}/a2a", internal.address);
    let card = card_naming(&endpoint);
    let url = format!("http://{}", card.address);
    let cli = Cli::new();

    let line = cli
        .run(&["attach", "calc", &url])
        .failure("on another origin than the card");
    assert!(line.contains(&format!("--endpoint {endpoint}")), "{line}");
    assert_eq!(*hits.lock().unwrap(), 0);
    assert_eq!(cli.run(&["ls", "--json"]).json(), serde_json::json!([]));

    // A metadata address is refused even when named.
    let metadata = "http://169.254.169.254/a2a";
    let to_metadata = card_naming(metadata);
    cli.run(&[
        "attach",
        "meta",
        "--endpoint",
        metadata,
        &format!("http://{}", to_metadata.address),
    ])
    .failure("169.254.169.254, which is a cloud metadata service");

    // Named by the operator, it is attached; what the service answers is
    // not relayed to whoever calls the tool.
    cli.run(&["attach", "calc", "--endpoint", &endpoint, &url])
        .success();
    let failed = cli.call("calc", "add", r#"{"message": "1 + 1"}"#);
    let line = failed.failure("HTTP 500");
    assert!(!failed.stderr().contains("INTERNAL-SECRET"), "{line}");
    assert!(*hits.lock().unwrap() >= 1);
}

#[test]
fn health_follows_no_redirect_and_asks_no_metadata_address() {
    let healthy = Served::start(axum::Router::new().route(
        "/health",
        axum::routing::get(|| async {
            axum::Json(serde_json::json!({"status": "ok", "version": "9", "agents": 0, "tools": 0}))
        }),
    ));
    let elsewhere = format!("http://{}/health", healthy.address);
    let redirecting = Served::start(axum::Router::new().fallback(move || {
        let elsewhere = elsewhere.clone();
        async move { axum::response::Redirect::temporary(&elsewhere) }
    }));
    let cli = Cli::new();
    cli.run(&["health", "--url", &format!("http://{}", healthy.address)])
        .success();
    cli.run(&[
        "health",
        "--url",
        &format!("http://{}", redirecting.address),
    ])
    .failure(&format!("redirects to http://{}/health", healthy.address));
    cli.run(&["health", "--url", "http://169.254.169.254"])
        .failure("cloud metadata service");
}
