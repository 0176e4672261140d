//! MCP Apps (`io.modelcontextprotocol/ui`, SEP-1865) on the node's
//! endpoints: a tool with a view carries `_meta.ui` (its `ui://` resource
//! and who may call it) and its view is one of its agent's resources, of
//! MIME type `text/html;profile=mcp-app`. A client that announces the
//! extension sees both; one that does not sees the tools without `_meta.ui`,
//! no tool meant for a view alone, and no view among the resources, as the
//! extension asks of servers.

use crate::agent::resource::ResourceSpec;
use crate::agent::tool::{APP_MIME_TYPE, is_app_mime};
use rmcp::model::{ExtensionCapabilities, JsonObject, Tool};
use rmcp::service::{Peer, RoleServer};

/// The extension's identifier, in `capabilities.extensions`.
pub const EXTENSION: &str = "io.modelcontextprotocol/ui";

/// The extensions the node's endpoints declare: MCP Apps, with the MIME
/// type of the views they serve.
pub fn server_extensions() -> ExtensionCapabilities {
    let mut settings = JsonObject::new();
    settings.insert("mimeTypes".into(), serde_json::json!([APP_MIME_TYPE]));
    ExtensionCapabilities::from([(EXTENSION.to_owned(), settings)])
}

/// Whether the client on `peer` announced that it renders views.
pub fn renders_views(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info().is_some_and(|info| {
        info.capabilities
            .extensions
            .as_ref()
            .is_some_and(|extensions| extensions.contains_key(EXTENSION))
    })
}

/// `tool` as a client is shown it: as it is to one that renders views;
/// without its view, or not at all when only its view may call it, to one
/// that does not.
pub fn for_client(mut tool: Tool, renders_views: bool) -> Option<Tool> {
    if renders_views {
        return Some(tool);
    }
    let Some(meta) = tool.meta.as_mut() else {
        return Some(tool);
    };
    let Some(view) = meta.0.remove("ui") else {
        return Some(tool);
    };
    let visibility = view.get("visibility").and_then(|v| v.as_array());
    let for_model = visibility.is_none_or(|audiences| {
        audiences.is_empty() || audiences.iter().any(|audience| audience == "model")
    });
    if meta.0.is_empty() {
        tool.meta = None;
    }
    for_model.then_some(tool)
}

/// Whether `resource` is a view (listed only to clients that render them).
pub fn is_view(resource: &ResourceSpec) -> bool {
    resource.uri.starts_with("ui://") && resource.info.mime_type.as_deref().is_some_and(is_app_mime)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(meta: serde_json::Value) -> Tool {
        serde_json::from_value(serde_json::json!({
            "name": "convert",
            "inputSchema": { "type": "object" },
            "_meta": meta,
        }))
        .unwrap()
    }

    #[test]
    fn a_client_without_the_extension_sees_no_view_and_no_tool_for_views_alone() {
        let shown = tool(serde_json::json!({ "ui": { "resourceUri": "ui://c/view" } }));
        assert!(for_client(shown.clone(), true).unwrap().meta.is_some());
        assert!(for_client(shown, false).unwrap().meta.is_none());

        let app_only = tool(serde_json::json!({
            "ui": { "resourceUri": "ui://c/view", "visibility": ["app"] },
        }));
        assert!(for_client(app_only.clone(), true).is_some());
        assert!(for_client(app_only, false).is_none());

        let both = tool(serde_json::json!({
            "ui": { "resourceUri": "ui://c/view", "visibility": ["app", "model"] },
            "other": 1,
        }));
        let kept = for_client(both, false).unwrap();
        assert_eq!(kept.meta.unwrap().0.keys().collect::<Vec<_>>(), ["other"]);
    }
}
