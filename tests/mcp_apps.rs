//! MCP Apps (`io.modelcontextprotocol/ui`) from agents: a tool the SDK
//! marks `#[tool(app = "ui://…")]` is listed with `_meta.ui` and its view
//! is one of the agent's resources, to an MCP client that announces the
//! extension; a client that does not sees the tool without it, no tool
//! meant for the view alone, and no view among the resources.

use crate::support;

use rmcp::ServiceExt as _;
use rmcp::model::{ClientConfig, ReadResourceRequestParams, ResourceContents};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;
use support::{Cli, Server};

/// An MCP client that renders views, as MCP Apps hosts announce it.
async fn apps_host(url: String) -> RunningService<RoleClient, ClientConfig> {
    let info: ClientConfig = serde_json::from_value(json!({
        "protocolVersion": "2025-06-18",
        "capabilities": {
            "extensions": {
                "io.modelcontextprotocol/ui": { "mimeTypes": ["text/html;profile=mcp-app"] },
            },
        },
        "clientInfo": { "name": "apps-host", "version": "1.0.0" },
    }))
    .unwrap();
    info.serve(StreamableHttpClientTransport::from_uri(url))
        .await
        .expect("the MCP Apps host connects")
}

/// The HTML of the view at `uri`, read as an MCP Apps host reads it: one
/// text contents of the extension's MIME type, a page that speaks it.
async fn read_view(host: &RunningService<RoleClient, ClientConfig>, uri: &str) -> String {
    let read = host
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .unwrap();
    match &read.contents[..] {
        [
            ResourceContents::TextResourceContents {
                text, mime_type, ..
            },
        ] => {
            assert_eq!(
                mime_type.as_deref(),
                Some("text/html;profile=mcp-app"),
                "{uri}"
            );
            assert!(
                text.contains("ui/initialize"),
                "{uri} speaks MCP Apps: {text}"
            );
            text.clone()
        }
        other => panic!("{uri}: one text contents expected: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_view_is_listed_and_served_to_clients_that_render_views_only() {
    let cli = Cli::new();
    cli.add(&["tipper", "calculator"]);
    let server = Server::start(cli.data(), &[]);

    let host = apps_host(server.url("/mcp")).await;
    let declared = host.peer_info().unwrap().capabilities.extensions.clone();
    assert!(
        declared.is_some_and(|e| e.contains_key("io.modelcontextprotocol/ui")),
        "the node declares the extension"
    );
    let tools = host.list_all_tools().await.unwrap();
    let tool = |name: &str| tools.iter().find(|t| t.name == name).cloned();
    let tip = tool("tipper.tip").expect("tipper.tip is listed");
    let meta = serde_json::to_value(tip.meta.expect("tipper.tip has _meta")).unwrap();
    assert_eq!(meta["ui"]["resourceUri"], "ui://tipper/panel");
    assert_eq!(meta["ui"].get("visibility"), None, "both audiences");
    let presets = tool("tipper.presets").expect("the view's own tool is listed to the host");
    let meta = serde_json::to_value(presets.meta.unwrap()).unwrap();
    assert_eq!(meta["ui"]["visibility"], json!(["app"]));
    assert!(tool("calculator.add").unwrap().meta.is_none());

    let resources = host.list_all_resources().await.unwrap();
    let view = resources
        .iter()
        .find(|r| r.uri == "ui://tipper/panel")
        .expect("the view is among the resources");
    assert_eq!(view.mime_type.as_deref(), Some("text/html;profile=mcp-app"));
    let text = read_view(&host, "ui://tipper/panel").await;
    assert!(text.starts_with("<!DOCTYPE html>"), "{text}");
    host.cancel().await.unwrap();

    // A client that does not render views.
    let plain = crate::mcp::http_client(server.url("/mcp")).await;
    let tools = plain.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(names.contains(&"tipper.tip"), "{names:?}");
    assert!(!names.contains(&"tipper.presets"), "{names:?}");
    assert!(tools.iter().all(|t| t.meta.is_none()), "{tools:?}");
    let resources = plain.list_all_resources().await.unwrap();
    assert!(
        resources.iter().all(|r| !r.uri.starts_with("ui://")),
        "{resources:?}"
    );
    // The tool itself answers any client.
    let answer = plain
        .call_tool(
            rmcp::model::CallToolRequestParams::new("tipper.tip").with_arguments(
                json!({"bill": 40, "percent": 15})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        answer.structured_content,
        Some(json!({"tip": 6.0, "total": 46.0}))
    );
    plain.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_javascript_agents_offer_views_as_rust_ones_do() {
    let cli = Cli::new();
    for component in [
        support::python_agent("python-split"),
        support::js_agent("js-mixer"),
    ] {
        cli.run(&["add", component.to_str().unwrap()]).success();
    }
    let server = Server::start(cli.data(), &[]);
    let host = apps_host(server.url("/mcp")).await;
    let tools = host.list_all_tools().await.unwrap();
    for (tool, view, arguments, expected) in [
        (
            "split.split",
            "ui://split/panel",
            json!({"bill": 100, "people": 3}),
            json!({"bill": 100.0, "people": 3, "each": 33.33}),
        ),
        (
            "mixer.mix",
            "ui://mixer/swatch",
            json!({"a": "#ff0000", "b": "#0000ff"}),
            json!({"colour": "#800080"}),
        ),
    ] {
        let listed = tools
            .iter()
            .find(|t| t.name == tool)
            .unwrap_or_else(|| panic!("{tool} is listed"));
        let meta = serde_json::to_value(listed.meta.clone().expect("_meta")).unwrap();
        assert_eq!(meta["ui"]["resourceUri"], view, "{tool}");
        read_view(&host, view).await;
        let answer = host
            .call_tool(
                rmcp::model::CallToolRequestParams::new(tool)
                    .with_arguments(arguments.as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        assert_eq!(answer.structured_content, Some(expected), "{tool}");
    }
    let resources = host.list_all_resources().await.unwrap();
    for view in ["ui://split/panel", "ui://mixer/swatch"] {
        assert!(
            resources.iter().any(|r| r.uri == view),
            "{view}: {resources:?}"
        );
    }
    host.cancel().await.unwrap();
}
