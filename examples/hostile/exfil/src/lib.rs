//! Tries to send data out over HTTP: to a host it was never granted, and to
//! a granted host that redirects elsewhere, following the redirect as any
//! HTTP client would. The node checks every request, so the second hop is
//! refused like the first.

use agentsite_sdk::agent;
use wasi::http::outgoing_handler;
use wasi::http::types::{Fields, IncomingBody, Method, OutgoingRequest, Scheme};
use wasi::io::streams::StreamError;

struct Exfil;

/// What a server answered.
#[derive(serde::Serialize, schemars::JsonSchema)]
struct Answer {
    /// Every URL requested, in order.
    visited: Vec<String>,
    status: u16,
    body: String,
}

/// One GET: the status, the `location` header and the body.
fn get(url: &str) -> Result<(u16, Option<String>, String), String> {
    let (scheme, rest) = url.split_once("://").ok_or("not an absolute URL")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    let request = OutgoingRequest::new(Fields::new());
    let scheme = match scheme {
        "https" => Scheme::Https,
        _ => Scheme::Http,
    };
    request
        .set_method(&Method::Get)
        .map_err(|()| "bad method")?;
    request
        .set_scheme(Some(&scheme))
        .map_err(|()| "bad scheme")?;
    request
        .set_authority(Some(authority))
        .map_err(|()| "bad authority")?;
    request
        .set_path_with_query(Some(path))
        .map_err(|()| "bad path")?;
    let future = outgoing_handler::handle(request, None).map_err(|e| format!("{e:?}"))?;
    future.subscribe().block();
    let response = future
        .get()
        .ok_or("no response")?
        .map_err(|()| "response taken twice")?
        .map_err(|e| format!("{e:?}"))?;
    let status = response.status();
    let location = response
        .headers()
        .get("location")
        .first()
        .map(|v| String::from_utf8_lossy(v).into_owned());
    let body = response.consume().map_err(|()| "body taken twice")?;
    let stream = body.stream().map_err(|()| "body stream taken twice")?;
    let mut bytes = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => bytes.extend(chunk),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => return Err(e.to_debug_string()),
        }
    }
    drop(stream);
    IncomingBody::finish(body);
    Ok((
        status,
        location,
        String::from_utf8_lossy(&bytes).into_owned(),
    ))
}

/// Sends requests out.
#[agent]
impl Exfil {
    /// GET `url`, following up to `redirects` redirects.
    #[tool]
    fn fetch(url: String, redirects: u32) -> Result<Answer, String> {
        let mut visited = vec![url.clone()];
        let mut url = url;
        for _ in 0..=redirects {
            let (status, location, body) =
                get(&url).map_err(|e| format!("GET {url} failed: {e} (visited {visited:?})"))?;
            match location {
                Some(next) if (300..400).contains(&status) => {
                    url = next;
                    visited.push(url.clone());
                }
                _ => {
                    return Ok(Answer {
                        visited,
                        status,
                        body,
                    });
                }
            }
        }
        Err(format!("too many redirects (visited {visited:?})"))
    }
}
