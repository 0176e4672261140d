//! `agentsite dev [PATH]`: the edit–build–serve loop, as `spin watch` and
//! `wash dev` give one. It builds the agent project in PATH, adds the build
//! (replacing the one before, whose grants and key-value data stay with
//! the name), serves it, and does it again each time a file is saved.
//!
//! It serves the agent itself, on HTTP only (off the network: a build in
//! progress is nobody's to fetch), unless a node already serves the data
//! directory: then each build is added to that node.

mod project;
mod watch;

use super::network::NodeClient;
use crate::Node;
use crate::server::Server;
use crate::server::config::Config;
use crate::store::AgentRecord;
use project::{BuildFailed, Project};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `agentsite dev` was asked to do.
pub struct DevOptions {
    /// The project: a folder, or a Python or JavaScript program.
    pub project: PathBuf,
    /// How long after a change to wait for the next before building.
    pub debounce: Duration,
    /// Where to serve; `None` when a node already serves the data directory.
    pub http: Option<crate::http::HttpOptions>,
}

/// `agentsite dev`: until Ctrl-C.
pub async fn dev(node: Arc<Node>, config: &Config, options: DevOptions) -> anyhow::Result<()> {
    let project = Project::find(&options.project)?;
    let sdk = super::sdk::install(node.data_dir())?;
    project.check_tools(&sdk).await?;
    // Watched before the first build, so that a file saved during it
    // calls for another.
    let mut changes = watch::Changes::watch(&project.dir)?;
    let (place, mut served) = match options.http {
        Some(http) => {
            let server = Server::start(node.clone(), config, http, None).await?;
            let listening = super::banner::Listening {
                peers: None,
                http: server.address(),
                agents: server.agents(),
            };
            for line in super::banner::lines(&listening) {
                eprintln!("{line}");
            }
            let place = Place::Here {
                base: format!("http://{}", server.address()),
                hosted: server.hosted(),
                stop: server.stopper(),
            };
            (place, Some(tokio::spawn(server.serve())))
        }
        None => {
            let client = NodeClient::connect(node.data_dir())?;
            eprintln!(
                "the node at {} (pid {}) serves this data directory: each build is added to it",
                client.file().api,
                client.file().pid
            );
            (Place::Node(client), None)
        }
    };
    let server_ended = async {
        match served.as_mut() {
            Some(served) => served.await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(server_ended);
    let shutdown = super::shutdown_signal();
    tokio::pin!(shutdown);
    let mut serving: Option<AgentRecord> = None;
    let watched = project.dir.display().to_string();
    loop {
        eprintln!("building {watched} ({})", project.describe());
        let round = build_and_add(&node, &project, &sdk, &place, &mut serving);
        tokio::select! {
            () = round => {}
            () = &mut shutdown => break,
            ended = &mut server_ended => return server_stopped(ended),
        }
        eprintln!("watching {watched} for changes (Ctrl-C stops)");
        tokio::select! {
            changed = changes.next(options.debounce) => match changed {
                Some(paths) => eprintln!("changed: {}", changed_files(&project.dir, &paths)),
                None => anyhow::bail!("the watch on {watched} ended"),
            },
            () = &mut shutdown => break,
            ended = &mut server_ended => return server_stopped(ended),
        }
    }
    eprintln!("stopping");
    if let Place::Here { stop, .. } = &place {
        stop.cancel();
        if let Some(served) = served {
            return server_stopped(served.await);
        }
    }
    Ok(())
}

/// Where the builds are served.
enum Place {
    /// By this process's server.
    Here {
        base: String,
        hosted: Arc<crate::mcp::Hosted>,
        stop: tokio_util::sync::CancellationToken,
    },
    /// By the node already serving the data directory.
    Node(NodeClient),
}

impl Place {
    fn base(&self) -> &str {
        match self {
            Place::Here { base, .. } => base,
            Place::Node(client) => &client.file().api,
        }
    }

    /// Returns once `record` is what the server serves under its name.
    async fn serves(&self, record: &AgentRecord) {
        match self {
            // The server follows the catalog by polling; told now, it
            // serves the new build before its URL is printed.
            Place::Here { hosted, .. } => hosted.refresh(),
            Place::Node(client) => {
                let id = record.id.to_string();
                let deadline = Instant::now() + Duration::from_secs(10);
                while Instant::now() < deadline {
                    let resolved: anyhow::Result<crate::web::api::Resolved> = client
                        .get(
                            "/api/agents/resolve",
                            &[("name", record.card.name.as_str())],
                        )
                        .await;
                    if resolved.is_ok_and(|r| r.id == id) {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                eprintln!("note: the node has not taken up the new build within 10 s");
            }
        }
    }
}

/// One round: build, add, say what serves.
async fn build_and_add(
    node: &Node,
    project: &Project,
    sdk: &super::sdk::Sdk,
    place: &Place,
    serving: &mut Option<AgentRecord>,
) {
    let started = Instant::now();
    let still = |serving: &Option<AgentRecord>| match serving {
        Some(record) => format!(
            "{} {} ({}) still serves",
            record.card.name,
            super::safe(&record.card.version),
            record.id
        ),
        None => "nothing of it serves yet".to_owned(),
    };
    let component = match project.build(sdk).await {
        Ok(component) => component,
        Err(BuildFailed(why)) => {
            eprintln!(
                "{why} after {}; {}",
                seconds(started.elapsed()),
                still(serving)
            );
            return;
        }
    };
    let bytes = match std::fs::read(&component) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!(
                "cannot read the build {}: {e}; {}",
                component.display(),
                still(serving)
            );
            return;
        }
    };
    let fallback = component
        .file_stem()
        .map(|stem| super::agent_name_from(&stem.to_string_lossy()));
    let installed = node
        .install(
            &bytes,
            crate::store::Origin::Local,
            fallback.as_deref(),
            crate::SameName::Replace,
        )
        .await;
    let installed = match installed {
        Ok(installed) => installed,
        Err(e) => {
            eprintln!(
                "cannot add the build {}: {e}; {}",
                component.display(),
                still(serving)
            );
            return;
        }
    };
    let record = installed.record;
    place.serves(&record).await;
    let took = seconds(started.elapsed());
    let name = &record.card.name;
    if serving.as_ref().is_some_and(|s| s.id == record.id) && installed.replaced.is_empty() {
        eprintln!(
            "built in {took}: the same component as before; {name} serves as it was ({})",
            record.id
        );
        return;
    }
    eprintln!(
        "built {name} {} in {took} ({})",
        super::safe(&record.card.version),
        record.id
    );
    for old in &installed.replaced {
        eprintln!(
            "  it replaces {} ({}): the grants and key-value data stay with the name",
            super::safe(&old.card.version),
            old.id
        );
    }
    eprintln!(
        "serving {name}: {} ({}) at {}/agents/{name}/mcp",
        super::counted(record.tools.len(), "tool"),
        super::tool_names(&record.tools),
        place.base()
    );
    *serving = Some(record);
}

/// The files of a change, relative to the project, for a line.
fn changed_files(root: &std::path::Path, paths: &[PathBuf]) -> String {
    const SHOWN: usize = 3;
    let mut names: Vec<String> = paths
        .iter()
        .take(SHOWN)
        .map(|p| p.strip_prefix(root).unwrap_or(p).display().to_string())
        .collect();
    if paths.len() > SHOWN {
        names.push(format!("and {} more", paths.len() - SHOWN));
    }
    super::safe(&names.join(", ")).into_owned()
}

fn seconds(duration: Duration) -> String {
    format!("{:.1} s", duration.as_secs_f64())
}

fn server_stopped(ended: Result<anyhow::Result<()>, tokio::task::JoinError>) -> anyhow::Result<()> {
    match ended {
        Ok(result) => result,
        Err(e) => anyhow::bail!("the server stopped: {e}"),
    }
}
