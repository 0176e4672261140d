//! A research assistant: the node's language model, given a tool that
//! searches the network's agents, works out which agents can help with a
//! task. The agent runs the model's tool loop itself (ask, run the searches
//! the model asks for, hand back their results, ask again) with the `chat`
//! interface of contract 0.1.1, and streams a summary as progress.
//!
//! Grant it `llm` and `peers`, and the time a few model calls take:
//! `agentsite grant research llm peers deadline=2m`.

use agentsite_sdk::chat::{Chat, Delta, ToolCall, ToolChoice};
use agentsite_sdk::{agent, host, peers};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Rounds of searching before the model must answer.
const MAX_ROUNDS: usize = 3;
/// Agents one search reports to the model.
const RESULTS_PER_SEARCH: u32 = 5;

struct Research;

/// A search the model may ask for.
#[derive(Deserialize, JsonSchema)]
struct Search {
    /// Keywords describing the skill wanted, such as "arithmetic".
    #[schemars(length(min = 2, max = 60))]
    query: String,
}

/// An agent a search found.
#[derive(Serialize, JsonSchema)]
struct Found {
    name: String,
    id: String,
    description: String,
    tools: Vec<String>,
}

/// What the research found.
#[derive(Serialize, JsonSchema)]
struct Findings {
    /// The model's answer, in its words.
    answer: String,
    /// The searches the model ran, in order.
    searches: Vec<String>,
    /// Every agent the searches found.
    agents: Vec<Found>,
    /// The model that answered.
    model: String,
}

/// Finds agents on the network for a task, with a language model that searches.
#[agent(tags = ["research", "discovery", "llm"])]
impl Research {
    /// Work out which agents on the network can help with a task: the model
    /// searches the network's agents (at least once) and answers.
    #[tool(read_only)]
    fn find_agents(
        /// The task to find agents for.
        task: String,
    ) -> Result<Findings, String> {
        let mut chat = Chat::new()
            .system(
                "You find agents that can do a task. Search the network's agents by keyword, \
                 then answer with the agents that fit and why.",
            )
            .user(task)
            .tool::<Search>("search", "Searches the network's agents by keyword")
            .max_tokens(200);
        let mut searches = Vec::new();
        let mut agents: Vec<Found> = Vec::new();
        for round in 0..=MAX_ROUNDS {
            // The first round must search; the last must answer.
            let choice = match round {
                0 => ToolChoice::Required,
                MAX_ROUNDS => ToolChoice::None,
                _ => ToolChoice::Auto,
            };
            chat = chat.tool_choice(choice);
            let answer = chat.complete().map_err(|e| e.to_string())?;
            if answer.tool_calls.is_empty() {
                return Ok(Findings {
                    answer: answer.content,
                    searches,
                    agents,
                    model: answer.model,
                });
            }
            chat.push_answer(&answer);
            for call in &answer.tool_calls {
                let result = run_search(call, &mut searches, &mut agents);
                chat.push_tool_result(call, result);
            }
        }
        unreachable!("the last round offers no tools")
    }

    /// Summarize a text in one or two sentences; the summary streams to the
    /// caller as progress messages while the model writes it.
    #[tool(read_only)]
    fn summarize(
        /// The text to summarize.
        text: String,
    ) -> Result<String, String> {
        let chat = Chat::new()
            .system("Summarize the user's text in one or two sentences.")
            .user(text)
            .max_tokens(120);
        let mut stream = chat.stream().map_err(|e| e.to_string())?;
        let mut written = String::new();
        let mut pieces = 0.0;
        for piece in stream.by_ref() {
            if let Delta::Text(text) = piece.map_err(|e| e.to_string())? {
                written.push_str(&text);
                pieces += 1.0;
                host::progress(pieces, None, Some(&written));
            }
        }
        let completion = stream.finish().map_err(|e| e.to_string())?;
        Ok(completion.content)
    }
}

/// Runs one search the model asked for and says what it found, as text for
/// the model. A bad call is told to the model, which may try again.
fn run_search(call: &ToolCall, searches: &mut Vec<String>, agents: &mut Vec<Found>) -> String {
    let Search { query } = match call.arguments_as() {
        Ok(search) => search,
        Err(error) => return format!("error: {error:?}"),
    };
    searches.push(query.clone());
    let found = match peers::discover(&query, RESULTS_PER_SEARCH) {
        Ok(found) => found,
        Err(error) => return format!("error: {error}"),
    };
    if found.is_empty() {
        return format!("no agent matches {query:?}");
    }
    let mut lines = Vec::new();
    for agent in found {
        let tools: Vec<String> = agent.tools.iter().map(|t| t.name.clone()).collect();
        lines.push(format!(
            "{} ({}): {} tools: {}",
            agent.card.name,
            agent.id,
            agent.card.description,
            tools.join(", ")
        ));
        if !agents.iter().any(|a| a.id == agent.id) {
            agents.push(Found {
                name: agent.card.name,
                id: agent.id,
                description: agent.card.description,
                tools,
            });
        }
    }
    lines.join("\n")
}
