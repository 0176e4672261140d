//! The resources and prompts of an agent whose tools are asynchronous.
//!
//! The `async-agent-core` world's `async-resources` and `async-prompts`
//! take their records from `resource-types` and `prompt-types`, field for
//! field those of `resources` and `prompts` (which define their own, and
//! keep them for the agents already built). An author writes one
//! [`Resources`](crate::Resources) and one [`Prompts`](crate::Prompts) for
//! either world; these conversions hand their answers to the asynchronous
//! world's exports.

use crate::async_bindings::agentsite::agent::{prompt_types as to_p, resource_types as to_r};
use crate::bindings::exports::agentsite::agent::{prompts as from_p, resources as from_r};

/// Moves a record's fields one by one into the same record of the other world.
macro_rules! same_record {
    ($from:path => $to:path { $($field:ident $(as $how:ident)?),* $(,)? }) => {
        impl From<$from> for $to {
            fn from(value: $from) -> Self {
                Self { $($field: same_record!(@field value.$field $(, $how)?)),* }
            }
        }
    };
    (@field $value:expr) => { $value };
    (@field $value:expr, into) => { $value.into() };
    (@field $value:expr, each) => { $value.into_iter().map(Into::into).collect() };
}

same_record!(from_r::Resource => to_r::Resource {
    uri, name, title, description, mime_type,
});
same_record!(from_r::ResourceTemplate => to_r::ResourceTemplate {
    uri_template, name, title, description, mime_type,
});
same_record!(from_r::ResourceContents => to_r::ResourceContents { uri, mime_type, body });
same_record!(from_p::PromptArgument => to_p::PromptArgument {
    name, title, description, required,
});
same_record!(from_p::Prompt => to_p::Prompt { name, title, description, arguments as each });
same_record!(from_p::PromptMessage => to_p::PromptMessage { role as into, content });
same_record!(from_p::PromptResult => to_p::PromptResult { description, messages as each });

impl From<from_r::ResourceError> for to_r::ResourceError {
    fn from(error: from_r::ResourceError) -> Self {
        match error {
            from_r::ResourceError::NotFound(message) => Self::NotFound(message),
            from_r::ResourceError::Failed(message) => Self::Failed(message),
        }
    }
}

impl From<from_p::PromptRole> for to_p::PromptRole {
    fn from(role: from_p::PromptRole) -> Self {
        match role {
            from_p::PromptRole::User => Self::User,
            from_p::PromptRole::Assistant => Self::Assistant,
        }
    }
}

impl From<from_p::PromptError> for to_p::PromptError {
    fn from(error: from_p::PromptError) -> Self {
        match error {
            from_p::PromptError::UnknownPrompt(message) => Self::UnknownPrompt(message),
            from_p::PromptError::InvalidArguments(message) => Self::InvalidArguments(message),
            from_p::PromptError::Failed(message) => Self::Failed(message),
        }
    }
}

/// Every item of `items` in the other world's type.
pub fn each<A: Into<B>, B>(items: Vec<A>) -> Vec<B> {
    items.into_iter().map(Into::into).collect()
}
