//! The `[llm]` part of the node's configuration: its models.
//!
//! ```toml
//! [llm]
//! default = "gpt"                  # the model a bare `llm` grant means
//!
//! [[llm.models]]
//! name = "gpt"
//! kind = "openai"                  # any OpenAI-compatible server
//! base_url = "https://api.openai.com/v1"
//! model = "gpt-4o-mini"
//! api_key_env = "OPENAI_API_KEY"   # the key's variable, never the key
//! timeout = "60s"                  # a whole request, at most
//! connect_timeout = "5s"
//! headers = { "OpenAI-Organization" = "org-..." }
//! max_concurrent = 4               # requests at once; more wait in a queue
//! queue = 64                       # requests that may wait
//!
//! [[llm.models]]
//! name = "local"
//! kind = "gguf"                    # a llama-family GGUF file run in the node
//! path = "/srv/models/SmolLM2-135M-Instruct.Q4_1.gguf"
//! context = 2048                   # tokens per request (prompt + answer)
//! ```
//!
//! With no model configured, the node runs the embedded default model,
//! called `local`.
//!
//! Models can be shared with the network and borrowed from it:
//!
//! ```toml
//! [llm]
//! share = ["local"]                # offered to other nodes (off by default)
//! share_rate = 30                  # requests per minute each peer may send
//!
//! [[llm.models]]
//! name = "borrowed"
//! kind = "network"                 # a model another node shares
//! model = "local"                  # its name there
//! ```

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The `[llm]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// The model a grant that names none uses; the first configured model
    /// when not set.
    pub default: Option<String>,
    /// The node's models. Empty: the embedded default model.
    pub models: Vec<ModelConfig>,
    /// The models other nodes may use (over the node-to-node protocol).
    pub share: Vec<String>,
    /// Requests per minute one peer may send to the shared models.
    pub share_rate: u32,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            default: None,
            models: Vec::new(),
            share: Vec::new(),
            share_rate: 30,
        }
    }
}

/// One `[[llm.models]]` table. (Unknown fields are refused by the
/// backend's table: serde cannot refuse them through `flatten`.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    /// What grants and requests call it: 1 to 64 of `a-z A-Z 0-9 - _ .`.
    pub name: String,
    #[serde(flatten)]
    pub backend: Backend,
    /// Requests it runs at once.
    #[serde(default = "default_concurrency")]
    pub max_concurrent: u32,
    /// Requests that may wait for a free slot; more are refused as busy.
    #[serde(default = "default_queue")]
    pub queue: u32,
}

/// Where a model runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Backend {
    /// A server speaking the OpenAI chat-completions API.
    Openai(OpenAiConfig),
    /// A GGUF file run in the node.
    Gguf(GgufConfig),
    /// A model another node shares, found through the DHT.
    Network(NetworkConfig),
}

/// A model borrowed from the network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkConfig {
    /// The model's name on the nodes that share it.
    pub model: String,
}

/// A server speaking the OpenAI API: OpenAI, Ollama, vLLM, llama.cpp's
/// server, LM Studio, another agentsite node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiConfig {
    /// Up to and including `/v1`, such as `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    /// The server's name of the model.
    pub model: String,
    /// The environment variable that holds the API key, if the server wants one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// How long a whole request may take (the caller's deadline may be shorter).
    #[serde(
        default = "default_timeout",
        with = "crate::config::humantime_serde_compat"
    )]
    pub timeout: Duration,
    /// How long connecting may take.
    #[serde(
        default = "default_connect_timeout",
        with = "crate::config::humantime_serde_compat"
    )]
    pub connect_timeout: Duration,
    /// Extra headers sent with every request.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// A llama-family GGUF file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GgufConfig {
    pub path: PathBuf,
    /// Tokens one request may fill, prompt and answer together.
    #[serde(default = "default_context")]
    pub context: usize,
}

fn default_concurrency() -> u32 {
    2
}

fn default_queue() -> u32 {
    64
}

fn default_timeout() -> Duration {
    Duration::from_secs(120)
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_context() -> usize {
    super::embedded::DEFAULT_CONTEXT
}

impl LlmConfig {
    /// Checks names, references and bounds.
    pub fn validate(&self) -> anyhow::Result<()> {
        let mut seen = std::collections::HashSet::new();
        for model in &self.models {
            valid_model_name(&model.name)?;
            anyhow::ensure!(
                seen.insert(model.name.as_str()),
                "llm.models: the name {:?} is used twice",
                model.name
            );
            anyhow::ensure!(
                model.max_concurrent >= 1,
                "llm.models {:?}: max_concurrent must be at least 1",
                model.name
            );
            match &model.backend {
                Backend::Openai(openai) => {
                    let url = reqwest::Url::parse(&openai.base_url).map_err(|e| {
                        anyhow::anyhow!(
                            "llm.models {:?}: base_url {:?} is not a URL: {e}",
                            model.name,
                            openai.base_url
                        )
                    })?;
                    anyhow::ensure!(
                        matches!(url.scheme(), "http" | "https"),
                        "llm.models {:?}: base_url must be http or https",
                        model.name
                    );
                    anyhow::ensure!(
                        !openai.timeout.is_zero(),
                        "llm.models {:?}: timeout must be above zero",
                        model.name
                    );
                    for (name, value) in &openai.headers {
                        anyhow::ensure!(
                            http::HeaderName::try_from(name.as_str()).is_ok()
                                && http::HeaderValue::try_from(value.as_str()).is_ok(),
                            "llm.models {:?}: header {name:?} is not a valid HTTP header",
                            model.name
                        );
                    }
                }
                Backend::Gguf(gguf) => {
                    anyhow::ensure!(
                        gguf.context >= 64,
                        "llm.models {:?}: context must be at least 64 tokens",
                        model.name
                    );
                }
                Backend::Network(network) => valid_model_name(&network.model)
                    .map_err(|e| anyhow::anyhow!("llm.models {:?}: model {e}", model.name))?,
            }
        }
        for shared in &self.share {
            let model = self.models.iter().find(|m| &m.name == shared);
            anyhow::ensure!(
                model.is_some()
                    || (self.models.is_empty() && shared == super::embedded::DEFAULT_NAME),
                "llm.share names {shared:?}, which is not one of the node's models"
            );
            anyhow::ensure!(
                !matches!(model.map(|m| &m.backend), Some(Backend::Network(_))),
                "llm.share names {shared:?}, which this node borrows from the network itself"
            );
        }
        anyhow::ensure!(self.share_rate >= 1, "llm.share_rate must be at least 1");
        if let Some(default) = &self.default {
            anyhow::ensure!(
                self.models.iter().any(|m| &m.name == default)
                    || (self.models.is_empty() && default == super::embedded::DEFAULT_NAME),
                "llm.default names {default:?}, which is not one of llm.models"
            );
        }
        Ok(())
    }
}

/// Checks a model's name.
pub fn valid_model_name(name: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')),
        "{name:?} is not a model name (1 to 64 of a-z A-Z 0-9 - _ .)"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<LlmConfig> {
        let config: LlmConfig =
            toml::from_str(text).map_err(|e| anyhow::anyhow!("{}", e.message()))?;
        config.validate()?;
        Ok(config)
    }

    #[test]
    fn both_kinds_of_model_are_read() {
        let config = parse(
            r#"
default = "local"
[[models]]
name = "gpt"
kind = "openai"
base_url = "http://127.0.0.1:8080/v1"
model = "gpt-4o-mini"
api_key_env = "OPENAI_API_KEY"
timeout = "30s"
headers = { "X-Team" = "agents" }
[[models]]
name = "local"
kind = "gguf"
path = "/srv/models/small.gguf"
max_concurrent = 1
"#,
        )
        .unwrap();
        let Backend::Openai(openai) = &config.models[0].backend else {
            panic!()
        };
        assert_eq!(openai.timeout, Duration::from_secs(30));
        assert_eq!(openai.headers["X-Team"], "agents");
        let Backend::Gguf(gguf) = &config.models[1].backend else {
            panic!()
        };
        assert_eq!(gguf.context, super::super::embedded::DEFAULT_CONTEXT);
        assert_eq!(config.models[1].max_concurrent, 1);
    }

    #[test]
    fn bad_models_are_refused_with_the_reason() {
        for (text, reason) in [
            (
                "[[models]]\nname = \"a\"\nkind = \"gguf\"\npath = \"/m\"\n[[models]]\nname = \"a\"\nkind = \"gguf\"\npath = \"/n\"",
                "used twice",
            ),
            (
                "[[models]]\nname = \"a b\"\nkind = \"gguf\"\npath = \"/m\"",
                "not a model name",
            ),
            (
                "[[models]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"nowhere\"\nmodel = \"m\"",
                "not a URL",
            ),
            (
                "[[models]]\nname = \"a\"\nkind = \"torch\"\npath = \"/m\"",
                "torch",
            ),
            (
                "default = \"b\"\n[[models]]\nname = \"a\"\nkind = \"gguf\"\npath = \"/m\"",
                "not one of llm.models",
            ),
            (
                "[[models]]\nname = \"a\"\nkind = \"gguf\"\npath = \"/m\"\nmax_concurrent = 0",
                "max_concurrent",
            ),
            (
                "[[models]]\nname = \"a\"\nkind = \"gguf\"\npth = \"/m\"",
                "pth",
            ),
            ("share = [\"gpt\"]", "not one of the node's models"),
            (
                "share = [\"b\"]\n[[models]]\nname = \"b\"\nkind = \"network\"\nmodel = \"local\"",
                "borrows from the network itself",
            ),
        ] {
            let error = parse(text).unwrap_err().to_string();
            assert!(error.contains(reason), "{text}: {error}");
        }
    }
}
