//! What this node offers other nodes: the manifests and chunks of the agents
//! it publishes, keyword matches among them, and calls to their tools.
//!
//! Only agents this node offers (published, or fetched and seeded) are
//! served; other installed agents stay private. A remote call runs under
//! this node's own limits, never longer than the caller still waits, and is
//! refused past the maximum hop count.

use super::Shared;
use crate::NodeCallError;
use crate::bindings::agentsite::agent::llm::{ChatRequest, ChatResponse, LlmError};
use crate::capabilities::caller::{Caller, ElicitFailure, Elicitation, Progress};
use crate::capabilities::guest_log::Level;
use crate::net::fetch::{FetchRequest, FetchResponse, MAX_MATCHES};
use crate::net::rpc::{self, CallRequest, RpcError, code};
use crate::policy::MAX_DEPTH;
use crate::runtime::CallError;
use crate::store::manifest::normalize_keyword;
use crate::tool::{Content, ToolOutput};
use libp2p::PeerId;
use serde_json::Value;
use std::sync::Arc;

pub(super) struct NodeLibrary(pub(super) Arc<Shared>);

#[async_trait::async_trait]
impl crate::net::Library for NodeLibrary {
    fn answer(&self, _from: PeerId, request: FetchRequest) -> FetchResponse {
        let shared = &self.0;
        match request {
            FetchRequest::Manifest { id } => match shared.offered(&id) {
                Some(signed) => FetchResponse::Manifest(signed.encoded().to_vec()),
                None => FetchResponse::NotFound,
            },
            FetchRequest::Chunk { id, index } => {
                let Some(signed) = shared.offered(&id) else {
                    return FetchResponse::NotFound;
                };
                let manifest = signed.manifest();
                let index = index as usize;
                if index >= manifest.chunk_count() {
                    return FetchResponse::NotFound;
                }
                match shared
                    .node
                    .blobs()
                    .read_range(&id, manifest.chunk_range(index))
                {
                    // Never pass on bytes that went bad on our own disk.
                    Ok(chunk) if manifest.chunk_matches(index, &chunk) => {
                        FetchResponse::Chunk(chunk)
                    }
                    Ok(_) => {
                        tracing::error!(%id, index, "stored agent is corrupt; not serving it");
                        FetchResponse::NotFound
                    }
                    Err(e) => {
                        tracing::warn!(%id, "cannot read a chunk: {e}");
                        FetchResponse::NotFound
                    }
                }
            }
            FetchRequest::Matching { keyword } => {
                let keyword = normalize_keyword(&keyword);
                let matches = shared
                    .offers()
                    .into_iter()
                    .filter(|m| m.manifest().keywords().contains(&keyword))
                    .take(MAX_MATCHES)
                    .map(|m| serde_bytes::ByteBuf::from(m.encoded().to_vec()))
                    .collect();
                FetchResponse::Matching(matches)
            }
        }
    }

    async fn rpc(&self, from: PeerId, message: Value) -> Value {
        let outcome = match CallRequest::from_json(&message) {
            Ok(request) => self.call(from, request).await,
            Err(error) => Err(error),
        };
        rpc::response(outcome)
    }

    fn announced(&self, manifest: crate::store::manifest::SignedManifest, host: PeerId) {
        self.0.remember(manifest, host);
    }

    fn connections_changed(&self, peers: usize) {
        self.0.node.audit().peers_connected(peers);
    }
}

impl NodeLibrary {
    async fn call(&self, from: PeerId, request: CallRequest) -> Result<ToolOutput, RpcError> {
        let shared = &self.0;
        if request.depth > MAX_DEPTH {
            return Err(RpcError {
                code: code::DEPTH_EXCEEDED,
                message: format!("agents calling agents may chain at most {MAX_DEPTH} deep"),
            });
        }
        if shared.offered(&request.agent).is_none() {
            return Err(RpcError {
                code: code::NOT_FOUND,
                message: format!("this node does not offer {}", request.agent),
            });
        }
        let record = shared
            .node
            .resolve(&request.agent.to_string())
            .map_err(|e| RpcError {
                code: code::NOT_FOUND,
                message: e.to_string(),
            })?;
        let mut grants = shared.node.grants(&record).map_err(|e| RpcError {
            code: code::NOT_FOUND,
            message: e.to_string(),
        })?;
        grants.limits.deadline = grants.limits.deadline.min(request.deadline);
        if grants.limits.deadline.is_zero() {
            return Err(RpcError {
                code: code::DEADLINE_EXCEEDED,
                message: "the caller's deadline has already passed".into(),
            });
        }
        tracing::info!(%from, agent = %record.card.name, tool = %request.tool, depth = request.depth, "remote call");
        let caller = Arc::new(ChainCaller {
            depth: request.depth,
        });
        let outcome = shared
            .node
            .call_record(
                &record,
                &request.tool,
                &request.arguments.to_string(),
                grants,
                Some(caller),
            )
            .await;
        match outcome {
            Ok(output) => Ok(output),
            Err(NodeCallError::UnknownTool { agent, tool, known }) => Err(RpcError {
                code: code::INVALID_PARAMS,
                message: format!("{agent} has no tool named {tool:?}; its tools are: {known}"),
            }),
            Err(NodeCallError::Call(CallError::InvalidArguments(reason))) => Err(RpcError {
                code: code::INVALID_PARAMS,
                message: format!("invalid arguments: {reason}"),
            }),
            // As over MCP: a failure of the tool is a result the caller sees.
            Err(NodeCallError::Call(error)) => Ok(ToolOutput {
                content: vec![Content::Text {
                    text: error.to_string(),
                }],
                structured_content: None,
                is_error: true,
            }),
            Err(error) => Err(RpcError {
                code: code::INTERNAL,
                message: error.to_string(),
            }),
        }
    }
}

/// The caller of a call made by another agent, here or on another node: it
/// carries the hop count; there is no client to report to, lend a model or ask.
pub(super) struct ChainCaller {
    pub(super) depth: u32,
}

#[async_trait::async_trait]
impl Caller for ChainCaller {
    fn progress(&self, _report: Progress) {}

    fn log(&self, _agent: &str, _level: Level, _message: &str) {}

    async fn sample(&self, _request: ChatRequest) -> Option<Result<ChatResponse, LlmError>> {
        None
    }

    async fn elicit(&self, _message: String, _schema: Value) -> Result<Elicitation, ElicitFailure> {
        Err(ElicitFailure::Unavailable(
            "the call came from another agent; there is nobody to ask".into(),
        ))
    }

    fn depth(&self) -> u32 {
        self.depth
    }
}
