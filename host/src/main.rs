//! The `agentsite` command: parses the command line and calls the library.

use agentsite::config::DataDir;
use agentsite::runtime::{Capacity, compiler};
use agentsite::server::config::Config;
use agentsite::{Node, cli};
use anyhow::Context as _;
use bytesize::ByteSize;
use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Host AI agents compiled to WebAssembly components and call their tools.
#[derive(Parser)]
#[command(name = "agentsite", version, about, propagate_version = true)]
struct Args {
    /// Where agents and their data are stored [default: $XDG_DATA_HOME/agentsite].
    #[arg(
        long,
        global = true,
        env = "AGENTSITE_DATA_DIR",
        value_name = "DIR",
        help_heading = "Global options"
    )]
    data_dir: Option<PathBuf>,

    /// Configuration file [default: <data-dir>/config.toml, if present].
    #[arg(
        long,
        global = true,
        env = "AGENTSITE_CONFIG",
        value_name = "FILE",
        help_heading = "Global options"
    )]
    config: Option<PathBuf>,

    /// Policy file: grants and trusted publishers [default: <data-dir>/policy.toml].
    #[arg(
        long,
        global = true,
        env = "AGENTSITE_POLICY",
        value_name = "FILE",
        help_heading = "Global options"
    )]
    policy: Option<PathBuf>,

    /// More log output on stderr (-v: info, -vv: debug, -vvv: trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, help_heading = "Global options")]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

/// How `add` and `push` reach a registry.
#[derive(clap::Args)]
struct RegistryAccess {
    /// The user name at the registry (the password comes from --password-stdin).
    #[arg(long, requires = "password_stdin")]
    username: Option<String>,
    /// Read the registry password (or token) from stdin.
    #[arg(long, requires = "username")]
    password_stdin: bool,
    /// Speak plain HTTP to the registry (one on this machine always is).
    #[arg(long)]
    plain_http: bool,
}

impl From<RegistryAccess> for cli::registry::Access {
    fn from(access: RegistryAccess) -> Self {
        Self {
            username: access.username,
            password_stdin: access.password_stdin,
            plain_http: access.plain_http,
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Add agents from component files or OCI registries; prints the id of
    /// each.
    ///
    /// A new build of an installed agent replaces it, and keeps its grants
    /// and key-value data, which follow the agent's name; --keep-both
    /// installs it beside.
    ///
    /// A registry reference (oci://REGISTRY/REPOSITORY:TAG or @sha256:...)
    /// is pulled in the Wasm OCI artifact layout of wkg and Wassette.
    /// Credentials: --username with --password-stdin; else
    /// AGENTSITE_REGISTRY_TOKEN, or AGENTSITE_REGISTRY_USERNAME and
    /// AGENTSITE_REGISTRY_PASSWORD, for the registry AGENTSITE_REGISTRY
    /// names; else the registry's entry in $REGISTRY_AUTH_FILE or Docker's
    /// config.json; else anonymous. A token realm is sent them only on the
    /// registry's own domain, over TLS (or the registry's own plain HTTP),
    /// never at a link-local or metadata address.
    #[command(
        after_help = "Examples:\n  agentsite add target/wasm32-wasip2/release/echo.wasm\n  agentsite add oci://ghcr.io/OWNER/echo:1.0"
    )]
    Add {
        /// WebAssembly component files (built for wasm32-wasip2) or oci:// references.
        #[arg(required = true, value_name = "FILE.wasm | oci://REF")]
        sources: Vec<String>,
        /// The name of a component of plain functions (a Wassette-style
        /// component carries no card) [default: its file's or repository's name].
        #[arg(long)]
        name: Option<String>,
        /// Install beside an agent of the same name instead of replacing
        /// it (by default a new build replaces the installed one and keeps
        /// its grants and key-value data).
        #[arg(long)]
        keep_both: bool,
        #[command(flatten)]
        registry: RegistryAccess,
    },
    /// Push an installed component to an OCI registry, in the Wasm OCI
    /// artifact layout (config application/vnd.wasm.config.v0+json, one
    /// application/wasm layer) that wkg and Wassette pull; prints the
    /// reference pinned to the pushed manifest. Credentials as for `add`.
    Push {
        /// Agent name, id, or unique id prefix.
        agent: String,
        /// Where to push: oci://REGISTRY/REPOSITORY:TAG.
        #[arg(value_name = "oci://REF")]
        reference: String,
        #[command(flatten)]
        registry: RegistryAccess,
        /// Sign the pushed manifest in cosign's format (a `sha256-….sig`
        /// tag beside it), with the node's publisher key or, without one,
        /// its identity: the key operators trust with `agentsite trust`.
        #[arg(long)]
        sign: bool,
        /// Sign with this ed25519 key instead (PKCS#8 PEM, as `openssl
        /// genpkey -algorithm ed25519` writes it); implies --sign.
        #[arg(long, value_name = "FILE")]
        key: Option<std::path::PathBuf>,
    },
    /// Attach an existing MCP server or A2A agent as an agent of this node:
    /// a command the node starts and supervises (`attach NAME -- COMMAND
    /// ARGS...`, MCP over its stdio), or a URL (`attach NAME URL`): an A2A
    /// agent when an Agent Card is at URL/.well-known/agent-card.json, else
    /// a streamable-HTTP MCP endpoint. Its tools (or skills) are checked
    /// and recorded now; the node starts it when it is first called. It is
    /// not sandboxed by the node.
    Attach {
        /// The agent name its tools are served under (a-z 0-9 - _).
        name: String,
        /// A URL, or `--` and a command with its arguments.
        #[arg(required = true, num_args = 1.., value_name = "URL | -- COMMAND ARGS", allow_hyphen_values = true)]
        target: Vec<String>,
        /// The JSON-RPC endpoint of an A2A agent whose card names one on
        /// another origin than the card's: the node posts there only when
        /// you name it.
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
    },
    /// Detach an attached MCP server or A2A agent: its tools are no longer
    /// served and the node stops it.
    Detach {
        /// Agent name, id, or unique id prefix.
        agent: String,
    },
    /// List installed agents.
    Ls {
        /// Print JSON records instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show the tools of an agent.
    Tools {
        /// Agent name, id, or unique id prefix.
        agent: String,
        /// Print the MCP tool descriptors as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Call a tool; prints its result for a person at a terminal, and as
    /// MCP JSON (a CallToolResult) with --json or into a pipe.
    Call {
        /// Agent name, id, or unique id prefix.
        agent: String,
        /// Tool name.
        tool: String,
        /// Arguments, a JSON object; @FILE reads them from a file, - from
        /// standard input.
        #[arg(default_value = "{}")]
        arguments: String,
        /// Wall-clock limit for this call, such as 500ms or 30s.
        #[arg(long, value_parser = humantime::parse_duration)]
        deadline: Option<Duration>,
        /// Memory limit for this call, such as 16MiB.
        #[arg(long)]
        memory: Option<ByteSize>,
        /// Call the agent on a node of the network that hosts it (the agent
        /// is an id, or a name found by searching), through the running node.
        #[arg(long, conflicts_with = "memory")]
        remote: bool,
        /// With --remote: check the answer by running the call again (on
        /// this node, after fetching the agent by hash, or on a second
        /// host); possible when the call read no clock, randomness,
        /// network, stored data or model. A wrong answer blocks its node.
        #[arg(long, requires = "remote")]
        verify: bool,
        /// Print the MCP result as JSON, also at a terminal.
        #[arg(long)]
        json: bool,
    },
    /// Show an agent's card, tools, the imports it asks for and its size.
    Inspect {
        /// Agent name, id, or unique id prefix.
        agent: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Grant an agent (or a publisher's agents, or every agent) a
    /// capability or limit; applies to the next call, also on a running node.
    ///
    /// Items: fs=/host/folder:/guest/path[:rw], http=https://host[:port],
    /// env=NAME, kv=QUOTA, peers[=DEPTH/FANOUT], llm, memory=SIZE,
    /// deadline=DURATION, concurrency=N.
    ///
    /// With --from-policy, the items are read from a Wassette permission
    /// file (policy.yaml): storage folders, network hosts, environment
    /// variables and memory; what has no safe equivalent is refused with
    /// its reason, and then nothing is granted. What it grants is printed,
    /// and a broad grant (a writable folder outside the scratch area, every
    /// host of a domain, every port) is asked about first.
    ///
    /// What reaches the node itself (its data directory, its configuration
    /// and policy files, /proc, /sys, /dev, the host's root, the node's
    /// secrets in its environment, every host, a metadata address) is
    /// refused with the reason, unless --dangerously-allow-node-access.
    #[command(
        after_help = "Examples:\n  agentsite grant notes kv=1MiB\n  agentsite grant weather http=https://api.weather.gov env=WEATHER_KEY\n  agentsite grant --publisher 12D3KooW... llm peers=2/8\n  agentsite grant filesystem --from-policy policy.yaml"
    )]
    Grant {
        #[command(flatten)]
        edit: PolicyEdit,
        /// Also grant what this Wassette policy.yaml allows.
        #[arg(long, value_name = "FILE")]
        from_policy: Option<PathBuf>,
        /// Grant what --from-policy allows without asking, broad or not.
        #[arg(long, short = 'y', requires = "from_policy")]
        yes: bool,
        /// Grant items that reach the node itself: the agent can then read
        /// the node's secrets or change its policy. Only for an agent you
        /// trust as much as the node.
        #[arg(long)]
        dangerously_allow_node_access: bool,
    },
    /// Take back grants (kv, fs, fs=/guest, http=PATTERN, env=NAME, ..., or
    /// all); a less specific grant decides them again.
    Revoke(PolicyEdit),
    /// Trust a publisher key: its agents fetched from the network get the
    /// defaults and its own grants instead of pure computation, and
    /// components it signed in OCI registries are admitted as signed.
    Trust {
        /// The key: a peer id (12D3KooW...), a did:key (did:key:z6Mk...),
        /// or an ed25519 PEM public key file (such as cosign.pub).
        key: String,
    },
    /// Stop trusting a publisher key (and drop its grants).
    Untrust {
        /// The key, as for `trust`.
        key: String,
    },
    /// Show the policy: defaults, trusted publishers and grants.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Remove an agent.
    Rm {
        /// Agent name, id, or unique id prefix.
        agent: String,
        /// Also delete the agent's key-value data.
        #[arg(long)]
        purge: bool,
    },
    /// Serve this node until interrupted: the installed agents over MCP
    /// (/mcp, /agents/<agent>/mcp) and A2A, the web pages (/: AgentHub,
    /// AgentChat, the network), the node's models in the OpenAI format
    /// (/v1), /health and /metrics; and, unless --no-p2p, the node on the
    /// agent network.
    Serve {
        /// Address and port to listen on [default: 127.0.0.1:7777, or `listen` in the config].
        #[arg(long, value_name = "ADDR:PORT")]
        listen: Option<std::net::SocketAddr>,
        /// Bearer token clients must present; required to listen beyond loopback.
        #[arg(long, env = "AGENTSITE_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Also accept requests whose Host is this name (repeatable).
        #[arg(long = "allow-host", value_name = "HOST")]
        allow_hosts: Vec<String>,
        /// Also accept browser requests from this origin, e.g. https://app.example.com:443 (repeatable).
        #[arg(long = "allow-origin", value_name = "ORIGIN")]
        allow_origins: Vec<String>,
        /// Listen for other nodes on this libp2p address, e.g.
        /// /ip4/0.0.0.0/tcp/4077 (repeatable) [default: `listen` under [p2p] in the config].
        #[arg(long = "p2p-listen", value_name = "MULTIADDR")]
        p2p_listen: Vec<String>,
        /// Join the network through this peer, e.g.
        /// /ip4/203.0.113.7/tcp/4077/p2p/12D3Koo... (repeatable; adds to the config's).
        #[arg(long, value_name = "MULTIADDR")]
        bootstrap: Vec<String>,
        /// Do not join the network; serve MCP only.
        #[arg(long, conflicts_with_all = ["p2p_listen", "bootstrap"])]
        no_p2p: bool,
        /// Also find peers on the local network by mDNS.
        #[arg(long)]
        mdns: bool,
    },
    /// Ask a node's /health whether it serves: the running node of the data
    /// directory, or the node at --url. Exits non-zero unless it does (a
    /// container's health check).
    Health {
        /// The node's base URL, such as http://127.0.0.1:7777 [default: the
        /// node running for the data directory].
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// Print the node's answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Make a new agent: a project in Rust, Python or JavaScript with two
    /// tools (text and structured output), built with the SDK this binary
    /// carries.
    New {
        /// The agent's name (a-z 0-9 - _), also its project's.
        name: String,
        /// The language it is written in.
        #[arg(long, value_enum, default_value = "rust")]
        lang: cli::Lang,
        /// The folder to make [default: ./NAME].
        #[arg(long, value_name = "DIR")]
        path: Option<PathBuf>,
    },
    /// Build the agent project in PATH, add it and serve it, and again on
    /// each saved change: the new build replaces the one before and keeps
    /// its grants and key-value data. Rust (a Cargo.toml), Python (app.py)
    /// or JavaScript (app.js). Serves on HTTP only, or adds each build to
    /// the node already serving the data directory.
    #[command(
        after_help = "Examples:\n  agentsite new tally && agentsite dev tally\n  agentsite dev --listen 127.0.0.1:8080 path/to/agent\n  agentsite dev app.py"
    )]
    Dev {
        /// The project folder, or a Python or JavaScript program.
        #[arg(default_value = ".")]
        path: PathBuf,
        /// Address and port to listen on [default: 127.0.0.1:7777, or `listen` in the config].
        #[arg(long, value_name = "ADDR:PORT")]
        listen: Option<std::net::SocketAddr>,
        /// How long to wait after a change for the next before building.
        #[arg(long, default_value = "300ms", value_parser = humantime::parse_duration, value_name = "DURATION")]
        debounce: Duration,
    },
    /// Make a publisher key (ed25519) that signs the agents this node
    /// publishes from now on; prints it in the form operators trust.
    Keygen {
        /// Replace an existing publisher key.
        #[arg(long)]
        force: bool,
    },
    /// Print this node's peer id and the addresses other nodes reach it at.
    Id {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the peers the running node is connected to.
    Peers {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Offer an installed agent to the network: a signed manifest in the
    /// DHT, this node as its provider and under each keyword, and a gossip
    /// announcement. Needs the running node (`agentsite serve`).
    Publish {
        /// Agent name, id, or unique id prefix.
        agent: String,
    },
    /// Give the running node a goal: it forms a team of agents (here and on
    /// the network), runs their conversation and prints it as it happens,
    /// then the conclusion. Also: goal show|say|cancel ID.
    #[command(
        after_help = "Examples:\n  agentsite goal \"count the words of 'to be or not to be' and double the count\"\n  agentsite goal --team calculator,text --max-turns 6 \"...\"\n  agentsite goal show g1a2b3c4d5e6f7a8b\n  agentsite goal say g1a2b3c4d5e6f7a8b \"now in upper case\""
    )]
    Goal(Box<cli::goals::GoalArgs>),
    /// Talk with the running node's agents at the terminal: replies
    /// streamed as written, tool calls shown as they run, in one of the
    /// node's conversations (the chat page's too).
    ///
    /// `agentsite chat @AGENT` talks to one agent (others join with @name
    /// in a message); a MESSAGE after it is sent and answered, and the
    /// command ends. Without one, each line read is a message until /bye;
    /// """ opens and closes a message of several lines; /team MESSAGE asks
    /// the agents to team up on it.
    #[command(
        after_help = "Examples:\n  agentsite chat @calculator\n  agentsite chat @calculator \"add 2 and 3\"\n  agentsite chat --list\n  agentsite chat --resume c-1a2b3c4d5e6f7a8b"
    )]
    Chat {
        /// `@AGENT`, then a message to send.
        #[arg(value_name = "@AGENT MESSAGE")]
        words: Vec<String>,
        /// Carry on a conversation (its id, as --list or the chat page shows it).
        #[arg(long, value_name = "ID", conflicts_with = "list")]
        resume: Option<String>,
        /// List the node's conversations.
        #[arg(long)]
        list: bool,
    },
    /// List the running node's goals: state, age, team, cost.
    Goals {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Find agents on the network by what they do (words of their names,
    /// tags, tools and descriptions), best match first.
    Search {
        /// Words; any may match, agents matching more rank higher.
        #[arg(required = true)]
        words: Vec<String>,
        /// Show at most this many agents.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Show every column whole (full ids, tool names) instead of
        /// fitting 100 columns.
        #[arg(long)]
        wide: bool,
    },
    /// Download an agent by id from the nodes that host it: every chunk and
    /// the whole are verified, then it is installed.
    Fetch {
        /// The agent's id, sha256:<64 hex digits>.
        id: String,
    },
    /// Check evidence another node kept (a file of <data-dir>/evidence/:
    /// a node's signed receipt with the arguments and result it covers) by
    /// running the call here; a node it proves wrong is blocked here too.
    CheckEvidence {
        /// The evidence file.
        file: std::path::PathBuf,
        /// Print the verdict as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the node's language models with their state (`[[llm.models]]`
    /// in the config; with none, the embedded default model).
    Models {
        #[command(subcommand)]
        command: Option<ModelsCommand>,
        /// List the models other nodes share (asks the running node).
        #[arg(long)]
        network: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve MCP over stdin/stdout (for Claude Desktop, Claude Code and other
    /// MCP clients that start their servers).
    Mcp {
        /// Serve only these agents (name, id or id prefix). One agent keeps
        /// its tool names; otherwise tools are named <agent>.<tool>.
        agents: Vec<String>,
    },
}

/// Whose grants `grant` or `revoke` change, and which.
#[derive(clap::Args)]
struct PolicyEdit {
    /// The agent (name, id or id prefix; any id also before it is fetched),
    /// then the items; only the items with --publisher or --defaults.
    #[arg(required = true, value_name = "AGENT ITEM")]
    args: Vec<String>,
    /// Every agent this publisher key signed (granting also trusts it).
    #[arg(long, value_name = "KEY", conflicts_with = "defaults")]
    publisher: Option<String>,
    /// Every agent with nothing more specific.
    #[arg(long)]
    defaults: bool,
}

#[derive(Subcommand)]
enum ModelsCommand {
    /// Ask a model one short question; prints the answer as it comes and
    /// the time to its first token.
    Test {
        /// The model [default: the node's default model].
        name: Option<String>,
        /// The question [default: the capital of France].
        #[arg(long)]
        question: Option<String>,
        /// How long the answer may take.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "60s")]
        deadline: Duration,
    },
    /// Register a GGUF file, on disk or downloaded from a URL, as a model of
    /// the node (checked, then written to the config file as a
    /// [[llm.models]] table). A download goes to <data-dir>/models, resumes
    /// where it broke off when run again, and is checked against --sha256
    /// or the sha256 the server names.
    Add {
        /// The GGUF file, or an http(s) URL of one.
        #[arg(value_name = "FILE|URL")]
        source: String,
        /// The model's name [default: from the file's name].
        #[arg(long)]
        name: Option<String>,
        /// Tokens one request may fill, prompt and answer.
        #[arg(long, default_value_t = agentsite::llm::embedded::DEFAULT_CONTEXT)]
        context: usize,
        /// The sha256 the downloaded file must have (64 hex digits).
        #[arg(long, value_name = "HEX")]
        sha256: Option<String>,
        /// The largest file a download may bring.
        #[arg(long, value_name = "SIZE", default_value = "32GiB")]
        max_size: ByteSize,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Print the policy file in force.
    Show {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

impl Command {
    /// Whether the command runs until stopped, serving many calls.
    fn serves(&self) -> bool {
        matches!(
            self,
            Command::Serve { .. } | Command::Mcp { .. } | Command::Dev { .. }
        )
    }
}

/// The commands as `--help` lists them, by what a person does with them
/// (clap lists subcommands in one flat list).
const COMMAND_GROUPS: [(&str, &[&str]); 5] = [
    (
        "Agents on this node",
        &[
            "new", "dev", "add", "ls", "tools", "call", "inspect", "rm", "attach", "detach", "push",
        ],
    ),
    ("Serving them", &["serve", "mcp", "health"]),
    (
        "Permissions",
        &["grant", "revoke", "policy", "trust", "untrust", "keygen"],
    ),
    (
        "The network (through the running node)",
        &[
            "id",
            "peers",
            "publish",
            "search",
            "fetch",
            "check-evidence",
        ],
    ),
    (
        "Goals, chat and models",
        &["goal", "goals", "chat", "models"],
    ),
];

/// The command line, with `--help`'s commands in [`COMMAND_GROUPS`], each
/// with the first clause of its description.
fn command() -> clap::Command {
    // Each command is listed in its group below, not in clap's flat list
    // (`agentsite help COMMAND` is answered in `parse_args`).
    let mut command = Args::command()
        .disable_help_subcommand(true)
        .override_usage("agentsite [OPTIONS] <COMMAND>");
    let names: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    for name in names {
        command = command.mut_subcommand(name, |sub| sub.hide(true));
    }
    let mut listing = String::new();
    for (heading, names) in COMMAND_GROUPS {
        listing.push_str(&format!("{heading}:\n"));
        for name in names {
            let about = command
                .find_subcommand(name)
                .and_then(|sub| sub.get_about())
                .map(|about| about.to_string())
                .unwrap_or_default();
            listing.push_str(&format!("  {name:<8} {}\n", first_clause(&about)));
        }
        listing.push('\n');
    }
    command.help_template(format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{listing}\
         `agentsite COMMAND --help` says more of each.\n\n\
         {{all-args}}"
    ))
}

/// A command's description up to its first colon, semicolon or full stop
/// outside brackets, and without a bracketed aside where that is still
/// longer than [`SUMMARY_WIDTH`].
fn first_clause(about: &str) -> String {
    let mut depth = 0usize;
    let mut end = about.len();
    let bytes = about.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        match b {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            b':' | b';' | b'.' if depth == 0 && bytes.get(i + 1).is_none_or(|n| *n == b' ') => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let clause = about[..end].trim();
    if clause.chars().count() <= SUMMARY_WIDTH {
        return clause.to_owned();
    }
    match clause.find(" (") {
        Some(aside) => clause[..aside].to_owned(),
        None => clause.to_owned(),
    }
}

/// The widest a command's line in `--help` is meant to be, after its name.
const SUMMARY_WIDTH: usize = 80;

fn parse_args() -> Args {
    let mut arguments: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // `agentsite help [COMMAND]`, as clap's own help command answers it.
    if arguments.get(1).is_some_and(|a| a == "help") {
        arguments.remove(1);
        arguments.push("--help".into());
    }
    let matches = command().get_matches_from(arguments);
    Args::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

fn main() -> ExitCode {
    if std::env::args_os().nth(1).as_deref() == Some(compiler::WORKER_ARG.as_ref()) {
        return compiler::worker_main();
    }
    let args = parse_args();
    init_logging(args.verbose);
    // Compiles run in a child process that a deadline can stop.
    match std::env::current_exe() {
        Ok(executable) => compiler::use_worker(executable),
        Err(e) => tracing::warn!("compiling in process, without a deadline: {e}"),
    }
    // A serving node uses every core; a one-shot command needs one thread.
    let runtime = if args.command.serves() {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    }
    .enable_all()
    .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(e) => return fail(anyhow::anyhow!("cannot start the async runtime: {e}")),
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(error),
    }
}

fn fail(error: anyhow::Error) -> ExitCode {
    let message = format!("{error:#}").replace('\n', " ");
    eprintln!("error: {}", agentsite::text::terminal_safe(&message));
    ExitCode::FAILURE
}

async fn run(args: Args) -> anyhow::Result<()> {
    let data = match args.data_dir {
        Some(dir) => DataDir::new(dir),
        None => DataDir::platform_default()?,
    };
    let mut config = match &args.config {
        Some(path) => Config::load(path, true)?,
        None => Config::load(&data.config_file(), false)?,
    };
    let named = cli::NamedFiles {
        config: args.config.clone(),
        policy: args.policy.clone(),
    };
    if let Some(policy) = args.policy {
        config.policy = Some(policy);
    }
    // The network commands ask the running node: this process needs no
    // runtime of its own.
    let command = match args.command {
        Command::Keygen { force } => return cli::policy::keygen(&data, force),
        Command::New { name, lang, path } => {
            return cli::new(&data, &name, lang, path.as_deref());
        }
        Command::Id { json } => return cli::id(&data, json).await,
        Command::Health { url, json } => return cli::health(&data, url.as_deref(), json).await,
        Command::Peers { json } => return cli::peers(&data, json).await,
        Command::Publish { agent } => return cli::publish(&data, &agent).await,
        Command::Search {
            words,
            limit,
            json,
            wide,
        } => {
            return cli::search(&data, &words, limit, json, wide).await;
        }
        Command::Fetch { id } => return cli::fetch(&data, &id).await,
        Command::CheckEvidence { file, json } => {
            return cli::check_evidence(&data, &file, json).await;
        }
        Command::Goal(args) => {
            let concluded = cli::goals::goal(&data, *args).await?;
            if !concluded {
                std::process::exit(1);
            }
            return Ok(());
        }
        Command::Goals { json } => return cli::goals::list(&data, json).await,
        Command::Chat {
            words,
            resume,
            list,
        } => {
            let args = cli::chat::ChatArgs {
                words,
                resume,
                list,
            };
            if !cli::chat::chat(&data, args).await? {
                std::process::exit(1);
            }
            return Ok(());
        }
        Command::Models {
            command:
                Some(ModelsCommand::Add {
                    source,
                    name,
                    context,
                    sha256,
                    max_size,
                }),
            ..
        } => {
            let config_file = args.config.clone().unwrap_or_else(|| data.config_file());
            let addition = cli::models::Addition {
                source: &source,
                name: name.as_deref(),
                context,
                sha256: sha256.as_deref(),
                max_size: max_size.as_u64(),
                models_dir: &data.models(),
            };
            return cli::models::add(&config_file, &config.llm, addition).await;
        }
        Command::Models {
            command: None,
            network: true,
            json,
        } => return cli::network_models(&data, json).await,
        Command::Models { command, json, .. } => {
            let models = agentsite::llm::models::Models::from_config(
                &config.llm,
                std::sync::Arc::new(agentsite::audit::Audit::new()),
            )?;
            return match command {
                None => cli::models::list(&models, json).await,
                Some(ModelsCommand::Test {
                    name,
                    question,
                    deadline,
                }) => {
                    cli::models::test(&models, name.as_deref(), question.as_deref(), deadline).await
                }
                Some(ModelsCommand::Add { .. }) => unreachable!("handled above"),
            };
        }
        Command::Call {
            agent,
            tool,
            arguments,
            deadline,
            remote: true,
            verify,
            json,
            ..
        } => {
            let outcome = match cli::arguments_text(arguments) {
                Ok(arguments) => {
                    let call = cli::RemoteCall {
                        agent: &agent,
                        tool: &tool,
                        arguments: &arguments,
                        deadline,
                        verify,
                    };
                    cli::call_remote(&data, call, json).await
                }
                Err(e) => Err(e),
            };
            return cli::call_outcome(json, outcome);
        }
        // Beside a running node, the command line and an MCP client reach
        // the agents through it: it holds their stores.
        Command::Call {
            agent,
            tool,
            arguments,
            deadline,
            memory,
            json,
            remote: false,
            ..
        } => {
            let outcome = async {
                let call = cli::LocalCall {
                    agent,
                    tool,
                    arguments: cli::arguments_text(arguments)?,
                    deadline,
                    memory: memory.map(|m| m.as_u64()),
                };
                if cli::node_running(&data, &named)? {
                    return cli::call_through_node(&data, call, json).await;
                }
                let node = Node::open(data, config.node(), Capacity::OneShot)
                    .context("cannot open the node")?;
                cli::call(&node, &call, json).await
            }
            .await;
            return cli::call_outcome(json, outcome);
        }
        Command::Mcp { agents } if cli::node_running(&data, &named)? => {
            return cli::mcp_through_node(&data, &agents).await;
        }
        local => local,
    };
    // `dev` beside a running node adds its builds to it and serves nothing.
    let dev_beside_a_node =
        matches!(command, Command::Dev { .. }) && cli::node_running(&data, &named)?;
    let capacity = if command.serves() && !dev_beside_a_node {
        Capacity::SERVER
    } else {
        Capacity::OneShot
    };
    let node = Node::open(data, config.node(), capacity).context("cannot open the node")?;
    match command {
        Command::Add {
            sources,
            name,
            registry,
            keep_both,
        } => {
            let same_name = if keep_both {
                agentsite::SameName::KeepBoth
            } else {
                agentsite::SameName::Replace
            };
            cli::add(
                &node,
                &sources,
                name.as_deref(),
                &registry.into(),
                same_name,
            )
            .await
        }
        Command::Push {
            agent,
            reference,
            registry,
            sign,
            key,
        } => {
            let signing = match (key, sign) {
                (Some(file), _) => cli::registry::Signing::KeyFile(file),
                (None, true) => cli::registry::Signing::NodeKey,
                (None, false) => cli::registry::Signing::None,
            };
            cli::registry::push(&node, &agent, &reference, &registry.into(), &signing).await
        }
        Command::Attach {
            name,
            target,
            endpoint,
        } => cli::attach(&node, &name, &target, endpoint.as_deref()).await,
        Command::Detach { agent } => cli::detach(&node, &agent),
        Command::Ls { json } => cli::list(&node, json),
        Command::Tools { agent, json } => cli::tools(&node, &agent, json),
        Command::Call { .. } => unreachable!("handled above"),
        Command::Inspect { agent, json } => cli::inspect(&node, &agent, json),
        Command::Rm { agent, purge } => cli::remove(&node, &agent, purge),
        Command::Grant {
            edit,
            from_policy,
            yes,
            dangerously_allow_node_access,
        } => {
            let (subject, mut items) = policy_subject(&node, edit)?;
            if let Some(file) = from_policy {
                items.extend(cli::policy::items_from_wassette(&file, yes)?);
                if items.is_empty() {
                    // A policy that allows nothing asks for the defaults.
                    return Ok(());
                }
            }
            let access = if dangerously_allow_node_access {
                agentsite::policy::edit::NodeAccess::Allowed
            } else {
                agentsite::policy::edit::NodeAccess::Refused
            };
            cli::policy::grant(&node, &subject, &items, access)
        }
        Command::Revoke(edit) => {
            let (subject, items) = policy_subject(&node, edit)?;
            cli::policy::revoke(&node, &subject, &items)
        }
        Command::Trust { key } => cli::policy::trust(node.policy(), &key, true),
        Command::Untrust { key } => cli::policy::trust(node.policy(), &key, false),
        Command::Policy {
            command: PolicyCommand::Show { json },
        } => cli::policy::show(node.policy(), json),
        Command::Serve {
            listen,
            token,
            allow_hosts,
            allow_origins,
            p2p_listen,
            bootstrap,
            no_p2p,
            mdns,
        } => {
            let p2p = p2p_options(&config, p2p_listen, bootstrap, no_p2p, mdns)?
                .map(|mut p2p| -> anyhow::Result<_> {
                    let key = node.data_dir().publisher_key();
                    p2p.hub.publisher = agentsite::net::identity::load_publisher(&key)?;
                    Ok(p2p)
                })
                .transpose()?;
            let serve = &config.serve;
            let options = agentsite::http::HttpOptions {
                listen: listen.unwrap_or(serve.listen),
                token: token.or_else(|| serve.token.clone()),
                allowed_hosts: [serve.allowed_hosts.clone(), allow_hosts].concat(),
                allowed_origins: [serve.allowed_origins.clone(), allow_origins].concat(),
                connections: serve.connections(),
            };
            cli::serve(std::sync::Arc::new(node), &config, options, p2p).await
        }
        Command::Dev {
            path,
            listen,
            debounce,
        } => {
            if dev_beside_a_node && listen.is_some() {
                eprintln!(
                    "note: --listen is not taken: the node already serving this data directory serves the builds"
                );
            }
            let serve = &config.serve;
            let http = (!dev_beside_a_node).then(|| agentsite::http::HttpOptions {
                listen: listen.unwrap_or(serve.listen),
                token: serve.token.clone(),
                allowed_hosts: serve.allowed_hosts.clone(),
                allowed_origins: serve.allowed_origins.clone(),
                connections: serve.connections(),
            });
            let options = cli::dev::DevOptions {
                project: path,
                debounce,
                http,
            };
            cli::dev::dev(std::sync::Arc::new(node), &config, options).await
        }
        Command::Id { .. }
        | Command::Health { .. }
        | Command::Keygen { .. }
        | Command::New { .. }
        | Command::Peers { .. }
        | Command::Publish { .. }
        | Command::Search { .. }
        | Command::Fetch { .. }
        | Command::CheckEvidence { .. }
        | Command::Goal(_)
        | Command::Goals { .. }
        | Command::Chat { .. }
        | Command::Models { .. } => unreachable!("network commands returned above"),
        Command::Mcp { agents } => cli::mcp(std::sync::Arc::new(node), &agents).await,
    }
}

/// Whose grants `grant` or `revoke` change, and the items: the first
/// argument names the agent unless a publisher or the defaults are named.
fn policy_subject(
    node: &Node,
    edit: PolicyEdit,
) -> anyhow::Result<(agentsite::policy::edit::Subject, Vec<String>)> {
    let PolicyEdit {
        mut args,
        publisher,
        defaults,
    } = edit;
    let agent = if publisher.is_none() && !defaults {
        Some(args.remove(0))
    } else {
        None
    };
    let subject = cli::policy::subject(node, agent.as_deref(), publisher.as_deref())?;
    Ok((subject, args))
}

/// The network settings of `serve`: the config's, overridden by flags.
fn p2p_options(
    config: &Config,
    listen: Vec<String>,
    bootstrap: Vec<String>,
    no_p2p: bool,
    mdns: bool,
) -> anyhow::Result<Option<agentsite::server::P2pOptions>> {
    let p2p = &config.p2p;
    if no_p2p || !p2p.enabled {
        return Ok(None);
    }
    let parse = |text: &String| {
        text.parse::<agentsite::net::Multiaddr>().map_err(|e| {
            anyhow::anyhow!(
                "{text:?} is not a libp2p address ({e}), such as /ip4/127.0.0.1/tcp/4077"
            )
        })
    };
    let listen = if listen.is_empty() {
        p2p.listen.clone()
    } else {
        listen
    };
    let bootstrap = [p2p.bootstrap.clone(), bootstrap].concat();
    Ok(Some(agentsite::server::P2pOptions {
        net: agentsite::net::NetConfig {
            mdns: mdns || p2p.mdns,
            relay_service: p2p.relay_service,
            relay_limits: p2p.relay_limits.clone(),
            ..agentsite::net::NetConfig::new(
                listen.iter().map(parse).collect::<Result<_, _>>()?,
                bootstrap.iter().map(parse).collect::<Result<_, _>>()?,
                agentsite::net::Transports::Network,
            )
        },
        hub: agentsite::hub::HubOptions {
            public: p2p.public.clone(),
            seed_fetched: p2p.seed_fetched,
            publisher: None,
        },
    }))
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::field::MakeExt as _;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    // Kademlia warns whenever its periodic bootstrap finds no peers (the
    // normal state of a network's first node), gossipsub whenever a node
    // that fetched an agent announces it again: neither is news to a person.
    // rmcp's service warns, in debug text, of every error answered to a
    // client (an unknown tool, a bad cursor): the client's mistake, which
    // the node itself logs plainly at info (`-v`). Its transports log
    // an attached server's failures in debug text too; the node says why
    // the server stopped in one line of its own.
    let quiet = if verbose < 2 {
        ",libp2p_kad=error,libp2p_gossipsub=error,rmcp::service=error,rmcp::transport=off"
    } else {
        ""
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("AGENTSITE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("{default}{quiet}")));
    // Log lines carry what agents and peers said (messages, errors, names):
    // every field is shown with control characters made visible, so that
    // none of it can drive the operator's terminal.
    let fields = tracing_subscriber::fmt::format::debug_fn(|out, field, value| {
        let value = format!("{value:?}");
        let value = agentsite::text::terminal_safe(&value);
        match field.name() {
            "message" => write!(out, "{value}"),
            name => write!(out, "{name}={value}"),
        }
    })
    .delimited(" ");
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .fmt_fields(fields)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_is_in_one_group_of_the_help() {
        let command = Args::command();
        let mut grouped: Vec<&str> = COMMAND_GROUPS
            .iter()
            .flat_map(|(_, names)| names.iter().copied())
            .collect();
        let listed = grouped.len();
        grouped.sort_unstable();
        grouped.dedup();
        assert_eq!(grouped.len(), listed, "a command is in two groups");
        let mut commands: Vec<&str> = command.get_subcommands().map(|c| c.get_name()).collect();
        commands.sort_unstable();
        assert_eq!(grouped, commands);
    }

    #[test]
    fn the_help_lists_each_command_on_one_line() {
        let help = command().render_help().to_string();
        for (heading, names) in COMMAND_GROUPS {
            assert!(help.contains(&format!("{heading}:")), "{help}");
            for name in names {
                let line = help
                    .lines()
                    .find(|l| l.starts_with(&format!("  {name} ")))
                    .unwrap_or_else(|| panic!("{name} is not listed: {help}"));
                assert!(line.len() <= 100, "{line}");
            }
        }
        assert!(help.contains("Global options:"), "{help}");
    }
}
