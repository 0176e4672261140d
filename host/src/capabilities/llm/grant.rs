//! The `llm` grant: which of the node's language models an agent may ask,
//! where its requests go, and how many of the node's tokens it may spend.
//!
//! ```toml
//! llm = true                        # the default model, client first
//! llm = { models = ["local", "gpt"], route = "node", tokens_per_call = 20000, tokens_per_day = 500000 }
//! ```
//!
//! Budgets count the tokens of the node's own models (prompt and answer):
//! a calling client's model (MCP sampling) is the client's to pay for.

use crate::capabilities::grant::{Capability, parse_bool, value_of};
use crate::llm::config::valid_model_name;
use serde::{Deserialize, Serialize};

/// The name that stands for the node's default model in a grant.
pub const DEFAULT_MODEL: &str = "default";

/// Where an agent's requests go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Route {
    /// The calling MCP client's model when it lends one, else the node's.
    #[default]
    ClientFirst,
    /// The node's models only.
    Node,
    /// The calling client's model only.
    Client,
}

impl Route {
    pub fn as_str(self) -> &'static str {
        match self {
            Route::ClientFirst => "client-first",
            Route::Node => "node",
            Route::Client => "client",
        }
    }
}

impl std::str::FromStr for Route {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> anyhow::Result<Route> {
        match text {
            "client-first" => Ok(Route::ClientFirst),
            "node" => Ok(Route::Node),
            "client" => Ok(Route::Client),
            _ => anyhow::bail!("route {text:?} is none of client-first, node and client"),
        }
    }
}

/// A granted language model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmGrant {
    /// The node's models the agent may use, by name (`default` for the
    /// node's default model); none: the default model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    #[serde(default, skip_serializing_if = "is_default_route")]
    pub route: Route,
    /// Tokens of the node's models one call of the agent may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_call: Option<u64>,
    /// Tokens of the node's models the agent may use in a day (UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_day: Option<u64>,
}

fn is_default_route(route: &Route) -> bool {
    *route == Route::default()
}

impl LlmGrant {
    /// Checks the model names and budgets.
    pub fn validate(&self) -> Result<(), String> {
        for name in &self.models {
            valid_model_name(name).map_err(|e| format!("llm: {e}"))?;
        }
        if self.tokens_per_call == Some(0) || self.tokens_per_day == Some(0) {
            return Err("llm: a token budget must be above 0 (revoke llm to give none)".into());
        }
        Ok(())
    }

    /// The grant as the command line writes it, such as
    /// `local,gpt:20000tokens/call (route node)`.
    pub fn describe(&self) -> String {
        let mut text = if self.models.is_empty() {
            "the default model".to_owned()
        } else {
            self.models.join(", ")
        };
        if let Some(n) = self.tokens_per_call {
            text.push_str(&format!(", {n} tokens per call"));
        }
        if let Some(n) = self.tokens_per_day {
            text.push_str(&format!(", {n} tokens per day"));
        }
        text.push_str(&format!(", route {}", self.route.as_str()));
        text
    }
}

/// `llm` in the policy file: `true`, `false` or a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LlmSetting {
    Switch(bool),
    Grant(LlmGrant),
}

impl LlmSetting {
    /// What the setting grants: `None` for `false`.
    pub fn grant(&self) -> Option<LlmGrant> {
        match self {
            LlmSetting::Switch(false) => None,
            LlmSetting::Switch(true) => Some(LlmGrant::default()),
            LlmSetting::Grant(grant) => Some(grant.clone()),
        }
    }

    /// `true` for a grant with nothing but defaults, so that policy files
    /// stay as short as the operator wrote them.
    pub fn of(grant: LlmGrant) -> LlmSetting {
        if grant == LlmGrant::default() {
            LlmSetting::Switch(true)
        } else {
            LlmSetting::Grant(grant)
        }
    }
}

/// Reads the command line's `llm=SPEC`: model names separated by commas
/// (`default` is the default model), then budgets after colons:
/// `local,gpt:20000tokens/call:500000tokens/day`.
pub fn parse_spec(spec: &str) -> anyhow::Result<LlmGrant> {
    let mut parts = spec.split(':');
    let models = parts.next().unwrap_or_default();
    let mut grant = LlmGrant::default();
    for name in models.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        valid_model_name(name)?;
        if !grant.models.iter().any(|m| m == name) {
            grant.models.push(name.to_owned());
        }
    }
    // `default` alone is what no list means; beside other names it stays,
    // and the node resolves it to its default model when it runs.
    if grant.models == [DEFAULT_MODEL] {
        grant.models.clear();
    }
    for budget in parts {
        let (count, per) = budget
            .trim()
            .split_once("tokens/")
            .ok_or_else(|| anyhow::anyhow!(
                "budget {budget:?} is not written as N tokens/call or N tokens/day, such as 20000tokens/call"
            ))?;
        let count: u64 = count
            .trim()
            .replace('_', "")
            .parse()
            .map_err(|_| anyhow::anyhow!("budget {budget:?} does not start with a number"))?;
        match per {
            "call" => grant.tokens_per_call = Some(count),
            "day" => grant.tokens_per_day = Some(count),
            other => anyhow::bail!("a budget is per call or per day, not per {other:?}"),
        }
    }
    grant.validate().map_err(anyhow::Error::msg)?;
    Ok(grant)
}

/// The language-model grant a table holds now (the default one if none).
fn current(now: Option<&LlmSetting>) -> LlmGrant {
    now.and_then(LlmSetting::grant).unwrap_or_default()
}

/// The `llm` capability (the `llm` and `chat` imports).
pub struct Llm;

impl Capability for Llm {
    const IMPORTS: &'static [&'static str] = &["agentsite:agent/llm", "agentsite:agent/chat"];
    const ALSO: &'static [&'static str] = &["llm-route"];
    type Grant = LlmSetting;
    /// The language models granted; `None` when none is.
    type Granted = Option<LlmGrant>;

    fn validate(setting: &LlmSetting) -> Result<(), String> {
        setting.grant().map_or(Ok(()), |grant| grant.validate())
    }

    /// `llm`, `llm=true|false`, `llm=SPEC` (see [`parse_spec`]) or
    /// `llm-route=ROUTE`; a route set before stays when the models change.
    fn parse(
        item: &str,
        value: Option<&str>,
        now: Option<&LlmSetting>,
    ) -> anyhow::Result<LlmSetting> {
        if item == "llm-route" {
            let mut llm = current(now);
            llm.route = value_of(item, value, "client-first, node or client")?.parse()?;
            return Ok(LlmSetting::of(llm));
        }
        Ok(match value {
            None => LlmSetting::Switch(true),
            Some(value) => match parse_bool(value) {
                Ok(switch) => LlmSetting::Switch(switch),
                Err(_) => {
                    let mut llm = parse_spec(value)?;
                    llm.route = current(now).route;
                    LlmSetting::of(llm)
                }
            },
        })
    }

    fn resolve(setting: &LlmSetting) -> Option<LlmGrant> {
        setting.grant()
    }

    fn describe(llm: &Option<LlmGrant>) -> Vec<String> {
        llm.iter()
            .map(|llm| format!("llm      {}", llm.describe()))
            .collect()
    }

    fn revocable(_setting: &LlmSetting) -> Vec<(String, String)> {
        vec![("llm".into(), "llm".into())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_read_as_the_issue_writes_them() {
        assert_eq!(parse_spec("default").unwrap(), LlmGrant::default());
        let grant = parse_spec("local,gpt").unwrap();
        assert_eq!(grant.models, ["local", "gpt"]);
        let grant = parse_spec("default:20000tokens/call").unwrap();
        assert!(grant.models.is_empty());
        assert_eq!(grant.tokens_per_call, Some(20_000));
        let grant = parse_spec("gpt:1000tokens/call:50_000tokens/day").unwrap();
        assert_eq!(
            (grant.tokens_per_call, grant.tokens_per_day),
            (Some(1000), Some(50_000))
        );
        for (bad, reason) in [
            ("local:20000", "not written as"),
            ("local:manytokens/call", "does not start with a number"),
            ("local:5tokens/week", "per call or per day"),
            ("a b", "not a model name"),
            ("local:0tokens/call", "above 0"),
        ] {
            let error = parse_spec(bad).unwrap_err().to_string();
            assert!(error.contains(reason), "{bad}: {error}");
        }
    }

    #[test]
    fn policy_files_say_true_or_a_table() {
        #[derive(Deserialize, Serialize)]
        struct Table {
            llm: LlmSetting,
        }
        let old: Table = toml::from_str("llm = true").unwrap();
        assert_eq!(old.llm.grant(), Some(LlmGrant::default()));
        let off: Table = toml::from_str("llm = false").unwrap();
        assert_eq!(off.llm.grant(), None);
        let table: Table =
            toml::from_str("llm = { models = [\"gpt\"], route = \"node\", tokens_per_day = 9 }")
                .unwrap();
        let grant = table.llm.grant().unwrap();
        assert_eq!(grant.route, Route::Node);
        assert_eq!(grant.tokens_per_day, Some(9));
        let text = toml::to_string(&Table {
            llm: LlmSetting::of(LlmGrant::default()),
        })
        .unwrap();
        assert_eq!(text.trim(), "llm = true");
        assert!(toml::from_str::<Table>("llm = { modles = [] }").is_err());
    }
}
