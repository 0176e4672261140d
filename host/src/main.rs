//! The `agentsite` command: parses the command line and calls the library.

use agentsite::config::{Config, DataDir};
use agentsite::runtime::Capacity;
use agentsite::{Node, cli};
use anyhow::Context as _;
use bytesize::ByteSize;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Host AI agents compiled to WebAssembly components and call their tools.
#[derive(Parser)]
#[command(name = "agentsite", version, about, propagate_version = true)]
struct Args {
    /// Where agents and their data are stored [default: $XDG_DATA_HOME/agentsite].
    #[arg(long, global = true, env = "AGENTSITE_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,

    /// Configuration file [default: <data-dir>/config.toml, if present].
    #[arg(long, global = true, env = "AGENTSITE_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,

    /// More log output on stderr (-v: info, -vv: debug, -vvv: trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Add agents from component files; prints the id of each.
    Add {
        /// WebAssembly component files (built for wasm32-wasip2).
        #[arg(required = true, value_name = "FILE.wasm")]
        files: Vec<PathBuf>,
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
    /// Call a tool; prints the result (an MCP CallToolResult) as JSON.
    Call {
        /// Agent name, id, or unique id prefix.
        agent: String,
        /// Tool name.
        tool: String,
        /// Arguments, a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
        /// Wall-clock limit for this call, such as 500ms or 30s.
        #[arg(long, value_parser = humantime::parse_duration)]
        deadline: Option<Duration>,
        /// Memory limit for this call, such as 16MiB.
        #[arg(long)]
        memory: Option<ByteSize>,
    },
    /// Show an agent's card, tools, the imports it asks for and its size.
    Inspect {
        /// Agent name, id, or unique id prefix.
        agent: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove an agent.
    Rm {
        /// Agent name, id, or unique id prefix.
        agent: String,
        /// Also delete the agent's key-value data.
        #[arg(long)]
        purge: bool,
    },
    /// Serve the installed agents' tools over MCP (streamable HTTP) until
    /// interrupted: /mcp (all agents), /agents/<agent>/mcp, /health.
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
    },
    /// Serve MCP over stdin/stdout (for Claude Desktop, Claude Code and other
    /// MCP clients that start their servers).
    Mcp {
        /// Serve only these agents (name, id or id prefix). One agent keeps
        /// its tool names; otherwise tools are named <agent>.<tool>.
        agents: Vec<String>,
    },
}

impl Command {
    /// Whether the command runs until stopped, serving many calls.
    fn serves(&self) -> bool {
        matches!(self, Command::Serve { .. } | Command::Mcp { .. })
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    init_logging(args.verbose);
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
    eprintln!("error: {message}");
    ExitCode::FAILURE
}

async fn run(args: Args) -> anyhow::Result<()> {
    let data = match args.data_dir {
        Some(dir) => DataDir::new(dir),
        None => DataDir::platform_default()?,
    };
    let config = match &args.config {
        Some(path) => Config::load(path, true)?,
        None => Config::load(&data.config_file(), false)?,
    };
    let capacity = if args.command.serves() {
        Capacity::SERVER
    } else {
        Capacity::OneShot
    };
    let node = Node::open(data, config, capacity).context("cannot open the node")?;
    match args.command {
        Command::Add { files } => cli::add(&node, &files).await,
        Command::Ls { json } => cli::list(&node, json),
        Command::Tools { agent, json } => cli::tools(&node, &agent, json),
        Command::Call {
            agent,
            tool,
            arguments,
            deadline,
            memory,
        } => {
            let mut limits = node.config().limits;
            if let Some(deadline) = deadline {
                limits.deadline = deadline;
            }
            if let Some(memory) = memory {
                limits.memory = memory;
            }
            limits.validate()?;
            cli::call(&node, &agent, &tool, &arguments, limits).await
        }
        Command::Inspect { agent, json } => cli::inspect(&node, &agent, json),
        Command::Rm { agent, purge } => cli::remove(&node, &agent, purge),
        Command::Serve {
            listen,
            token,
            allow_hosts,
            allow_origins,
        } => {
            let serve = &node.config().serve;
            let options = agentsite::mcp::http::HttpOptions {
                listen: listen.unwrap_or(serve.listen),
                token: token.or_else(|| serve.token.clone()),
                allowed_hosts: [serve.allowed_hosts.clone(), allow_hosts].concat(),
                allowed_origins: [serve.allowed_origins.clone(), allow_origins].concat(),
            };
            cli::serve(std::sync::Arc::new(node), options).await
        }
        Command::Mcp { agents } => cli::mcp(std::sync::Arc::new(node), &agents).await,
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("AGENTSITE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
}
