//! What each fuzz target does with its input, shared by the targets in
//! `fuzz_targets/` and by the node's suite (`tests/fuzz_regressions.rs`
//! includes this file), which replays every input a fuzzer ever crashed
//! on (kept in `regressions/<target>/`).
//!
//! A target passes when it returns: bad input must end in an error value,
//! never a panic, an abort or a hang.

use agentsite::NodeConfig;
use agentsite::config::{DataDir, Limits};
use agentsite::http::token::{Family, Gate};
use agentsite::mcp::hosted::Hosted;
use agentsite::mcp::http::router;
use agentsite::runtime::{Capacity, Runtime};
use agentsite::store::manifest::SignedManifest;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Decodes `data` as a signed manifest from the network: checks the
/// signature, the shape and every field.
pub fn manifest(data: &[u8]) {
    if let Ok(signed) = SignedManifest::decode(data) {
        // What decodes is used at once: chunk ranges, search keywords.
        let manifest = signed.manifest();
        for index in 0..manifest.chunk_count() {
            let _ = manifest.chunk_range(index);
        }
        let _ = manifest.keywords();
        let _ = signed.publisher_id();
    }
}

/// Compiles `data` as a component and, if it compiles, checks it against
/// the agent world, as `agentsite add` does.
pub fn component(data: &[u8]) {
    static RUNTIME: OnceLock<(Runtime, tempfile::TempDir)> = OnceLock::new();
    let (runtime, _) = RUNTIME.get_or_init(|| {
        let kv = tempfile::tempdir().unwrap();
        let runtime =
            Runtime::new(kv.path().to_owned(), Capacity::OneShot, Default::default()).unwrap();
        (runtime, kv)
    });
    if let Ok(compiled) = runtime.compile(data, Limits::default().compile_deadline) {
        let component = compiled.component;
        let id = agentsite::AgentId::of(data);
        let _ = runtime.prepare(id, "fuzzed", &component, &Limits::default());
        let _ = runtime.imports(&component);
    }
}

/// The HTTP front end of an empty node, built once per process.
struct Front {
    runtime: tokio::runtime::Runtime,
    router: axum::Router,
    _data: tempfile::TempDir,
}

fn front() -> &'static Front {
    static FRONT: OnceLock<Front> = OnceLock::new();
    FRONT.get_or_init(|| {
        let data = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let router = runtime.block_on(async {
            let node = agentsite::Node::open(
                DataDir::new(data.path()),
                NodeConfig::default(),
                Capacity::OneShot,
            )
            .unwrap();
            let hosted = Hosted::new(Arc::new(node)).unwrap();
            router(
                hosted,
                Gate::new(None, Family::Text),
                tokio_util::sync::CancellationToken::new(),
                agentsite::mcp::sessions::DORMANT_AFTER,
            )
        });
        Front {
            runtime,
            router,
            _data: data,
        }
    })
}

/// POSTs `data` to `/mcp` as a JSON-RPC message and returns the HTTP
/// status. The first byte picks the protocol era (the stateless 2026-07-28
/// or the session handshake), so both request paths are explored.
pub fn mcp_request(data: &[u8]) -> Option<u16> {
    use tower::ServiceExt as _;
    let (&era, body) = data.split_first()?;
    let mut request = axum::http::Request::post("/mcp")
        .header("host", "127.0.0.1:7777")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if era % 2 == 0 {
        // Stateless requests name their method (and tool) in headers too,
        // which must agree with the body.
        request = request.header("mcp-protocol-version", "2026-07-28");
        // (Only what a header can carry: a client could send nothing else.)
        if let Ok(message) = serde_json::from_slice::<serde_json::Value>(body) {
            let header =
                |value: &serde_json::Value| axum::http::HeaderValue::from_str(value.as_str()?).ok();
            if let Some(method) = header(&message["method"]) {
                request = request.header("mcp-method", method);
            }
            if let Some(name) = header(&message["params"]["name"]) {
                request = request.header("mcp-name", name);
            }
        }
    }
    let request = request.body(axum::body::Body::from(body.to_vec())).unwrap();
    let front = front();
    front.runtime.block_on(async {
        let response = front.router.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        // A session's event stream may stay open: read what comes in time.
        let body = axum::body::to_bytes(response.into_body(), 1 << 20);
        let _ = tokio::time::timeout(Duration::from_secs(2), body).await;
        Some(status)
    })
}

/// Reads `data` as an OpenAI-compatible server's answer, or a client's
/// request to the node's `/v1`. The first byte picks which: a whole answer,
/// a streamed one (server-sent events, cut into pieces of the second byte's
/// length, as a network delivers them) or a request.
pub fn openai(data: &[u8]) {
    use agentsite::llm::{openai, wire};
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => {
            let _ = wire::completion_from_wire(rest, "fuzzed");
        }
        1 => {
            let Some((&piece, body)) = rest.split_first() else {
                return;
            };
            let pieces: Vec<Result<bytes::Bytes, String>> = body
                .chunks(usize::from(piece).max(1))
                .map(|chunk| Ok(bytes::Bytes::copy_from_slice(chunk)))
                .collect();
            let stream = futures::stream::iter(pieces);
            let _ = futures::executor::block_on(openai::assemble_stream(
                stream,
                "fuzzed",
                std::time::Instant::now(),
                &None,
            ));
        }
        _ => {
            if let Ok(request) = serde_json::from_slice::<wire::ChatCompletionRequest>(rest) {
                let _ = wire::request_from_wire(request);
            }
        }
    }
}

/// Reads `data` as a policy file: as Wassette's `policy.yaml` that
/// `agentsite grant --from-policy` imports (a stranger's file), and as the
/// node's own `policy.toml`.
pub fn policy_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = agentsite::policy::wassette::grant_items(
        text,
        std::path::Path::new("/nonexistent/policy.yaml"),
    );
    let _ = agentsite::policy::Policy::parse(text);
}

/// Reads `data` as the A2A Agent Card a peer answered: its signature, its
/// fields, the endpoint it names.
pub fn card(data: &[u8]) {
    let _ = agentsite::testing::read_a2a_card(
        "http://127.0.0.1:9/.well-known/agent-card.json",
        data,
        None,
    );
}

/// Reads `data` as a did:key, as a signed card's `kid` or an operator's
/// `trust` names one.
pub fn did_key(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = agentsite::did::peer_of(text);
    }
}
