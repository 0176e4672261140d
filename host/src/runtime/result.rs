//! What a guest returns, checked and converted into host types.
//!
//! The guest is untrusted: its card, tool list, resources, prompts and
//! results are validated
//! here (names, JSON, schemas, sizes) before anything reaches a client.

use super::CallError;
use crate::agent::prompt::{
    PromptArgumentSpec, PromptMessage, PromptOutput, PromptRole, PromptSpec,
};
use crate::agent::resource::{
    self, ResourceCatalog, ResourceContents, ResourceInfo, ResourceSpec, ResourceTemplateSpec,
};
use crate::agent::tool::{
    self, AgentCard, Content, EmbeddedResource, ResourceBody, StructuredContent, ToolAnnotations,
    ToolOutput, ToolSpec,
};
use crate::capabilities::bindings::exports::agentsite::agent::{
    prompts as wit_prompts, resources as wit_resources,
};
use crate::capabilities::bindings::types;
use crate::config::Limits;
use bytesize::ByteSize;

/// Most content blocks in one tool result or filled-in prompt, and most
/// contents of one resource read.
pub const MAX_CONTENT_ITEMS: usize = 1024;

/// Most resources, resource templates or prompts one agent lists.
pub const MAX_LISTED_ITEMS: usize = 4096;

/// Longest error message an agent may give; a longer one is cut. An error
/// is read by a person or a model: its first kilobytes say what failed.
pub const MAX_ERROR_MESSAGE: usize = 4096;

/// Refuses more than `limit` items before anything else is done with them.
pub(crate) fn check_count(what: &'static str, count: usize, limit: usize) -> Result<(), CallError> {
    if count > limit {
        return Err(CallError::TooManyItems { what, count, limit });
    }
    Ok(())
}

/// Checks the size of `value` as it will be sent, counting it only when it
/// could be over the cap: the raw bytes it came from (`raw`, in `items`
/// items) grow at most sixfold as JSON (a control character becomes
/// `\u001f`; base64 adds a third), plus each item's framing. Small
/// results, the common case, are not serialized twice.
fn check_wire_size(
    value: &impl serde::Serialize,
    raw: usize,
    items: usize,
    limits: &Limits,
) -> Result<(), CallError> {
    const FRAMING_PER_ITEM: usize = 128;
    let bound = raw
        .saturating_mul(6)
        .saturating_add(items.saturating_mul(FRAMING_PER_ITEM))
        .saturating_add(FRAMING_PER_ITEM);
    if bound as u64 <= limits.max_output.as_u64() {
        return Ok(());
    }
    check_size(crate::text::json_size(value), limits)
}

/// An error message from the guest, cut to [`MAX_ERROR_MESSAGE`].
fn guest_message(message: String) -> String {
    crate::text::truncated(message, MAX_ERROR_MESSAGE)
}

/// Checks the output budget against `size` bytes: first the raw bytes the
/// guest returned (before any of it is converted), then the result as it
/// will be sent, framing, escapes and base64 included.
fn check_size(size: usize, limits: &Limits) -> Result<(), CallError> {
    if size as u64 > limits.max_output.as_u64() {
        return Err(CallError::OutputTooLarge {
            size: Some(ByteSize(size as u64)),
            limit: limits.max_output,
        });
    }
    Ok(())
}

/// Validates and converts a card and tool list. Their size is bounded by
/// [`tool::card_limits`], not by the output cap: a record is read by every
/// listing, so it has bounds of its own.
pub(crate) fn describe(
    card: types::AgentCard,
    tools: Vec<types::Tool>,
    apps: Vec<ToolAppExport>,
) -> Result<(AgentCard, Vec<ToolSpec>), CallError> {
    let malformed = |e: tool::ContractError| CallError::MalformedResult(e.0);
    tool::validate_agent_name(&card.name).map_err(malformed)?;
    let card = AgentCard {
        name: card.name,
        version: card.version,
        description: card.description,
        tags: card.tags,
        homepage: card.homepage,
    };
    // Each field is checked on its own first, so that an oversized one is
    // named (and no large schema is parsed).
    tool::check_card_fields(&card).map_err(malformed)?;
    tool::check_tool_count(tools.len()).map_err(malformed)?;
    for t in &tools {
        tool::validate_tool_name(&t.name).map_err(malformed)?;
        tool::check_tool_fields(
            &t.name,
            t.title.as_deref(),
            &t.description,
            t.input_schema.len(),
            t.output_schema.as_ref().map(String::len),
        )
        .map_err(malformed)?;
    }
    if tools.is_empty() {
        return Err(CallError::MalformedResult(
            "the agent lists no tools".into(),
        ));
    }
    let mut specs: Vec<ToolSpec> = Vec::with_capacity(tools.len());
    for tool in tools {
        if specs.iter().any(|s| s.name == tool.name) {
            return Err(CallError::MalformedResult(format!(
                "two tools are named {:?}",
                tool.name
            )));
        }
        let input_schema =
            tool::parse_object_schema(&tool.name, "input schema", &tool.input_schema)
                .map_err(malformed)?;
        let output_schema = tool
            .output_schema
            .as_deref()
            .map(|text| tool::parse_object_schema(&tool.name, "output schema", text))
            .transpose()
            .map_err(malformed)?;
        specs.push(ToolSpec {
            name: tool.name,
            title: tool.title,
            description: tool.description,
            input_schema,
            output_schema,
            annotations: ToolAnnotations {
                read_only_hint: tool.annotations.read_only,
                destructive_hint: tool.annotations.destructive,
                idempotent_hint: tool.annotations.idempotent,
                open_world_hint: tool.annotations.open_world,
            },
            app: None,
        });
    }
    attach_apps(&mut specs, apps)?;
    tool::check_card_size(&card, &specs).map_err(malformed)?;
    Ok((card, specs))
}

/// Gives each tool the view the agent's `apps` export names for it: a
/// `ui://` URI of at most [`tool::MAX_APP_URI`] bytes, one view per tool,
/// and only for tools the agent lists.
fn attach_apps(specs: &mut [ToolSpec], apps: Vec<ToolAppExport>) -> Result<(), CallError> {
    use crate::capabilities::bindings::exports::agentsite::agent::apps::Audience as Exported;
    let malformed = |reason: String| Err(CallError::MalformedResult(reason));
    if apps.len() > specs.len() {
        return malformed(format!(
            "the agent names {} views for {} tools",
            apps.len(),
            specs.len()
        ));
    }
    for app in apps {
        let shown = crate::text::excerpt(&app.tool, 80);
        let Some(spec) = specs.iter_mut().find(|spec| spec.name == app.tool) else {
            return malformed(format!(
                "a view is named for {shown:?}, which is not a tool"
            ));
        };
        if spec.app.is_some() {
            return malformed(format!("two views are named for the tool {shown:?}"));
        }
        let uri = &app.resource_uri;
        if !uri.starts_with("ui://")
            || uri.len() > tool::MAX_APP_URI
            || uri.chars().any(char::is_control)
        {
            return malformed(format!(
                "the view of {shown:?} is not a ui:// URI of at most {} bytes",
                tool::MAX_APP_URI
            ));
        }
        let mut visibility = Vec::new();
        for audience in app.visibility.iter().take(2) {
            let audience = match audience {
                Exported::Model => tool::Audience::Model,
                Exported::App => tool::Audience::App,
            };
            if !visibility.contains(&audience) {
                visibility.push(audience);
            }
        }
        spec.app = Some(tool::ToolApp {
            resource_uri: app.resource_uri,
            visibility,
        });
    }
    Ok(())
}

/// What the `apps` export says of one tool.
pub(crate) type ToolAppExport =
    crate::capabilities::bindings::exports::agentsite::agent::apps::ToolApp;

/// Raw bytes of a content block, for the output budget.
fn content_size(content: &types::Content) -> usize {
    match content {
        types::Content::Text(text) => text.len(),
        types::Content::Image(media) | types::Content::Audio(media) => {
            media.data.len() + media.mime_type.len()
        }
        types::Content::Resource(resource) => resource.uri.len() + body_size(&resource.body),
    }
}

fn body_size(body: &types::ResourceBody) -> usize {
    match body {
        types::ResourceBody::Text(text) => text.len(),
        types::ResourceBody::Blob(blob) => blob.len(),
    }
}

fn body(body: types::ResourceBody) -> ResourceBody {
    match body {
        types::ResourceBody::Text(text) => ResourceBody::Text { text },
        types::ResourceBody::Blob(blob) => ResourceBody::Blob {
            blob: tool::base64(&blob),
        },
    }
}

fn content(content: types::Content) -> Content {
    match content {
        types::Content::Text(text) => Content::Text { text },
        types::Content::Image(media) => Content::Image {
            data: tool::base64(&media.data),
            mime_type: media.mime_type,
        },
        types::Content::Audio(media) => Content::Audio {
            data: tool::base64(&media.data),
            mime_type: media.mime_type,
        },
        types::Content::Resource(resource) => Content::Resource {
            resource: EmbeddedResource {
                uri: resource.uri,
                mime_type: resource.mime_type,
                body: body(resource.body),
            },
        },
    }
}

/// Validates and converts a tool result.
pub(crate) fn tool_output(
    result: types::ToolResult,
    limits: &Limits,
) -> Result<ToolOutput, CallError> {
    check_count("content blocks", result.content.len(), MAX_CONTENT_ITEMS)?;
    let size: usize = result.content.iter().map(content_size).sum::<usize>()
        + result.structured_content.as_ref().map_or(0, String::len);
    check_size(size, limits)?;
    result.content.iter().try_for_each(check_content)?;

    let structured_content = match result.structured_content {
        None => None,
        Some(text) => Some(StructuredContent::from_text(text).map_err(CallError::MalformedResult)?),
    };
    let items = result.content.len();
    let output = ToolOutput {
        content: result.content.into_iter().map(content).collect(),
        structured_content,
        is_error: result.is_error,
    };
    check_wire_size(&output, size, items, limits)?;
    Ok(output)
}

/// An embedded resource must name itself with a URI a client can use.
fn check_content(content: &types::Content) -> Result<(), CallError> {
    match content {
        types::Content::Resource(resource) => check_uri(&resource.uri),
        _ => Ok(()),
    }
}

fn check_uri(uri: &str) -> Result<(), CallError> {
    resource::check_uri(uri).map_err(CallError::MalformedResult)
}

fn check_name(what: &str, name: &str) -> Result<(), CallError> {
    if name.is_empty() || name.len() > 256 {
        return Err(CallError::MalformedResult(format!(
            "{what} name {:?} must be 1 to 256 bytes",
            crate::text::excerpt(name, 256)
        )));
    }
    Ok(())
}

/// Validates and converts the resources and templates an agent lists.
pub(super) fn resource_catalog(
    resources: Vec<wit_resources::Resource>,
    templates: Vec<wit_resources::ResourceTemplate>,
    limits: &Limits,
) -> Result<ResourceCatalog, CallError> {
    check_count("resources", resources.len(), MAX_LISTED_ITEMS)?;
    check_count("resource templates", templates.len(), MAX_LISTED_ITEMS)?;
    let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    let size: usize =
        resources
            .iter()
            .map(|r| r.uri.len() + r.name.len() + text(&r.title) + text(&r.description))
            .chain(templates.iter().map(|t| {
                t.uri_template.len() + t.name.len() + text(&t.title) + text(&t.description)
            }))
            .sum();
    check_size(size, limits)?;
    let mut catalog = ResourceCatalog::default();
    for r in resources {
        check_uri(&r.uri)?;
        check_name("resource", &r.name)?;
        if catalog.resources.iter().any(|known| known.uri == r.uri) {
            return Err(CallError::MalformedResult(format!(
                "two resources have the URI {:?}",
                r.uri
            )));
        }
        catalog.resources.push(ResourceSpec {
            uri: r.uri,
            info: ResourceInfo {
                name: r.name,
                title: r.title,
                description: r.description,
                mime_type: r.mime_type,
            },
        });
    }
    for t in templates {
        check_uri(&t.uri_template)?;
        check_name("resource template", &t.name)?;
        resource::validate_template(&t.uri_template).map_err(CallError::MalformedResult)?;
        catalog.templates.push(ResourceTemplateSpec {
            uri_template: t.uri_template,
            info: ResourceInfo {
                name: t.name,
                title: t.title,
                description: t.description,
                mime_type: t.mime_type,
            },
        });
    }
    check_size(
        crate::text::json_size(&catalog.resources) + crate::text::json_size(&catalog.templates),
        limits,
    )?;
    Ok(catalog)
}

/// Validates and converts what a resource read returned.
pub(super) fn resource_contents(
    contents: Vec<wit_resources::ResourceContents>,
    limits: &Limits,
) -> Result<Vec<ResourceContents>, CallError> {
    check_count("resource contents", contents.len(), MAX_CONTENT_ITEMS)?;
    let size: usize = contents
        .iter()
        .map(|c| c.uri.len() + body_size(&c.body))
        .sum();
    check_size(size, limits)?;
    let contents = contents
        .into_iter()
        .map(|c| {
            check_uri(&c.uri)?;
            Ok(ResourceContents {
                uri: c.uri,
                mime_type: c.mime_type,
                body: body(c.body),
            })
        })
        .collect::<Result<Vec<_>, CallError>>()?;
    check_wire_size(&contents, size, contents.len(), limits)?;
    Ok(contents)
}

/// Converts a resource error the guest returned.
pub(super) fn resource_error(error: wit_resources::ResourceError) -> CallError {
    match error {
        wit_resources::ResourceError::NotFound(uri) => {
            CallError::ResourceNotFound(crate::text::excerpt(&uri, 256).into_owned())
        }
        wit_resources::ResourceError::Failed(reason) => CallError::Failed(guest_message(reason)),
    }
}

/// Validates and converts the prompts an agent lists.
pub(super) fn prompts(
    prompts: Vec<wit_prompts::Prompt>,
    limits: &Limits,
) -> Result<Vec<PromptSpec>, CallError> {
    check_count("prompts", prompts.len(), MAX_LISTED_ITEMS)?;
    let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    let size: usize = prompts
        .iter()
        .map(|p| {
            p.name.len()
                + text(&p.title)
                + text(&p.description)
                + p.arguments
                    .iter()
                    .map(|a| a.name.len() + text(&a.title) + text(&a.description))
                    .sum::<usize>()
        })
        .sum();
    check_size(size, limits)?;
    let mut specs: Vec<PromptSpec> = Vec::with_capacity(prompts.len());
    for p in prompts {
        tool::validate_tool_name(&p.name)
            .map_err(|e| CallError::MalformedResult(e.0.replace("tool name", "prompt name")))?;
        if specs.iter().any(|s| s.name == p.name) {
            return Err(CallError::MalformedResult(format!(
                "two prompts are named {:?}",
                p.name
            )));
        }
        let mut arguments: Vec<PromptArgumentSpec> = Vec::with_capacity(p.arguments.len());
        for a in p.arguments {
            check_name("prompt argument", &a.name)?;
            if arguments.iter().any(|known| known.name == a.name) {
                return Err(CallError::MalformedResult(format!(
                    "prompt {:?} has two arguments named {:?}",
                    p.name, a.name
                )));
            }
            arguments.push(PromptArgumentSpec {
                name: a.name,
                title: a.title,
                description: a.description,
                required: a.required,
            });
        }
        specs.push(PromptSpec {
            name: p.name,
            title: p.title,
            description: p.description,
            arguments,
        });
    }
    check_size(crate::text::json_size(&specs), limits)?;
    Ok(specs)
}

/// Validates and converts a filled-in prompt.
pub(super) fn prompt_output(
    result: wit_prompts::PromptResult,
    limits: &Limits,
) -> Result<PromptOutput, CallError> {
    check_count("prompt messages", result.messages.len(), MAX_CONTENT_ITEMS)?;
    let size: usize = result
        .messages
        .iter()
        .map(|m| content_size(&m.content))
        .sum::<usize>()
        + result.description.as_ref().map_or(0, String::len);
    check_size(size, limits)?;
    result
        .messages
        .iter()
        .try_for_each(|m| check_content(&m.content))?;
    let output = PromptOutput {
        description: result.description,
        messages: result
            .messages
            .into_iter()
            .map(|m| PromptMessage {
                role: match m.role {
                    wit_prompts::PromptRole::User => PromptRole::User,
                    wit_prompts::PromptRole::Assistant => PromptRole::Assistant,
                },
                content: content(m.content),
            })
            .collect(),
    };
    check_wire_size(&output, size, output.messages.len(), limits)?;
    Ok(output)
}

/// Converts a prompt error the guest returned.
pub(super) fn prompt_error(error: wit_prompts::PromptError, agent: &str) -> CallError {
    match error {
        wit_prompts::PromptError::UnknownPrompt(prompt) => CallError::UnknownPrompt {
            agent: agent.to_owned(),
            prompt: crate::text::excerpt(&prompt, 256).into_owned(),
        },
        wit_prompts::PromptError::InvalidArguments(reason) => {
            CallError::InvalidArguments(guest_message(reason))
        }
        wit_prompts::PromptError::Failed(reason) => CallError::Failed(guest_message(reason)),
    }
}

/// Converts a tool error the guest returned.
pub(super) fn tool_error(error: types::ToolError, agent: &str) -> CallError {
    match error {
        types::ToolError::UnknownTool(tool) => CallError::UnknownTool {
            agent: agent.to_owned(),
            tool: crate::text::excerpt(&tool, 256).into_owned(),
        },
        types::ToolError::InvalidArguments(reason) => {
            CallError::InvalidArguments(guest_message(reason))
        }
        types::ToolError::Failed(reason) => CallError::Failed(guest_message(reason)),
    }
}

/// The result of a plain function (see [`super::plain`]) as a tool's: its
/// value as structured content `{"result": …}` and as text (a string as
/// itself, anything else as JSON); the `err` of a `result` as the tool's
/// failure. Written within the output limit.
pub(super) fn function_output(
    results: Vec<wasmtime::component::Val>,
    limits: &Limits,
) -> Result<ToolOutput, CallError> {
    use super::plain::json;
    use wasmtime::component::Val;
    let limit = usize::try_from(limits.max_output.as_u64()).unwrap_or(usize::MAX);
    // Writing stops at the limit: the whole size is never known.
    let unwritable = |why: json::Unwritable| match why {
        json::Unwritable::OverBudget => CallError::OutputTooLarge {
            size: None,
            limit: limits.max_output,
        },
        non_finite => CallError::Failed(format!("the result is {non_finite}")),
    };
    let mut budget = limit;
    let value = match results.into_iter().next() {
        None => {
            return Ok(ToolOutput {
                content: Vec::new(),
                structured_content: None,
                is_error: false,
            });
        }
        Some(Val::Result(Err(payload))) => {
            let message = match payload {
                Some(payload) => {
                    as_text(json::from_val(&payload, &mut budget).map_err(unwritable)?)
                }
                None => "the function returned an error".to_owned(),
            };
            return Err(CallError::Failed(guest_message(message)));
        }
        Some(Val::Result(Ok(payload))) => match payload {
            Some(payload) => json::from_val(&payload, &mut budget).map_err(unwritable)?,
            None => serde_json::Value::Null,
        },
        Some(value) => json::from_val(&value, &mut budget).map_err(unwritable)?,
    };
    let structured = serde_json::json!({ "result": value });
    let text = as_text(value);
    check_size(text.len(), limits)?;
    let output = ToolOutput {
        content: vec![Content::Text { text }],
        structured_content: Some(
            StructuredContent::from_value(&structured).map_err(CallError::MalformedResult)?,
        ),
        is_error: false,
    };
    check_wire_size(&output, limit - budget, 1, limits)?;
    Ok(output)
}

/// A value as a person reads it: a string as itself, else JSON.
fn as_text(value: serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text,
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::function_output;
    use crate::config::Limits;
    use bytesize::ByteSize;
    use wasmtime::component::Val;

    #[test]
    fn a_function_result_past_the_limit_is_refused_without_a_size_it_never_measured() {
        let limits = Limits {
            max_output: ByteSize(1000),
            ..Limits::default()
        };
        let long = Val::String("x".repeat(5000));
        let error = function_output(vec![long], &limits).unwrap_err();
        assert_eq!(error.to_string(), "output exceeds the limit of 1000 B");
        let short = function_output(vec![Val::String("fits".into())], &limits).unwrap();
        assert_eq!(
            short.structured_content.unwrap().to_string(),
            r#"{"result":"fits"}"#
        );
    }

    #[test]
    fn views_are_given_to_listed_tools_only_as_ui_uris_one_each() {
        use super::{ToolAppExport, attach_apps};
        use crate::agent::tool::{Audience, ToolAnnotations, ToolApp, ToolSpec};
        use crate::capabilities::bindings::exports::agentsite::agent::apps::Audience as Exported;
        let spec = |name: &str| ToolSpec {
            name: name.into(),
            title: None,
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            annotations: ToolAnnotations::default(),
            app: None,
        };
        let view = |tool: &str, uri: &str, visibility: Vec<Exported>| ToolAppExport {
            tool: tool.into(),
            resource_uri: uri.into(),
            visibility,
        };
        let mut specs = vec![spec("tip"), spec("presets")];
        attach_apps(
            &mut specs,
            vec![
                view("tip", "ui://t/panel", vec![]),
                view(
                    "presets",
                    "ui://t/panel",
                    vec![Exported::App, Exported::App],
                ),
            ],
        )
        .unwrap();
        assert_eq!(
            specs[1].app,
            Some(ToolApp {
                resource_uri: "ui://t/panel".into(),
                visibility: vec![Audience::App],
            })
        );
        for (views, expected) in [
            (
                vec![view("nope", "ui://t/p", vec![])],
                "which is not a tool",
            ),
            (
                vec![view("tip", "https://t/p", vec![])],
                "is not a ui:// URI",
            ),
            (
                vec![view("tip", &format!("ui://{}", "x".repeat(600)), vec![])],
                "is not a ui:// URI",
            ),
            (
                vec![view("tip", "ui://a", vec![]), view("tip", "ui://b", vec![])],
                "two views are named",
            ),
            (
                vec![view("tip", "ui://a", vec![]); 3],
                "names 3 views for 2 tools",
            ),
        ] {
            let mut specs = vec![spec("tip"), spec("presets")];
            let error = attach_apps(&mut specs, views).unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
        }
    }
}
