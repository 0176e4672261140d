//! The MCP server of a node: an rmcp `ServerHandler` whose tools are the
//! tools of the installed agents, each call run in a fresh wasm instance.

use super::exposed::Exposed;
use super::hosted::{Hosted, ScopedTools};
use crate::NodeCallError;
use crate::capabilities::host::{Progress, ProgressSink};
use crate::runtime::CallError;
use crate::tool::ToolOutput;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ResultType,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use std::sync::Arc;

/// Tools per `tools/list` page.
pub const PAGE_SIZE: usize = 100;

/// One MCP session's view of the node (rmcp makes one per session).
#[derive(Clone)]
pub struct AgentServer {
    hosted: Arc<Hosted>,
    tools: Arc<ScopedTools>,
}

impl AgentServer {
    pub fn new(hosted: Arc<Hosted>, tools: Arc<ScopedTools>) -> Self {
        AgentServer { hosted, tools }
    }

    fn exposed(&self) -> Arc<Exposed> {
        self.tools.get(self.hosted.records())
    }

    /// Runs the call and turns every outcome a client can act on into a
    /// result; only a broken node is a protocol error.
    async fn run(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let exposed = self.exposed();
        let Some(tool) = exposed.get(&request.name) else {
            return Err(McpError::invalid_params(
                format!("unknown tool: {}", request.name),
                None,
            ));
        };
        let arguments = match &request.arguments {
            Some(arguments) => serde_json::to_string(arguments)
                .map_err(|e| McpError::invalid_params(format!("arguments: {e}"), None))?,
            None => "{}".to_owned(),
        };
        let node = self.hosted.node();
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| ProgressForwarder::start(context.peer.clone(), token));
        let call = node.call_record(
            &tool.record,
            &tool.tool,
            &arguments,
            node.config().limits,
            progress.as_ref().map(ProgressForwarder::sink),
        );
        // A cancelled request drops the call, which stops the guest at its
        // next epoch check and frees its instance.
        let outcome = tokio::select! {
            outcome = call => outcome,
            _ = context.ct.cancelled() => {
                tracing::info!(tool = %request.name, "call cancelled by the client");
                return Err(McpError::internal_error("request cancelled", None));
            }
        };
        if let Some(progress) = progress {
            progress.finish().await;
        }
        match outcome {
            Ok(output) => call_tool_result(output),
            Err(NodeCallError::Call(error)) => Ok(tool_failure(&error)),
            Err(NodeCallError::UnknownTool { .. }) | Err(NodeCallError::Resolve(_)) => Err(
                McpError::invalid_params(format!("unknown tool: {}", request.name), None),
            ),
            Err(error) => {
                tracing::error!(tool = %request.name, "{error}");
                Err(McpError::internal_error(error.to_string(), None))
            }
        }
    }
}

impl ServerHandler for AgentServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(
            Implementation::new("agentsite", env!("CARGO_PKG_VERSION"))
                .with_title("agentsite")
                .with_description(
                    "AI agents compiled to WebAssembly components, served as MCP tools",
                ),
        )
        .with_instructions(
            "Tools of the agents hosted on this node. Each call runs in a fresh, \
             isolated WebAssembly instance with a deadline and a memory cap.",
        )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let exposed = self.exposed();
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => parse_cursor(&cursor, exposed.tools().len())?,
        };
        let end = (start + PAGE_SIZE).min(exposed.tools().len());
        let mut result = ListToolsResult::with_all_items(
            exposed.tools()[start..end]
                .iter()
                .map(|t| t.descriptor.clone())
                .collect(),
        );
        if end < exposed.tools().len() {
            result.next_cursor = Some(end.to_string());
        }
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.exposed().get(name).map(|t| t.descriptor.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.run(request, context).await.map(CallToolResponse::from)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Tell this client whenever the installed agents change, for as long
        // as its session lives.
        let mut changes = self.hosted.subscribe();
        let peer = context.peer;
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                if peer.is_transport_closed() || peer.notify_tool_list_changed().await.is_err() {
                    return;
                }
            }
        });
    }
}

/// A `tools/list` cursor is the index of the page's first tool.
fn parse_cursor(cursor: &str, len: usize) -> Result<usize, McpError> {
    match cursor.parse::<usize>() {
        Ok(start) if start <= len => Ok(start),
        _ => Err(McpError::invalid_params(
            format!("invalid cursor {cursor:?}: pass back a nextCursor from tools/list"),
            None,
        )),
    }
}

/// The MCP result of a tool's output: it is MCP-shaped already.
fn call_tool_result(output: ToolOutput) -> Result<CallToolResult, McpError> {
    let value = serde_json::to_value(output)
        .map_err(|e| McpError::internal_error(format!("result: {e}"), None))?;
    let mut result: CallToolResult = serde_json::from_value(value)
        .map_err(|e| McpError::internal_error(format!("result: {e}"), None))?;
    // Required from 2026-07-28 on; rmcp drops it for older protocol versions.
    result.result_type = Some(ResultType::COMPLETE);
    Ok(result)
}

/// A call that failed in the tool or at a limit: a result with `isError`,
/// so that the model sees why (as the spec asks for tool errors).
fn tool_failure(error: &CallError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(error.to_string())])
}

/// Forwards a call's progress reports to the client as
/// `notifications/progress`, in order, and finishes before the result is sent.
struct ProgressForwarder {
    sender: tokio::sync::mpsc::UnboundedSender<Progress>,
    task: tokio::task::JoinHandle<()>,
}

impl ProgressForwarder {
    fn start(peer: Peer<RoleServer>, token: rmcp::model::ProgressToken) -> Self {
        let (sender, mut reports) = tokio::sync::mpsc::unbounded_channel::<Progress>();
        let task = tokio::spawn(async move {
            while let Some(report) = reports.recv().await {
                let mut param = ProgressNotificationParam::new(token.clone(), report.progress);
                param.total = report.total;
                param.message = report.message;
                if peer.notify_progress(param).await.is_err() {
                    return;
                }
            }
        });
        ProgressForwarder { sender, task }
    }

    fn sink(&self) -> ProgressSink {
        let sender = self.sender.clone();
        Arc::new(move |report| {
            let _ = sender.send(report);
        })
    }

    async fn finish(self) {
        drop(self.sender);
        let _ = self.task.await;
    }
}
