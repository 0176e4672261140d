//! The Agent Cards this node serves: one for the node (a message to it is
//! a goal; its skills are its agents' tools, and "goal" when goals are on)
//! and one per installed agent (a message to it is a tool call; its skills
//! are its tools).

use crate::a2a::wire::{
    AgentCapabilities, AgentCard, AgentInterface, AgentSkill, HttpAuthSecurityScheme, JSONRPC,
    SecurityScheme,
};
use crate::store::AgentRecord;
use std::collections::HashMap;

/// Skills a card lists at most (a node with more tools lists the first).
const MAX_SKILLS: usize = 256;
/// The name of the security scheme of the node's token.
const BEARER: &str = "bearer";

/// What every card of this node shares: where it is reached and how.
pub struct Site {
    /// `http://host:port` as the client reached it.
    pub base: String,
    /// Whether a bearer token is required.
    pub token: bool,
}

impl Site {
    /// The JSON-RPC endpoint at `path`, once for A2A 1.0 and once for 0.3
    /// (the same endpoint answers both; see `server::compat`).
    fn interface(&self, path: &str) -> Vec<AgentInterface> {
        let current = AgentInterface::new(format!("{}{path}", self.base), JSONRPC);
        let mut legacy = current.clone();
        legacy.protocol_version = crate::a2a::v0_3::VERSION.into();
        vec![current, legacy]
    }

    fn card(&self, name: String, description: String, path: &str) -> AgentCard {
        let (schemes, requirements) = if self.token {
            let bearer = SecurityScheme::HttpAuth(HttpAuthSecurityScheme {
                scheme: "Bearer".into(),
                description: Some("the node's token".into()),
                bearer_format: None,
            });
            (
                Some(HashMap::from([(BEARER.to_owned(), bearer)])),
                Some(vec![HashMap::from([(BEARER.to_owned(), Vec::new())])]),
            )
        } else {
            (None, None)
        };
        AgentCard {
            name,
            description,
            version: env!("CARGO_PKG_VERSION").into(),
            supported_interfaces: self.interface(path),
            capabilities: AgentCapabilities {
                streaming: Some(true),
                push_notifications: Some(false),
                extensions: None,
                extended_agent_card: Some(false),
            },
            default_input_modes: vec!["text/plain".into(), "application/json".into()],
            default_output_modes: vec!["text/plain".into(), "application/json".into()],
            skills: Vec::new(),
            provider: None,
            documentation_url: None,
            icon_url: None,
            security_schemes: schemes,
            security_requirements: requirements,
            signatures: None,
        }
    }

    /// The card of the agent of `record`, at `/agents/<name>/…`.
    pub fn agent(&self, record: &AgentRecord) -> AgentCard {
        let name = &record.card.name;
        let mut description = record.card.description.clone();
        if let Some(attached) = &record.attached {
            description.push_str(&format!(
                " (an attached {}, not sandboxed by this node)",
                attached.kind()
            ));
        }
        description.push_str(
            " A message is one call of its tools, chosen by the node's language model; a data part {\"tool\": NAME, \"arguments\": {...}} names the call itself.",
        );
        let mut card = self.card(name.clone(), description, &format!("/agents/{name}/a2a"));
        card.skills = record
            .tools
            .iter()
            .take(MAX_SKILLS)
            .map(|tool| {
                skill(
                    tool.name.clone(),
                    tool.title.clone().unwrap_or_else(|| tool.name.clone()),
                    tool_description(tool),
                    tags(record),
                )
            })
            .collect();
        card.documentation_url = record.card.homepage.clone();
        card
    }

    /// The node's card: its agents' tools as skills (named `agent/tool`),
    /// and "goal" first when it takes goals.
    pub fn node(&self, records: &[AgentRecord], goals: bool) -> AgentCard {
        let description = if goals {
            format!(
                "An agentsite node hosting {}. A message is a goal: the node forms a team of agents (its own and the network's) that works on it and concludes. Each agent also has its own card at /agents/<name>/.well-known/agent-card.json.",
                agents(records.len())
            )
        } else {
            format!(
                "An agentsite node hosting {}. It takes no goals: send messages to an agent's own card, at /agents/<name>/.well-known/agent-card.json.",
                agents(records.len())
            )
        };
        let mut card = self.card("agentsite node".into(), description, "/a2a");
        if goals {
            let mut goal = skill(
                "goal".into(),
                "Goal".into(),
                "Carries out a goal with a team of agents and answers with the team's conclusion. Name the team in the message's metadata as {\"team\": [\"agent\", ...]}, or let the node form one.".into(),
                vec!["goal".into(), "team".into()],
            );
            goal.examples = Some(vec!["How far is 42 km in miles?".into()]);
            card.skills.push(goal);
        }
        for record in records {
            for tool in &record.tools {
                if card.skills.len() == MAX_SKILLS {
                    return card;
                }
                card.skills.push(skill(
                    format!("{}/{}", record.card.name, tool.name),
                    format!("{} {}", record.card.name, tool.name),
                    tool_description(tool),
                    tags(record),
                ));
            }
        }
        card
    }
}

fn skill(id: String, name: String, description: String, tags: Vec<String>) -> AgentSkill {
    AgentSkill {
        id,
        name,
        description,
        tags,
        examples: None,
        input_modes: None,
        output_modes: None,
        security_requirements: None,
    }
}

fn tool_description(tool: &crate::agent::tool::ToolSpec) -> String {
    if tool.description.is_empty() {
        format!("The tool {}.", tool.name)
    } else {
        tool.description.clone()
    }
}

fn tags(record: &AgentRecord) -> Vec<String> {
    let mut tags = vec![record.card.name.clone()];
    for tag in record.card.tags.iter().take(8) {
        if !tags.contains(tag) {
            tags.push(tag.clone());
        }
    }
    tags
}

fn agents(count: usize) -> String {
    match count {
        1 => "1 agent".into(),
        n => format!("{n} agents"),
    }
}
