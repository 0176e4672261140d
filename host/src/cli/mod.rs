//! The command-line front end: each `agentsite` subcommand as a function
//! that takes parsed arguments, calls the [`Node`], and prints.
//!
//! Output meant for programs (ids, results, `--json`) goes to stdout; notes
//! for people go to stderr, so that `agentsite add x.wasm` can be captured.

mod banner;
pub mod chat;
pub mod dev;
pub mod goals;
mod health;
pub mod models;
mod network;
pub mod new;
pub mod policy;
pub mod registry;
mod sdk;
mod shown;

/// What `agentsite call` asks a running node to do.
pub use crate::web::api::LocalCall;
pub use health::health;
pub use network::{
    RemoteCall, call_remote, call_through_node, check_evidence, fetch, id, network_models, peers,
    publish, search,
};
pub use new::{Lang, new};

use crate::Node;
use crate::agent::tool::ToolSpec;
use crate::capabilities::caller::{Caller, ElicitFailure, Elicitation, Progress};
use crate::capabilities::guest_log::Level;
use crate::text::terminal_safe as safe;
use anyhow::Context as _;
use bytesize::ByteSize;
use serde_json::Value;
use std::io::{IsTerminal as _, Write as _};
use std::path::Path;

/// `agentsite add FILE|oci://REF...`: prints the id of each added agent.
/// A component of plain functions is named `name`, or after its file or
/// repository.
pub async fn add(
    node: &Node,
    sources: &[String],
    name: Option<&str>,
    access: &registry::Access,
    same_name: crate::SameName,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        name.is_none() || sources.len() == 1,
        "--name names one component: add the others with their own command"
    );
    for source in sources {
        if crate::oci::is_registry(source) {
            registry::add(node, source, name, access, same_name).await?;
            continue;
        }
        let file = Path::new(source);
        let bytes =
            std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
        let fallback = file
            .file_stem()
            .map(|stem| agent_name_from(&stem.to_string_lossy()));
        let installed = node
            .install(
                &bytes,
                crate::store::Origin::Local,
                name.or(fallback.as_deref()),
                same_name,
            )
            .await
            .with_context(|| format!("cannot add {}", file.display()))?;
        let record = &installed.record;
        println!("{}", record.id);
        note_name_not_taken(name, record);
        eprintln!(
            "added {} {} ({}: {})",
            record.card.name,
            safe(&record.card.version),
            counted(record.tools.len(), "tool"),
            tool_names(&record.tools)
        );
        note_replaced(&installed);
    }
    Ok(())
}

/// Says which builds a new one replaced, and what it kept of them.
pub(crate) fn note_replaced(installed: &crate::Installed) {
    for old in &installed.replaced {
        eprintln!(
            "replaced {} {} ({}) with {} ({}): its grants and key-value data stay with the name (--keep-both installs beside instead)",
            old.card.name,
            safe(&old.card.version),
            old.id,
            safe(&installed.record.card.version),
            installed.record.id,
        );
    }
}

/// Says so when `--name` did not name the agent: a component of the agent
/// world names itself in its card, and one already installed keeps the
/// name it has.
pub(crate) fn note_name_not_taken(asked: Option<&str>, record: &crate::store::AgentRecord) {
    if let Some(asked) = asked
        && asked != record.card.name
    {
        eprintln!(
            "note: --name {} was not taken: the agent is named {} (a component of the agent world is named by its card, and one already installed keeps its name)",
            safe(asked),
            safe(&record.card.name)
        );
    }
}

/// An agent name made from a file's or repository's name: lower case,
/// other characters than a-z 0-9 - _ as `-`, at most 64 characters.
pub(crate) fn agent_name_from(text: &str) -> String {
    let name: String = text
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = name.trim_matches(|c| c == '-' || c == '_');
    let name: String = name.chars().take(64).collect();
    if name.is_empty() {
        "component".to_owned()
    } else {
        name
    }
}

/// `agentsite attach NAME URL` or `agentsite attach NAME -- COMMAND ARGS...`:
/// prints the new agent's id.
pub async fn attach(
    node: &Node,
    name: &str,
    target: &[String],
    endpoint: Option<&str>,
) -> anyhow::Result<()> {
    let dir = std::env::current_dir().context("cannot read the current directory")?;
    let attachment = crate::bridge::Attachment::from_command_line(target, endpoint, dir)?;
    eprintln!("reaching {} to list its tools…", safe(&attachment.target()));
    let record = node
        .attach(name, attachment)
        .await
        .with_context(|| format!("cannot attach {name}"))?;
    println!("{}", record.id);
    eprintln!(
        "attached {name} ({} tools: {}); it runs outside the sandbox and is never fetchable by hash",
        record.tools.len(),
        tool_names(&record.tools)
    );
    Ok(())
}

/// `agentsite detach AGENT`
pub fn detach(node: &Node, agent: &str) -> anyhow::Result<()> {
    let record = node.resolve(agent)?;
    anyhow::ensure!(
        record.is_attached(),
        "{} is a component, not an attached server; `agentsite rm {}` removes it",
        record.card.name,
        record.card.name
    );
    node.remove(&record.id.to_string(), false)?;
    eprintln!("detached {}", record.card.name);
    Ok(())
}

/// `agentsite ls`
pub fn list(node: &Node, json: bool) -> anyhow::Result<()> {
    let records = node.list()?;
    if json {
        return print_json(&records);
    }
    if records.is_empty() {
        eprintln!("no agents installed; add one with `agentsite add FILE.wasm`");
        return Ok(());
    }
    let rows: Vec<[String; 5]> = records
        .iter()
        .map(|r| {
            [
                r.card.name.clone(),
                safe(&r.card.version).into_owned(),
                r.id.short(),
                match &r.attached {
                    Some(_) => "attached".to_owned(),
                    None => ByteSize(r.size).to_string(),
                },
                tool_names(&r.tools),
            ]
        })
        .collect();
    print_table(["NAME", "VERSION", "ID", "SIZE", "TOOLS"], &rows);
    Ok(())
}

/// `agentsite tools AGENT`
pub fn tools(node: &Node, agent: &str, json: bool) -> anyhow::Result<()> {
    let record = node.resolve(agent)?;
    if json {
        return print_json(&record.tools);
    }
    let mut out = String::new();
    for tool in &record.tools {
        describe_tool(&mut out, tool);
    }
    print!("{out}");
    Ok(())
}

/// `agentsite call AGENT TOOL JSON`: prints the result (see
/// [`print_result`]). A tool error, or a result flagged `isError`, exits
/// non-zero.
pub async fn call(node: &Node, call: &LocalCall, json: bool) -> anyhow::Result<()> {
    let (record, output) = call.run(node, Some(std::sync::Arc::new(Terminal))).await?;
    print_result(&record.card.name, &call.tool, &output, json)
}

/// A tool's result on stdout: the MCP JSON for a program (`json`, or
/// stdout not a terminal), what it says for a person at a terminal. A
/// result flagged `isError` is an error of one line, after its JSON for a
/// program and in place of the text for a person.
pub(crate) fn print_result(
    agent: &str,
    tool: &str,
    output: &crate::agent::tool::ToolOutput,
    json: bool,
) -> anyhow::Result<()> {
    print_result_with_meta(agent, tool, output, None, json)
}

/// [`print_result`], with `meta` as the result's `_meta` for a program.
pub(crate) fn print_result_with_meta(
    agent: &str,
    tool: &str,
    output: &crate::agent::tool::ToolOutput,
    meta: Option<serde_json::Value>,
    json: bool,
) -> anyhow::Result<()> {
    let for_program = json || !std::io::stdout().is_terminal();
    if for_program {
        match meta {
            Some(meta) => {
                let mut result = serde_json::to_value(output)?;
                if let Some(object) = result.as_object_mut() {
                    object.insert("_meta".into(), meta);
                }
                print_json(&result)?;
            }
            None => print_json(output)?,
        }
    }
    if output.is_error {
        let text = output.text();
        let first = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("(no text)");
        return Err(ToolReportedError(format!(
            "{agent}.{tool} reported an error: {}",
            crate::text::excerpt(first, 4096)
        ))
        .into());
    }
    if !for_program {
        print!("{}", shown::for_person(output));
    }
    Ok(())
}

/// A tool's own error result, already printed as its JSON for a program.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ToolReportedError(String);

/// What `call` ended with, for a program (`--json`): a call that failed
/// before the tool could answer (an unknown agent or tool, arguments the
/// schema refuses, a grant missing, a deadline) is printed as the tool's
/// own failures are, an MCP result with `isError` and the reason as text,
/// so that a program reads one shape whatever happened. The error line on
/// stderr and the exit status stay as they are.
pub fn call_outcome(json: bool, outcome: anyhow::Result<()>) -> anyhow::Result<()> {
    if let Err(error) = &outcome
        && json
        && error.downcast_ref::<ToolReportedError>().is_none()
    {
        print_json(&serde_json::json!({
            "content": [{ "type": "text", "text": format!("{error:#}") }],
            "isError": true,
        }))?;
    }
    outcome
}

/// A call's arguments as given: JSON text, `@FILE` for a file's, or `-`
/// (or `@-`) for standard input's.
pub fn arguments_text(given: String) -> anyhow::Result<String> {
    use std::io::Read as _;
    let from = match given.as_str() {
        "-" | "@-" => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the arguments from standard input")?;
            return Ok(text);
        }
        _ => match given.strip_prefix('@') {
            Some(path) => path,
            None => return Ok(given),
        },
    };
    std::fs::read_to_string(from).with_context(|| format!("cannot read the arguments from {from}"))
}

/// `agentsite inspect AGENT`
pub fn inspect(node: &Node, agent: &str, json: bool) -> anyhow::Result<()> {
    let record = node.resolve(agent)?;
    let compiled = node.compiled_path(&record.id);
    let asks = crate::capabilities::grant::asked_for(&record.imports);
    let granted = node.grants(&record);
    if json {
        let mut value = serde_json::to_value(&record)?;
        value["compiled"] = serde_json::json!(compiled);
        value["asks_for"] = serde_json::json!(asks);
        value["granted"] = match &granted {
            Ok(grants) => serde_json::json!(grants.describe()),
            Err(refused) => serde_json::json!({ "refused": refused.to_string() }),
        };
        return print_json(&value);
    }
    let card = &record.card;
    let mut out = String::new();
    // Everything the agent wrote is shown escaped, each on its own line:
    // a description cannot pose as, or hide, the lines the node writes.
    out.push_str(&format!("{} {}\n", card.name, safe(&card.version)));
    push_lines(&mut out, "  ", "  ", &card.description);
    out.push('\n');
    out.push_str(&format!("id:        {}\n", record.id));
    match &record.attached {
        Some(attachment) => {
            out.push_str(&format!(
                "runs:      {}: {}\n           not sandboxed by this node, not fetchable by hash\n",
                attachment.kind(),
                safe(&attachment.target())
            ));
        }
        None => out.push_str(&format!(
            "size:      {} ({} bytes)\n",
            ByteSize(record.size),
            record.size
        )),
    }
    if !card.tags.is_empty() {
        out.push_str(&format!("tags:      {}\n", safe(&card.tags.join(", "))));
    }
    if let Some(homepage) = &card.homepage {
        out.push_str(&format!("homepage:  {}\n", safe(homepage)));
    }
    if !record.is_attached() {
        out.push_str(&format!(
            "compiled:  {}\n",
            compiled.map_or("no (compiles on first call)".into(), |p| p
                .display()
                .to_string())
        ));
    }
    out.push_str(&format!("origin:    {}\n", record.origin));
    if record.is_attached() {
        // Nothing to grant: only the limits of a call apply.
        if let Ok(grants) = &granted {
            let limits = &grants.limits;
            out.push_str(&format!(
                "\ngranted:   no capabilities (it runs with the rights of its own process or host)\n\
                 limits:    deadline {}, {} calls at once, output up to {}\n",
                humantime::format_duration(limits.deadline),
                limits.max_concurrent_calls,
                limits.max_output
            ));
        }
        out.push_str(&format!("\ntools ({}):\n", record.tools.len()));
        for tool in &record.tools {
            describe_tool(&mut out, tool);
        }
        print!("{out}");
        return Ok(());
    }
    out.push_str(&format!(
        "\nasks for:  {}\n",
        if asks.is_empty() {
            "nothing beyond computation".to_owned()
        } else {
            asks.join(", ")
        }
    ));
    out.push_str("granted:\n");
    match &granted {
        Ok(grants) => {
            for line in grants.describe() {
                out.push_str(&format!("  {line}\n"));
            }
        }
        Err(refused) => out.push_str(&format!("  nothing: {refused}\n")),
    }
    out.push_str(&format!("\nimports ({}):\n", record.imports.len()));
    for import in &record.imports {
        out.push_str(&format!("  {}\n", safe(import)));
    }
    out.push_str(&format!("\ntools ({}):\n", record.tools.len()));
    for tool in &record.tools {
        describe_tool(&mut out, tool);
    }
    print!("{out}");
    Ok(())
}

/// `text` (an agent's words, such as a doc comment of several lines) line
/// by line, each escaped: the first after `first`, the others after
/// `then`, so that a description keeps its lines and its indentation under
/// the heading it belongs to, and no line of it can pose as the node's.
fn push_lines(out: &mut String, first: &str, then: &str, text: &str) {
    let mut lines = text.trim_end().lines();
    out.push_str(first);
    out.push_str(&safe(lines.next().unwrap_or_default()));
    out.push('\n');
    for line in lines {
        out.push_str(then);
        out.push_str(&safe(line));
        out.push('\n');
    }
}

/// `agentsite rm AGENT`
pub fn remove(node: &Node, agent: &str, purge: bool) -> anyhow::Result<()> {
    let removed = node.remove(agent, purge)?;
    let record = &removed.record;
    println!("{}", record.id);
    eprintln!(
        "removed {} {}",
        record.card.name,
        safe(&record.card.version)
    );
    if !removed.grants.is_empty() {
        let tables: Vec<String> = removed
            .grants
            .iter()
            .map(|key| format!("[agents.{}]", toml::Value::String(key.to_string())))
            .collect();
        eprintln!(
            "its grants went with it: {} removed from {}",
            tables.join(" and "),
            node.policy().path().display()
        );
    }
    Ok(())
}

pub(crate) fn tool_names(tools: &[ToolSpec]) -> String {
    tools
        .iter()
        .map(|t| t.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_tool(out: &mut String, tool: &ToolSpec) {
    let title = tool
        .title
        .as_deref()
        .map(|t| format!(" ({})", safe(t)))
        .unwrap_or_default();
    out.push_str(&format!("{}{title}\n", tool.name));
    for line in tool.description.lines() {
        out.push_str(&format!("    {}\n", safe(line)));
    }
    let properties = tool
        .input_schema
        .get("properties")
        .and_then(|p| p.as_object());
    let required: Vec<&str> = tool
        .input_schema
        .get("required")
        .and_then(|r| r.as_array())
        .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    for (name, schema) in properties.into_iter().flatten() {
        let kind = schema_type(schema);
        let optional = if required.contains(&name.as_str()) {
            ""
        } else {
            ", optional"
        };
        let argument = format!("    - {} ({}{optional})", safe(name), safe(&kind));
        match schema.get("description").and_then(|d| d.as_str()) {
            Some(description) => push_lines(out, &format!("{argument}: "), "        ", description),
            None => out.push_str(&format!("{argument}\n")),
        }
    }
    let hints = &tool.annotations;
    let flags: Vec<&str> = [
        (hints.read_only_hint, "read-only"),
        (hints.destructive_hint, "destructive"),
        (hints.idempotent_hint, "idempotent"),
        (hints.open_world_hint, "open-world"),
    ]
    .into_iter()
    .filter_map(|(hint, name)| (hint == Some(true)).then_some(name))
    .collect();
    if !flags.is_empty() {
        out.push_str(&format!("    [{}]\n", flags.join(", ")));
    }
}

fn schema_type(schema: &serde_json::Value) -> String {
    match schema.get("type") {
        Some(serde_json::Value::String(t)) => t.clone(),
        Some(serde_json::Value::Array(types)) => types
            .iter()
            .filter_map(|t| t.as_str())
            .collect::<Vec<_>>()
            .join(" | "),
        _ => "any".into(),
    }
}

/// `1 peer`, `2 peers`.
pub(crate) fn counted(count: usize, noun: &str) -> String {
    match count {
        1 => format!("1 {noun}"),
        _ => format!("{count} {noun}s"),
    }
}

/// The width tables fit unless asked to be wide: a terminal's usual 100
/// columns at most.
pub(crate) const TABLE_WIDTH: usize = 100;

/// The most of a name a narrow table shows.
pub(crate) const NAME_WIDTH: usize = 24;

/// `text` cut to at most `max` characters, the cut marked with `…`.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(max.saturating_sub(1)).collect();
    kept.push('…');
    kept
}

/// A table whose lines fit `width` columns: the last column is cut to the
/// room the others leave (at least a few characters of it).
pub(crate) fn print_table_within<const N: usize>(
    header: [&str; N],
    rows: &[[String; N]],
    width: usize,
) {
    let before_last: usize = (0..N - 1)
        .map(|i| {
            rows.iter()
                .map(|row| row[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
                + 2
        })
        .sum();
    let room = width.saturating_sub(before_last).max(12);
    let rows: Vec<[String; N]> = rows
        .iter()
        .map(|row| {
            let mut row = row.clone();
            row[N - 1] = cut(&row[N - 1], room);
            row
        })
        .collect();
    print_table(header, &rows);
}

pub(crate) fn print_table<const N: usize>(header: [&str; N], rows: &[[String; N]]) {
    let mut widths = header.map(str::len);
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let last = cells.len() - 1;
        for (i, cell) in cells.into_iter().enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        out.push('\n');
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    print!("{out}");
}

/// How long before `now` the moment `then` was (both in milliseconds
/// since the Unix epoch), in its two largest units: `3m 12s`.
pub(crate) fn age(now: u64, then: u64) -> String {
    let age = std::time::Duration::from_secs(now.saturating_sub(then) / 1000);
    humantime::format_duration(age)
        .to_string()
        .split(' ')
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A bar of bytes on stderr, as `fetch` and `models add` draw one: how
/// many of how many, the rate, and how long is left.
pub(crate) fn byte_bar(total: u64, message: String) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message(message);
    bar
}

/// JSON on stdout: indented for a person at a terminal, one line for a pipe.
pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let text = if stdout.is_terminal() {
        serde_json::to_string_pretty(value)?
    } else {
        serde_json::to_string(value)?
    };
    let mut lock = stdout.lock();
    writeln!(lock, "{}", crate::text::json_terminal_safe(&text))?;
    Ok(())
}

/// `agentsite serve`: the node's serving side (see [`crate::server`]) until
/// Ctrl-C or SIGTERM.
pub async fn serve(
    node: std::sync::Arc<Node>,
    config: &crate::server::config::Config,
    options: crate::http::HttpOptions,
    p2p: Option<crate::server::P2pOptions>,
) -> anyhow::Result<()> {
    let listen = p2p
        .as_ref()
        .map(|p2p| p2p.net.listen.clone())
        .unwrap_or_default();
    let server = crate::server::Server::start(node, config, options, p2p).await?;
    let banner = banner::Listening {
        peers: server.hub().map(|hub| banner::Peers {
            peer_id: hub.peer_id().to_string(),
            addresses: server.p2p_addresses(),
            listen: &listen,
        }),
        http: server.address(),
        agents: server.agents(),
    };
    for line in banner::lines(&banner) {
        eprintln!("{line}");
    }
    let stop = server.stopper();
    tokio::spawn(async move {
        shutdown_signal().await;
        eprintln!("stopping");
        stop.cancel();
    });
    server.serve().await
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

/// `agentsite mcp [AGENT...]`: one MCP session over stdin and stdout.
pub async fn mcp(node: std::sync::Arc<Node>, agents: &[String]) -> anyhow::Result<()> {
    use crate::mcp::{Hosted, Scope, stdio};
    let scope = if agents.is_empty() {
        Scope::All
    } else {
        let ids = agents
            .iter()
            .map(|a| node.resolve(a).map(|r| r.id))
            .collect::<Result<Vec<_>, _>>()?;
        Scope::Agents(ids)
    };
    stdio::serve(Hosted::new(node)?, scope).await
}

/// The files this command line names with `--config` and `--policy` (or
/// `AGENTSITE_CONFIG` and `AGENTSITE_POLICY`).
#[derive(Debug, Default)]
pub struct NamedFiles {
    pub config: Option<std::path::PathBuf>,
    pub policy: Option<std::path::PathBuf>,
}

/// Whether an `agentsite serve` of `data` is running (its files are there),
/// so that a command goes through it. Refused when the command line names
/// a config or policy file other than the node's: through the node, the
/// node's would apply, not the one named.
pub fn node_running(data: &crate::config::DataDir, named: &NamedFiles) -> anyhow::Result<bool> {
    let Some((node, _)) = crate::web::control::find(data)? else {
        return Ok(false);
    };
    let files = [
        ("--config", &named.config, &node.config, "no config file"),
        ("--policy", &named.policy, &node.policy, "no policy file"),
    ];
    for (flag, ours, theirs, none) in files {
        let Some(ours) = ours else { continue };
        let ours = crate::web::control::absolute(ours);
        if theirs.as_ref() == Some(&ours) {
            continue;
        }
        let theirs = match theirs {
            Some(theirs) => theirs.display().to_string(),
            None => none.to_owned(),
        };
        anyhow::bail!(
            "the node serving {} (pid {}) runs with {theirs}, not {}, and this command would go through it: \
             stop that node to use {flag} {}, or leave {flag} out",
            data.root().display(),
            node.pid,
            ours.display(),
            ours.display(),
        );
    }
    Ok(true)
}

/// `agentsite mcp [AGENT…]` beside a running node: the session is relayed
/// to its `/mcp` (`/agents/AGENT/mcp` for one, `/mcp?agents=A,B` for
/// several), so that the client gets what it serves (agents whose stores it
/// holds, the `goal` tool) as it serves it.
pub async fn mcp_through_node(
    data: &crate::config::DataDir,
    agents: &[String],
) -> anyhow::Result<()> {
    let node = network::NodeClient::connect(data)?;
    // Each name is resolved by the node first, so that a name it does not
    // have is refused in its words before any MCP client waits on it.
    let mut ids = Vec::with_capacity(agents.len());
    for agent in agents {
        let resolved: crate::web::api::Resolved = node
            .get("/api/agents/resolve", &[("name", agent.as_str())])
            .await?;
        ids.push(resolved.id);
    }
    let api = &node.file().api;
    let url = match ids.as_slice() {
        [] => format!("{api}/mcp"),
        [id] => format!("{api}/agents/{id}/mcp"),
        several => format!("{api}/mcp?agents={}", several.join(",")),
    };
    tracing::info!("relaying this MCP session to the running node at {url}");
    crate::mcp::relay::relay(&url, node.token()).await
}

/// The caller of a command-line call: progress goes to the log; there is no
/// model to lend and nobody to ask for input mid-call.
struct Terminal;

#[async_trait::async_trait]
impl Caller for Terminal {
    fn progress(&self, report: Progress) {
        let total = report.total.map(|t| format!("/{t}")).unwrap_or_default();
        let message = report.message.map(|m| format!(" {m}")).unwrap_or_default();
        tracing::info!("progress {}{total}{message}", report.progress);
    }

    fn log(&self, _agent: &str, _level: Level, _message: &str) {
        // Already in the node's log, which is this terminal's stderr.
    }

    async fn sample(
        &self,
        _request: &crate::llm::ChatRequest,
        _model_hint: Option<&str>,
    ) -> Option<Result<crate::llm::Completion, crate::llm::LlmFailure>> {
        None
    }

    async fn elicit(&self, _message: String, _schema: Value) -> Result<Elicitation, ElicitFailure> {
        Err(ElicitFailure::Unavailable(
            "agentsite call cannot ask for input; serve the agent over MCP to a client that supports elicitation".into(),
        ))
    }
}
