//! Replays every input in `fuzz/regressions/<target>/` through its fuzz
//! target's harness (`fuzz/src/lib.rs`, compiled into this suite): each is
//! an input a fuzzer once crashed on (or a seed worth keeping), and must
//! now pass. Here, in the suite's one build, rather than as the fuzz
//! workspace's own `cargo test`, which built the whole node a second time.

#[path = "../fuzz/src/lib.rs"]
mod harness;

use crate::support::repo;

fn replay(target: &str, run: impl Fn(&[u8])) {
    let dir = repo().join("fuzz/regressions").join(target);
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
        harness::mcp_request(data);
    });
}

/// The harness reaches the real request path: seeds get the answers a
/// client would.
#[test]
fn the_mcp_seeds_are_answered_as_over_the_wire() {
    let dir = repo().join("fuzz/regressions/mcp_request");
    let status = |name: &str| harness::mcp_request(&std::fs::read(dir.join(name)).unwrap());
    assert_eq!(status("stateless-tools-list"), Some(200));
    assert_eq!(status("initialize"), Some(200));
    assert_eq!(status("batch"), Some(400));
}

#[test]
fn manifests() {
    replay("manifest", harness::manifest);
}

#[test]
fn components() {
    replay("component", harness::component);
}

#[test]
fn openai_answers_and_requests() {
    replay("openai", harness::openai);
}

#[test]
fn policy_files() {
    replay("policy_file", harness::policy_file);
}

#[test]
fn a2a_cards() {
    replay("card", harness::card);
}

#[test]
fn did_keys() {
    replay("did_key", harness::did_key);
}
