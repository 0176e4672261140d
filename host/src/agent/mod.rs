//! The agent contract's types, as the rest of the host sees them: an
//! agent's content id ([`id`]), its card, tools and their results
//! ([`tool`]), its resources ([`resource`]) and prompts ([`prompt`]). Plain
//! Rust types that serialize to MCP's JSON shapes, checked once where they
//! cross out of a guest; every floor above speaks them.

/// Serde for a type written as its text: `Display` out, `FromStr` in
/// (whose error says what the text should have been).
macro_rules! serde_as_text {
    ($type:ty) => {
        impl serde::Serialize for $type {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $type {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
use serde_as_text;

pub(crate) mod id;
pub mod key;
pub(crate) mod prompt;
pub(crate) mod resource;
pub mod tool;
