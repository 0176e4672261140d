//! The pages' style sheet, scripts and icon, compiled into the binary and
//! answered with an `ETag`, so a browser asks again cheaply (304) and always
//! gets the ones of the node it talks to.

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::LazyLock;

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            content_type: $type,
            body: include_str!(concat!("assets/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

static ASSETS: &[Asset] = &[
    asset!("site.css", "text/css; charset=utf-8"),
    asset!("icon.svg", "image/svg+xml"),
    asset!("common.js", JS),
    asset!("hub.js", JS),
    asset!("agent.js", JS),
    asset!("app-views.js", JS),
    asset!("schema-form.js", JS),
    asset!("result.js", JS),
    asset!("chat.js", JS),
    asset!("goal.js", JS),
    asset!("network.js", JS),
];

/// Each asset's `ETag`, computed once.
static TAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|asset| {
            let hash = Sha256::digest(asset.body.as_bytes());
            HeaderValue::from_str(&format!("\"{}\"", &hex::encode(hash)[..16]))
                .expect("hex is a valid header value")
        })
        .collect()
});

/// `GET /assets/{name}`
pub async fn serve(Path(name): Path<String>, headers: HeaderMap) -> Response {
    let Some(index) = ASSETS.iter().position(|a| a.name == name) else {
        return (StatusCode::NOT_FOUND, "no such asset").into_response();
    };
    let asset = &ASSETS[index];
    let tag = &TAGS[index];
    let cached = headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|sent| sent == tag);
    let mut response = if cached {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            )],
            asset.body,
        )
            .into_response()
    };
    let headers = response.headers_mut();
    headers.insert(header::ETAG, tag.clone());
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
