//! The node's web pages in a real browser: the distribution's Chromium,
//! driven by Playwright (tests/web/journeys/*.mjs), against real `agentsite
//! serve` processes on loopback. Each test is one person's journey; the
//! screenshots it takes land in `$CARGO_TARGET_DIR/screenshots` (the
//! README's come from there).

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use support::{Cli, Server, eventually, installed_tool, repo, run_bounded, tools_dir};

/// The longest one journey may take, browser start included.
const JOURNEY_LIMIT: Duration = Duration::from_secs(240);

fn screenshots() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"));
    target.join("screenshots")
}

/// Runs the journey `name` with `env`; fails the test with what the
/// journey printed when it does not finish well.
fn journey(name: &str, env: &[(&str, &str)]) {
    installed_tool("web/node_modules/playwright-core/package.json");
    let chromium =
        std::env::var("AGENTSITE_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&chromium).exists(),
        "{chromium} is missing: run `bash scripts/tools.sh` once to install Chromium"
    );
    let script = repo()
        .join("tests/web/journeys")
        .join(format!("{name}.mjs"));
    let mut command = Command::new("node");
    command
        .arg(&script)
        .env("AGENTSITE_TOOLS", tools_dir())
        .env("AGENTSITE_SCREENSHOTS", screenshots())
        .env("AGENTSITE_CHROMIUM", &chromium);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = run_bounded(&mut command, JOURNEY_LIMIT);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "journey {name} failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
}

/// Hub: search (a card arriving from another node), filters, an agent's
/// page, a tool tried through its form (a mistake caught in the page, a
/// result, a tool error), the same call as a command, a phone's screen.
#[test]
fn search_open_an_agent_and_try_its_tools() {
    let here = Cli::new();
    here.add(&["calculator", "notes"]);
    let there = Cli::new();
    there.add(&["text"]);
    let node = Server::join(here.data(), None);
    let other = Server::join(there.data(), Some(&node));
    there.run(&["publish", "text"]).success();
    // The page's node finds it by searching, as a person's search would.
    eventually(Duration::from_secs(30), "the text agent is found", || {
        let found = here.run(&["search", "words", "--json"]).json();
        if found.to_string().contains("\"text\"") {
            Ok(())
        } else {
            Err(found)
        }
    });
    journey(
        "hub",
        &[("AGENTSITE_URL", &node.base), ("REMOTE_AGENT", "text")],
    );
    drop(other);
}
