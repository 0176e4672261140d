//! The fixture of the MCP conformance suite (`@modelcontextprotocol/conformance`).
//!
//! Every tool, resource and prompt the suite's server scenarios ask for, with
//! the names and contents they expect. Served at `/agents/conformance/mcp`,
//! the suite exercises the whole path: MCP request → host → fresh wasm
//! instance → host imports (log, progress, llm sampling, elicitation) → result.

use agentsite_sdk::host::{self, LogLevel};
use agentsite_sdk::user::{ElicitAction, elicit};
use agentsite_sdk::{
    Content, EmbeddedResource, Prompt, PromptArgument, PromptArguments, PromptError, PromptMessage,
    PromptResult, Prompts, Resource, ResourceBody, ResourceContents, ResourceError,
    ResourceTemplate, Resources, ToolResult, agent, llm,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;

const RED_PIXEL_PNG: &[u8] = include_bytes!("../assets/red-pixel.png");
const SILENCE_WAV: &[u8] = include_bytes!("../assets/silence.wav");

struct Conformance;

/// A postal address, defined once under `$defs` of the input schema.
#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "address")]
struct Address {
    street: Option<String>,
    city: Option<String>,
}

/// Fixture for the MCP conformance suite: one tool, resource and prompt per scenario.
#[agent(tags = ["testing", "mcp"], resources, prompts)]
impl Conformance {
    /// Returns a fixed text.
    #[tool(read_only)]
    fn test_simple_text() -> &'static str {
        "This is a simple text response for testing."
    }

    /// Returns a 1x1 red PNG.
    #[tool(read_only)]
    fn test_image_content() -> Content {
        Content::image(RED_PIXEL_PNG.to_vec(), "image/png")
    }

    /// Returns a short silent WAV.
    #[tool(read_only)]
    fn test_audio_content() -> Content {
        Content::audio(SILENCE_WAV.to_vec(), "audio/wav")
    }

    /// Returns an embedded text resource.
    #[tool(read_only)]
    fn test_embedded_resource() -> Content {
        text_resource(
            "test://embedded-resource",
            "text/plain",
            "This is an embedded resource content.",
        )
    }

    /// Returns text, an image and an embedded resource.
    #[tool(read_only)]
    fn test_multiple_content_types() -> Vec<Content> {
        vec![
            Content::Text("Multiple content types test:".into()),
            Content::image(RED_PIXEL_PNG.to_vec(), "image/png"),
            text_resource(
                "test://mixed-content-resource",
                "application/json",
                r#"{"test":"data","value":123}"#,
            ),
        ]
    }

    /// Logs three messages at info level, 50 ms apart.
    #[tool(read_only)]
    fn test_tool_with_logging() -> &'static str {
        host::log(LogLevel::Info, "Tool execution started");
        std::thread::sleep(Duration::from_millis(50));
        host::log(LogLevel::Info, "Tool processing data");
        std::thread::sleep(Duration::from_millis(50));
        host::log(LogLevel::Info, "Tool execution completed");
        "Logging test completed: sent 3 log messages"
    }

    /// Always fails.
    #[tool(read_only)]
    fn test_error_handling() -> ToolResult {
        ToolResult::error("This tool intentionally returns an error for testing")
    }

    /// Reports progress 0, 50 and 100 of 100, 50 ms apart.
    #[tool(read_only)]
    fn test_tool_with_progress() -> &'static str {
        for (step, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
            if step > 0 {
                std::thread::sleep(Duration::from_millis(50));
            }
            host::progress(progress, Some(100.0), None);
        }
        "Progress test completed"
    }

    /// Asks the calling client's language model (MCP sampling).
    #[tool]
    fn test_sampling(
        /// The prompt to send to the model.
        prompt: String,
    ) -> ToolResult {
        match llm::ask(&prompt, 100) {
            Ok(answer) => ToolResult::text(format!("LLM response: {}", answer.content)),
            Err(error) => ToolResult::error(format!("Sampling error: {error:?}")),
        }
    }

    /// Asks the person for a username and an email address (MCP elicitation).
    #[tool]
    fn test_elicitation(
        /// The message to show the person.
        message: String,
    ) -> ToolResult {
        let schema = json!({
            "type": "object",
            "properties": {
                "username": { "type": "string", "description": "User's response" },
                "email": { "type": "string", "description": "User's email address" },
            },
            "required": ["username", "email"],
        });
        ask_person(&message, &schema, "User response")
    }

    /// Asks for values of every primitive type, each with a default (SEP-1034).
    #[tool]
    fn test_elicitation_sep1034_defaults() -> ToolResult {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "description": "User's name", "default": "John Doe" },
                "age": { "type": "integer", "description": "User's age", "default": 30 },
                "score": { "type": "number", "description": "User's score", "default": 95.5 },
                "status": {
                    "type": "string",
                    "description": "User's status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": { "type": "boolean", "description": "Whether the user is verified", "default": true },
            },
        });
        ask_person(
            "Please review these values (all have defaults)",
            &schema,
            "Elicitation completed",
        )
    }

    /// Asks for choices in each of the five enum forms (SEP-1330).
    #[tool]
    fn test_elicitation_sep1330_enums() -> ToolResult {
        let titled = |title: &str| {
            json!([
                { "const": "value1", "title": format!("First {title}") },
                { "const": "value2", "title": format!("Second {title}") },
                { "const": "value3", "title": format!("Third {title}") },
            ])
        };
        let schema = json!({
            "type": "object",
            "properties": {
                "untitledSingle": { "type": "string", "enum": ["option1", "option2", "option3"] },
                "titledSingle": { "type": "string", "oneOf": titled("Option") },
                "legacyEnum": {
                    "type": "string",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "items": { "type": "string", "enum": ["option1", "option2", "option3"] },
                },
                "titledMulti": { "type": "array", "items": { "anyOf": titled("Choice") } },
            },
        });
        ask_person(
            "Please choose from each list",
            &schema,
            "Elicitation completed",
        )
    }

    /// Greets by name; its input schema uses `$defs` and `$ref` (JSON Schema 2020-12).
    #[tool(read_only)]
    fn json_schema_2020_12_tool(
        /// Who to greet.
        name: Option<String>,
        /// Where they live.
        address: Option<Address>,
    ) -> String {
        let city = address.and_then(|a| a.city.or(a.street));
        match city {
            Some(city) => format!("Hello, {} from {city}!", name.as_deref().unwrap_or("world")),
            None => format!("Hello, {}!", name.as_deref().unwrap_or("world")),
        }
    }

    /// Takes long enough for a client to lose and resume its stream (SEP-1699).
    #[tool(read_only)]
    fn test_reconnection() -> &'static str {
        std::thread::sleep(Duration::from_millis(100));
        "Reconnection test completed"
    }
}

fn text_resource(uri: &str, mime_type: &str, text: &str) -> Content {
    Content::Resource(EmbeddedResource {
        uri: uri.into(),
        mime_type: Some(mime_type.into()),
        body: ResourceBody::Text(text.into()),
    })
}

/// Elicits `schema` and reports what the person did, as the suite expects.
fn ask_person(message: &str, schema: &Value, label: &str) -> ToolResult {
    match elicit(message, &schema.to_string()) {
        Ok(response) => {
            let action = match response.action {
                ElicitAction::Accept => "accept",
                ElicitAction::Decline => "decline",
                ElicitAction::Cancel => "cancel",
            };
            let content = response.content.as_deref().unwrap_or("{}");
            ToolResult::text(format!("{label}: action={action}, content={content}"))
        }
        Err(error) => ToolResult::error(format!("Elicitation error: {error:?}")),
    }
}

impl Resources for Conformance {
    fn list() -> Vec<Resource> {
        vec![
            Resource {
                description: Some("A static text resource for testing".into()),
                mime_type: Some("text/plain".into()),
                ..Resource::new("test://static-text", "static-text")
            },
            Resource {
                description: Some("A static binary resource (a 1x1 PNG) for testing".into()),
                mime_type: Some("image/png".into()),
                ..Resource::new("test://static-binary", "static-binary")
            },
            Resource {
                description: Some("A resource clients subscribe to for updates".into()),
                mime_type: Some("text/plain".into()),
                ..Resource::new("test://watched-resource", "watched-resource")
            },
        ]
    }

    fn templates() -> Vec<ResourceTemplate> {
        vec![ResourceTemplate {
            description: Some("Data for an id, substituted into the URI".into()),
            mime_type: Some("application/json".into()),
            ..ResourceTemplate::new("test://template/{id}/data", "template-data")
        }]
    }

    fn read(uri: &str) -> Result<Vec<ResourceContents>, ResourceError> {
        let contents = match uri {
            "test://static-text" => ResourceContents::text(
                uri,
                "text/plain",
                "This is the content of the static text resource.",
            ),
            "test://static-binary" => {
                ResourceContents::blob(uri, "image/png", RED_PIXEL_PNG.to_vec())
            }
            "test://watched-resource" => {
                ResourceContents::text(uri, "text/plain", "This resource is watched.")
            }
            _ => {
                let id = uri
                    .strip_prefix("test://template/")
                    .and_then(|rest| rest.strip_suffix("/data"))
                    .filter(|id| !id.is_empty() && !id.contains('/'))
                    .ok_or_else(|| ResourceError::NotFound(uri.into()))?;
                let data =
                    json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") });
                ResourceContents::text(uri, "application/json", data.to_string())
            }
        };
        Ok(vec![contents])
    }
}

impl Prompts for Conformance {
    fn list() -> Vec<Prompt> {
        vec![
            Prompt::new(
                "test_simple_prompt",
                "A simple prompt without arguments",
                vec![],
            ),
            Prompt::new(
                "test_prompt_with_arguments",
                "A prompt with two required arguments",
                vec![
                    PromptArgument::new("arg1", "First test argument", true),
                    PromptArgument::new("arg2", "Second test argument", true),
                ],
            ),
            Prompt::new(
                "test_prompt_with_embedded_resource",
                "A prompt that embeds a resource",
                vec![PromptArgument::new(
                    "resourceUri",
                    "URI of the resource to embed",
                    true,
                )],
            ),
            Prompt::new("test_prompt_with_image", "A prompt with an image", vec![]),
        ]
    }

    fn get(name: &str, arguments: &PromptArguments) -> Result<PromptResult, PromptError> {
        let text = |text: &str| PromptMessage::user(Content::Text(text.into()));
        let messages = match name {
            "test_simple_prompt" => vec![text("This is a simple prompt for testing.")],
            "test_prompt_with_arguments" => {
                let arg1 = arguments.required("arg1")?;
                let arg2 = arguments.required("arg2")?;
                vec![text(&format!(
                    "Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
                ))]
            }
            "test_prompt_with_embedded_resource" => {
                let uri = arguments.required("resourceUri")?;
                vec![
                    PromptMessage::user(text_resource(
                        uri,
                        "text/plain",
                        "Embedded resource content for testing.",
                    )),
                    text("Please process the embedded resource above."),
                ]
            }
            "test_prompt_with_image" => vec![
                PromptMessage::user(Content::image(RED_PIXEL_PNG.to_vec(), "image/png")),
                text("Please analyze the image above."),
            ],
            _ => return Err(PromptError::UnknownPrompt(name.into())),
        };
        Ok(PromptResult {
            description: None,
            messages,
        })
    }
}
