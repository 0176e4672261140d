//! `agentsite health`: whether a node serves, as its `/health` says. It is
//! the container image's health check (an image made `FROM scratch` has no
//! curl to ask with) and an operator's quick look at a node.

use crate::config::DataDir;
use crate::http::bounded::{BodyError, read_bounded};
use crate::text::terminal_safe as safe;
use anyhow::Context as _;
use serde::Deserialize;
use std::time::Duration;

/// How long the node has to answer: a health check that waits longer is
/// itself the failure it looks for.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// The most of an answer read: `/health` answers a few dozen bytes.
const ANSWER_LIMIT: usize = 64 * 1024;

/// What `/health` answers.
#[derive(Debug, Deserialize)]
struct Health {
    status: String,
    version: String,
    agents: u64,
    tools: u64,
}

/// Asks `url`'s `/health`, or that of the node running for `data`; fails
/// unless the node answers that it serves.
pub async fn health(data: &DataDir, url: Option<&str>, json: bool) -> anyhow::Result<()> {
    let base = match url {
        Some(url) => {
            if let Ok(parsed) = reqwest::Url::parse(url)
                && let Some(host) = parsed.host_str()
                && let Some(refusal) = crate::http::destination::refusal(host)
            {
                anyhow::bail!(refusal);
            }
            url.trim_end_matches('/').to_owned()
        }
        None => match crate::web::control::find(data)? {
            Some((node, _)) => node.api,
            None => anyhow::bail!(
                "no node is running for {}: nothing answers /health (start one with `agentsite serve`)",
                data.root().display()
            ),
        },
    };
    let address = format!("{base}/health");
    let body = fetch(&address).await?;
    let health: Health = serde_json::from_slice(&body)
        .with_context(|| format!("{address} answered something other than the node's health"))?;
    anyhow::ensure!(
        health.status == "ok",
        "{address} says the node is {:?}, not ok",
        safe(&health.status)
    );
    if json {
        let body: serde_json::Value = serde_json::from_slice(&body)?;
        return super::print_json(&body);
    }
    println!(
        "ok: agentsite {} serving {} and {} at {base}",
        safe(&health.version),
        super::counted(health.agents as usize, "agent"),
        super::counted(health.tools as usize, "tool"),
    );
    Ok(())
}

/// The body of a successful answer to a GET of `address`, read to at most
/// [`ANSWER_LIMIT`] bytes within [`ANSWER_WITHIN`].
async fn fetch(address: &str) -> anyhow::Result<Vec<u8>> {
    // A redirect is not followed: whatever answers elsewhere is not the
    // node asked about, however healthy it says it is.
    let http = crate::http::destination::guarded(reqwest::Client::builder())
        .no_proxy()
        .timeout(ANSWER_WITHIN)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .context("cannot make an HTTP client")?;
    let response = http
        .get(address)
        .send()
        .await
        .with_context(|| format!("nothing answers {address}"))?;
    let status = response.status();
    if status.is_redirection() {
        let elsewhere = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|location| location.to_str().ok())
            .unwrap_or("elsewhere");
        anyhow::bail!(
            "{address} redirects to {}: a node answers /health itself, so this is not one",
            safe(&crate::text::one_line(elsewhere, 200))
        );
    }
    anyhow::ensure!(
        status.is_success(),
        "{address} answered HTTP {status}: the node does not serve (or refuses this Host name)"
    );
    read_bounded(response, ANSWER_LIMIT)
        .await
        .map_err(|error| match error {
            BodyError::TooLarge(limit) => {
                anyhow::anyhow!("{address} answered more than {limit} bytes: not the node's health")
            }
            BodyError::Broke(e) => anyhow::anyhow!("{address} stopped answering: {e}"),
        })
}
