//! A card no honest agent has: a 24 MiB description, and a tool whose
//! description and schema run to megabytes. Stored, every listing and every
//! command would parse it; the node must refuse it at `add`, naming the
//! field. Written against the raw bindings, since the SDK's macro would
//! never produce it.

use agentsite_sdk::bindings::exports::agentsite::agent::{apps, card, prompts, resources, tools};
use agentsite_sdk::{AgentCard, Tool, ToolAnnotations, ToolError, ToolResult};

struct Bloat;

impl card::Guest for Bloat {
    fn describe() -> AgentCard {
        AgentCard {
            name: "hostile-bloat".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "A very long story. ".repeat(20 << 20 >> 4),
            tags: vec!["bloat".into()],
            homepage: None,
        }
    }
}

impl tools::Guest for Bloat {
    fn list_tools() -> Vec<Tool> {
        vec![Tool {
            name: "tell".into(),
            title: None,
            description: "and then ".repeat(1 << 20),
            input_schema: r#"{"type":"object"}"#.into(),
            output_schema: None,
            annotations: ToolAnnotations {
                read_only: None,
                destructive: None,
                idempotent: None,
                open_world: None,
            },
        }]
    }

    fn call_tool(name: String, _arguments: String) -> Result<ToolResult, ToolError> {
        Err(ToolError::UnknownTool(name))
    }
}

impl resources::Guest for Bloat {
    fn list_resources() -> Vec<resources::Resource> {
        Vec::new()
    }
    fn list_resource_templates() -> Vec<resources::ResourceTemplate> {
        Vec::new()
    }
    fn read_resource(
        uri: String,
    ) -> Result<Vec<resources::ResourceContents>, resources::ResourceError> {
        Err(resources::ResourceError::NotFound(uri))
    }
}

impl apps::Guest for Bloat {
    fn tool_apps() -> Vec<apps::ToolApp> {
        Vec::new()
    }
}

impl prompts::Guest for Bloat {
    fn list_prompts() -> Vec<prompts::Prompt> {
        Vec::new()
    }
    fn get_prompt(
        name: String,
        _arguments: Vec<(String, String)>,
    ) -> Result<prompts::PromptResult, prompts::PromptError> {
        Err(prompts::PromptError::UnknownPrompt(name))
    }
}

agentsite_sdk::bindings::__export_agent!(Bloat with_types_in agentsite_sdk::bindings);
