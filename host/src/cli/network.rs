//! The network commands (`id`, `peers`, `publish`, `search`, `fetch`, `call
//! --remote`): each asks the running node of the data directory through its
//! control API, because the node that serves is the one on the network.

use crate::config::DataDir;
use crate::web::control::{self, NodeFile};
use anyhow::Context as _;
use bytesize::ByteSize;
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
        let status = response.status();
        let body: Value = response.json().await.unwrap_or_default();
        let message = body["error"].as_str().unwrap_or("no reason given");
        anyhow::bail!("{message} (HTTP {})", status.as_u16())
    }

    async fn get(&self, path: &str, query: &[(&str, &str)]) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.node.api);
        Ok(self
            .send(self.http.get(url).query(query))
            .await?
            .json()
            .await?)
    }

    async fn post(&self, path: &str, body: Value) -> anyhow::Result<reqwest::Response> {
        let url = format!("{}{path}", self.node.api);
        self.send(self.http.post(url).json(&body)).await
    }
}

/// `agentsite id`: the node's peer id and the addresses peers reach it at.
pub async fn id(data: &DataDir, json: bool) -> anyhow::Result<()> {
    let (peer_id, addresses, running) = match NodeClient::connect(data) {
        Ok(client) => {
            let node = client.get("/api/node", &[]).await?;
            let addresses = node["addresses"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            (
                node["peer_id"].as_str().unwrap_or_default().to_owned(),
                addresses,
                true,
            )
        }
        Err(_) => {
            let keypair = crate::net::identity::load_or_create(&data.identity())?;
            (keypair.public().to_peer_id().to_string(), Vec::new(), false)
        }
    };
    if json {
        return super::print_json(&json!({
            "peer_id": peer_id,
            "addresses": addresses,
            "running": running,
        }));
    }
    println!("{peer_id}");
    for address in &addresses {
        println!("{address}");
    }
    if !running {
        eprintln!("(the node is not running: `agentsite serve` listens and prints its addresses)");
    }
    Ok(())
}

/// `agentsite peers`
pub async fn peers(data: &DataDir, json: bool) -> anyhow::Result<()> {
    let peers = NodeClient::connect(data)?.get("/api/peers", &[]).await?;
    if json {
        return super::print_json(&peers);
    }
    let peers = peers.as_array().cloned().unwrap_or_default();
    if peers.is_empty() {
        eprintln!("no connected peers");
        return Ok(());
    }
    let rows: Vec<[String; 3]> = peers
        .iter()
        .map(|p| {
            [
                p["peer_id"].as_str().unwrap_or_default().to_owned(),
                p["agent_version"].as_str().unwrap_or("?").to_owned(),
                p["addresses"]
                    .as_array()
                    .and_then(|a| a.first())
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            ]
        })
        .collect();
    super::print_table(["PEER", "SOFTWARE", "ADDRESS"], &rows);
    Ok(())
}

/// `agentsite publish AGENT`
pub async fn publish(data: &DataDir, agent: &str) -> anyhow::Result<()> {
    let answer: Value = NodeClient::connect(data)?
        .post("/api/publish", json!({ "agent": agent }))
        .await
        .with_context(|| format!("cannot publish {agent}"))?
        .json()
        .await?;
    println!("{}", answer["id"].as_str().unwrap_or_default());
    let report = &answer["report"];
    eprintln!(
        "published {}: manifest stored on {} peers, provider of {} keys ({}), announced to {} peers",
        answer["name"].as_str().unwrap_or_default(),
        report["record_replicas"],
        report["provider_keys"],
        answer["keywords"]
            .as_array()
            .map(|k| k
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", "))
            .unwrap_or_default(),
        report["gossip_peers"],
    );
    Ok(())
}

/// `agentsite search WORDS...`
pub async fn search(
    data: &DataDir,
    words: &[String],
    limit: usize,
    json: bool,
) -> anyhow::Result<()> {
    let query = words.join(" ");
    let limit = limit.to_string();
    let found = NodeClient::connect(data)?
        .get("/api/search", &[("q", &query), ("limit", &limit)])
        .await?;
    if json {
        return super::print_json(&found);
    }
    let found = found.as_array().cloned().unwrap_or_default();
    if found.is_empty() {
        eprintln!("no agent on the network matches {query:?}");
        return Ok(());
    }
    let rows: Vec<[String; 5]> = found
        .iter()
        .map(|f| {
            let tools = f["tools"]
                .as_array()
                .map(|t| {
                    t.iter()
                        .filter_map(|t| t["name"].as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            [
                f["card"]["name"].as_str().unwrap_or_default().to_owned(),
                f["card"]["description"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                tools,
                f["providers"].to_string(),
                f["id"].as_str().unwrap_or_default().to_owned(),
            ]
        })
        .collect();
    super::print_table(["NAME", "DESCRIPTION", "TOOLS", "PROVIDERS", "ID"], &rows);
    Ok(())
}

/// `agentsite fetch sha256:...`: a progress bar on a terminal; the id on stdout.
pub async fn fetch(data: &DataDir, id: &str) -> anyhow::Result<()> {
    let id: crate::AgentId = id.parse()?;
    let mut response = NodeClient::connect(data)?
        .post("/api/fetch", json!({ "id": id }))
        .await
        .with_context(|| format!("cannot fetch {id}"))?;
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_message(format!("fetching {}", id.short()));
        bar
    });
    let mut pending = Vec::new();
    let mut outcome = None;
    while let Some(bytes) = response.chunk().await? {
        pending.extend_from_slice(&bytes);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let event: Value =
                serde_json::from_slice(&line).context("the node sent a bad progress line")?;
            match event["event"].as_str() {
                Some("started") => {
                    if let Some(bar) = &bar {
                        bar.set_length(event["size"].as_u64().unwrap_or(0));
                    }
                }
                Some("bytes") => {
                    if let Some(bar) = &bar {
                        bar.set_position(event["done"].as_u64().unwrap_or(0));
                    }
                }
                Some("done") | Some("error") => outcome = Some(event),
                _ => {}
            }
        }
    }
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let outcome = outcome.context("the node stopped answering before the fetch ended")?;
    if let Some(error) = outcome["error"].as_str() {
        anyhow::bail!("cannot fetch {id}: {error}");
    }
    let fetched = &outcome["fetched"];
    let record = &fetched["record"];
    println!("{}", record["id"].as_str().unwrap_or_default());
    if fetched["downloaded"] == json!(false) {
        eprintln!(
            "{} is already installed",
            record["card"]["name"].as_str().unwrap_or_default()
        );
    } else {
        let liars = fetched["liars"].as_array().map_or(0, Vec::len);
        eprintln!(
            "fetched {} {} ({}) from {} providers, verified{}",
            record["card"]["name"].as_str().unwrap_or_default(),
            record["card"]["version"].as_str().unwrap_or_default(),
            ByteSize(record["size"].as_u64().unwrap_or(0)),
            fetched["providers_used"],
            if liars > 0 {
                format!("; {liars} providers sent corrupt chunks and were blocked")
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

/// `agentsite call AGENT TOOL JSON --remote`: runs on a node that hosts it.
pub async fn call_remote(
    data: &DataDir,
    agent: &str,
    tool: &str,
    arguments: &str,
    deadline: Option<Duration>,
) -> anyhow::Result<()> {
    let arguments: Value = serde_json::from_str(arguments)
        .map_err(|e| anyhow::anyhow!("arguments are not valid JSON: {e}"))?;
    let mut request = json!({ "agent": agent, "tool": tool, "arguments": arguments });
    if let Some(deadline) = deadline {
        request["deadline_ms"] = json!(deadline.as_millis() as u64);
    }
    let answer: Value = NodeClient::connect(data)?
        .post("/api/call", request)
        .await
        .with_context(|| format!("{agent}.{tool} failed"))?
        .json()
        .await?;
    let output = &answer["output"];
    super::print_json(output)?;
    if output["isError"] == json!(true) {
        let text = output["content"][0]["text"].as_str().unwrap_or("(no text)");
        anyhow::bail!(
            "{agent}.{tool} reported an error: {}",
            text.lines().next().unwrap_or("")
        );
    }
    Ok(())
}
