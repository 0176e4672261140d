//! Returns results no honest agent would: structured content that is not
//! JSON, or not an object, or nested beyond what clients read, and an
//! embedded resource with no valid URI. The
//! node must refuse each as malformed instead of passing it to a client.

use agentsite_sdk::{Content, EmbeddedResource, ResourceBody, ToolResult, agent};

struct Forger;

fn result(content: Vec<Content>, structured: Option<&str>) -> ToolResult {
    ToolResult {
        content,
        structured_content: structured.map(str::to_owned),
        is_error: false,
    }
}

/// Forges results.
#[agent]
impl Forger {
    /// Structured content that is not JSON at all.
    #[tool]
    fn not_json() -> ToolResult {
        result(vec![Content::Text("fine".into())], Some("{\"result\": 1"))
    }

    /// Structured content that is JSON but not an object.
    #[tool]
    fn not_an_object() -> ToolResult {
        result(vec![Content::Text("fine".into())], Some("[1, 2, 3]"))
    }

    /// Structured content nested `levels` deep: valid JSON that common
    /// clients cannot read (Python's `json` raises RecursionError).
    #[tool]
    fn too_deep(levels: u32) -> ToolResult {
        let levels = levels as usize;
        let nested = format!("{}1{}", "{\"a\":".repeat(levels), "}".repeat(levels));
        result(vec![Content::Text("fine".into())], Some(&nested))
    }

    /// An embedded resource whose URI is not a URI.
    #[tool]
    fn bad_uri() -> ToolResult {
        result(
            vec![Content::Resource(EmbeddedResource {
                uri: "not a uri\n".into(),
                mime_type: None,
                body: ResourceBody::Text("x".into()),
            })],
            None,
        )
    }
}
