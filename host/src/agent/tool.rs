//! Tools and their results as the rest of the host sees them: plain Rust
//! types that serialize to the JSON shapes of MCP (`Tool`, `CallToolResult`),
//! checked when they cross out of the guest.
//!
//! The guest hands over JSON as text (schemas, structured content); here it
//! is checked once, and anything malformed is refused with a clear error
//! instead of being passed on to clients. A tool's structured content stays
//! the text the tool wrote ([`StructuredContent`]): most results only pass
//! through the node, so no JSON tree is built for them.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who an agent is (the WIT `agent-card`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentCard {
    pub name: String,
    pub version: String,
    pub description: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub homepage: Option<String>,
}

/// Behaviour hints of a tool, named as in MCP.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

impl ToolAnnotations {
    pub fn is_empty(&self) -> bool {
        *self == ToolAnnotations::default()
    }
}

/// A tool, as MCP `tools/list` describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub description: String,
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "ToolAnnotations::is_empty")]
    pub annotations: ToolAnnotations,
    /// The tool's interactive view (MCP Apps), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<ToolApp>,
}

/// A tool's interactive view (MCP Apps): a `ui://` resource of its agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolApp {
    /// The `ui://` URI of the view among the agent's resources.
    pub resource_uri: String,
    /// Who may call the tool (`model`, `app`); empty means both.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub visibility: Vec<Audience>,
}

/// Who may call a tool that has a view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Audience {
    Model,
    App,
}

/// The MIME type of an MCP Apps view.
pub const APP_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// Whether `mime` is [`APP_MIME_TYPE`], however it is spaced or cased.
pub fn is_app_mime(mime: &str) -> bool {
    mime.replace(' ', "").eq_ignore_ascii_case(APP_MIME_TYPE)
}
/// The longest `ui://` URI a view may have.
pub const MAX_APP_URI: usize = 512;

impl ToolApp {
    /// Whether the language model may call the tool (and so whether it is
    /// listed to a client that does not render views).
    pub fn for_model(&self) -> bool {
        self.visibility.is_empty() || self.visibility.contains(&Audience::Model)
    }

    /// Whether the view may call the tool.
    pub fn for_app(&self) -> bool {
        self.visibility.is_empty() || self.visibility.contains(&Audience::App)
    }
}

/// The body of an embedded resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ResourceBody {
    Text { text: String },
    Blob { blob: String },
}

/// An embedded resource, as MCP writes it (`blob` is base64).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddedResource {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(flatten)]
    pub body: ResourceBody,
}

/// One MCP content block. Binary data is base64, as on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Content {
    Text {
        text: String,
    },
    Image {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    Audio {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    Resource {
        resource: EmbeddedResource,
    },
}

/// The result of a tool call, as MCP `CallToolResult`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutput {
    pub content: Vec<Content>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<StructuredContent>,
    #[serde(default)]
    pub is_error: bool,
}

/// A tool's structured result (MCP `structuredContent`): one JSON object,
/// kept as the text it came in once checked to be one. A result passes
/// through the node to a client, a peer or another agent as it is; where the
/// node needs the values themselves, [`StructuredContent::to_value`] parses
/// them.
#[derive(Clone)]
pub struct StructuredContent(String);

const NOT_AN_OBJECT: &str = "structured content is not a JSON object";

/// The deepest nesting of objects and arrays a structured result may have.
/// Clients read results recursively (serde_json stops at 128 levels,
/// Python's `json` near 1,000 with a RecursionError), so the node passes
/// on none that one of them could not read; real results seldom pass ten.
pub const MAX_STRUCTURED_DEPTH: usize = 64;

fn too_deep() -> String {
    format!("structured content is nested deeper than {MAX_STRUCTURED_DEPTH} levels")
}

/// The deepest nesting of objects and arrays in JSON `text`, counted in one
/// pass over its bytes (brackets inside strings do not count); stops
/// counting past [`MAX_STRUCTURED_DEPTH`].
fn nesting_of_text(text: &str) -> usize {
    let mut deepest = 0;
    for (_, depth) in crate::text::json_brackets(text.as_bytes()) {
        deepest = deepest.max(depth);
        if deepest > MAX_STRUCTURED_DEPTH {
            break;
        }
    }
    deepest
}

/// Whether `value` nests objects and arrays more than `levels` deep.
fn deeper_than(value: &Value, levels: usize) -> bool {
    match value {
        Value::Object(map) => levels == 0 || map.values().any(|v| deeper_than(v, levels - 1)),
        Value::Array(items) => levels == 0 || items.iter().any(|v| deeper_than(v, levels - 1)),
        _ => false,
    }
}

impl StructuredContent {
    /// Checks that `text` is one JSON object, nested at most
    /// [`MAX_STRUCTURED_DEPTH`] levels.
    pub fn from_text(text: String) -> Result<Self, String> {
        // Before the parse, which reads any depth (it skips values without
        // recursing) and would let a deeper one through.
        if nesting_of_text(&text) > MAX_STRUCTURED_DEPTH {
            return Err(too_deep());
        }
        serde_json::from_str::<serde::de::IgnoredAny>(&text)
            .map_err(|e| format!("structured content is not JSON: {e}"))?;
        // Valid JSON starting with `{` is one object.
        if !text.trim_start().starts_with('{') {
            return Err(NOT_AN_OBJECT.into());
        }
        Ok(StructuredContent(text))
    }

    /// The object `value`, as text.
    pub fn from_value(value: &Value) -> Result<Self, String> {
        if !value.is_object() {
            return Err(NOT_AN_OBJECT.into());
        }
        if deeper_than(value, MAX_STRUCTURED_DEPTH) {
            return Err(too_deep());
        }
        // A tree written out is valid JSON: no need to check it again.
        Ok(StructuredContent(value.to_string()))
    }

    /// The object as the tool wrote it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The object as a JSON tree.
    pub fn to_value(&self) -> Value {
        // Checked to be a JSON object when it was made.
        serde_json::from_str(self.as_str()).unwrap_or_else(|_| Value::Object(Default::default()))
    }
}

impl std::fmt::Debug for StructuredContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for StructuredContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Two results are equal when they hold the same values, however spaced.
impl PartialEq for StructuredContent {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str() || self.to_value() == other.to_value()
    }
}

impl PartialEq<Value> for StructuredContent {
    fn eq(&self, other: &Value) -> bool {
        self.to_value() == *other
    }
}

/// Written as the JSON the tool wrote, not as a string of it.
impl Serialize for StructuredContent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw: &serde_json::value::RawValue =
            serde_json::from_str(&self.0).map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

/// Read through a JSON tree, so that it comes from any format, a peer's
/// JSON-RPC message (a `Value`) among them, and is checked again.
impl<'de> Deserialize<'de> for StructuredContent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_value(&value).map_err(serde::de::Error::custom)
    }
}

impl ToolOutput {
    /// A result reporting a failure to the caller (MCP `isError`), as the
    /// spec wants a tool's errors: the model or agent calling sees why.
    pub fn failure(message: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![Content::Text {
                text: message.into(),
            }],
            structured_content: None,
            is_error: true,
        }
    }

    /// The text of all text blocks, joined by newlines.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|c| match c {
                Content::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Encodes binary content for JSON.
pub(crate) fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A card or tool list that breaks the contract.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ContractError(pub String);

/// Checks a card name: 1 to 64 of `a-z 0-9 - _`, starting with a letter or digit.
pub fn validate_agent_name(name: &str) -> Result<(), ContractError> {
    let mut chars = name.chars();
    let valid = (1..=64).contains(&name.len())
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if valid {
        Ok(())
    } else {
        Err(ContractError(format!(
            "agent name {name:?} is invalid: use 1 to 64 characters of a-z 0-9 - _, starting with a letter or digit"
        )))
    }
}

/// Checks a tool name as MCP defines it: 1 to 128 of `A-Z a-z 0-9 _ - .`.
pub fn validate_tool_name(name: &str) -> Result<(), ContractError> {
    let valid = (1..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if valid {
        Ok(())
    } else {
        Err(ContractError(format!(
            "tool name {name:?} is invalid: use 1 to 128 characters of A-Z a-z 0-9 _ - ."
        )))
    }
}

/// How large each part of an agent's card and tool list may be. An agent's
/// record is read by every command and listing, and its card travels in
/// manifests: a few kilobytes say what any agent does.
pub mod card_limits {
    /// Longest version string.
    pub const VERSION: usize = 64;
    /// Longest card description.
    pub const DESCRIPTION: usize = 4096;
    /// Most tags, and the longest tag.
    pub const TAGS: usize = 32;
    pub const TAG: usize = 64;
    /// Longest homepage URL.
    pub const HOMEPAGE: usize = 2048;
    /// Most tools.
    pub const TOOLS: usize = 256;
    /// Longest tool title, and tool description.
    pub const TOOL_TITLE: usize = 256;
    pub const TOOL_DESCRIPTION: usize = 8192;
    /// Largest input or output schema, as JSON text.
    pub const SCHEMA: usize = 64 * 1024;
    /// Largest card and tool list together, as JSON.
    pub const TOTAL: usize = 512 * 1024;
}

/// Checks that every field of `card` and `tools` is within
/// [`card_limits`]; the error names the field.
pub fn check_card_size(card: &AgentCard, tools: &[ToolSpec]) -> Result<(), ContractError> {
    check_card_fields(card)?;
    check_tool_count(tools.len())?;
    for tool in tools {
        check_tool_fields(
            &tool.name,
            tool.title.as_deref(),
            &tool.description,
            json_len(&tool.input_schema),
            tool.output_schema.as_ref().map(json_len),
        )?;
    }
    within(
        "the card and tool list",
        json_len(card) + json_len(&tools),
        card_limits::TOTAL,
    )
}

fn within(what: &str, len: usize, limit: usize) -> Result<(), ContractError> {
    if len > limit {
        Err(ContractError(format!(
            "{what} is {len} bytes, above the limit of {limit}"
        )))
    } else {
        Ok(())
    }
}

/// The card's own fields against [`card_limits`].
pub fn check_card_fields(card: &AgentCard) -> Result<(), ContractError> {
    use card_limits as max;
    within("the version", card.version.len(), max::VERSION)?;
    within("the description", card.description.len(), max::DESCRIPTION)?;
    if card.tags.len() > max::TAGS {
        return Err(ContractError(format!(
            "the card has {} tags, above the limit of {}",
            card.tags.len(),
            max::TAGS
        )));
    }
    for tag in &card.tags {
        within("a tag", tag.len(), max::TAG)?;
    }
    within(
        "the homepage",
        card.homepage.as_ref().map_or(0, String::len),
        max::HOMEPAGE,
    )
}

/// The number of tools against [`card_limits::TOOLS`].
pub fn check_tool_count(count: usize) -> Result<(), ContractError> {
    if count > card_limits::TOOLS {
        return Err(ContractError(format!(
            "the agent lists {count} tools, above the limit of {}",
            card_limits::TOOLS
        )));
    }
    Ok(())
}

/// One tool's title, description and schema sizes (as JSON text) against
/// [`card_limits`]; `name` is checked already.
pub fn check_tool_fields(
    name: &str,
    title: Option<&str>,
    description: &str,
    input_schema_len: usize,
    output_schema_len: Option<usize>,
) -> Result<(), ContractError> {
    use card_limits as max;
    let title = title.map_or(0, str::len);
    within(&format!("tool {name:?}'s title"), title, max::TOOL_TITLE)?;
    within(
        &format!("tool {name:?}'s description"),
        description.len(),
        max::TOOL_DESCRIPTION,
    )?;
    within(
        &format!("tool {name:?}'s input schema"),
        input_schema_len,
        max::SCHEMA,
    )?;
    within(
        &format!("tool {name:?}'s output schema"),
        output_schema_len.unwrap_or(0),
        max::SCHEMA,
    )
}

fn json_len(value: &impl Serialize) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |v| v.len())
}

/// Parses a JSON Schema the guest sent as text; it must describe an object.
pub(crate) fn parse_object_schema(
    tool: &str,
    what: &str,
    text: &str,
) -> Result<Value, ContractError> {
    let schema: Value = serde_json::from_str(text)
        .map_err(|e| ContractError(format!("tool {tool:?} has an {what} that is not JSON: {e}")))?;
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(ContractError(format!(
            "tool {tool:?} has an {what} whose type is not \"object\""
        )));
    }
    let mut schema = schema;
    standard_schema::standardize(&mut schema);
    Ok(schema)
}

/// The guest SDK's normalization, shared as source: the node serves every
/// agent's schemas in JSON Schema's own vocabulary, whatever made them.
#[path = "../../../guest-sdk/src/standard_schema.rs"]
pub(crate) mod standard_schema;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_serialize_as_mcp_call_tool_results() {
        let output = ToolOutput {
            content: vec![
                Content::Text { text: "5".into() },
                Content::Image {
                    data: base64(b"png"),
                    mime_type: "image/png".into(),
                },
                Content::Resource {
                    resource: EmbeddedResource {
                        uri: "file:///a.txt".into(),
                        mime_type: None,
                        body: ResourceBody::Text { text: "hi".into() },
                    },
                },
            ],
            structured_content: Some(StructuredContent::from_value(&json!({"result": 5})).unwrap()),
            is_error: false,
        };
        assert_eq!(
            serde_json::to_value(&output).unwrap(),
            json!({
                "content": [
                    {"type": "text", "text": "5"},
                    {"type": "image", "data": "cG5n", "mimeType": "image/png"},
                    {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "hi"}},
                ],
                "structuredContent": {"result": 5},
                "isError": false,
            })
        );
    }

    /// `levels` objects, each the only value of the one around it.
    fn nested(levels: usize) -> String {
        format!("{}1{}", "{\"a\":".repeat(levels), "}".repeat(levels))
    }

    #[test]
    fn structured_content_nests_at_most_max_depth_levels() {
        assert!(StructuredContent::from_text(nested(MAX_STRUCTURED_DEPTH)).is_ok());
        let error = StructuredContent::from_text(nested(MAX_STRUCTURED_DEPTH + 1)).unwrap_err();
        assert!(error.contains("nested deeper than 64 levels"), "{error}");
        // 100,000 levels in 600 KB: refused without a parse that recurses.
        assert!(StructuredContent::from_text(nested(100_000)).is_err());
        let arrays = format!("{{\"a\":{}{}}}", "[".repeat(64), "]".repeat(64));
        assert!(StructuredContent::from_text(arrays).is_err());
        // Brackets inside strings are text.
        let text = format!("{{\"a\":\"{}\\\"{}\"}}", "[".repeat(500), "{".repeat(500));
        assert!(StructuredContent::from_text(text).is_ok());
        // A tree from a peer's message is held to the same depth.
        let deep: Value = serde_json::from_str(&nested(MAX_STRUCTURED_DEPTH + 1)).unwrap();
        assert!(StructuredContent::from_value(&deep).is_err());
        let fine: Value = serde_json::from_str(&nested(MAX_STRUCTURED_DEPTH)).unwrap();
        assert!(StructuredContent::from_value(&fine).is_ok());
    }

    #[test]
    fn names_follow_the_contract() {
        assert!(validate_agent_name("calculator").is_ok());
        assert!(validate_agent_name("hostile-loop_2").is_ok());
        for bad in ["", "Calculator", "-x", "a.b", &"x".repeat(65)] {
            assert!(validate_agent_name(bad).is_err(), "{bad:?}");
        }
        assert!(validate_tool_name("word_count").is_ok());
        assert!(validate_tool_name("v1.get-item").is_ok());
        for bad in ["", "has space", "slash/", &"x".repeat(129)] {
            assert!(validate_tool_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn schemas_must_be_json_objects() {
        assert!(parse_object_schema("t", "input schema", r#"{"type":"object"}"#).is_ok());
        assert!(parse_object_schema("t", "input schema", r#"{"type":"string"}"#).is_err());
        assert!(parse_object_schema("t", "input schema", "{").is_err());
    }

    #[test]
    fn structured_content_is_one_json_object_kept_as_written() {
        let text = r#"{ "result": 5, "parts": [2, 3] }"#;
        let structured = StructuredContent::from_text(text.to_owned()).unwrap();
        assert_eq!(structured.as_str(), text);
        assert_eq!(structured, json!({"result": 5, "parts": [2, 3]}));
        for bad in [
            "[1]",
            "5",
            "null",
            r#""{}""#,
            "{",
            r#"{"a": 1} {"b": 2}"#,
            "",
        ] {
            let error = StructuredContent::from_text(bad.to_owned()).unwrap_err();
            assert!(
                error.starts_with("structured content is not"),
                "{bad:?}: {error}"
            );
        }
        assert!(StructuredContent::from_value(&json!([1])).is_err());
        // Equal by value, however it is spaced.
        let compact = StructuredContent::from_text(r#"{"result":5,"parts":[2,3]}"#.into()).unwrap();
        assert_eq!(structured, compact);
    }

    #[test]
    fn structured_content_travels_as_written_and_is_checked_when_read() {
        let output = ToolOutput {
            content: vec![],
            structured_content: Some(
                StructuredContent::from_text(r#"{"b": 1, "a": [true]}"#.into()).unwrap(),
            ),
            is_error: false,
        };
        // Into JSON text as the tool wrote it, and into a tree.
        let text = serde_json::to_string(&output).unwrap();
        assert!(
            text.contains(r#""structuredContent":{"b": 1, "a": [true]}"#),
            "{text}"
        );
        let tree = serde_json::to_value(&output).unwrap();
        assert_eq!(tree["structuredContent"], json!({"b": 1, "a": [true]}));
        // Back from either, as a peer's answer comes.
        let from_text: ToolOutput = serde_json::from_str(&text).unwrap();
        let from_tree: ToolOutput = serde_json::from_value(tree).unwrap();
        assert_eq!(from_text, output);
        assert_eq!(from_tree, output);
        // A peer's answer whose structured content is no object is refused.
        let bad = json!({"content": [], "structuredContent": [1], "isError": false});
        let error = serde_json::from_value::<ToolOutput>(bad).unwrap_err();
        assert!(error.to_string().contains("not a JSON object"), "{error}");
    }
}
