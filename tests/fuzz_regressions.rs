//! Replays every input in `regressions/<target>/` through its target: each
//! is an input a fuzzer once crashed on (or a seed worth keeping), and must
//! now pass.

use std::path::Path;

fn replay(target: &str, run: impl Fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("regressions")
        .join(target);
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            continue;
        }
        run(&std::fs::read(&path).unwrap());
        replayed += 1;
    }
    assert!(replayed > 0, "no inputs in {}", dir.display());
}

#[test]
fn mcp_requests() {
    replay("mcp_request", |data| {
        agentsite_fuzz::mcp_request(data);
    });
}

/// The harness reaches the real request path: seeds get the answers a
/// client would.
#[test]
fn the_mcp_seeds_are_answered_as_over_the_wire() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions/mcp_request");
    let status = |name: &str| agentsite_fuzz::mcp_request(&std::fs::read(dir.join(name)).unwrap());
    assert_eq!(status("stateless-tools-list"), Some(200));
    assert_eq!(status("initialize"), Some(200));
    assert_eq!(status("batch"), Some(400));
}

#[test]
fn manifests() {
    replay("manifest", agentsite_fuzz::manifest);
}

#[test]
fn components() {
    replay("component", agentsite_fuzz::component);
}

#[test]
fn openai_answers_and_requests() {
    replay("openai", agentsite_fuzz::openai);
}
