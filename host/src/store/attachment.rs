//! What the operator attached: a command the node starts and talks MCP to
//! over its stdin and stdout, or the URL of an MCP server. Kept in the
//! agent's record, so that a serving node reaches the same server that
//! `agentsite attach` probed.

use crate::AgentId;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Longest command line, URL or working directory kept for an attachment.
const MAX_FIELD: usize = 4096;
/// Most arguments of an attached command.
const MAX_ARGS: usize = 256;

/// How the node reaches an attached server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Attachment {
    /// A program the node starts (and restarts), speaking MCP over stdio.
    Stdio {
        command: String,
        #[serde(default)]
        args: Vec<String>,
        /// The directory it runs in: where `agentsite attach` was run, so
        /// that relative paths in the command mean what they meant there.
        dir: PathBuf,
    },
    /// An MCP server at a streamable-HTTP endpoint.
    Http { url: String },
    /// An A2A agent: its Agent Card, and the JSON-RPC endpoint the card
    /// named when it was attached, and the version of A2A spoken there
    /// (none: 1.0; `0.3.0` for an agent whose card offers only 0.3).
    A2a {
        card: String,
        endpoint: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        protocol: Option<String>,
    },
}

/// Why an attachment cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidAttachment(pub String);

impl Attachment {
    /// The attachment `agentsite attach NAME TARGET...` describes: one
    /// `http://` or `https://` URL, or a command and its arguments run in
    /// `dir`.
    pub fn from_command_line(
        target: &[String],
        endpoint: Option<&str>,
        dir: PathBuf,
    ) -> Result<Attachment, InvalidAttachment> {
        let Some((first, rest)) = target.split_first() else {
            return Err(InvalidAttachment(
                "name what to attach: a URL, or `-- COMMAND ARGS...`".into(),
            ));
        };
        let attachment = if first.starts_with("http://") || first.starts_with("https://") {
            if !rest.is_empty() {
                return Err(InvalidAttachment(format!(
                    "a URL takes no arguments (got {rest:?}); a command goes after `--`"
                )));
            }
            match endpoint {
                // The operator names the endpoint of an A2A agent whose
                // card puts it on another origin.
                Some(endpoint) => Attachment::A2a {
                    card: first.clone(),
                    endpoint: endpoint.to_owned(),
                    protocol: None,
                },
                None => Attachment::Http { url: first.clone() },
            }
        } else if endpoint.is_some() {
            return Err(InvalidAttachment(
                "--endpoint names an A2A agent's endpoint: attach the agent by its URL".into(),
            ));
        } else {
            Attachment::Stdio {
                command: first.clone(),
                args: rest.to_vec(),
                dir,
            }
        };
        attachment.check()?;
        Ok(attachment)
    }

    /// Checks the bounds and form of every field.
    pub fn check(&self) -> Result<(), InvalidAttachment> {
        let bad = |reason: String| Err(InvalidAttachment(reason));
        match self {
            Attachment::Stdio { command, args, dir } => {
                if command.is_empty() {
                    return bad("the command is empty".into());
                }
                if args.len() > MAX_ARGS {
                    return bad(format!("more than {MAX_ARGS} arguments"));
                }
                let too_long = std::iter::once(command)
                    .chain(args)
                    .any(|field| field.len() > MAX_FIELD || field.contains('\0'));
                if too_long || dir.as_os_str().len() > MAX_FIELD {
                    return bad(format!(
                        "the command line has a part longer than {MAX_FIELD} bytes or a NUL"
                    ));
                }
                if !dir.is_absolute() {
                    return bad(format!("{} is not an absolute directory", dir.display()));
                }
            }
            Attachment::Http { url } => check_url(url)?,
            Attachment::A2a {
                card,
                endpoint,
                protocol,
            } => {
                check_url(card)?;
                check_url(endpoint)?;
                if protocol.as_ref().is_some_and(|p| p.len() > 16) {
                    return bad("the A2A version is longer than 16 bytes".into());
                }
            }
        }
        Ok(())
    }

    /// A new agent id for an attachment named `name`. It is not the hash of
    /// any content (there are no bytes to hash, and the server behind it can
    /// change at any time): a digest of the descriptor and a random salt, so
    /// that two nodes attaching the same command get different ids and a
    /// call by id reaches the node that attached it.
    pub fn new_id(&self, name: &str) -> AgentId {
        let mut salt = [0u8; 16];
        // Without the salt the id is still unique on this node.
        let _ = getrandom::fill(&mut salt);
        let descriptor = serde_json::to_vec(self).unwrap_or_default();
        let mut bytes = b"agentsite-attached\0".to_vec();
        bytes.extend_from_slice(&salt);
        bytes.extend_from_slice(name.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(&descriptor);
        AgentId::of(&bytes)
    }

    /// The kind of server, as listings show it.
    pub fn kind(&self) -> &'static str {
        match self {
            Attachment::Stdio { .. } => "MCP server (stdio)",
            Attachment::Http { .. } => "MCP server (HTTP)",
            Attachment::A2a { .. } => "A2A agent",
        }
    }

    /// What it runs or where it is, for the operator's own listings.
    pub fn target(&self) -> String {
        match self {
            Attachment::Stdio { command, args, .. } => std::iter::once(command)
                .chain(args)
                .map(|part| {
                    if part.contains(char::is_whitespace) || part.is_empty() {
                        format!("{part:?}")
                    } else {
                        part.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join(" "),
            Attachment::Http { url } => url.clone(),
            Attachment::A2a { card, .. } => card.clone(),
        }
    }
}

fn check_url(url: &str) -> Result<(), InvalidAttachment> {
    if url.len() > MAX_FIELD {
        return Err(InvalidAttachment(format!(
            "the URL is longer than {MAX_FIELD} bytes"
        )));
    }
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| InvalidAttachment(format!("{url:?} is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
        return Err(InvalidAttachment(format!(
            "{url:?} is not an http:// or https:// URL"
        )));
    }
    if let Some(host) = parsed.host_str()
        && let Some(why) = crate::http::destination::forbidden(host)
    {
        return Err(InvalidAttachment(format!(
            "{url} names {host}, which {why}: the node sends no request there"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn a_url_or_a_command_line_is_an_attachment() {
        let dir = PathBuf::from("/srv");
        assert_eq!(
            Attachment::from_command_line(&args(&["https://example.com/mcp"]), None, dir.clone()),
            Ok(Attachment::Http {
                url: "https://example.com/mcp".into()
            })
        );
        let stdio = Attachment::from_command_line(
            &args(&["python", "server.py", "a b"]),
            None,
            dir.clone(),
        )
        .unwrap();
        assert_eq!(stdio.target(), "python server.py \"a b\"");
        assert_eq!(stdio.kind(), "MCP server (stdio)");

        for (target, says) in [
            (args(&[]), "name what to attach"),
            (args(&["http://x/mcp", "more"]), "takes no arguments"),
            (args(&["http://"]), "is not a URL"),
            (args(&["a\0b"]), "NUL"),
        ] {
            let error = Attachment::from_command_line(&target, None, dir.clone()).unwrap_err();
            assert!(error.0.contains(says), "{target:?}: {error}");
        }
        let relative =
            Attachment::from_command_line(&args(&["ls"]), None, "here".into()).unwrap_err();
        assert!(relative.0.contains("not an absolute directory"));
    }

    #[test]
    fn each_attachment_gets_its_own_id() {
        let http = Attachment::Http {
            url: "http://127.0.0.1:9/mcp".into(),
        };
        assert_ne!(http.new_id("weather"), http.new_id("weather"));
    }
}
