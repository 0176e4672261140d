//! MCP over stdio: one session on this process's stdin and stdout. Stdout
//! carries protocol messages only; logs go to stderr.

use super::exposed::Scope;
use super::hosted::{Hosted, ScopedTools};
use super::server::AgentServer;
use rmcp::ServiceExt as _;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Serves `scope` on stdin/stdout until the client closes the stream.
pub async fn serve(hosted: Arc<Hosted>, scope: Scope) -> anyhow::Result<()> {
    let stop = CancellationToken::new();
    let watcher = tokio::spawn(hosted.clone().watch(stop.clone()));
    let server = AgentServer::new(hosted, Arc::new(ScopedTools::new(scope)));
    let outcome = async {
        // Tokio's own stdin and stdout read and write on its blocking pool,
        // so each message hopped between threads (a read, a write and a
        // flush per call: most of a call's CPU). When they are pipes, as MCP
        // clients start servers, rmcp's stdio_pipes reads and writes them on
        // the reactor, on descriptions of their own (O_NONBLOCK stays out of
        // the process's standard streams); anything else falls back.
        let running = server
            .serve(rmcp::transport::stdio_pipes())
            .await
            .map_err(|e| anyhow::anyhow!("MCP session over stdio failed to start: {e}"))?;
        running
            .waiting()
            .await
            .map_err(|e| anyhow::anyhow!("MCP session over stdio ended abnormally: {e}"))?;
        Ok(())
    }
    .await;
    stop.cancel();
    let _ = watcher.await;
    outcome
}
