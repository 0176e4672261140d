//! `agentsite mcp` beside a running `agentsite serve` of the same data
//! directory: the stdio session is relayed to the node's streamable-HTTP
//! endpoint, message by message, so that the client reaches the agents as
//! the node serves them. Two processes cannot both hold an agent's
//! key-value store or the goals' records, and the node that serves also
//! offers the `goal` tool and its network; through the relay the client
//! gets all of it.
//!
//! The relay moves JSON-RPC messages between two rmcp transports and reads
//! none of them: requests, answers and notifications pass both ways, so the
//! node's requests to the client (elicitation, sampling, roots) reach it
//! too.

use rmcp::RoleServer;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, Transport};

/// Relays this process's stdin and stdout to the MCP endpoint at `url`,
/// authenticated by `token`, until the client closes its side.
pub async fn relay(url: &str, token: &str) -> anyhow::Result<()> {
    let (reader, writer) = rmcp::transport::stdio_pipes();
    let mut client = AsyncRwTransport::<RoleServer, _, _>::new_server(reader, writer);
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot make an HTTP client: {e}"))?;
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let mut node = StreamableHttpClientTransport::with_client(http, config);
    let outcome = loop {
        tokio::select! {
            from_client = client.receive() => match from_client {
                Some(message) => {
                    if let Err(e) = node.send(message).await {
                        break Err(anyhow::anyhow!("the node at {url} did not take a message: {e}"));
                    }
                }
                // The client closed stdin: the session is over.
                None => break Ok(()),
            },
            from_node = node.receive() => match from_node {
                Some(message) => {
                    if let Err(e) = client.send(message).await {
                        break Err(anyhow::anyhow!("cannot write to the MCP client: {e}"));
                    }
                }
                None => break Err(anyhow::anyhow!(
                    "the node at {url} ended the session (did `agentsite serve` stop?)"
                )),
            },
        }
    };
    let _ = node.close().await;
    let _ = client.close().await;
    outcome
}
