//! The tools a server exposes, under the names its clients see.
//!
//! A snapshot is built from the catalog's records whenever the set of
//! installed agents changes, so that `tools/list` and the name lookup of
//! every `tools/call` cost no disk access. The MCP descriptors are built once
//! per snapshot, not per request.

use crate::AgentId;
use crate::agent::tool::ToolSpec;
use crate::store::AgentRecord;
use rmcp::model::Tool;
use std::collections::HashMap;
use std::sync::Arc;

/// Which installed agents a server exposes, and how tools are named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every installed agent, tools named `<agent-name>.<tool>`.
    All,
    /// These agents only. One agent: its tools keep their own names.
    /// Several: `<agent-name>.<tool>`.
    Agents(Vec<AgentId>),
}

/// One exposed tool.
#[derive(Debug)]
pub struct ExposedTool {
    pub record: Arc<AgentRecord>,
    /// The tool's name inside its agent.
    pub tool: String,
    /// The MCP descriptor, under the exposed name.
    pub descriptor: Tool,
}

/// An agent in a server's scope, with the prefix of its exposed names.
#[derive(Debug)]
pub struct ExposedAgent {
    pub record: Arc<AgentRecord>,
    /// Empty when names are bare (a server for one agent).
    pub prefix: String,
}

impl ExposedAgent {
    /// The name a client sees for the agent's tool or prompt `name`.
    pub fn exposed_name(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{}.{name}", self.prefix)
        }
    }
}

/// All tools a server exposes at one moment, in a stable order, and the
/// agents they come from.
#[derive(Debug, Default)]
pub struct Exposed {
    agents: Vec<ExposedAgent>,
    tools: Vec<ExposedTool>,
    by_name: HashMap<String, usize>,
}

impl Exposed {
    /// The snapshot of `records` seen through `scope`.
    pub fn build(records: &[AgentRecord], scope: &Scope) -> Exposed {
        let in_scope = |r: &&AgentRecord| match scope {
            Scope::All => true,
            Scope::Agents(ids) => ids.contains(&r.id),
        };
        let mut records: Vec<Arc<AgentRecord>> = records
            .iter()
            .filter(in_scope)
            .map(|r| Arc::new(r.clone()))
            .collect();
        records.sort_by(|a, b| (&a.card.name, a.id).cmp(&(&b.card.name, b.id)));
        let bare_names = matches!(scope, Scope::Agents(ids) if ids.len() == 1);
        let prefixes = agent_prefixes(&records);

        let mut exposed = Exposed::default();
        for (record, prefix) in records.iter().zip(prefixes) {
            let agent = ExposedAgent {
                record: record.clone(),
                prefix: if bare_names { String::new() } else { prefix },
            };
            for spec in &record.tools {
                let name = agent.exposed_name(&spec.name);
                if let Err(e) = crate::agent::tool::validate_tool_name(&name) {
                    tracing::warn!(agent = %record.card.name, "tool not exposed: {e}");
                    continue;
                }
                let descriptor = match descriptor(&name, spec) {
                    Ok(descriptor) => descriptor,
                    Err(e) => {
                        tracing::warn!(agent = %record.card.name, tool = %spec.name, "not exposed: {e}");
                        continue;
                    }
                };
                exposed.by_name.insert(name, exposed.tools.len());
                exposed.tools.push(ExposedTool {
                    record: record.clone(),
                    tool: spec.name.clone(),
                    descriptor,
                });
            }
            exposed.agents.push(agent);
        }
        exposed
    }

    /// The agents in scope, in the order of their tools.
    pub fn agents(&self) -> &[ExposedAgent] {
        &self.agents
    }

    /// The agent and inner name meant by an exposed prompt name.
    pub fn split_name<'a>(&self, name: &'a str) -> Option<(&ExposedAgent, &'a str)> {
        match self.agents.as_slice() {
            [only] if only.prefix.is_empty() => Some((only, name)),
            agents => {
                // Prefixes never contain '.', so the first one ends the prefix.
                let (prefix, inner) = name.split_once('.')?;
                let agent = agents.iter().find(|a| a.prefix == prefix)?;
                Some((agent, inner))
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<&ExposedTool> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    pub fn tools(&self) -> &[ExposedTool] {
        &self.tools
    }
}

/// The prefix of each agent's tools: its card name, or, where two installed
/// agents share a name (two versions, say), the name and a short id, so that
/// every exposed name stays unique and valid (letters, digits, `_-.`).
fn agent_prefixes(records: &[Arc<AgentRecord>]) -> Vec<String> {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for record in records {
        *count.entry(record.card.name.as_str()).or_default() += 1;
    }
    records
        .iter()
        .map(|r| {
            if count[r.card.name.as_str()] > 1 {
                format!("{}-{}", r.card.name, &r.id.hex()[..12])
            } else {
                r.card.name.clone()
            }
        })
        .collect()
}

/// The MCP descriptor of `spec` under `name`. The spec is already MCP-shaped
/// JSON (checked when the agent was added), so this is a typed re-read.
fn descriptor(name: &str, spec: &ToolSpec) -> Result<Tool, serde_json::Error> {
    let mut value = serde_json::to_value(spec)?;
    value["name"] = name.into();
    // A view is MCP Apps' `_meta.ui`; clients that do not announce the
    // extension get the descriptor without it (`apps::for_client`).
    if let Some(app) = value.as_object_mut().and_then(|tool| tool.remove("app")) {
        value["_meta"] = serde_json::json!({ "ui": app });
    }
    // Records stored before schemas were standardized at `add` still carry
    // their agent's own formats.
    for schema in ["inputSchema", "outputSchema"] {
        if let Some(schema) = value.get_mut(schema) {
            crate::agent::tool::standard_schema::standardize(schema);
        }
    }
    serde_json::from_value(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tool::{AgentCard, ToolAnnotations};
    use serde_json::json;

    fn record(name: &str, seed: &[u8], tools: &[&str]) -> AgentRecord {
        AgentRecord {
            id: AgentId::of(seed),
            card: AgentCard {
                name: name.into(),
                version: "1.0.0".into(),
                description: "test".into(),
                tags: vec![],
                homepage: None,
            },
            tools: tools
                .iter()
                .map(|t| ToolSpec {
                    name: (*t).into(),
                    title: None,
                    description: format!("{t} tool"),
                    input_schema: json!({"type": "object"}),
                    output_schema: None,
                    annotations: ToolAnnotations {
                        read_only_hint: Some(true),
                        ..Default::default()
                    },
                    app: None,
                })
                .collect(),
            imports: vec![],
            size: 1,
            origin: crate::store::Origin::Local,
            added_at: 0,
            attached: None,
        }
    }

    #[test]
    fn all_agents_are_namespaced_and_sorted() {
        let exposed = Exposed::build(
            &[
                record("text", b"t", &["upper"]),
                record("calculator", b"c", &["add", "divide"]),
            ],
            &Scope::All,
        );
        let names: Vec<&str> = exposed
            .tools()
            .iter()
            .map(|t| t.descriptor.name.as_ref())
            .collect();
        assert_eq!(names, ["calculator.add", "calculator.divide", "text.upper"]);
        let add = exposed.get("calculator.add").unwrap();
        assert_eq!(add.tool, "add");
        assert_eq!(add.descriptor.description.as_deref(), Some("add tool"));
        assert_eq!(
            add.descriptor.annotations.as_ref().unwrap().read_only_hint,
            Some(true)
        );
        assert!(exposed.get("add").is_none());
    }

    #[test]
    fn one_agent_keeps_its_own_tool_names() {
        let calculator = record("calculator", b"c", &["add"]);
        let scope = Scope::Agents(vec![calculator.id]);
        let exposed = Exposed::build(&[calculator, record("text", b"t", &["upper"])], &scope);
        assert_eq!(exposed.tools().len(), 1);
        assert!(exposed.get("add").is_some());
    }

    #[test]
    fn agents_sharing_a_name_get_distinct_prefixes() {
        let exposed = Exposed::build(
            &[
                record("calculator", b"one", &["add"]),
                record("calculator", b"two", &["add"]),
            ],
            &Scope::All,
        );
        let names: Vec<String> = exposed
            .tools()
            .iter()
            .map(|t| t.descriptor.name.to_string())
            .collect();
        assert_eq!(names.len(), 2);
        assert_ne!(names[0], names[1]);
        for name in &names {
            assert!(
                name.starts_with("calculator-") && name.ends_with(".add"),
                "{name}"
            );
            crate::agent::tool::validate_tool_name(name).unwrap();
        }
    }

    #[test]
    fn prompt_names_split_into_agent_and_inner_name() {
        let exposed = Exposed::build(
            &[
                record("notes", b"n", &["put"]),
                record("text", b"t", &["upper"]),
            ],
            &Scope::All,
        );
        let (agent, inner) = exposed.split_name("notes.summarize").unwrap();
        assert_eq!(
            (agent.record.card.name.as_str(), inner),
            ("notes", "summarize")
        );
        assert!(exposed.split_name("summarize").is_none());
        assert!(exposed.split_name("other.summarize").is_none());

        let notes = record("notes", b"n", &["put"]);
        let one = Exposed::build(std::slice::from_ref(&notes), &Scope::Agents(vec![notes.id]));
        let (agent, inner) = one.split_name("summarize").unwrap();
        assert_eq!(
            (agent.exposed_name("x").as_str(), inner),
            ("x", "summarize")
        );
    }
}
