//! An attached server at a streamable-HTTP endpoint. Each message the
//! server sends is bounded (a JSON body by the MCP library, an event of a
//! stream by `max_message`); a server that stops answering is noticed by
//! the call that fails, which takes the link down for a reconnect.

use super::{Client, Connected, Session, root_cause};
use rmcp::ServiceExt as _;
use rmcp::service::ClientInitializeError;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use std::time::Duration;

/// How long opening a connection to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

pub async fn connect(
    name: &str,
    url: &str,
    max_message: usize,
    client: Client,
) -> Result<Connected, String> {
    let http = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    config.max_sse_event_size = max_message;
    let transport = StreamableHttpClientTransport::with_client(http, config);
    let running = client.serve(transport).await.map_err(|e| {
        let why = match &e {
            ClientInitializeError::TransportError { error, .. } => root_cause(&*error.error),
            other => other.to_string(),
        };
        format!(
            "cannot reach {name} at {url}: {}",
            crate::text::one_line(&why, 400)
        )
    })?;
    let (session, stop) = Session::new(&running, false);
    let name = name.to_owned();
    let url = url.to_owned();
    let ended = async move {
        tokio::select! {
            _ = running.waiting() => format!("the connection to {name} at {url} closed"),
            _ = stop.cancelled() => format!("{name} was detached"),
        }
    };
    Ok(Connected {
        session,
        ended: Box::pin(ended),
    })
}
