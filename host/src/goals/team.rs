//! Forming a team for a goal: the agents a person named, or the ones the
//! model picks from what a search of this node and the network finds.
//!
//! Without names, the model writes a few search queries; the goal's own
//! words are searched too, so a weak model still finds what the goal
//! mentions. The model then picks one to four of the candidates from their
//! cards and tools, with a reason for each, preferring fewer members with
//! distinct skills.

use super::ask::{AskFailure, Asker};
use super::directory::{Candidate, Directory};
use super::message::Member;
use crate::llm::Message;
use crate::text::excerpt;
use serde_json::{Value, json};

/// Members a formed team has at most.
pub const MAX_MEMBERS: usize = 4;
/// Agents a person may name for one team.
pub const MAX_NAMED: usize = 8;
/// Candidates shown to the model at most.
const MAX_CANDIDATES: usize = 12;
/// Agents taken from each search.
const PER_QUERY: usize = 6;

/// A team and how it was found.
#[derive(Debug, Clone)]
pub struct Formed {
    pub members: Vec<Member>,
    pub queries: Vec<String>,
}

/// Why no team was formed.
#[derive(Debug, Clone, PartialEq)]
pub enum FormFailure {
    /// A named member is unknown, or nothing matches the goal.
    NoTeam(String),
    Ask(AskFailure),
}

impl std::fmt::Display for FormFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormFailure::NoTeam(why) => f.write_str(why),
            FormFailure::Ask(failure) => write!(f, "the team could not be formed: {failure}"),
        }
    }
}

/// The team of the agents `named` (names, ids or search words).
pub async fn named(directory: &dyn Directory, named: &[String]) -> Result<Formed, FormFailure> {
    if named.len() > MAX_NAMED {
        return Err(FormFailure::NoTeam(format!(
            "a team has at most {MAX_NAMED} named members"
        )));
    }
    let mut members: Vec<Member> = Vec::new();
    for name in named {
        let candidate = directory.resolve(name).await.map_err(FormFailure::NoTeam)?;
        if members.iter().all(|m| m.agent != candidate.agent) {
            members.push(member(&candidate, "named by the person".into(), &members));
        }
    }
    if members.is_empty() {
        return Err(FormFailure::NoTeam("the team named no agent".into()));
    }
    Ok(Formed {
        members,
        queries: Vec::new(),
    })
}

/// A team for `goal` found by searching and chosen by the model.
pub async fn discover(
    asker: &Asker<'_>,
    directory: &dyn Directory,
    goal: &str,
) -> Result<Formed, FormFailure> {
    let mut queries = ask_queries(asker, goal).await.map_err(FormFailure::Ask)?;
    queries.push(excerpt(goal, 200).into_owned());
    let mut candidates: Vec<Candidate> = Vec::new();
    for query in &queries {
        for candidate in directory.search(query, PER_QUERY).await {
            if candidates.len() < MAX_CANDIDATES
                && candidates.iter().all(|c| c.agent != candidate.agent)
            {
                candidates.push(candidate);
            }
        }
    }
    if candidates.is_empty() {
        return Err(FormFailure::NoTeam(format!(
            "no team could be formed: no agent on this node or the network matches {}",
            queries
                .iter()
                .map(|q| format!("{:?}", excerpt(q, 60)))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let members = if candidates.len() == 1 {
        vec![member(&candidates[0], "the only agent found".into(), &[])]
    } else {
        pick(asker, goal, &candidates)
            .await
            .map_err(FormFailure::Ask)?
    };
    Ok(Formed { members, queries })
}

/// A member made of `candidate`, named uniquely among `others`.
fn member(candidate: &Candidate, reason: String, others: &[Member]) -> Member {
    let mut name = candidate.name.clone();
    let mut n = 2;
    while others.iter().any(|m| m.name == name) {
        name = format!("{}-{n}", candidate.name);
        n += 1;
    }
    Member {
        name,
        agent: candidate.agent,
        node: candidate.node.clone(),
        local: candidate.local,
        description: candidate.description.clone(),
        tools: candidate.tools.clone(),
        reason,
    }
}

/// The model's search queries for `goal` (none if it offers none).
async fn ask_queries(asker: &Asker<'_>, goal: &str) -> Result<Vec<String>, AskFailure> {
    let schema = json!({
        "type": "object",
        "properties": {
            "queries": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": {"type": "string", "minLength": 2, "maxLength": 60}
            }
        },
        "required": ["queries"],
        "additionalProperties": false
    });
    let messages = vec![
        Message::system(
            "You find agents for a goal on a network of AI agents. Agents are found by the words \
             of their names, descriptions and tools. Answer with JSON: up to 3 short search \
             queries, a few words each, naming the skills the goal needs.",
        ),
        Message::user(format!("Goal: {goal}")),
    ];
    asker
        .structured(messages, schema, 120, |value| {
            let queries: Vec<String> = value["queries"]
                .as_array()
                .ok_or("\"queries\" must be an array of strings")?
                .iter()
                .filter_map(Value::as_str)
                .map(str::trim)
                .filter(|q| !q.is_empty())
                .map(|q| excerpt(q, 60).into_owned())
                .take(3)
                .collect();
            Ok(queries)
        })
        .await
}

/// A candidate as the model sees it: one line, bounded.
fn describe(label: &str, candidate: &Candidate) -> String {
    format!(
        "- {label}: {} Tools: {}",
        excerpt(&candidate.description, 200),
        super::member::tools_line(&candidate.tools, 8)
    )
}

/// The model's choice of members among `candidates`.
async fn pick(
    asker: &Asker<'_>,
    goal: &str,
    candidates: &[Candidate],
) -> Result<Vec<Member>, AskFailure> {
    // Labels are unique even when two agents share a name.
    let mut labelled: Vec<Member> = Vec::new();
    for candidate in candidates {
        let labelled_one = member(candidate, String::new(), &labelled);
        labelled.push(labelled_one);
    }
    let labels: Vec<&str> = labelled.iter().map(|m| m.name.as_str()).collect();
    let schema = json!({
        "type": "object",
        "properties": {
            "members": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_MEMBERS,
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"enum": labels},
                        "reason": {"type": "string", "minLength": 3, "maxLength": 200}
                    },
                    "required": ["name", "reason"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["members"],
        "additionalProperties": false
    });
    let list: Vec<String> = labelled
        .iter()
        .zip(candidates)
        .map(|(m, c)| describe(&m.name, c))
        .collect();
    let messages = vec![
        Message::system(format!(
            "You form a team of agents for a goal. Pick 1 to {MAX_MEMBERS} of the candidates \
             whose tools the goal needs, with a short reason for each. Prefer fewer members \
             with distinct skills. Answer with JSON."
        )),
        Message::user(format!("Goal: {goal}\n\nCandidates:\n{}", list.join("\n"))),
    ];
    asker
        .structured(messages, schema, 300, |value| {
            let picks = value["members"]
                .as_array()
                .ok_or("\"members\" must be an array")?;
            let mut members: Vec<Member> = Vec::new();
            for pick in picks.iter().take(MAX_MEMBERS) {
                let name = pick["name"]
                    .as_str()
                    .ok_or("each member needs a \"name\"")?;
                let chosen = labelled
                    .iter()
                    .find(|m| m.name == name)
                    .ok_or_else(|| format!("{name:?} is not one of the candidates"))?;
                if members.iter().any(|m| m.agent == chosen.agent) {
                    continue;
                }
                let reason = pick["reason"].as_str().unwrap_or("").trim();
                let mut chosen = chosen.clone();
                chosen.reason = if reason.is_empty() {
                    "picked for the goal".into()
                } else {
                    excerpt(reason, 200).into_owned()
                };
                members.push(chosen);
            }
            if members.is_empty() {
                return Err("pick at least one member".into());
            }
            Ok(members)
        })
        .await
}
