//! A node killed with SIGKILL in the middle of adds and fetches loses
//! nothing it reported done and keeps nothing broken: after a restart every
//! blob in the store hashes to its name, every listed agent loads and runs,
//! and adding or fetching again works.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::{Cli, Server, eventually};

/// Runs `args` against the node in `data` again and again until `stop`,
/// killing (SIGKILL) the run in flight when it comes.
fn keep_running(
    data: PathBuf,
    args: Vec<String>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<u32> {
    std::thread::spawn(move || {
        let mut finished = 0;
        while !stop.load(Ordering::SeqCst) {
            let mut child: Child = Command::new(env!("CARGO_BIN_EXE_agentsite"))
                .arg("--data-dir")
                .arg(&data)
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            loop {
                if stop.load(Ordering::SeqCst) {
                    let _ = child.kill();
                    let _ = child.wait();
                    return finished;
                }
                if child.try_wait().unwrap().is_some() {
                    finished += 1;
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        finished
    })
}

/// Every blob under a content name hashes to that name.
fn assert_blobs_whole(data: &Path) {
    use sha2::{Digest as _, Sha256};
    let dir = data.join("blobs/sha256");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with(".tmp-") {
            // An unfinished write: never read under a content name.
            continue;
        }
        let digest = hex::encode(Sha256::digest(std::fs::read(&path).unwrap()));
        assert_eq!(digest, name, "blob {name} is corrupt or partial");
    }
}

#[test]
fn a_node_killed_mid_add_and_fetch_restarts_whole() {
    // A provider with four agents of 1 to 4 MiB for the victim to fetch.
    let provider = Cli::new();
    let mut published = Vec::new();
    for mib in 1..=4 {
        let file = provider.data().join(format!("remote-{mib}.wasm"));
        std::fs::write(&file, support::padded_agent("calculator", mib << 20)).unwrap();
        published.push(
            provider
                .run(&["add", file.to_str().unwrap(), "--keep-both"])
                .success()
                .trim()
                .to_owned(),
        );
    }
    let provider_node = Server::start(provider.data(), &["--p2p-listen", "/ip4/127.0.0.1/tcp/0"]);
    for id in &published {
        provider.run(&["publish", id]).success();
    }
    let bootstrap = provider_node.p2p.clone().unwrap();

    // Local files for the victim to add: six agents of 0.5 to 3 MiB (and
    // a page, so that none is byte for byte one of the remote agents).
    let files = tempfile::tempdir().unwrap();
    let local: Vec<String> = (1..=6)
        .map(|half_mib| {
            let file = files.path().join(format!("local-{half_mib}.wasm"));
            std::fs::write(
                &file,
                support::padded_agent("calculator", (half_mib << 19) + 4096),
            )
            .unwrap();
            file.to_str().unwrap().to_owned()
        })
        .collect();

    let victim = Cli::new();
    for (round, kill_after) in [300u64, 900, 1700].into_iter().enumerate() {
        let mut node = Server::start(
            victim.data(),
            &[
                "--p2p-listen",
                "/ip4/127.0.0.1/tcp/0",
                "--bootstrap",
                &bootstrap,
            ],
        );
        let stop = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        for file in &local {
            // Builds of one agent, each kept beside the others.
            let args = vec!["add".to_owned(), file.clone(), "--keep-both".to_owned()];
            workers.push(keep_running(victim.data().to_owned(), args, stop.clone()));
        }
        for id in &published {
            let args = vec!["fetch".to_owned(), id.clone()];
            workers.push(keep_running(victim.data().to_owned(), args, stop.clone()));
        }
        std::thread::sleep(Duration::from_millis(kill_after));
        // The crash: the node and every command writing its store at once.
        node.kill();
        stop.store(true, Ordering::SeqCst);
        let finished: u32 = workers.into_iter().map(|w| w.join().unwrap()).sum();
        eprintln!("round {round}: killed after {kill_after} ms, {finished} commands had finished");

        // After the restart: nothing broken is stored...
        assert_blobs_whole(victim.data());
        // ...and every agent it lists loads and runs.
        let listed = victim.run(&["ls", "--json"]).json();
        for agent in listed.as_array().unwrap() {
            let id = agent["id"].as_str().unwrap();
            let sum = victim.call(id, "add", r#"{"a": 20, "b": 22}"#).json();
            assert_eq!(sum["structuredContent"]["result"], 42.0, "{id}");
        }
    }

    // The store takes new work: every local agent adds, every remote one fetches.
    let _node = Server::start(
        victim.data(),
        &[
            "--p2p-listen",
            "/ip4/127.0.0.1/tcp/0",
            "--bootstrap",
            &bootstrap,
        ],
    );
    for file in &local {
        victim.run(&["add", file, "--keep-both"]).success();
    }
    for id in &published {
        eventually(Duration::from_secs(60), "the fetch succeeds", || {
            let run = victim.run(&["fetch", id]);
            if run.ok() { Ok(()) } else { Err(run.stderr()) }
        });
    }
    assert_blobs_whole(victim.data());
    let listed = victim.run(&["ls", "--json"]).json();
    assert_eq!(
        listed.as_array().unwrap().len(),
        local.len() + published.len()
    );
}
