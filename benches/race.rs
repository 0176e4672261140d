//! agentsite against Wassette, one driver, the two servers in turns.
//!
//! Both serve the same component, `examples/shapes` (plain exported
//! functions, built with wit-bindgen alone, as Wassette's users write
//! them), and the driver calls its `initial` function (`{"name": "Ada"}`,
//! answer `A`), each call in a fresh instance on both. Each round measures
//! both servers, the order swapped every round, so that what the machine
//! does meanwhile falls on both alike; the table gives each figure's
//! median over the rounds and its range.
//!
//! * **stdio**, 1 and 32 calls in flight: each server started as an MCP
//!   client starts it (`agentsite mcp`, `wassette serve --stdio`);
//! * **HTTP**, 1 and 32 calls in flight: each server's own HTTP transport,
//!   one session per client (agentsite: streamable HTTP, `/mcp`; Wassette
//!   0.2: the HTTP+SSE transport of MCP 2024-11-05, the one it has);
//! * **cold start**: from starting the process to the first call's answer,
//!   over stdio, the component already on disk;
//! * **memory**: the server's resident set after the HTTP runs, serving
//!   the one component.
//!
//! Wassette is not built here: its source is not this repository's to
//! carry. Build it from its own repository (`cargo build --release` at the
//! tag named in BENCHMARKS.md) and point `WASSETTE` at the binary:
//!
//! ```sh
//! WASSETTE=/path/to/wassette cargo bench -p agentsite --bench race
//! ```
//!
//! `RACE_ROUNDS` (default 3), `RACE_CALLS` (calls at one in flight, per
//! round and transport; default 5,000) and `RACE_SECONDS` (each run at 32
//! in flight; default 5) change the amounts.

#[path = "../tests/support/mod.rs"]
mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};
use support::{Cli, cpu_time, micros, percentile};

/// Wassette 0.2 listens for HTTP here, and nowhere else.
const WASSETTE_HTTP: &str = "127.0.0.1:9001";
const IN_FLIGHT: usize = 32;

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Agentsite,
    Wassette,
}

/// One server, installed with the component and ready to start.
struct Contender {
    kind: Kind,
    binary: PathBuf,
    /// agentsite's data directory, or Wassette's home (its plugin
    /// directory and everything it writes are under it).
    home: tempfile::TempDir,
    version: String,
}

impl Contender {
    fn agentsite(cli: &Cli) -> Contender {
        let home = tempfile::tempdir().unwrap();
        // The node's data, with the component added, is the CLI's.
        copy_dir(cli.data(), home.path());
        Contender {
            kind: Kind::Agentsite,
            binary: env!("CARGO_BIN_EXE_agentsite").into(),
            home,
            version: format!("agentsite {}", env!("CARGO_PKG_VERSION")),
        }
    }

    fn wassette(binary: PathBuf, component: &Path) -> Contender {
        let home = tempfile::tempdir().unwrap();
        let plugins = home.path().join("plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        std::fs::copy(component, plugins.join("shapes.wasm")).unwrap();
        let version = Command::new(&binary)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_else(|e| panic!("{} does not run: {e}", binary.display()));
        Contender {
            kind: Kind::Wassette,
            binary,
            home,
            version,
        }
    }

    fn name(&self) -> &'static str {
        match self.kind {
            Kind::Agentsite => "agentsite",
            Kind::Wassette => "Wassette",
        }
    }

    fn command(&self, http: bool) -> Command {
        let mut command = Command::new(&self.binary);
        match self.kind {
            Kind::Agentsite => {
                // Over HTTP, `support::Server` starts it.
                assert!(!http);
                command
                    .arg("--data-dir")
                    .arg(self.home.path())
                    .arg("mcp")
                    .env_remove("AGENTSITE_LOG");
            }
            Kind::Wassette => {
                let plugins = self.home.path().join("plugins");
                command
                    .args(["serve", if http { "--http" } else { "--stdio" }])
                    .arg("--plugin-dir")
                    .arg(plugins)
                    .env("HOME", self.home.path())
                    .env("XDG_DATA_HOME", self.home.path().join("data"))
                    .env("XDG_CONFIG_HOME", self.home.path().join("config"))
                    .env("XDG_CACHE_HOME", self.home.path().join("cache"))
                    .env("RUST_LOG", "off");
            }
        }
        command
    }
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn initialize() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-03-26",
            "capabilities": {},
            "clientInfo": {"name": "race", "version": "1"}
        }
    })
}

fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

fn call(id: u64, tool: &str) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": {"name": "Ada"}}
    })
}

/// The tool that is the component's `initial`, among those listed.
fn initial_tool(list: &Value) -> String {
    list["result"]["tools"]
        .as_array()
        .and_then(|tools| {
            tools.iter().find_map(|tool| {
                let name = tool["name"].as_str()?;
                name.ends_with("initial").then(|| name.to_owned())
            })
        })
        .unwrap_or_else(|| panic!("no tool `initial` listed: {list}"))
}

/// Checks that an answer is the call's: `A`, not an error.
fn check(answer: &Value) {
    let result = &answer["result"];
    assert!(
        result.is_object() && result["isError"] != json!(true),
        "not an answer: {answer}"
    );
    assert!(result.to_string().contains('A'), "not `A`: {answer}");
}

/// A server over its stdin and stdout.
struct StdioServer {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    tool: String,
}

impl StdioServer {
    /// Starts the server, initializes a session and finds the tool.
    fn start(contender: &Contender) -> StdioServer {
        let mut child = contender
            .command(false)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", contender.name()));
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        let mut server = StdioServer {
            child,
            input,
            output,
            tool: String::new(),
        };
        server.send(&initialize());
        let answer = server.receive();
        assert!(answer["result"]["serverInfo"].is_object(), "{answer}");
        server.send(&initialized());
        server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
        server.tool = initial_tool(&server.receive());
        server
    }

    fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.input.write_all(line.as_bytes()).unwrap();
        self.input.flush().unwrap();
    }

    /// The next message with an id (an answer), skipping notifications.
    fn receive(&mut self) -> Value {
        let mut line = String::new();
        loop {
            line.clear();
            let read = self.output.read_line(&mut line).unwrap();
            assert!(read > 0, "the server closed its output");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message.get("id").is_some() {
                return message;
            }
        }
    }

    fn call(&mut self, id: u64) {
        let message = call(id, &self.tool);
        self.send(&message);
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one run of calls gave.
#[derive(Default, Clone, Copy)]
struct Run {
    p50: Duration,
    p99: Duration,
    calls_per_second: f64,
    cpu_per_call: Duration,
}

/// `calls` calls, `in_flight` at a time, over stdio.
fn stdio_run(server: &mut StdioServer, calls: u64, in_flight: usize) -> Run {
    let pid = server.child.id();
    let cpu = cpu_time(pid);
    let mut sent_at = std::collections::HashMap::new();
    let mut times = Vec::with_capacity(calls as usize);
    let started = Instant::now();
    let mut sent = 0;
    while sent < (in_flight as u64).min(calls) {
        sent += 1;
        sent_at.insert(sent, Instant::now());
        server.call(sent + 100);
    }
    for _ in 0..calls {
        let answer = server.receive();
        check(&answer);
        let id = answer["id"].as_u64().unwrap() - 100;
        times.push(sent_at.remove(&id).unwrap().elapsed());
        if sent < calls {
            sent += 1;
            sent_at.insert(sent, Instant::now());
            server.call(sent + 100);
        }
    }
    let elapsed = started.elapsed();
    times.sort();
    Run {
        p50: percentile(&times, 0.5),
        p99: percentile(&times, 0.99),
        calls_per_second: calls as f64 / elapsed.as_secs_f64(),
        cpu_per_call: (cpu_time(pid) - cpu) / calls as u32,
    }
}

/// From starting the server to the answer of its first call, over stdio.
fn cold_start(contender: &Contender) -> Duration {
    let started = Instant::now();
    let mut server = StdioServer::start(contender);
    server.call(2);
    check(&server.receive());
    started.elapsed()
}

/// A server listening for HTTP, and where.
struct Listening {
    /// agentsite's test handle, or Wassette's process; each is stopped
    /// when dropped.
    node: Option<support::Server>,
    child: Option<Child>,
    pid: u32,
    base: String,
}

impl Listening {
    fn start(contender: &Contender) -> Listening {
        match contender.kind {
            Kind::Agentsite => {
                let node = support::Server::start(contender.home.path(), &[]);
                Listening {
                    pid: node.pid(),
                    base: node.base.clone(),
                    node: Some(node),
                    child: None,
                }
            }
            Kind::Wassette => {
                if std::net::TcpStream::connect(WASSETTE_HTTP).is_ok() {
                    panic!("{WASSETTE_HTTP} is taken: Wassette 0.2 listens there only");
                }
                let child = contender
                    .command(true)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                let deadline = Instant::now() + Duration::from_secs(60);
                while std::net::TcpStream::connect(WASSETTE_HTTP).is_err() {
                    assert!(Instant::now() < deadline, "Wassette did not listen in 60 s");
                    std::thread::sleep(Duration::from_millis(20));
                }
                Listening {
                    pid: child.id(),
                    child: Some(child),
                    node: None,
                    base: format!("http://{WASSETTE_HTTP}"),
                }
            }
        }
    }

    fn resident_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap()
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        drop(self.node.take());
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One MCP session over HTTP: agentsite's streamable HTTP, or Wassette's
/// HTTP+SSE (a `GET /sse` stream the answers come on, requests posted to
/// the address its first event names).
enum HttpSession {
    Streamable {
        url: String,
        session: String,
    },
    Sse {
        post: String,
        events: reqwest::Response,
        buffer: String,
    },
}

struct HttpClient {
    client: reqwest::Client,
    session: HttpSession,
    tool: String,
}

impl HttpClient {
    async fn open(kind: Kind, base: &str) -> HttpClient {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(4)
            .build()
            .unwrap();
        let session = match kind {
            Kind::Agentsite => {
                let url = format!("{base}/mcp");
                let response = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .body(initialize().to_string())
                    .send()
                    .await
                    .unwrap();
                let session = response.headers()["mcp-session-id"]
                    .to_str()
                    .unwrap()
                    .to_owned();
                response.text().await.unwrap();
                HttpSession::Streamable { url, session }
            }
            Kind::Wassette => {
                let events = client
                    .get(format!("{base}/sse"))
                    .header("accept", "text/event-stream")
                    .send()
                    .await
                    .unwrap();
                let mut session = HttpSession::Sse {
                    post: String::new(),
                    events,
                    buffer: String::new(),
                };
                let (event, data) = session.next_event().await;
                assert_eq!(event, "endpoint", "{data}");
                if let HttpSession::Sse { post, .. } = &mut session {
                    *post = format!("{base}{data}");
                }
                session
            }
        };
        let mut http = HttpClient {
            client,
            session,
            tool: String::new(),
        };
        if kind == Kind::Wassette {
            let answer = http.request(&initialize()).await;
            assert!(answer["result"]["serverInfo"].is_object(), "{answer}");
        }
        http.notify(&initialized()).await;
        let list = http
            .request(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .await;
        http.tool = initial_tool(&list);
        http
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let (url, session) = match &self.session {
            HttpSession::Streamable { url, session } => (url.as_str(), Some(session)),
            HttpSession::Sse { post, .. } => (post.as_str(), None),
        };
        let mut request = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-03-26");
        }
        request
    }

    async fn notify(&mut self, message: &Value) {
        let response = self.post(message).send().await.unwrap();
        assert!(response.status().is_success(), "{}", response.status());
        response.bytes().await.unwrap();
    }

    /// Sends a request and waits for its answer.
    async fn request(&mut self, message: &Value) -> Value {
        let response = self.post(message).send().await.unwrap();
        assert!(response.status().is_success(), "{}", response.status());
        let body = response.text().await.unwrap();
        match &mut self.session {
            HttpSession::Streamable { .. } => {
                // A JSON answer, or an SSE stream that opens with an empty
                // priming event (its id lets a client resume): the answer
                // is the event whose data is JSON.
                let body = body.replace("\r\n", "\n");
                let json = body
                    .split("\n\n")
                    .filter_map(sse_event)
                    .map(|(_, data)| data)
                    .find(|data| data.starts_with('{'))
                    .unwrap_or_else(|| body.clone());
                serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {body}"))
            }
            HttpSession::Sse { .. } => loop {
                let (event, data) = self.session.next_event().await;
                if event != "message" {
                    continue;
                }
                let answer: Value = serde_json::from_str(&data).unwrap();
                if answer.get("id") == message.get("id") {
                    return answer;
                }
            },
        }
    }
}

impl HttpSession {
    /// The next event of the SSE stream: its type and data.
    async fn next_event(&mut self) -> (String, String) {
        let HttpSession::Sse { events, buffer, .. } = self else {
            unreachable!("only the SSE transport has an event stream")
        };
        loop {
            if let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                if let Some(event) = sse_event(&block) {
                    return event;
                }
                continue;
            }
            let chunk = events
                .chunk()
                .await
                .unwrap()
                .expect("the event stream ended");
            buffer.push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"));
        }
    }
}

/// One SSE event block's type and data; `None` for a block without data
/// (a priming event, a comment).
fn sse_event(block: &str) -> Option<(String, String)> {
    let mut event = "message".to_owned();
    let mut data = String::new();
    for line in block.lines() {
        if let Some(value) = line.strip_prefix("event:") {
            event = value.trim().to_owned();
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push_str(value.trim_start());
        }
    }
    (!data.is_empty()).then_some((event, data))
}

/// `in_flight` sessions calling one after another: `calls` calls in all at
/// one in flight, else for `seconds`.
async fn http_run(
    kind: Kind,
    base: &str,
    pid: u32,
    in_flight: usize,
    calls: u64,
    seconds: u64,
) -> Run {
    let mut clients = Vec::new();
    for _ in 0..in_flight {
        clients.push(HttpClient::open(kind, base).await);
    }
    let cpu = cpu_time(pid);
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let tasks = clients.into_iter().map(|mut client| {
        tokio::spawn(async move {
            let mut times = Vec::new();
            let mut id = 100;
            loop {
                if in_flight == 1 && times.len() as u64 >= calls {
                    break;
                }
                if in_flight > 1 && Instant::now() >= until {
                    break;
                }
                id += 1;
                let message = call(id, &client.tool);
                let sent = Instant::now();
                let answer = client.request(&message).await;
                times.push(sent.elapsed());
                check(&answer);
            }
            times
        })
    });
    let mut times: Vec<Duration> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .flat_map(Result::unwrap)
        .collect();
    let elapsed = started.elapsed();
    let cpu = cpu_time(pid) - cpu;
    times.sort();
    Run {
        p50: percentile(&times, 0.5),
        p99: percentile(&times, 0.99),
        calls_per_second: times.len() as f64 / elapsed.as_secs_f64(),
        cpu_per_call: cpu / times.len().max(1) as u32,
    }
}

/// Everything one round measures of one server.
#[derive(Default, Clone, Copy)]
struct Round {
    stdio_1: Run,
    stdio_32: Run,
    http_1: Run,
    http_32: Run,
    cold_start: Duration,
    resident_kib: u64,
}

fn round(contender: &Contender, runtime: &tokio::runtime::Runtime) -> Round {
    let calls = setting("RACE_CALLS", 5_000);
    let seconds = setting("RACE_SECONDS", 5);
    let mut colds: Vec<Duration> = (0..5).map(|_| cold_start(contender)).collect();
    colds.sort();
    let mut stdio = StdioServer::start(contender);
    // Warm: the first calls load the component and fill the caches.
    stdio_run(&mut stdio, 200, 1);
    let stdio_1 = stdio_run(&mut stdio, calls, 1);
    let stdio_32 = stdio_run(&mut stdio, calls * 4, IN_FLIGHT);
    drop(stdio);
    let server = Listening::start(contender);
    let (http_1, http_32) = runtime.block_on(async {
        http_run(contender.kind, &server.base, server.pid, 1, 200, 0).await;
        let one = http_run(contender.kind, &server.base, server.pid, 1, calls, 0).await;
        let many = http_run(
            contender.kind,
            &server.base,
            server.pid,
            IN_FLIGHT,
            0,
            seconds,
        )
        .await;
        (one, many)
    });
    Round {
        stdio_1,
        stdio_32,
        http_1,
        http_32,
        cold_start: colds[colds.len() / 2],
        resident_kib: server.resident_kib(),
    }
}

/// A figure over the rounds: its median, and its range.
fn spread<T: PartialOrd + Copy>(rounds: &[Round], figure: impl Fn(&Round) -> T) -> (T, T, T) {
    let mut values: Vec<T> = rounds.iter().map(figure).collect();
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (
        values[0],
        values[values.len() / 2],
        values[values.len() - 1],
    )
}

fn main() {
    let Some(wassette) = std::env::var_os("WASSETTE").map(PathBuf::from) else {
        eprintln!(
            "WASSETTE is not set: build Wassette from its source and set WASSETTE to the \
             binary (see the top of benches/race.rs)"
        );
        return;
    };
    let rounds = setting("RACE_ROUNDS", 3) as usize;
    let cli = Cli::new();
    cli.add(&["shapes"]);
    let component = support::wasm("shapes");
    let contenders = [
        Contender::agentsite(&cli),
        Contender::wassette(wassette, &component),
    ];
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut results: [Vec<Round>; 2] = [Vec::new(), Vec::new()];
    for r in 0..rounds {
        let order: [usize; 2] = if r % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            eprintln!("round {} of {rounds}: {}", r + 1, contenders[i].name());
            results[i].push(round(&contenders[i], &runtime));
        }
    }
    print_table(&contenders, &results);
}

fn print_table(contenders: &[Contender; 2], results: &[Vec<Round>; 2]) {
    println!(
        "{} against {}, {} rounds in turns; median (range); ratio = Wassette / agentsite \
         for times and memory, agentsite / Wassette for rates",
        contenders[0].version,
        contenders[1].version,
        results[0].len()
    );
    println!();
    println!("| figure | agentsite | Wassette | ratio |");
    println!("|---|---|---|---|");
    let time = |name: &str, figure: &dyn Fn(&Round) -> Duration| {
        let a = spread(&results[0], figure);
        let w = spread(&results[1], figure);
        println!(
            "| {name} | {} ({}–{}) | {} ({}–{}) | {:.2}× |",
            micros(a.1),
            micros(a.0),
            micros(a.2),
            micros(w.1),
            micros(w.0),
            micros(w.2),
            w.1.as_secs_f64() / a.1.as_secs_f64()
        );
    };
    let rate = |name: &str, figure: &dyn Fn(&Round) -> f64| {
        let a = spread(&results[0], figure);
        let w = spread(&results[1], figure);
        println!(
            "| {name} | {:.0} ({:.0}–{:.0}) | {:.0} ({:.0}–{:.0}) | {:.2}× |",
            a.1,
            a.0,
            a.2,
            w.1,
            w.0,
            w.2,
            a.1 / w.1
        );
    };
    time("stdio, 1 in flight: p50", &|r| r.stdio_1.p50);
    time("stdio, 1 in flight: p99", &|r| r.stdio_1.p99);
    time("stdio, 1 in flight: server CPU per call", &|r| {
        r.stdio_1.cpu_per_call
    });
    rate("stdio, 32 in flight: calls/s", &|r| {
        r.stdio_32.calls_per_second
    });
    time("stdio, 32 in flight: server CPU per call", &|r| {
        r.stdio_32.cpu_per_call
    });
    time("HTTP, 1 in flight: p50", &|r| r.http_1.p50);
    time("HTTP, 1 in flight: p99", &|r| r.http_1.p99);
    time("HTTP, 1 in flight: server CPU per call", &|r| {
        r.http_1.cpu_per_call
    });
    rate("HTTP, 32 in flight: calls/s", &|r| {
        r.http_32.calls_per_second
    });
    time("HTTP, 32 in flight: p50", &|r| r.http_32.p50);
    time("HTTP, 32 in flight: server CPU per call", &|r| {
        r.http_32.cpu_per_call
    });
    time("cold start to first answer (stdio)", &|r| r.cold_start);
    let a = spread(&results[0], |r| r.resident_kib);
    let w = spread(&results[1], |r| r.resident_kib);
    println!(
        "| resident memory after the HTTP runs | {:.1} MiB ({:.1}–{:.1}) | {:.1} MiB ({:.1}–{:.1}) | {:.2}× |",
        a.1 as f64 / 1024.0,
        a.0 as f64 / 1024.0,
        a.2 as f64 / 1024.0,
        w.1 as f64 / 1024.0,
        w.0 as f64 / 1024.0,
        w.2 as f64 / 1024.0,
        w.1 as f64 / a.1 as f64
    );
}
