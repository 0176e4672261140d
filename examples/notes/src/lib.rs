//! Notes kept in the agent's key-value store: state that outlives a call,
//! even though every call runs in a fresh instance.
//!
//! Each note is also an MCP resource, `note://<title>`, which clients can
//! read and subscribe to: saving or deleting a note tells subscribers. A
//! prompt hands every note to a language model for a summary.

use agentsite_sdk::{
    Content, Prompt, PromptArgument, PromptArguments, PromptError, PromptMessage, PromptResult,
    Prompts, Resource, ResourceContents, ResourceError, ResourceTemplate, Resources, agent, host,
    kv,
};

struct Notes;

const PREFIX: &str = "note/";
const SCHEME: &str = "note://";

/// Keep short notes by title; they persist between calls.
#[agent(tags = ["notes", "memory", "storage"], resources, prompts)]
impl Notes {
    /// Save a note under a title, replacing any note with that title.
    #[tool(idempotent, destructive)]
    fn put(
        /// The note's title.
        title: &str,
        /// The note's text.
        text: &str,
    ) -> Result<String, kv::KvError> {
        kv::set(&format!("{PREFIX}{title}"), text.as_bytes())?;
        host::resource_updated(&uri(title));
        Ok(format!("saved {title:?}"))
    }

    /// Read the note with a title.
    #[tool(read_only, idempotent)]
    fn get(
        /// The note's title.
        title: &str,
    ) -> Result<String, String> {
        match kv::get_string(&format!("{PREFIX}{title}")).map_err(|e| e.to_string())? {
            Some(text) => Ok(text),
            None => Err(format!("no note titled {title:?}")),
        }
    }

    /// List the titles of all notes, in order.
    #[tool(read_only, idempotent)]
    fn list() -> Result<Vec<String>, kv::KvError> {
        titles()
    }

    /// Delete the note with a title; says whether it existed.
    #[tool(idempotent, destructive)]
    fn delete(title: &str) -> Result<bool, kv::KvError> {
        let existed = kv::delete(&format!("{PREFIX}{title}"))?;
        if existed {
            host::resource_updated(&uri(title));
        }
        Ok(existed)
    }
}

fn titles() -> Result<Vec<String>, kv::KvError> {
    Ok(kv::keys_with_prefix(PREFIX)?
        .into_iter()
        .map(|key| key[PREFIX.len()..].to_owned())
        .collect())
}

/// The URI of a note: its title, percent-encoded outside the unreserved set.
fn uri(title: &str) -> String {
    let mut uri = String::from(SCHEME);
    for byte in title.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            uri.push(byte as char);
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

/// The title in a note URI, or `None` if it is not one.
fn title(uri: &str) -> Option<String> {
    let encoded = uri.strip_prefix(SCHEME)?.as_bytes();
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut i = 0;
    while i < encoded.len() {
        if encoded[i] == b'%' {
            let hex = std::str::from_utf8(encoded.get(i + 1..i + 3)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            bytes.push(encoded[i]);
            i += 1;
        }
    }
    String::from_utf8(bytes).ok().filter(|t| !t.is_empty())
}

impl Resources for Notes {
    fn list() -> Vec<Resource> {
        // A store the agent cannot read lists nothing; reads say why.
        titles()
            .unwrap_or_default()
            .into_iter()
            .map(|title| Resource {
                mime_type: Some("text/plain".into()),
                ..Resource::new(uri(&title), title)
            })
            .collect()
    }

    fn templates() -> Vec<ResourceTemplate> {
        vec![ResourceTemplate {
            description: Some("The note with this title (percent-encoded)".into()),
            mime_type: Some("text/plain".into()),
            ..ResourceTemplate::new("note://{title}", "note")
        }]
    }

    fn read(uri: &str) -> Result<Vec<ResourceContents>, ResourceError> {
        let title = title(uri).ok_or_else(|| ResourceError::NotFound(uri.into()))?;
        match kv::get_string(&format!("{PREFIX}{title}")) {
            Ok(Some(text)) => Ok(vec![ResourceContents::text(uri, "text/plain", text)]),
            Ok(None) => Err(ResourceError::NotFound(uri.into())),
            Err(e) => Err(ResourceError::Failed(e.to_string())),
        }
    }
}

impl Prompts for Notes {
    fn list() -> Vec<Prompt> {
        vec![Prompt::new(
            "summarize",
            "Ask a model to summarize every note, optionally with a focus",
            vec![PromptArgument::new(
                "focus",
                "What the summary should concentrate on",
                false,
            )],
        )]
    }

    fn get(name: &str, arguments: &PromptArguments) -> Result<PromptResult, PromptError> {
        if name != "summarize" {
            return Err(PromptError::UnknownPrompt(name.into()));
        }
        let failed = |e: kv::KvError| PromptError::Failed(e.to_string());
        let mut text = String::from("Summarize these notes");
        if let Some(focus) = arguments.get("focus") {
            text.push_str(&format!(", focusing on {focus}"));
        }
        text.push_str(":\n");
        for title in titles().map_err(failed)? {
            let note = kv::get_string(&format!("{PREFIX}{title}"))
                .map_err(failed)?
                .unwrap_or_default();
            text.push_str(&format!("\n## {title}\n{note}\n"));
        }
        Ok(PromptResult {
            description: Some("Every note, for a summary".into()),
            messages: vec![PromptMessage::user(Content::Text(text))],
        })
    }
}
