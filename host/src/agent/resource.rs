//! Resources as the rest of the host sees them: plain Rust types that
//! serialize to the JSON shapes of MCP (`Resource`, `ResourceTemplate`,
//! `ResourceContents`), and the URI-template matching that routes a read to
//! the agent that can answer it.

use crate::agent::tool::ResourceBody;
use serde::{Deserialize, Serialize};

/// What describes a resource or a family of them, besides its URI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// A resource with a fixed URI, as MCP `resources/list` describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceSpec {
    pub uri: String,
    #[serde(flatten)]
    pub info: ResourceInfo,
}

/// A family of resources, as MCP `resources/templates/list` describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplateSpec {
    pub uri_template: String,
    #[serde(flatten)]
    pub info: ResourceInfo,
}

/// Contents of a read resource, as MCP writes them (`blob` is base64).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceContents {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(flatten)]
    pub body: ResourceBody,
}

/// What an agent offers to read.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ResourceCatalog {
    pub resources: Vec<ResourceSpec>,
    pub templates: Vec<ResourceTemplateSpec>,
}

impl ResourceCatalog {
    /// Whether a read of `uri` belongs to this agent: a listed URI or one
    /// that matches a template.
    pub fn offers(&self, uri: &str) -> bool {
        self.resources.iter().any(|r| r.uri == uri)
            || self
                .templates
                .iter()
                .any(|t| template_matches(&t.uri_template, uri))
    }
}

/// Longest resource URI or URI template an agent may hand over.
pub const MAX_URI_LEN: usize = 2048;

/// Checks a URI (or URI template) an agent hands over: not empty, at most
/// [`MAX_URI_LEN`] bytes, no control characters.
pub fn check_uri(uri: &str) -> Result<(), String> {
    if uri.is_empty() || uri.len() > MAX_URI_LEN || uri.chars().any(char::is_control) {
        return Err(format!(
            "resource URI {:?} is empty, longer than {MAX_URI_LEN} bytes or has control characters",
            crate::text::excerpt(uri, 256)
        ));
    }
    Ok(())
}

/// Whether `uri` matches the RFC 6570 level 1 template `template`, where each
/// `{name}` stands for one non-empty segment without `/`, `?` or `#`.
pub fn template_matches(template: &str, uri: &str) -> bool {
    let mut rest = uri;
    let mut parts = template.split('{');
    let Some(prefix) = parts.next() else {
        return false;
    };
    let Some(after) = rest.strip_prefix(prefix) else {
        return false;
    };
    rest = after;
    for part in parts {
        // `part` is `name}literal`; the literal runs to the next `{`.
        let Some((_, literal)) = part.split_once('}') else {
            return false;
        };
        let end = if literal.is_empty() {
            rest.len()
        } else {
            match rest.find(literal) {
                Some(end) => end,
                None => return false,
            }
        };
        let value = &rest[..end];
        if value.is_empty() || value.contains(['/', '?', '#']) {
            return false;
        }
        rest = &rest[end + literal.len()..];
    }
    rest.is_empty()
}

/// Checks a template: balanced braces with a name inside each pair.
pub(crate) fn validate_template(template: &str) -> Result<(), String> {
    let mut open = false;
    let mut name_len = 0;
    for c in template.chars() {
        match (c, open) {
            ('{', false) => {
                open = true;
                name_len = 0;
            }
            ('}', true) if name_len > 0 => open = false,
            ('{', true) | ('}', _) => {
                return Err(format!("URI template {template:?} has unbalanced braces"));
            }
            (_, true) => name_len += 1,
            _ => {}
        }
    }
    if open {
        return Err(format!("URI template {template:?} has an unclosed brace"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_one_segment_per_variable() {
        let t = "test://template/{id}/data";
        assert!(template_matches(t, "test://template/123/data"));
        assert!(!template_matches(t, "test://template//data"));
        assert!(!template_matches(t, "test://template/1/2/data"));
        assert!(!template_matches(t, "test://template/123/data/more"));
        assert!(!template_matches(t, "other://template/123/data"));
        assert!(template_matches("notes://{title}", "notes://shopping"));
        assert!(!template_matches("notes://{title}", "notes://"));
        assert!(template_matches("a://{x}-{y}", "a://1-2"));
        assert!(template_matches("plain://fixed", "plain://fixed"));
    }

    #[test]
    fn malformed_templates_are_refused() {
        assert!(validate_template("notes://{title}").is_ok());
        for bad in [
            "notes://{title",
            "notes://title}",
            "notes://{}",
            "a://{b{c}}",
        ] {
            assert!(validate_template(bad).is_err(), "{bad:?}");
        }
    }
}
