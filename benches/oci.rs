//! Adding an agent from an OCI registry against adding its file: what the
//! pull costs on top of what every add does (check the component, store
//! it, compile it in the node's compiler process).
//!
//! A CNCF distribution registry (Debian's `docker-registry`) runs on
//! loopback; each component is pushed once with `agentsite push`, then
//! added 7 times each way into a fresh data directory, timed from exec to
//! exit of `agentsite add`: the median, and the pull's share.
//!
//! Run with `cargo bench -p agentsite --bench oci` after building the
//! examples and installing the test tools (`bash scripts/tools.sh`).

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::registry::Registry;

const ROUNDS: usize = 7;

fn add(source: &str) -> Duration {
    let data = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_agentsite"))
        .arg("--data-dir")
        .arg(data.path())
        .args(["add", source])
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(
        output.status.success(),
        "add {source}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    took
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let registry = Registry::start();
    println!("| component | size | add FILE (p50) | add oci://… (p50) | the pull's share |");
    println!("|---|---|---|---|---|");
    let subjects = [
        (
            "calculator (Rust)",
            support::wasm("calculator"),
            "calculator",
        ),
        (
            "stats (Python)",
            support::python_agent("python-stats"),
            "stats",
        ),
    ];
    for (label, file, name) in subjects {
        let author = tempfile::tempdir().unwrap();
        let cli = |args: &[&str]| {
            let output = Command::new(env!("CARGO_BIN_EXE_agentsite"))
                .arg("--data-dir")
                .arg(author.path())
                .args(args)
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        };
        cli(&["add", file.to_str().unwrap()]);
        let reference = registry.reference(&format!("bench/{name}:1"));
        cli(&["push", name, &reference]);
        // Alternate the two, so that the machine's moods fall on both.
        let (mut by_file, mut by_pull) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            by_file.push(add(file.to_str().unwrap()));
            by_pull.push(add(&reference));
        }
        let (by_file, by_pull) = (median(by_file), median(by_pull));
        let size = std::fs::metadata(Path::new(&file)).unwrap().len();
        println!(
            "| {label} | {:.1} MiB | {:.0} ms | {:.0} ms | {:+.0} ms |",
            size as f64 / (1024.0 * 1024.0),
            by_file.as_secs_f64() * 1e3,
            by_pull.as_secs_f64() * 1e3,
            (by_pull.as_secs_f64() - by_file.as_secs_f64()) * 1e3,
        );
    }
}
