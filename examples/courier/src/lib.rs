//! An agent built on WASI 0.3: its tools are `async fn`s that wait on
//! WASI 0.3's clocks, HTTP client and filesystem (the `wasip3` bindings),
//! which the node grants as it grants WASI 0.2's: no HTTP origin, folder or
//! variable unless the operator names it.

use agentsite_sdk::{
    Content, Prompt, PromptArgument, PromptArguments, PromptError, PromptMessage, PromptResult,
    Prompts, Resource, ResourceContents, ResourceError, ResourceTemplate, Resources, agent,
};
use wasip3::clocks::monotonic_clock;
use wasip3::filesystem::types::{DescriptorFlags, OpenFlags, PathFlags};
use wasip3::http::types::{Fields, Method, Request, Response, Scheme};
use wasip3::wit_bindgen::StreamResult;
use wasip3::{wit_future, wit_stream};

/// The longest wait one call may ask for, in milliseconds.
const MAX_WAIT_MS: u64 = 10_000;

/// The most bytes of a body or file a tool returns.
const MAX_BYTES: usize = 64 * 1024;

struct Courier;

/// Waits, fetches web pages and reads granted files, asynchronously (WASI 0.3).
#[agent(tags = ["wasi-0.3", "http", "files", "wait"], resources, prompts)]
impl Courier {
    /// Waits `millis` milliseconds (at most 10000) on WASI 0.3's monotonic
    /// clock, then says how long it waited.
    #[tool(read_only, idempotent)]
    async fn wait(
        /// How long to wait, in milliseconds.
        millis: u64,
    ) -> Result<u64, String> {
        if millis > MAX_WAIT_MS {
            return Err(format!("a wait is at most {MAX_WAIT_MS} ms"));
        }
        let started = monotonic_clock::now();
        monotonic_clock::wait_for(millis * 1_000_000).await;
        Ok((monotonic_clock::now() - started) / 1_000_000)
    }

    /// Fetches `url` with an HTTP GET and returns its status and the start
    /// of its body (at most 64 KiB, as text).
    #[tool(read_only, open_world)]
    async fn fetch(
        /// An `http://` or `https://` address.
        url: String,
    ) -> Result<Fetched, String> {
        let (scheme, rest) = if let Some(rest) = url.strip_prefix("http://") {
            (Scheme::Http, rest)
        } else if let Some(rest) = url.strip_prefix("https://") {
            (Scheme::Https, rest)
        } else {
            return Err(format!("{url:?} is not an http:// or https:// address"));
        };
        let (authority, path) = match rest.find('/') {
            Some(slash) => rest.split_at(slash),
            None => (rest, "/"),
        };
        let (_, no_trailers) = wit_future::new(|| Ok(None));
        let (request, _sent) = Request::new(Fields::new(), None, no_trailers, None);
        let refused = |what: &str| format!("cannot {what} of {url:?}");
        request
            .set_method(&Method::Get)
            .map_err(|()| refused("set the method"))?;
        request
            .set_scheme(Some(&scheme))
            .map_err(|()| refused("set the scheme"))?;
        request
            .set_authority(Some(authority))
            .map_err(|()| refused("set the host"))?;
        request
            .set_path_with_query(Some(path))
            .map_err(|()| refused("set the path"))?;
        let response = wasip3::http::client::send(request)
            .await
            .map_err(|e| format!("GET {url}: {e:?}"))?;
        let status = response.get_status_code();
        let (_, handled) = wit_future::new(|| Ok(()));
        let (body, _trailers) = Response::consume_body(response, handled);
        let (text, truncated) = read_at_most(body, MAX_BYTES).await;
        Ok(Fetched {
            status,
            body: text,
            truncated,
        })
    }

    /// Reads the text file at `path` (relative to a folder the operator
    /// granted, as `/data/notes.txt`); at most 64 KiB.
    #[tool(read_only)]
    async fn read(
        /// The file's path, starting with the granted folder's name.
        path: String,
    ) -> Result<String, String> {
        let folders = wasip3::filesystem::preopens::get_directories();
        let (folder, inside) = folders
            .iter()
            .find_map(|(folder, name)| {
                let inside = path.strip_prefix(name.as_str())?.trim_start_matches('/');
                Some((folder, inside))
            })
            .ok_or_else(|| format!("{path:?} is in no folder this agent was granted"))?;
        let file = folder
            .open_at(
                PathFlags::empty(),
                inside.to_owned(),
                OpenFlags::empty(),
                DescriptorFlags::READ,
            )
            .await
            .map_err(|e| format!("cannot open {path:?}: {e:?}"))?;
        let (contents, _done) = file.read_via_stream(0);
        let (text, truncated) = read_at_most(contents, MAX_BYTES).await;
        if truncated {
            return Err(format!("{path:?} is over {MAX_BYTES} bytes"));
        }
        Ok(text)
    }

    /// Says hello through WASI 0.3's stdout stream (which the node keeps
    /// in the call's log) and returns the greeting.
    #[tool(read_only, idempotent)]
    async fn greet(
        /// Who to greet.
        name: String,
    ) -> String {
        let greeting = format!("Hello, {name}!");
        let (mut tx, rx) = wit_stream::new();
        let written = async {
            tx.write_all(greeting.clone().into_bytes()).await;
            drop(tx);
        };
        let (_, ()) = futures::join!(
            wasip3::cli::stdout::write_via_stream(rx).into_future(),
            written
        );
        greeting
    }
}

/// What `fetch` returns.
#[agentsite_sdk::data]
struct Fetched {
    /// The HTTP status code.
    status: u16,
    /// The body as text (lossy UTF-8).
    body: String,
    /// Whether the body was longer than what is returned.
    truncated: bool,
}

/// Reads `stream` until it ends or `limit` bytes are in; the text, and
/// whether more was left.
async fn read_at_most(
    mut stream: wasip3::wit_bindgen::StreamReader<u8>,
    limit: usize,
) -> (String, bool) {
    let mut bytes = Vec::new();
    loop {
        let room = limit + 1 - bytes.len().min(limit);
        let (result, chunk) = stream.read(Vec::with_capacity(room.min(16 * 1024))).await;
        bytes.extend_from_slice(&chunk);
        if bytes.len() > limit {
            bytes.truncate(limit);
            return (String::from_utf8_lossy(&bytes).into_owned(), true);
        }
        if !matches!(result, StreamResult::Complete(_)) {
            return (String::from_utf8_lossy(&bytes).into_owned(), false);
        }
    }
}

/// Where the courier says what it carries, and a route per place.
const ABOUT: &str = "courier://about";

impl Resources for Courier {
    fn list() -> Vec<Resource> {
        vec![Resource {
            description: Some("What the courier carries".into()),
            mime_type: Some("text/plain".into()),
            ..Resource::new(ABOUT, "about")
        }]
    }

    fn templates() -> Vec<ResourceTemplate> {
        vec![ResourceTemplate {
            mime_type: Some("text/plain".into()),
            ..ResourceTemplate::new("courier://route/{place}", "route")
        }]
    }

    fn read(uri: &str) -> Result<Vec<ResourceContents>, ResourceError> {
        if uri == ABOUT {
            return Ok(vec![ResourceContents::text(
                uri,
                "text/plain",
                "waits, fetches and reads, on WASI 0.3",
            )]);
        }
        match uri.strip_prefix("courier://route/") {
            Some(place) if !place.is_empty() => Ok(vec![ResourceContents::blob(
                uri,
                "application/octet-stream",
                place.as_bytes().to_vec(),
            )]),
            _ => Err(ResourceError::NotFound(uri.into())),
        }
    }
}

impl Prompts for Courier {
    fn list() -> Vec<Prompt> {
        vec![Prompt::new(
            "deliver",
            "Ask for a delivery to a place",
            vec![PromptArgument::new("place", "Where to deliver", true)],
        )]
    }

    fn get(name: &str, arguments: &PromptArguments) -> Result<PromptResult, PromptError> {
        if name != "deliver" {
            return Err(PromptError::UnknownPrompt(name.into()));
        }
        let place = arguments.required("place")?;
        Ok(PromptResult {
            description: Some(format!("A delivery to {place}")),
            messages: vec![
                PromptMessage::user(Content::Text(format!("Deliver this to {place}."))),
                PromptMessage::assistant(Content::Text("On my way.".into())),
            ],
        })
    }
}
