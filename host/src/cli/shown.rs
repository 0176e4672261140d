//! A tool's result as a person at a terminal reads it, beside the MCP JSON
//! that programs get (`--json`, or stdout not a terminal), as `gh` and
//! `kubectl` do.
//!
//! Text blocks are shown as text, JSON (a text block holding an object or
//! an array, or structured content with no block beside it) indented, and
//! binary blocks as one line saying what they are. Everything came from
//! the agent: each line goes through [`terminal_safe`], so that none of it
//! can drive the terminal.

use crate::agent::tool::{Content, ResourceBody, ToolOutput};
use crate::text::{json_terminal_safe, terminal_safe};
use bytesize::ByteSize;

/// `output` as lines for a person, ending in a newline (empty when the
/// result holds nothing).
pub fn for_person(output: &ToolOutput) -> String {
    let mut shown = String::new();
    for block in &output.content {
        match block {
            Content::Text { text } => push_text(&mut shown, text),
            Content::Image { data, mime_type } => {
                push_line(&mut shown, &binary("image", mime_type, data));
            }
            Content::Audio { data, mime_type } => {
                push_line(&mut shown, &binary("audio", mime_type, data));
            }
            Content::Resource { resource } => {
                let mime = resource.mime_type.as_deref().unwrap_or("no type");
                match &resource.body {
                    ResourceBody::Text { text } => {
                        push_line(
                            &mut shown,
                            &format!("[resource {}, {mime}]", terminal_safe(&resource.uri)),
                        );
                        push_text(&mut shown, text);
                    }
                    ResourceBody::Blob { blob } => push_line(
                        &mut shown,
                        &format!(
                            "[resource {}, {}]",
                            terminal_safe(&resource.uri),
                            binary_size(mime, blob)
                        ),
                    ),
                }
            }
        }
    }
    // By the spec's advice a tool that returns structured content also
    // returns it as text; one that did not is shown its structured content.
    if output.content.is_empty()
        && let Some(structured) = &output.structured_content
    {
        push_text(&mut shown, structured.as_str());
    }
    shown
}

/// A text block: indented when it is a JSON object or array, else its
/// lines as they are.
fn push_text(shown: &mut String, text: &str) {
    let trimmed = text.trim_start();
    if trimmed.starts_with(['{', '['])
        && let Ok(value) = serde_json::from_str::<serde_json::Value>(text)
        && let Ok(pretty) = serde_json::to_string_pretty(&value)
    {
        push_line(shown, &json_terminal_safe(&pretty));
        return;
    }
    for line in text.lines() {
        push_line(shown, &terminal_safe(line));
    }
}

fn push_line(shown: &mut String, line: &str) {
    shown.push_str(line);
    shown.push('\n');
}

/// `[image image/png, 12.0 KiB]`.
fn binary(kind: &str, mime_type: &str, base64: &str) -> String {
    format!("[{kind} {}]", binary_size(mime_type, base64))
}

fn binary_size(mime_type: &str, base64: &str) -> String {
    // Four base64 characters carry three bytes.
    let bytes = base64.trim_end_matches('=').len() as u64 * 3 / 4;
    format!("{}, {}", terminal_safe(mime_type), ByteSize(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tool::{EmbeddedResource, StructuredContent};

    fn output(content: Vec<Content>, structured: Option<&str>) -> ToolOutput {
        ToolOutput {
            content,
            structured_content: structured.map(|s| StructuredContent::from_text(s.into()).unwrap()),
            is_error: false,
        }
    }

    fn text(text: &str) -> Content {
        Content::Text { text: text.into() }
    }

    #[test]
    fn text_is_shown_as_text_beside_its_structured_twin() {
        let shown = for_person(&output(vec![text("5.0")], Some(r#"{"result":5.0}"#)));
        assert_eq!(shown, "5.0\n");
    }

    #[test]
    fn json_is_indented_whether_text_or_only_structured() {
        let expected = "{\n  \"a\": [\n    1,\n    2\n  ]\n}\n";
        assert_eq!(
            for_person(&output(vec![text(r#"{"a":[1,2]}"#)], None)),
            expected
        );
        assert_eq!(
            for_person(&output(vec![], Some(r#"{"a":[1,2]}"#))),
            expected
        );
        // Text that only starts like JSON stays text.
        assert_eq!(
            for_person(&output(vec![text("[draft] two lines\nok")], None)),
            "[draft] two lines\nok\n"
        );
    }

    #[test]
    fn binary_blocks_are_one_line_each() {
        let shown = for_person(&output(
            vec![
                Content::Image {
                    data: "AAAA".repeat(1024),
                    mime_type: "image/png".into(),
                },
                Content::Resource {
                    resource: EmbeddedResource {
                        uri: "note://todo".into(),
                        mime_type: Some("text/plain".into()),
                        body: ResourceBody::Text {
                            text: "eggs".into(),
                        },
                    },
                },
            ],
            None,
        ));
        assert_eq!(
            shown,
            "[image image/png, 3.0 KiB]\n[resource note://todo, text/plain]\neggs\n"
        );
    }

    #[test]
    fn nothing_an_agent_wrote_reaches_the_terminal_raw() {
        let shown = for_person(&output(
            vec![text("ok\u{1b}]0;owned\u{7}\nline \u{202e}two")],
            Some(r#"{"k":"\u001b[2J"}"#),
        ));
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{202e}'),
            "{shown:?}"
        );
        let json = for_person(&output(vec![], Some("{\"k\":\"\u{9b}2J\"}")));
        assert!(!json.contains('\u{9b}'), "{json:?}");
    }
}
