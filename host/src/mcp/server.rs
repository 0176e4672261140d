//! The MCP server of a node: an rmcp `ServerHandler` whose tools, resources
//! and prompts are those of the installed agents, each request run in a fresh
//! wasm instance.

// Logging and resources/subscribe are deprecated by SEP-2577 for protocol
// 2026-07-28 but are part of 2025-11-25, which most clients speak.
#![allow(deprecated)]

use super::caller::{ClientCall, Session};
use super::exposed::{Exposed, ExposedAgent};
use super::hosted::{Hosted, ScopedTools};
use crate::NodeCallError;
use crate::agent::prompt::PromptSpec;
use crate::agent::resource::{ResourceCatalog, ResourceSpec, ResourceTemplateSpec};
use crate::agent::tool::{Content, ResourceBody, ToolOutput};
use crate::capabilities::caller::Caller;
use crate::capabilities::peers::PeerFailure;
use crate::requester::Requester;
use crate::runtime::CallError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ResourceContents, ServerCapabilities, ServerConfig, SetLevelRequestParams,
    SubscribeRequestParams, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// Items per page of `tools/list`, `resources/list`, `prompts/list`, ...
pub const PAGE_SIZE: usize = 100;

/// One MCP session's view of the node (rmcp makes one per session).
#[derive(Clone)]
pub struct AgentServer {
    hosted: Arc<Hosted>,
    tools: Arc<ScopedTools>,
    session: Arc<Session>,
    /// Cancelled when rmcp drops the session's last handler clone, which
    /// ends the session's notification task.
    _alive: Arc<tokio_util::sync::DropGuard>,
    ended: tokio_util::sync::CancellationToken,
}

impl AgentServer {
    pub fn new(hosted: Arc<Hosted>, tools: Arc<ScopedTools>) -> Self {
        let ended = tokio_util::sync::CancellationToken::new();
        AgentServer {
            hosted,
            tools,
            session: Arc::new(Session::default()),
            _alive: Arc::new(ended.clone().drop_guard()),
            ended,
        }
    }

    fn exposed(&self) -> Arc<Exposed> {
        self.tools.get(self.hosted.records())
    }

    /// The node's goals, when this endpoint offers the `goal` tool.
    fn goals(&self) -> Option<&Arc<crate::goals::Goals>> {
        self.hosted.goals().filter(|_| self.tools.with_node_tools())
    }

    /// Runs the `goal` tool: the goal's messages go to the client as
    /// progress, its end is the result.
    async fn run_goal(
        &self,
        goals: &Arc<crate::goals::Goals>,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let arguments = request.arguments.as_ref();
        // Over HTTP, the address the request came from; over stdio, the
        // process that started this one.
        let requester = match context.extensions.get::<http::request::Parts>() {
            Some(parts) => Requester::from_extensions("mcp", &parts.extensions),
            None => Requester::new("mcp", None),
        };
        let requester = &requester;
        let output = self
            .with_client(&context, |caller| async move {
                crate::goals::mcp::call(goals, arguments, requester, &*caller).await
            })
            .await?;
        Ok(call_tool_result(output))
    }

    /// Runs the call and turns every outcome a client can act on into a
    /// result; only a broken node is a protocol error.
    async fn run(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        if let Some(goals) = self.goals()
            && request.name == crate::goals::mcp::TOOL_NAME
        {
            return self.run_goal(goals, request, context).await;
        }
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
        let outcome = self
            .with_client(&context, |caller| async move {
                let grants = node.grants(&tool.record)?;
                // Boxed once here, the call's future (several KiB: wasmtime's
                // instantiation and call) is not copied again into each
                // future awaiting it, up to the request's task.
                let call = Box::pin(node.call_record(
                    &tool.record,
                    &tool.tool,
                    &arguments,
                    grants,
                    Some(caller),
                ));
                call.await
            })
            .await?;
        match NodeCallError::answer(outcome) {
            Ok(output) => Ok(call_tool_result(output)),
            // MCP wants bad arguments reported as a tool error the model sees.
            Err(PeerFailure::InvalidArguments(reason)) => Ok(call_tool_result(
                ToolOutput::failure(format!("invalid arguments: {reason}")),
            )),
            Err(PeerFailure::UnknownTool(_) | PeerFailure::NotFound(_)) => Err(
                McpError::invalid_params(format!("unknown tool: {}", request.name), None),
            ),
            Err(refused) => Err(McpError::internal_error(refused.to_string(), None)),
        }
    }

    /// What each agent in scope offers to read now, asked of all at once
    /// (see [`super::listing`]): an agent that does not answer in time is
    /// left out rather than holding up the list.
    async fn catalogs<'a>(
        &self,
        exposed: &'a Exposed,
    ) -> Vec<(&'a ExposedAgent, Arc<ResourceCatalog>)> {
        let node = self.hosted.node();
        self.hosted
            .resources
            .of(node, exposed.agents(), |record, grants| {
                super::hosted::resources_of(node.clone(), record, grants)
            })
            .await
    }

    /// `resources/read`: routed to the one agent that offers the URI.
    async fn read(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let exposed = self.exposed();
        let uri = request.uri.as_str();
        // One agent answers for itself; among several, the one that lists
        // the URI or a template matching it (from the shared listings, so
        // that only the owner runs).
        let owner = match exposed.agents() {
            [only] => Some(only),
            _ => self
                .catalogs(&exposed)
                .await
                .into_iter()
                .find(|(_, catalog)| catalog.offers(uri))
                .map(|(agent, _)| agent),
        };
        let Some(owner) = owner else {
            return Err(not_found(uri));
        };
        let node = self.hosted.node();
        let contents = self
            .with_client(&context, |caller| {
                node.read_resource(&owner.record, uri, Some(caller))
            })
            .await?
            .map_err(protocol_error)?;
        let contents = contents
            .into_iter()
            .map(|read| resource_contents(read.uri, read.mime_type, read.body))
            .collect();
        Ok(ReadResourceResult::new(contents).into())
    }

    /// `prompts/get`: the named prompt of its agent.
    async fn prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let exposed = self.exposed();
        let unknown =
            || McpError::invalid_params(format!("unknown prompt: {}", request.name), None);
        let (agent, name) = exposed.split_name(&request.name).ok_or_else(unknown)?;
        let mut arguments = Vec::new();
        for (key, value) in request.arguments.iter().flatten() {
            let Some(value) = value.as_str() else {
                return Err(McpError::invalid_params(
                    format!("prompt argument {key:?} must be a string"),
                    None,
                ));
            };
            arguments.push((key.clone(), value.to_owned()));
        }
        let node = self.hosted.node();
        let output = self
            .with_client(&context, |caller| {
                node.get_prompt(&agent.record, name, &arguments, Some(caller))
            })
            .await?
            .map_err(protocol_error)?;
        let messages = output
            .messages
            .iter()
            .map(mcp::<PromptMessage>)
            .collect::<Result<_, _>>()?;
        let mut result = GetPromptResult::new(messages);
        result.description = output.description;
        Ok(result.into())
    }

    /// Runs a request's work in the node with this session as its caller.
    /// A cancelled request drops the work, which stops the guest at its next
    /// epoch check and frees its instance; that is the only error here.
    async fn with_client<T, F>(
        &self,
        context: &RequestContext<RoleServer>,
        work: impl FnOnce(Arc<dyn Caller>) -> F,
    ) -> Result<T, McpError>
    where
        F: Future<Output = T>,
    {
        let client = ClientCall::start(context, self.session.clone());
        let outcome = tokio::select! {
            outcome = work(client.caller()) => outcome,
            _ = context.ct.cancelled() => {
                tracing::info!("request cancelled by the client");
                return Err(McpError::internal_error("request cancelled", None));
            }
        };
        client.finish().await;
        Ok(outcome)
    }
}

impl ServerHandler for AgentServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_logging()
                .enable_prompts()
                .enable_prompts_list_changed()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_resources_subscribe()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_extensions_with(super::apps::server_extensions())
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
            "Tools, resources and prompts of the agents hosted on this node. Each request \
             runs in a fresh, isolated WebAssembly instance with a deadline and a memory cap.",
        )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let exposed = self.exposed();
        let first_page = request.as_ref().is_none_or(|r| r.cursor.is_none());
        let views = super::apps::renders_views(&context.peer);
        let (tools, next_cursor) = answered(
            "tools/list",
            "",
            page(exposed.tools(), request, |t| Ok(t.descriptor.clone())),
        )?;
        // Pages keep their cursors: a tool left out for this client leaves
        // its page shorter, not the next one shifted.
        let mut tools: Vec<Tool> = tools
            .into_iter()
            .filter_map(|tool| super::apps::for_client(tool, views))
            .collect();
        // The node's own tool leads the first page; the agents' pages stay
        // as they are, so cursors keep their meaning.
        if first_page && self.goals().is_some() {
            tools.insert(0, crate::goals::mcp::descriptor());
        }
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next_cursor;
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        if name == crate::goals::mcp::TOOL_NAME && self.goals().is_some() {
            return Some(crate::goals::mcp::descriptor());
        }
        self.exposed().get(name).map(|t| t.descriptor.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.clone();
        answered("tools/call", &name, self.run(request, context).await).map(CallToolResponse::from)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let exposed = self.exposed();
        let views = super::apps::renders_views(&context.peer);
        let resources: Vec<ResourceSpec> = self
            .catalogs(&exposed)
            .await
            .into_iter()
            .flat_map(|(_, catalog)| catalog.resources.clone())
            .filter(|resource| views || !super::apps::is_view(resource))
            .collect();
        let (resources, next_cursor) =
            answered("resources/list", "", page(&resources, request, mcp))?;
        let mut result = ListResourcesResult::with_all_items(resources);
        result.next_cursor = next_cursor;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let exposed = self.exposed();
        let templates: Vec<ResourceTemplateSpec> = self
            .catalogs(&exposed)
            .await
            .into_iter()
            .flat_map(|(_, catalog)| catalog.templates.clone())
            .collect();
        let (templates, next_cursor) = answered(
            "resources/templates/list",
            "",
            page(&templates, request, mcp),
        )?;
        let mut result = ListResourceTemplatesResult::with_all_items(templates);
        result.next_cursor = next_cursor;
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.clone();
        answered("resources/read", &uri, self.read(request, context).await)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.session.subscribe(request.uri.to_string());
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.session.unsubscribe(request.uri.as_str());
        Ok(())
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let exposed = self.exposed();
        let node = self.hosted.node();
        let listed = self
            .hosted
            .prompts
            .of(node, exposed.agents(), |record, grants| {
                super::hosted::prompts_of(node.clone(), record, grants)
            })
            .await;
        let prompts: Vec<_> = listed
            .into_iter()
            .flat_map(|(agent, specs)| {
                specs
                    .iter()
                    .map(|spec| PromptSpec {
                        name: agent.exposed_name(&spec.name),
                        ..spec.clone()
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        let (prompts, next_cursor) = answered("prompts/list", "", page(&prompts, request, mcp))?;
        let mut result = ListPromptsResult::with_all_items(prompts);
        result.next_cursor = next_cursor;
        Ok(result)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let name = request.name.clone();
        answered("prompts/get", &name, self.prompt(request, context).await)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.session.set_log_level(request.level);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // For as long as this session lives: tell the client when the
        // installed agents change, and when a subscribed resource does.
        let mut changes = self.hosted.subscribe();
        let mut updates = match self.hosted.node().runtime() {
            Ok(runtime) => runtime.resource_updates(),
            Err(_) => return,
        };
        let (peer, session, tools) = (context.peer, self.session.clone(), self.tools.clone());
        let hosted = self.hosted.clone();
        let ended = self.ended.clone();
        tokio::spawn(async move {
            loop {
                let notice = tokio::select! {
                    _ = ended.cancelled() => {
                        tracing::debug!("session ended; its notification task stops");
                        return;
                    }
                    changed = changes.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        Some(Notice::ListsChanged)
                    }
                    update = updates.recv() => match update {
                        Ok(update) => {
                            let in_scope = tools
                                .get(hosted.records())
                                .agents()
                                .iter()
                                .any(|a| a.record.id == update.agent);
                            (in_scope && session.is_subscribed(&update.uri))
                                .then_some(Notice::ResourceUpdated(update.uri))
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => None,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    },
                };
                // Boxed: the task waits for the session's whole life, and
                // what a send takes would otherwise be part of its size.
                let sent = match notice {
                    Some(notice) => Box::pin(notice.send(&peer)).await,
                    None => Ok(()),
                };
                if sent.is_err() || peer.is_transport_closed() {
                    return;
                }
            }
        });
    }
}

/// What a session's notification task tells its client.
enum Notice {
    /// The installed agents changed: their tools, prompts and resources.
    ListsChanged,
    /// A resource the client subscribed to changed.
    ResourceUpdated(String),
}

impl Notice {
    async fn send(self, peer: &rmcp::Peer<RoleServer>) -> Result<(), rmcp::service::ServiceError> {
        match self {
            Notice::ListsChanged => {
                let notified = peer.notify_tool_list_changed().await;
                let _ = peer.notify_prompt_list_changed().await;
                let _ = peer.notify_resource_list_changed().await;
                notified
            }
            Notice::ResourceUpdated(uri) => {
                peer.notify_resource_updated(rmcp::model::ResourceUpdatedNotificationParam::new(
                    uri,
                ))
                .await
            }
        }
    }
}

/// One page of `items` from the request's cursor (the index of the page's
/// first item, handed out as `nextCursor`), each converted for the response.
fn page<T, U>(
    items: &[T],
    request: Option<PaginatedRequestParams>,
    convert: impl Fn(&T) -> Result<U, McpError>,
) -> Result<(Vec<U>, Option<String>), McpError> {
    let start = match request.and_then(|r| r.cursor) {
        None => 0,
        Some(cursor) => match cursor.parse::<usize>() {
            Ok(start) if start <= items.len() => start,
            _ => {
                return Err(McpError::invalid_params(
                    format!("invalid cursor {cursor:?}: pass back a nextCursor from the last page"),
                    None,
                ));
            }
        },
    };
    let end = (start + PAGE_SIZE).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    let page = items[start..end]
        .iter()
        .map(convert)
        .collect::<Result<_, _>>()?;
    Ok((page, next))
}

/// The rmcp type of one of the host's MCP-shaped values (checked when the
/// guest returned it, so this is a typed re-read).
fn mcp<T: DeserializeOwned>(value: &impl serde::Serialize) -> Result<T, McpError> {
    serde_json::to_value(value)
        .and_then(serde_json::from_value)
        .map_err(|e| McpError::internal_error(format!("result: {e}"), None))
}

fn not_found(uri: &str) -> McpError {
    McpError::resource_not_found(
        format!("no resource at {uri}"),
        Some(serde_json::json!({ "uri": uri })),
    )
}

/// Logs a request the node refused, in plain words: at info, as the
/// client's mistake (an unknown tool, a bad cursor), or at warn when the
/// node failed (an internal error). `what` names the request's subject.
fn answered<T>(method: &str, what: &str, result: Result<T, McpError>) -> Result<T, McpError> {
    if let Err(error) = &result {
        // The log line escapes it; a client may send megabytes of name.
        let what = crate::text::excerpt(what, 200);
        let code = error.code.0;
        if error.code == rmcp::model::ErrorCode::INTERNAL_ERROR {
            tracing::warn!("{method} {what} failed ({code}): {}", error.message);
        } else {
            tracing::info!("{method} {what} refused ({code}): {}", error.message);
        }
    }
    result
}

/// The JSON-RPC error for a resource or prompt request that failed.
fn protocol_error(error: NodeCallError) -> McpError {
    match error {
        NodeCallError::Call(CallError::ResourceNotFound(uri)) => not_found(&uri),
        NodeCallError::Call(
            error @ (CallError::UnknownPrompt { .. } | CallError::InvalidArguments(_)),
        ) => McpError::invalid_params(error.to_string(), None),
        error => McpError::internal_error(error.to_string(), None),
    }
}

/// The MCP result of a tool's output, which is MCP-shaped already: moved
/// over block by block rather than through JSON (that round trip was 4% of
/// a tool call's CPU over stdio). rmcp's constructors set `resultType`,
/// required from 2026-07-28 on, and drop it for older protocol versions.
fn call_tool_result(output: ToolOutput) -> CallToolResult {
    let content = output.content.into_iter().map(content_block).collect();
    let mut result = if output.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = output.structured_content.map(|s| s.to_value());
    result
}

fn content_block(content: Content) -> ContentBlock {
    match content {
        Content::Text { text } => ContentBlock::text(text),
        Content::Image { data, mime_type } => ContentBlock::image(data, mime_type),
        Content::Audio { data, mime_type } => ContentBlock::audio(data, mime_type),
        Content::Resource { resource } => ContentBlock::resource(resource_contents(
            resource.uri,
            resource.mime_type,
            resource.body,
        )),
    }
}

/// rmcp's form of a resource's contents, as a read answers them and as a
/// tool's output embeds them.
fn resource_contents(
    uri: String,
    mime_type: Option<String>,
    body: ResourceBody,
) -> ResourceContents {
    match body {
        ResourceBody::Text { text } => ResourceContents::TextResourceContents {
            uri,
            mime_type,
            text,
            meta: None,
        },
        ResourceBody::Blob { blob } => ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            meta: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tool::EmbeddedResource;
    use serde_json::json;

    fn structured(value: serde_json::Value) -> crate::agent::tool::StructuredContent {
        crate::agent::tool::StructuredContent::from_value(&value).unwrap()
    }

    fn resource(mime_type: Option<&str>, body: ResourceBody) -> Content {
        Content::Resource {
            resource: EmbeddedResource {
                uri: "mem://notes/1".into(),
                mime_type: mime_type.map(String::from),
                body,
            },
        }
    }

    /// Every kind of block a tool may return, with and without the
    /// optional parts, reaches the client as the JSON the tool wrote.
    #[test]
    fn a_tool_output_reaches_the_client_as_the_tool_wrote_it() {
        let outputs = [
            ToolOutput {
                content: vec![
                    Content::Text { text: "5".into() },
                    Content::Image {
                        data: "iVBORw0KGgo=".into(),
                        mime_type: "image/png".into(),
                    },
                    Content::Audio {
                        data: "UklGRg==".into(),
                        mime_type: "audio/wav".into(),
                    },
                    resource(
                        Some("text/markdown"),
                        ResourceBody::Text {
                            text: "# hi".into(),
                        },
                    ),
                    resource(
                        None,
                        ResourceBody::Blob {
                            blob: "AAEC".into(),
                        },
                    ),
                ],
                structured_content: Some(structured(
                    json!({"sum": 5, "parts": [2, 3], "none": null}),
                )),
                is_error: false,
            },
            ToolOutput::failure("division by zero"),
            ToolOutput {
                content: vec![],
                structured_content: Some(
                    crate::agent::tool::StructuredContent::from_text(
                        "{ \"spaced\" : \"\\u00e9\" }".into(),
                    )
                    .unwrap(),
                ),
                is_error: false,
            },
        ];
        for output in outputs {
            let mut expected = serde_json::to_value(&output).unwrap();
            expected["resultType"] = json!("complete");
            let sent = serde_json::to_value(call_tool_result(output)).unwrap();
            assert_eq!(sent, expected);
        }
    }

    /// A resource read reaches the client as the agent wrote it.
    #[test]
    fn read_contents_reach_the_client_as_the_agent_wrote_them() {
        let reads = [
            crate::agent::resource::ResourceContents {
                uri: "note://todo".into(),
                mime_type: Some("text/plain".into()),
                body: ResourceBody::Text {
                    text: "eggs".into(),
                },
            },
            crate::agent::resource::ResourceContents {
                uri: "test://static-binary".into(),
                mime_type: None,
                body: ResourceBody::Blob {
                    blob: "AAEC".into(),
                },
            },
        ];
        for read in reads {
            let expected = serde_json::to_value(&read).unwrap();
            let sent = resource_contents(read.uri, read.mime_type, read.body);
            assert_eq!(serde_json::to_value(sent).unwrap(), expected);
        }
    }
}
