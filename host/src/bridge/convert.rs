//! What an attached server says, turned into the node's own types through
//! the same checks a component's card, tools and results go through: an
//! attached server is as untrusted as any agent, and a client of the node
//! sees one contract whoever implements the tools.

use crate::agent::tool::{AgentCard, ToolOutput, ToolSpec, card_limits};
use crate::capabilities::bindings::types;
use crate::config::Limits;
use crate::runtime::CallError;
use crate::runtime::result;
use base64::Engine as _;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ResourceContents, Tool};

/// The card and tool list of the server attached as `name`, from its
/// `initialize` answer and its tools, or why they break the contract (a
/// tool name that is not one, a schema that is not an object, too many or
/// too large, no tools at all).
pub fn describe(
    name: &str,
    kind: &str,
    server: Option<&Implementation>,
    instructions: Option<&str>,
    tools: Vec<Tool>,
) -> Result<(AgentCard, Vec<ToolSpec>), CallError> {
    let card = card(name, kind, server, instructions);
    let tools = tools.into_iter().map(contract_tool).collect();
    result::describe(card, tools, Vec::new())
}

/// A card in the contract's own form: the operator's name, the rest from
/// what the server says about itself, cut to the card's bounds.
fn card(
    name: &str,
    kind: &str,
    server: Option<&Implementation>,
    instructions: Option<&str>,
) -> types::AgentCard {
    let said = server
        .and_then(|s| s.description.as_deref().or(s.title.as_deref()))
        .or(instructions)
        .map(|text| crate::text::one_line(text, card_limits::DESCRIPTION - 128));
    let server_name = server.map(|s| crate::text::one_line(&s.name, 128));
    let description = match (said, server_name) {
        (Some(said), _) => said,
        (None, Some(server_name)) => format!("{server_name}, an attached {kind}"),
        (None, None) => format!("An attached {kind}"),
    };
    types::AgentCard {
        name: name.to_owned(),
        version: server
            .map(|s| crate::text::one_line(&s.version, card_limits::VERSION))
            .unwrap_or_default(),
        description,
        tags: vec!["mcp".into(), "attached".into()],
        homepage: server
            .and_then(|s| s.website_url.clone())
            .filter(|url| url.len() <= card_limits::HOMEPAGE),
    }
}

fn contract_tool(tool: Tool) -> types::Tool {
    let annotations = tool.annotations.unwrap_or_default();
    types::Tool {
        name: tool.name.into_owned(),
        title: tool.title,
        description: tool.description.map(|d| d.into_owned()).unwrap_or_default(),
        input_schema: serde_json::to_string(&*tool.input_schema).unwrap_or_default(),
        output_schema: tool
            .output_schema
            .map(|schema| serde_json::to_string(&*schema).unwrap_or_default()),
        annotations: types::ToolAnnotations {
            read_only: annotations.read_only_hint,
            destructive: annotations.destructive_hint,
            idempotent: annotations.idempotent_hint,
            open_world: annotations.open_world_hint,
        },
    }
}

/// A tool result from an attached server, checked against `limits` (the
/// output cap, the number of content blocks, well-formed media and
/// structured content) as a component's result is.
pub fn tool_output(answer: CallToolResult, limits: &Limits) -> Result<ToolOutput, CallError> {
    // Counted before any block is converted, as the contract's check does.
    result::check_count(
        "content blocks",
        answer.content.len(),
        result::MAX_CONTENT_ITEMS,
    )?;
    let content = answer
        .content
        .into_iter()
        .map(contract_content)
        .collect::<Result<Vec<_>, _>>()?;
    let structured_content = match answer.structured_content {
        None | Some(serde_json::Value::Null) => None,
        Some(value) => Some(value.to_string()),
    };
    result::tool_output(
        types::ToolResult {
            content,
            structured_content,
            is_error: answer.is_error.unwrap_or(false),
        },
        limits,
    )
}

fn contract_content(block: ContentBlock) -> Result<types::Content, CallError> {
    Ok(match block {
        ContentBlock::Text(text) => types::Content::Text(text.text),
        ContentBlock::Image(image) => types::Content::Image(types::Media {
            data: decode("image", &image.data)?,
            mime_type: image.mime_type,
        }),
        ContentBlock::Audio(audio) => types::Content::Audio(types::Media {
            data: decode("audio", &audio.data)?,
            mime_type: audio.mime_type,
        }),
        ContentBlock::Resource(embedded) => {
            let (uri, mime_type, body) = match embedded.resource {
                ResourceContents::TextResourceContents {
                    uri,
                    mime_type,
                    text,
                    ..
                } => (uri, mime_type, types::ResourceBody::Text(text)),
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => (
                    uri,
                    mime_type,
                    types::ResourceBody::Blob(decode("resource", &blob)?),
                ),
                other => return Err(unknown(&other)),
            };
            types::Content::Resource(types::EmbeddedResource {
                uri,
                mime_type,
                body,
            })
        }
        // The contract has no links to resources, which the node would not
        // serve anyway (they live on the attached server): the link is
        // passed on as what it says.
        ContentBlock::ResourceLink(link) => types::Content::Text(match link.description {
            Some(description) => format!("{} ({}): {description}", link.name, link.uri),
            None => format!("{} ({})", link.name, link.uri),
        }),
        other => return Err(unknown(&other)),
    })
}

fn unknown(content: &impl serde::Serialize) -> CallError {
    CallError::MalformedResult(format!(
        "content of a kind the node does not know: {}",
        crate::text::excerpt(&serde_json::to_string(content).unwrap_or_default(), 200)
    ))
}

fn decode(what: &str, data: &str) -> Result<Vec<u8>, CallError> {
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| CallError::MalformedResult(format!("{what} data is not base64: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(value: serde_json::Value) -> Tool {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_server_describes_itself_within_the_contract() {
        let mut server = Implementation::new("weather-server", "1.2.0");
        server.description = Some("Forecasts\nfor anywhere".into());
        let tools = vec![tool(json!({
            "name": "forecast",
            "description": "The forecast for a city",
            "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
            "annotations": {"readOnlyHint": true}
        }))];
        let (card, specs) = describe("weather", "MCP server", Some(&server), None, tools).unwrap();
        assert_eq!(card.name, "weather");
        assert_eq!(card.version, "1.2.0");
        assert_eq!(card.description, "Forecasts for anywhere");
        assert_eq!(specs[0].name, "forecast");
        assert_eq!(specs[0].annotations.read_only_hint, Some(true));
    }

    #[test]
    fn a_server_that_lies_about_its_tools_is_refused() {
        let server = Implementation::new("liar", "1");
        let object = json!({"type": "object"});
        for (tools, says) in [
            (vec![], "lists no tools"),
            (
                vec![tool(json!({"name": "bad name!", "inputSchema": object}))],
                "is invalid",
            ),
            (
                vec![
                    tool(json!({"name": "twice", "inputSchema": object})),
                    tool(json!({"name": "twice", "inputSchema": object})),
                ],
                "two tools are named",
            ),
            (
                vec![tool(
                    json!({"name": "t", "inputSchema": {"type": "string"}}),
                )],
                "input schema",
            ),
            (
                vec![tool(json!({
                    "name": "t", "inputSchema": object, "description": "x".repeat(10_000)
                }))],
                "description",
            ),
        ] {
            let error = describe("liar", "MCP server", Some(&server), None, tools).unwrap_err();
            assert!(error.to_string().contains(says), "{error}");
        }
    }

    #[test]
    fn results_are_held_to_the_output_limit_and_the_contract() {
        let limits = Limits {
            max_output: bytesize::ByteSize::kib(1),
            ..Limits::default()
        };
        let answer =
            |value: serde_json::Value| -> CallToolResult { serde_json::from_value(value).unwrap() };
        let ok = tool_output(
            answer(json!({
                "content": [
                    {"type": "text", "text": "12 °C"},
                    {"type": "image", "data": "iVBORw==", "mimeType": "image/png"}
                ],
                "structuredContent": {"celsius": 12}
            })),
            &limits,
        )
        .unwrap();
        assert_eq!(ok.text(), "12 °C");
        assert_eq!(ok.structured_content.unwrap(), json!({"celsius": 12}));

        let flood = answer(json!({"content": [{"type": "text", "text": "x".repeat(4096)}]}));
        assert!(matches!(
            tool_output(flood, &limits),
            Err(CallError::OutputTooLarge { .. })
        ));
        let not_base64 = answer(
            json!({"content": [{"type": "image", "data": "not base64!", "mimeType": "image/png"}]}),
        );
        assert!(
            tool_output(not_base64, &limits)
                .unwrap_err()
                .to_string()
                .contains("not base64")
        );
        let not_object = answer(json!({"content": [], "structuredContent": [1, 2]}));
        assert!(
            tool_output(not_object, &limits)
                .unwrap_err()
                .to_string()
                .contains("not a JSON object")
        );
    }
}
