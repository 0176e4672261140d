//! The agents a team is made of: those a person named, or candidates found
//! for the goal by a search of this node and the network.
//!
//! Without names, the goal's own words are searched, and the words the
//! model uses to say how to do it: "what is 23 plus 19?" names no tool,
//! "to find 23 plus 19, add them" does. No candidate is a member yet: one joins the team when a step
//! of the goal calls one of its tools (see [`super::controller`]), so every
//! member is there for a tool that serves a part of the goal.

use super::ask::{AskFailure, Asker};
use super::directory::{Candidate, Directory};
use super::message::Member;
use crate::llm::{ChatRequest, Message};
use crate::text::excerpt;

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

/// Candidates for `goal`, found by the model's search queries and the
/// goal's own words.
pub async fn candidates(
    asker: &Asker<'_>,
    directory: &dyn Directory,
    goal: &str,
) -> Result<Formed, FormFailure> {
    let mut queries = vec![excerpt(goal, 200).into_owned()];
    queries.extend(ask_how(asker, goal).await.map_err(FormFailure::Ask)?);
    let mut found: Vec<Candidate> = Vec::new();
    for query in &queries {
        for candidate in directory.search(query, PER_QUERY).await {
            if found.len() < MAX_CANDIDATES && found.iter().all(|c| c.agent != candidate.agent) {
                found.push(candidate);
            }
        }
    }
    // This node's own agents are candidates too: the steps decide which
    // of them a goal needs.
    for candidate in directory.installed(MAX_CANDIDATES).await {
        if found.len() < MAX_CANDIDATES && found.iter().all(|c| c.agent != candidate.agent) {
            found.push(candidate);
        }
    }
    if found.is_empty() {
        return Err(FormFailure::NoTeam(format!(
            "no team could be formed: no agent on this node or the network matches {}",
            queries
                .iter()
                .map(|q| format!("{:?}", excerpt(q, 60)))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let mut members: Vec<Member> = Vec::new();
    for candidate in &found {
        let made = member(candidate, String::new(), &members);
        members.push(made);
    }
    Ok(Formed { members, queries })
}

/// `candidate` renamed, if need be, to differ from `others`.
pub fn unique<'a>(candidate: Member, others: impl Iterator<Item = &'a Member> + Clone) -> Member {
    let mut name = candidate.name.clone();
    let mut n = 2;
    while others.clone().any(|m| m.name == name) {
        name = format!("{}-{n}", candidate.name);
        n += 1;
    }
    Member { name, ..candidate }
}

/// A member made of `candidate`, named uniquely among `others`.
fn member(candidate: &Candidate, reason: String, others: &[Member]) -> Member {
    let made = Member {
        name: candidate.name.clone(),
        agent: candidate.agent,
        node: candidate.node.clone(),
        local: candidate.local,
        description: candidate.description.clone(),
        tools: candidate.tools.clone(),
        reason,
    };
    unique(made, others.iter())
}

/// Tokens the model's account of how to do a goal may take.
const HOW_TOKENS: u32 = 40;
/// Words of that account searched for, at most.
const HOW_WORDS: usize = 8;

/// A search query in the model's words: what it says the goal takes
/// ("To find 23 plus 19, add 23 and 19" finds the agent that adds), its
/// words that name things, once each; `None` when it says nothing useful.
async fn ask_how(asker: &Asker<'_>, goal: &str) -> Result<Option<String>, AskFailure> {
    let request = ChatRequest {
        messages: vec![
            Message::system("Explain briefly how to do this."),
            Message::user(goal.to_owned()),
        ],
        temperature: Some(0.0),
        ..Default::default()
    };
    let answer = asker.complete(request, HOW_TOKENS).await?;
    let mut words: Vec<String> = Vec::new();
    for word in answer.content.split(|c: char| !c.is_alphanumeric()) {
        let word = word.to_lowercase();
        let names_something = word.len() >= 3
            && !word.bytes().all(|b| b.is_ascii_digit())
            && crate::store::terms::terms(&word).next().is_some();
        if names_something && !words.contains(&word) && words.len() < HOW_WORDS {
            words.push(word);
        }
    }
    Ok((!words.is_empty()).then(|| words.join(" ")))
}
