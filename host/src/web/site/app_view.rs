//! The frames in which an agent's page shows its tools' views (MCP Apps):
//! `GET /hub/agents/{agent}/views?uri=ui://…` answers the view's HTML, read
//! from the agent as MCP clients read it, under a policy of its own.
//!
//! A view is the agent's code running in the person's browser, so it gets
//! nothing of the node's: the `sandbox` directive of its content security
//! policy gives it an opaque origin even when opened on its own (no
//! cookies, no storage, no same-origin request to the node's pages or
//! API), its scripts and styles must be inline, and it may fetch only from
//! the origins the operator granted the agent itself (`http=…`), nothing
//! when none. It reaches its agent only by asking the page over
//! `postMessage` (assets/app-views.js), which calls the tools through the
//! page's own route, with the page's anti-forgery header and the node's
//! grants.

use super::{Site, failure};
use crate::agent::tool::ResourceBody;
use crate::agent::tool::{APP_MIME_TYPE, is_app_mime};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use std::sync::Arc;

/// The largest view served: an HTML page with its scripts inline.
pub const MAX_VIEW: usize = 2 * 1024 * 1024;

/// What a view may do in the browser; `connect` is where it may fetch.
fn view_policy(connect: &str) -> String {
    format!(
        "sandbox allow-scripts allow-forms; default-src 'none'; \
         script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; media-src data:; \
         font-src data:; connect-src {connect}; frame-src 'none'; child-src 'none'; \
         worker-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'self'"
    )
}

/// Where the agent's view may fetch: the origins its grant lets the agent
/// itself reach, as source expressions; `'none'` without any.
fn connect_sources(grants: &crate::capabilities::grant::Grants) -> String {
    let sources: Vec<String> = grants
        .http
        .iter()
        .filter_map(|pattern| pattern.csp_source())
        .collect();
    if sources.is_empty() {
        "'none'".to_owned()
    } else {
        sources.join(" ")
    }
}

#[derive(serde::Deserialize)]
pub struct ViewQuery {
    uri: String,
}

/// `GET /hub/agents/{agent}/views?uri=ui://…`
pub async fn serve(
    State(site): State<Arc<Site>>,
    Path(agent): Path<String>,
    Query(query): Query<ViewQuery>,
) -> Response {
    let record = match site.node.resolve(&agent) {
        Ok(record) => record,
        Err(e) => return failure(StatusCode::NOT_FOUND, e.to_string()),
    };
    let uri = query.uri;
    let shown = crate::text::excerpt(&uri, 120);
    let named = record
        .tools
        .iter()
        .any(|tool| tool.app.as_ref().is_some_and(|app| app.resource_uri == uri));
    if !named {
        return failure(
            StatusCode::NOT_FOUND,
            format!("no tool of {} has the view {shown}", record.card.name),
        );
    }
    let policy = match site.node.grants(&record) {
        Ok(grants) => view_policy(&connect_sources(&grants)),
        Err(e) => return failure(StatusCode::FORBIDDEN, e.to_string()),
    };
    let contents = match site.node.read_resource(&record, &uri, None).await {
        Ok(contents) => contents,
        Err(e) => return failure(StatusCode::BAD_GATEWAY, e.to_string()),
    };
    let Some(view) = contents.into_iter().find(|c| c.uri == uri) else {
        return failure(
            StatusCode::BAD_GATEWAY,
            format!("{} read no contents for {shown}", record.card.name),
        );
    };
    if !view.mime_type.as_deref().is_some_and(is_app_mime) {
        return failure(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("the view is not of MIME type {APP_MIME_TYPE}"),
        );
    }
    let html = match view.body {
        ResourceBody::Text { text } => text.into_bytes(),
        ResourceBody::Blob { blob } => {
            match base64::engine::general_purpose::STANDARD.decode(blob) {
                Ok(bytes) => bytes,
                Err(_) => return failure(StatusCode::BAD_GATEWAY, "the view is not base64"),
            }
        }
    };
    if html.len() > MAX_VIEW {
        return failure(
            StatusCode::BAD_GATEWAY,
            format!(
                "the view is {} bytes, more than the {MAX_VIEW} served",
                html.len()
            ),
        );
    }
    let mut response = html.into_response();
    let headers = response.headers_mut();
    let set = |headers: &mut axum::http::HeaderMap, name, value| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(headers, header::CONTENT_TYPE, "text/html; charset=utf-8");
    match HeaderValue::from_str(&policy) {
        Ok(policy) => {
            headers.insert(header::CONTENT_SECURITY_POLICY, policy);
        }
        Err(_) => {
            return failure(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the view's policy is not a header",
            );
        }
    }
    set(headers, header::REFERRER_POLICY, "no-referrer");
    set(headers, header::CACHE_CONTROL, "no-store");
    set(
        headers,
        header::HeaderName::from_static("cross-origin-resource-policy"),
        "same-origin",
    );
    response
}
