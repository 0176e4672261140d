//! The network commands (`id`, `peers`, `publish`, `search`, `fetch`, `call
//! --remote`): each asks the running node of the data directory through its
//! control API, because the node that serves is the one on the network.

use crate::agent::tool::ToolOutput;
use crate::config::DataDir;
use crate::hub::{FetchProgress, Found, Verdict};
use crate::net::PeerInfo;
use crate::text::terminal_safe as safe;
use crate::web::api::{
    CallAnswer, FetchLine, FetchOutcome, LocalAnswer, NodeAnswer, PublishAnswer,
};
use crate::web::control::{self, NodeFile};
use anyhow::Context as _;
use bytesize::ByteSize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::io::IsTerminal as _;
use std::time::Duration;

/// A connection to the running node's control API.
pub struct NodeClient {
    node: NodeFile,
    token: String,
    http: reqwest::Client,
}

impl NodeClient {
    /// The running node of `data`, or an error saying how to start one.
    pub fn connect(data: &DataDir) -> anyhow::Result<NodeClient> {
        let Some((node, token)) = control::find(data)? else {
            anyhow::bail!(
                "no node is running for {}: start one with `agentsite serve` (it joins the network)",
                data.root().display()
            );
        };
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .context("cannot make an HTTP client")?;
        Ok(NodeClient { node, token, http })
    }

    /// What the node says about itself.
    pub(crate) fn file(&self) -> &NodeFile {
        &self.node
    }

    /// The control token it takes.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// The running node of `data`, which must be on the network.
    pub fn connect_networked(data: &DataDir) -> anyhow::Result<NodeClient> {
        let client = NodeClient::connect(data)?;
        anyhow::ensure!(
            !client.node.peer_id.is_empty(),
            "the node running for {} is not on the network (it was started with --no-p2p)",
            data.root().display()
        );
        Ok(client)
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> anyhow::Result<reqwest::Response> {
        let response = request
            .bearer_auth(&self.token)
            .send()
            .await
            .with_context(|| {
                format!(
                    "the node at {} (pid {}) does not answer; if it stopped uncleanly, start `agentsite serve` again",
                    self.node.api, self.node.pid
                )
            })?;
        if response.status().is_success() {
            return Ok(response);
        }
        // The node's own words are the error; its API's status codes are
        // nothing a person at the command line acts on.
        let status = response.status();
        let body: Value = response.json().await.unwrap_or_default();
        match body["error"].as_str() {
            Some(message) => anyhow::bail!("{message}"),
            None => anyhow::bail!(
                "the node refused the request without a reason ({})",
                status.canonical_reason().unwrap_or("no status text")
            ),
        }
    }

    pub(crate) async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, &str)],
    ) -> anyhow::Result<T> {
        let url = format!("{}{path}", self.node.api);
        let response = self.send(self.http.get(url).query(query)).await?;
        response
            .json()
            .await
            .context("the node's answer is not what this command expects")
    }

    /// The server-sent events at `path` after number `after`, read as
    /// they arrive.
    pub(crate) async fn events(
        &self,
        path: &str,
        after: u64,
    ) -> anyhow::Result<
        impl futures::Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Unpin + use<>,
    > {
        let url = format!("{}{path}", self.node.api);
        let after = after.to_string();
        let response = self
            .send(self.http.get(url).query(&[("after", after.as_str())]))
            .await?;
        let bytes = futures::StreamExt::map(response.bytes_stream(), |c| {
            c.map_err(|e| crate::llm::openai::StreamBroke(e.to_string()))
        });
        Ok(sse_stream::SseStream::from_bytes_stream(bytes))
    }

    pub(crate) async fn post(&self, path: &str, body: Value) -> anyhow::Result<reqwest::Response> {
        let url = format!("{}{path}", self.node.api);
        self.send(self.http.post(url).json(&body)).await
    }
}

/// `agentsite id`: the node's peer id and the addresses peers reach it at.
pub async fn id(data: &DataDir, json: bool) -> anyhow::Result<()> {
    use crate::net::reach::Reachability;
    let (peer_id, addresses, reachability) = match NodeClient::connect_networked(data) {
        Ok(client) => {
            let node: NodeAnswer = client.get("/api/node", &[]).await?;
            (node.peer_id, node.addresses, Some(node.reachability))
        }
        Err(_) => {
            let keypair = crate::net::identity::load_or_create(&data.identity())?;
            (keypair.public().to_peer_id().to_string(), Vec::new(), None)
        }
    };
    let did = crate::did::of_peer_text(&peer_id);
    if json {
        return super::print_json(&json!({
            "peer_id": peer_id,
            "did": did,
            "addresses": addresses,
            "running": reachability.is_some(),
            "reachability": reachability,
        }));
    }
    println!("{peer_id}");
    if let Some(did) = &did {
        println!("{did}");
    }
    for address in &addresses {
        println!("{address}");
    }
    match reachability {
        None => eprintln!(
            "(the node is not running: `agentsite serve` listens and prints its addresses)"
        ),
        Some(Reachability::Unknown) => {
            eprintln!("reachability: not known yet (peers are asked to dial this node back)")
        }
        Some(Reachability::Public { addresses }) => {
            eprintln!(
                "reachability: public, dialed back at {}",
                addresses.join(", ")
            )
        }
        Some(Reachability::Relayed { relays, .. }) if relays.is_empty() => eprintln!(
            "reachability: behind a NAT or firewall; no relay yet (it needs a peer that relays)"
        ),
        Some(Reachability::Relayed { relays, .. }) => eprintln!(
            "reachability: behind a NAT or firewall, reached through {} ({})",
            super::counted(relays.len(), "relay"),
            relays.join(", ")
        ),
    }
    Ok(())
}

/// `agentsite peers`
pub async fn peers(data: &DataDir, json: bool) -> anyhow::Result<()> {
    let peers: Vec<PeerInfo> = NodeClient::connect_networked(data)?
        .get("/api/peers", &[])
        .await?;
    if json {
        return super::print_json(&peers);
    }
    if peers.is_empty() {
        eprintln!("no connected peers");
        return Ok(());
    }
    let now = crate::clock::unix_millis();
    let rows: Vec<[String; 5]> = peers
        .iter()
        .map(|p| {
            let connected = Duration::from_millis(now.saturating_sub(p.connected_at));
            let mut transports: Vec<&str> =
                p.connections.iter().map(|c| c.transport.as_str()).collect();
            transports.sort_unstable();
            transports.dedup();
            [
                p.peer_id.clone(),
                // A peer names its own software: shown escaped.
                safe(p.agent_version.as_deref().unwrap_or("?")).into_owned(),
                // So does the address it gave (a DNS name is any text).
                safe(p.shown_address().unwrap_or_default()).into_owned(),
                transports.join("+"),
                format!(
                    "{} ({})",
                    roughly(connected),
                    if p.dialed { "dialed" } else { "it dialed" }
                ),
            ]
        })
        .collect();
    super::print_table(
        ["PEER", "SOFTWARE", "ADDRESS", "VIA", "CONNECTED FOR"],
        &rows,
    );
    Ok(())
}

/// `elapsed` to the unit a person reads at a glance: `42s`, `5m`, `3h 20m`, `2d 4h`.
fn roughly(elapsed: Duration) -> String {
    let seconds = elapsed.as_secs();
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m", seconds / 60),
        3600..86400 => format!("{}h {}m", seconds / 3600, seconds % 3600 / 60),
        _ => format!("{}d {}h", seconds / 86400, seconds % 86400 / 3600),
    }
}

/// `agentsite publish AGENT`
pub async fn publish(data: &DataDir, agent: &str) -> anyhow::Result<()> {
    let answer: PublishAnswer = NodeClient::connect_networked(data)?
        .post("/api/publish", json!({ "agent": agent }))
        .await
        .with_context(|| format!("cannot publish {agent}"))?
        .json()
        .await?;
    println!("{}", answer.id);
    let report = &answer.report;
    if answer.peers == 0 {
        eprintln!(
            "published {} on this node; it has no peers yet, and announces it to the network when the first one connects",
            answer.name
        );
        return Ok(());
    }
    // The terms are stems (`arithmet`): a count reads better than the list.
    eprintln!(
        "published {}: manifest stored on {}, found by {} search terms from its name, tags, tools and descriptions, announced to {}",
        answer.name,
        super::counted(report.record_replicas, "peer"),
        answer.keywords.len(),
        super::counted(report.gossip_peers, "peer"),
    );
    if report.record_replicas == 0 || report.provider_keys_unconfirmed > 0 {
        eprintln!(
            "warning: the network did not confirm all of it after three attempts \
             (manifest stored on {} peers, {} of {} keys unconfirmed): nodes that heard the \
             announcement know the agent, searches may miss it; the node publishes it again \
             when it next has peers after none, or run `agentsite publish {}` again",
            report.record_replicas,
            report.provider_keys_unconfirmed,
            report.provider_keys,
            answer.name
        );
    }
    Ok(())
}

/// `agentsite search WORDS...`
/// `agentsite models --network`: the models other nodes share.
pub async fn network_models(data: &DataDir, json: bool) -> anyhow::Result<()> {
    let found: Vec<crate::llm::share::SharedModel> = NodeClient::connect_networked(data)?
        .get("/api/models/network", &[])
        .await?;
    if json {
        return super::print_json(&found);
    }
    if found.is_empty() {
        eprintln!(
            "no node on the network shares a model (a node shares with `[llm] share = [...]`)"
        );
        return Ok(());
    }
    let rows: Vec<[String; 3]> = found
        .into_iter()
        .map(|model| {
            [
                safe(&model.name).into_owned(),
                model.sharers.len().to_string(),
                model.sharers.join(" "),
            ]
        })
        .collect();
    super::print_table(["MODEL", "NODES", "SHARED BY"], &rows);
    Ok(())
}

pub async fn search(
    data: &DataDir,
    words: &[String],
    limit: usize,
    json: bool,
    wide: bool,
) -> anyhow::Result<()> {
    let query = words.join(" ");
    let limit = limit.to_string();
    let found: Vec<Found> = NodeClient::connect_networked(data)?
        .get("/api/search", &[("q", &query), ("limit", &limit)])
        .await?;
    if json {
        return super::print_json(&found);
    }
    if found.is_empty() {
        eprintln!("no agent on the network matches {query:?}");
        return Ok(());
    }
    // Manifests come from peers: every field is shown escaped.
    let runs = |f: &Found| match &f.service {
        // Not sandboxed where it runs, never fetched: called there.
        Some(kind) => format!("{}, remote call only", safe(kind)),
        None => "component".to_owned(),
    };
    if wide {
        let rows: Vec<[String; 6]> = found
            .iter()
            .map(|f| {
                [
                    safe(&f.card.name).into_owned(),
                    safe(&f.card.description).into_owned(),
                    safe(&super::tool_names(&f.tools)).into_owned(),
                    runs(f),
                    f.providers.to_string(),
                    f.id.to_string(),
                ]
            })
            .collect();
        super::print_table(
            ["NAME", "DESCRIPTION", "TOOLS", "RUNS", "PROVIDERS", "ID"],
            &rows,
        );
        return Ok(());
    }
    let rows: Vec<[String; 5]> = found
        .iter()
        .map(|f| {
            let description = match &f.service {
                // Kept short so that it survives the cut.
                Some(_) => format!("[remote call only] {}", safe(&f.card.description)),
                None => safe(&f.card.description).into_owned(),
            };
            [
                super::cut(&safe(&f.card.name), super::NAME_WIDTH),
                f.id.short(),
                f.tools.len().to_string(),
                f.providers.to_string(),
                description,
            ]
        })
        .collect();
    super::print_table_within(
        ["NAME", "ID", "TOOLS", "PROVIDERS", "DESCRIPTION"],
        &rows,
        super::TABLE_WIDTH,
    );
    Ok(())
}

/// `agentsite fetch sha256:...`: a progress bar on a terminal; the id on stdout.
pub async fn fetch(data: &DataDir, id: &str) -> anyhow::Result<()> {
    let id: crate::AgentId = id.parse()?;
    let mut response = NodeClient::connect_networked(data)?
        .post("/api/fetch", json!({ "id": id }))
        .await
        .with_context(|| format!("cannot fetch {id}"))?;
    let bar = std::io::stderr()
        .is_terminal()
        .then(|| super::byte_bar(0, format!("fetching {}", id.short())));
    let mut pending = Vec::new();
    let mut outcome = None;
    while let Some(bytes) = response.chunk().await? {
        pending.extend_from_slice(&bytes);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let line: FetchLine =
                serde_json::from_slice(&line).context("the node sent a bad progress line")?;
            match (line, &bar) {
                (FetchLine::Progress(FetchProgress::Started { size, .. }), Some(bar)) => {
                    bar.set_length(size)
                }
                (FetchLine::Progress(FetchProgress::Bytes { done, .. }), Some(bar)) => {
                    bar.set_position(done)
                }
                (FetchLine::Outcome(last), _) => outcome = Some(last),
                _ => {}
            }
        }
    }
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let fetched = match outcome.context("the node stopped answering before the fetch ended")? {
        FetchOutcome::Done { fetched } => fetched,
        FetchOutcome::Error { error } => anyhow::bail!("cannot fetch {id}: {error}"),
    };
    let record = &fetched.record;
    println!("{}", record.id);
    if !fetched.downloaded {
        eprintln!("{} is already installed", safe(&record.card.name));
    } else {
        let liars = fetched.liars.len();
        eprintln!(
            "fetched {} {} ({}) from {}, verified{}",
            safe(&record.card.name),
            safe(&record.card.version),
            ByteSize(record.size),
            super::counted(fetched.providers_used, "provider"),
            if liars > 0 {
                format!("; {liars} providers sent corrupt chunks and were blocked")
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

/// `agentsite call AGENT TOOL JSON` beside a running node of the same data
/// directory: the node runs it, as it holds the agents' stores.
pub async fn call_through_node(
    data: &DataDir,
    call: crate::web::api::LocalCall,
    json: bool,
) -> anyhow::Result<()> {
    let tool = call.tool.clone();
    let answer: LocalAnswer = NodeClient::connect(data)?
        .post("/api/agents/call", serde_json::to_value(&call)?)
        .await?
        .json()
        .await?;
    super::print_result(&answer.name, &tool, &answer.output, json)
}

/// `agentsite call AGENT TOOL JSON --remote [--verify]`.
pub struct RemoteCall<'a> {
    pub agent: &'a str,
    pub tool: &'a str,
    /// A JSON object, as text.
    pub arguments: &'a str,
    pub deadline: Option<Duration>,
    /// Check the answer by running the call again.
    pub verify: bool,
}

/// `agentsite call AGENT TOOL JSON --remote`: runs on a node that hosts it.
/// The node's receipt is printed with the result (in `_meta` for a
/// program, a line on stderr for a person); with `verify`, what the check
/// found, and a wrong answer ends the command with an error after the
/// agent's own result.
pub async fn call_remote(data: &DataDir, call: RemoteCall<'_>, json: bool) -> anyhow::Result<()> {
    let RemoteCall {
        agent,
        tool,
        arguments,
        deadline,
        verify,
    } = call;
    let arguments: Value = serde_json::from_str(arguments)
        .map_err(|e| anyhow::anyhow!("arguments are not valid JSON: {e}"))?;
    let mut request =
        json!({ "agent": agent, "tool": tool, "arguments": arguments, "verify": verify });
    if let Some(deadline) = deadline {
        request["deadline_ms"] = json!(deadline.as_millis() as u64);
    }
    let answer: CallAnswer = NodeClient::connect_networked(data)?
        .post("/api/call", request)
        .await
        .with_context(|| format!("{agent}.{tool} failed"))?
        .json()
        .await?;
    let for_program = json || !std::io::stdout().is_terminal();
    if !for_program {
        eprintln!("{}", safe(&receipt_line(&answer)));
    }
    match &answer.check {
        Some(Verdict::Refuted {
            node,
            expected,
            evidence,
            why,
        }) => {
            let kept = crate::hub::where_kept(evidence.as_deref());
            if let Ok(own) = serde_json::from_value::<ToolOutput>(expected.clone()) {
                super::print_result(agent, tool, &own, json)?;
            }
            anyhow::bail!(
                "{} answered wrongly: {}; it is blocked, {kept} (the result above is the agent's own, run here)",
                safe(node),
                safe(why)
            );
        }
        Some(verdict) if !for_program => eprintln!("{}", safe(&verdict_line(verdict))),
        _ => {}
    }
    // For a program, the receipt travels with the result, where MCP puts
    // metadata.
    let meta = answer.receipt.as_ref().map(|receipt| {
        let mut meta = json!({ "agentsite/receipt": receipt });
        if let Some(check) = &answer.check {
            meta["agentsite/check"] = json!(check);
        }
        meta
    });
    super::print_result_with_meta(agent, tool, &answer.output, meta, json)
}

/// `agentsite check-evidence FILE`: the running node checks the evidence
/// by running the call itself. Fails unless the evidence was confirmed or
/// proved a node wrong, as it says.
pub async fn check_evidence(
    data: &DataDir,
    file: &std::path::Path,
    json: bool,
) -> anyhow::Result<()> {
    /// Evidence holds a result, which a node bounds at 8 MiB on the wire.
    const MAX_EVIDENCE: u64 = 16 << 20;
    let size = std::fs::metadata(file)
        .with_context(|| format!("cannot read {}", file.display()))?
        .len();
    anyhow::ensure!(
        size <= MAX_EVIDENCE,
        "{} is {} bytes: evidence is at most {MAX_EVIDENCE}",
        file.display(),
        size
    );
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let evidence: crate::receipt::Evidence = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{} is not evidence (a receipt with its arguments and result): {e}",
            file.display()
        )
    })?;
    let verdict: Verdict = NodeClient::connect_networked(data)?
        .post("/api/evidence/check", serde_json::to_value(&evidence)?)
        .await?
        .json()
        .await?;
    if json {
        super::print_json(&verdict)?;
    }
    match verdict {
        Verdict::Refuted { node, why, .. } => {
            if !json {
                println!(
                    "{}",
                    safe(&format!(
                        "proved: {node} signed a wrong answer: {why}; it is blocked here"
                    ))
                );
            }
            Ok(())
        }
        Verdict::Confirmed { by } => {
            if !json {
                println!(
                    "{}",
                    safe(&format!(
                        "the answer holds: run again on {by}, the same result"
                    ))
                );
            }
            Ok(())
        }
        Verdict::Unchecked { why } => anyhow::bail!("not checked: {}", safe(&why)),
    }
}

/// What a person is told of the node's receipt.
fn receipt_line(answer: &CallAnswer) -> String {
    match &answer.receipt {
        Some(receipt) if receipt.replayable => {
            format!(
                "ran on {}, signed receipt: replayable (any node can check it)",
                receipt.node
            )
        }
        Some(receipt) => format!(
            "ran on {}, signed receipt: read {} (not replayable)",
            receipt.node,
            receipt.used.join(", ")
        ),
        None => format!("ran on {}, which gave no receipt", answer.node),
    }
}

/// What a person is told of a check that did not find the answer wrong.
fn verdict_line(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Confirmed { by } => format!("checked: run again on {by}, the same result"),
        Verdict::Unchecked { why } => format!("not checked: {why}"),
        Verdict::Refuted { node, why, .. } => format!("{node} answered wrongly: {why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::roughly;
    use std::time::Duration;

    #[test]
    fn a_connection_time_reads_at_a_glance() {
        let read = |s| roughly(Duration::from_secs(s));
        assert_eq!(read(0), "0s");
        assert_eq!(read(59), "59s");
        assert_eq!(read(60), "1m");
        assert_eq!(read(3599), "59m");
        assert_eq!(read(3600 + 20 * 60 + 5), "1h 20m");
        assert_eq!(read(2 * 86400 + 4 * 3600 + 59), "2d 4h");
    }
}
