//! What a guest returns, checked and converted into host types.
//!
//! The guest is untrusted: its card, tool list and results are validated
//! here (names, JSON, schemas, sizes) before anything reaches a client.

use super::CallError;
use super::bindings::types;
use crate::config::Limits;
use crate::tool::{
    self, AgentCard, Content, EmbeddedResource, ResourceBody, ToolAnnotations, ToolOutput, ToolSpec,
};
use bytesize::ByteSize;
use serde_json::Value;

/// Checks the output budget against `size` raw bytes.
fn check_size(size: usize, limits: &Limits) -> Result<(), CallError> {
    if size as u64 > limits.max_output.as_u64() {
        return Err(CallError::OutputTooLarge {
            size: ByteSize(size as u64),
            limit: limits.max_output,
        });
    }
    Ok(())
}

/// Validates and converts a card and tool list.
pub(super) fn describe(
    card: types::AgentCard,
    tools: Vec<types::Tool>,
    limits: &Limits,
) -> Result<(AgentCard, Vec<ToolSpec>), CallError> {
    let malformed = |e: tool::ContractError| CallError::MalformedResult(e.0);
    tool::validate_agent_name(&card.name).map_err(malformed)?;
    let size: usize = tools
        .iter()
        .map(|t| {
            t.name.len()
                + t.description.len()
                + t.input_schema.len()
                + t.output_schema.as_ref().map_or(0, String::len)
        })
        .sum();
    check_size(size, limits)?;
    if tools.is_empty() {
        return Err(CallError::MalformedResult(
            "the agent lists no tools".into(),
        ));
    }
    let mut specs: Vec<ToolSpec> = Vec::with_capacity(tools.len());
    for tool in tools {
        tool::validate_tool_name(&tool.name).map_err(malformed)?;
        if specs.iter().any(|s| s.name == tool.name) {
            return Err(CallError::MalformedResult(format!(
                "two tools are named {:?}",
                tool.name
            )));
        }
        let input_schema =
            tool::parse_object_schema(&tool.name, "input schema", &tool.input_schema)
                .map_err(malformed)?;
        let output_schema = tool
            .output_schema
            .as_deref()
            .map(|text| tool::parse_object_schema(&tool.name, "output schema", text))
            .transpose()
            .map_err(malformed)?;
        specs.push(ToolSpec {
            name: tool.name,
            title: tool.title,
            description: tool.description,
            input_schema,
            output_schema,
            annotations: ToolAnnotations {
                read_only_hint: tool.annotations.read_only,
                destructive_hint: tool.annotations.destructive,
                idempotent_hint: tool.annotations.idempotent,
                open_world_hint: tool.annotations.open_world,
            },
        });
    }
    let card = AgentCard {
        name: card.name,
        version: card.version,
        description: card.description,
        tags: card.tags,
        homepage: card.homepage,
    };
    Ok((card, specs))
}

/// Validates and converts a tool result.
pub(super) fn tool_output(
    result: types::ToolResult,
    limits: &Limits,
) -> Result<ToolOutput, CallError> {
    let size: usize = result
        .content
        .iter()
        .map(|c| match c {
            types::Content::Text(text) => text.len(),
            types::Content::Image(media) | types::Content::Audio(media) => {
                media.data.len() + media.mime_type.len()
            }
            types::Content::Resource(resource) => {
                resource.uri.len()
                    + match &resource.body {
                        types::ResourceBody::Text(text) => text.len(),
                        types::ResourceBody::Blob(blob) => blob.len(),
                    }
            }
        })
        .sum::<usize>()
        + result.structured_content.as_ref().map_or(0, String::len);
    check_size(size, limits)?;

    let structured_content = match result.structured_content {
        None => None,
        Some(text) => {
            let value: Value = serde_json::from_str(&text).map_err(|e| {
                CallError::MalformedResult(format!("structured content is not JSON: {e}"))
            })?;
            if !value.is_object() {
                return Err(CallError::MalformedResult(
                    "structured content is not a JSON object".into(),
                ));
            }
            Some(value)
        }
    };
    let content = result
        .content
        .into_iter()
        .map(|c| match c {
            types::Content::Text(text) => Content::Text { text },
            types::Content::Image(media) => Content::Image {
                data: tool::base64(&media.data),
                mime_type: media.mime_type,
            },
            types::Content::Audio(media) => Content::Audio {
                data: tool::base64(&media.data),
                mime_type: media.mime_type,
            },
            types::Content::Resource(resource) => Content::Resource {
                resource: EmbeddedResource {
                    uri: resource.uri,
                    mime_type: resource.mime_type,
                    body: match resource.body {
                        types::ResourceBody::Text(text) => ResourceBody::Text { text },
                        types::ResourceBody::Blob(blob) => ResourceBody::Blob {
                            blob: tool::base64(&blob),
                        },
                    },
                },
            },
        })
        .collect();
    Ok(ToolOutput {
        content,
        structured_content,
        is_error: result.is_error,
    })
}

/// Converts a tool error the guest returned.
pub(super) fn tool_error(error: types::ToolError, agent: &str) -> CallError {
    match error {
        types::ToolError::UnknownTool(tool) => CallError::UnknownTool {
            agent: agent.to_owned(),
            tool,
        },
        types::ToolError::InvalidArguments(reason) => CallError::InvalidArguments(reason),
        types::ToolError::Failed(reason) => CallError::Failed(reason),
    }
}
