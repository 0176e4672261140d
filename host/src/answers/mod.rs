//! What a person reads rests on what the tools returned.
//!
//! Goals, chat and A2A answer people with the node's model, which may be
//! tiny (the default is a 135M-parameter model) and may be wrong. So the
//! work is split where the model is needed from where the state decides:
//!
//! - [`steps`]: which values the next call takes and which tools can take
//!   them (the state), and which tool it is (the model's words, or its
//!   choice), with the arguments held to those values while written;
//! - [`wording`]: the answer in the model's words, held to the numbers and
//!   texts the person and the tools gave, checked to state every call's
//!   result, and otherwise stated by the node itself.

pub(crate) mod align;
pub(crate) mod fit;
pub(crate) mod notation;
pub(crate) mod parts;
pub(crate) mod serve;
pub(crate) mod steer;
pub(crate) mod steps;
pub(crate) mod tool_loop;
pub(crate) mod unfounded;
pub(crate) mod wording;

pub use serve::{Runner, serve};
pub use steps::{Offered, Outcome, Step, Steps};

use crate::llm::grounding::{Literal, number_literal};
use crate::llm::{ChatRequest, Completion, DeltaSink, Message, Role, ToolChoice, ToolSpec};
use crate::text::excerpt;
use serde_json::Value;
use std::collections::BTreeMap;

/// Tokens the model's account of how to do a step may take.
pub(crate) const THOUGHT_TOKENS: u32 = 24;
/// Tokens a call may take.
const CALL_TOKENS: u32 = 160;

/// The model, as the answers ask it: goals through their budget, chat and
/// A2A through the node's models.
#[async_trait::async_trait]
pub trait Ask: Send + Sync {
    /// Why a request got no answer (a goal's limit, a model's failure).
    type Error: Send;

    /// Completes `request`, writing at most `max_tokens`, sending text to
    /// `sink` as it is written.
    async fn ask(
        &self,
        request: ChatRequest,
        max_tokens: u32,
        sink: DeltaSink,
    ) -> Result<Completion, Self::Error>;

    /// Says why an answer could not be used (a failure of the model's).
    fn unusable(&self, why: String) -> Self::Error;
}

/// The node's models as chat and A2A ask them: the default model, within
/// `deadline`, counted for `requester`.
pub struct NodeAsk {
    pub models: std::sync::Arc<crate::llm::models::Models>,
    /// The model by name; the node's default when `None`.
    pub model: Option<String>,
    pub requester: &'static str,
    /// Whose requests these are (a conversation, a task): they take their
    /// turns at the model together.
    pub caller: String,
    pub deadline: std::time::Instant,
}

/// Why the node's model gave no answer [`NodeAsk`] could use: the model's
/// own failure (kept whole, so `/v1` answers a request too long for the
/// model with 400, not as the node's fault), or an answer it could not use.
#[derive(Debug, thiserror::Error)]
pub enum NodeAskFailure {
    #[error("the node's model could not answer: {0}")]
    Model(crate::llm::LlmFailure),
    #[error("{0}")]
    Unusable(String),
}

impl From<NodeAskFailure> for String {
    fn from(failure: NodeAskFailure) -> String {
        failure.to_string()
    }
}

#[async_trait::async_trait]
impl Ask for NodeAsk {
    type Error = NodeAskFailure;

    async fn ask(
        &self,
        mut request: ChatRequest,
        max_tokens: u32,
        sink: DeltaSink,
    ) -> Result<Completion, NodeAskFailure> {
        request.max_tokens = Some(max_tokens);
        request.caller = Some(self.caller.clone());
        self.models
            .complete(
                self.model.as_deref(),
                request,
                self.deadline,
                sink,
                self.requester,
            )
            .await
            .map_err(NodeAskFailure::Model)
    }

    fn unusable(&self, why: String) -> NodeAskFailure {
        NodeAskFailure::Unusable(why)
    }
}

/// A call chosen for a step.
#[derive(Debug, Clone, PartialEq)]
pub struct Chosen {
    /// Index into the offered tools.
    pub tool: usize,
    pub arguments: Value,
}

/// Chooses the call of `step`: the tool the words of its part or the
/// model's account of it name (the model chooses among what is left), and
/// its arguments, held to the step's values. Where the words do not
/// choose, the model is asked how to do the part twice, the tools listed
/// in one order and then in the reverse: when both accounts name the same
/// tool, the choice is the model's and not the list's (see
/// [`Steps::agree`]).
pub async fn choose<A: Ask>(
    ask: &A,
    steps: &mut Steps,
    tools: &[Offered],
    step: &Step,
) -> Result<Chosen, A::Error> {
    // Where the refusal offers several words for one ("ft" or "f" for
    // "feet"), the model's choice between them, when it holds both ways.
    let unsure = unsure(steps, tools, step);
    let picked = match unsure.is_empty() {
        true => BTreeMap::new(),
        false => pick_symbols(ask, &unsure).await?,
    };
    if let Some(chosen) = corrected(steps, tools, step, &picked) {
        return Ok(chosen);
    }
    let mut candidates = steps.named_by(tools, step, "");
    let by_words: Vec<usize> = step
        .tools
        .iter()
        .copied()
        .filter(|&i| steps.chosen_by_request(tools, step, i))
        .collect();
    // Where the words choose a tool among all the step's, it is the
    // choice wherever its word stands ("Lowercase the words 'LOUD TEXT
    // HERE'": "words", nearest the text, names the word counters, and
    // "lowercase" names `lower` alone), unless a word of the part names
    // what the nearest word's tools take and not what the chosen one
    // takes: in "how many words are in my note 'monday'", "note" is the
    // word of `get`'s title ("the note's title"), and 'monday' no text
    // whose words to count. The words right beside a text say what it is
    // ("my note 'monday'"), whatever other words of the part name; where
    // none stands beside one, any word of the part may.
    let the_value_is_theirs = || {
        let beside = steps.words_beside_texts(step.index);
        let said = match beside.is_empty() {
            true => steps.said_terms(step.index),
            false => beside,
        };
        let names_a_parameter = |i: usize| {
            let taken: Vec<String> =
                crate::store::terms::terms(&fit::described(&tools[i].schema)).collect();
            said.iter()
                .any(|w| taken.iter().any(|t| steps::same_word(w, t)))
        };
        !candidates.is_empty()
            && candidates.iter().all(|&i| names_a_parameter(i))
            && !by_words.iter().any(|&i| names_a_parameter(i))
    };
    if !candidates.iter().any(|i| by_words.contains(i))
        && one_choice(tools, &by_words)
        && !the_value_is_theirs()
    {
        candidates = by_words.clone();
    }
    tracing::debug!(part = %step.part, tools = ?function_names(tools, &step.tools), named = ?function_names(tools, &candidates), "the tools the words name");
    let words_choose = candidates.iter().any(|i| by_words.contains(i));
    if candidates.len() > 1 && !words_choose {
        let listed = candidates.clone();
        let first = account(ask, tools, &listed, &step.part).await?;
        candidates = steps.named_by(tools, step, &first);
        tracing::debug!(part = %step.part, account = %first, "the model's account");
        // An account that names two tools ("the histogram with the mean
        // and the standard deviation") chose neither.
        let mut named_by_accounts = steps::named_in(tools, &listed, &first);
        if one_choice(tools, &candidates) && one_choice(tools, &named_by_accounts) {
            let reversed: Vec<usize> = listed.iter().rev().copied().collect();
            let second = account(ask, tools, &reversed, &step.part).await?;
            tracing::debug!(part = %step.part, account = %second, "the model's account, reversed");
            let named = steps::named_in(tools, &listed, &second);
            if steps.named_by(tools, step, &second) == candidates && one_choice(tools, &named) {
                steps.agree(step, candidates.clone());
            }
            named_by_accounts.extend(named);
        }
        // Accounts that explain the arithmetic name no tool ("add them up
        // and divide by the count" for "average"): the model's pick of a
        // tool by what each does, in both orders, is a choice the list's
        // order did not make.
        // Not where a word names a tool that could not take the part's
        // values (then the values were read apart from what it asks), nor
        // where the accounts named tools and the pick is none of them
        // ("convert 3 yards to feet, then multiply" picked as `add`): the
        // model's two ways of choosing must agree.
        if !candidates.iter().any(|&i| steps.agreed_on(step, i))
            && !steps.names_another(tools, step, &listed)
            && let Some(picked) = picked_both_ways(ask, tools, &listed, &step.part).await?
            && (named_by_accounts.is_empty()
                || named_by_accounts
                    .iter()
                    .any(|&i| tools[i].name == tools[picked].name))
        {
            candidates = listed
                .iter()
                .copied()
                .filter(|&i| tools[i].name == tools[picked].name)
                .collect();
            steps.agree(step, candidates.clone());
        }
    }
    // A tool its agent refused for this part, where the refusal could
    // not be corrected, gives way to the tool of that name on another
    // agent, as a peer that failed a call gives way to another provider
    // ("unknown unit \"stone\"" from one converter; the other lists "st").
    let refused_here: Vec<usize> = step.refused.iter().map(|&r| steps.made()[r].tool).collect();
    let namesakes: Vec<usize> = step
        .tools
        .iter()
        .copied()
        .filter(|i| !refused_here.contains(i))
        .filter(|&i| candidates.iter().any(|&c| tools[c].name == tools[i].name))
        .collect();
    if !refused_here.is_empty() && !namesakes.is_empty() && one_choice(tools, &candidates) {
        candidates = namesakes;
    }
    let names = function_names(tools, &candidates);
    // A string takes the person's words, or a short word of the tool's
    // description that abbreviates one of them best ("mi" for "miles",
    // not "m"), or what a refusal offered for them (see `Steps`).
    let mut grounding = step.grounding.clone();
    if !grounding.texts.is_empty() {
        for &i in &candidates {
            let words = fit::own_words(&tools[i], step);
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            for symbol in steps::standing_for(&words, &fit::listed_by(&tools[i])) {
                let symbol = Literal::Text(symbol);
                if !grounding.values.contains(&symbol) {
                    grounding.values.push(symbol);
                }
            }
        }
    }
    let specs: Vec<ToolSpec> = candidates
        .iter()
        .zip(&names)
        .map(|(&i, name)| ToolSpec {
            name: name.clone(),
            description: tools[i].description.clone(),
            parameters: tools[i].schema.clone(),
        })
        .collect();
    let mut messages = vec![
        Message::system(
            "Call the one tool that does this part of the person's request, with values \
             taken from the request or from earlier results.",
        ),
        Message::user(call_prompt(steps, tools, step)),
    ];
    let mut last_error = String::new();
    for _ in 0..2 {
        let request = ChatRequest {
            messages: messages.clone(),
            tools: specs.clone(),
            tool_choice: if specs.len() == 1 {
                ToolChoice::Named(specs[0].name.clone())
            } else {
                ToolChoice::Required
            },
            parallel_tool_calls: Some(false),
            grounding: Some(grounding.clone()),
            temperature: Some(0.0),
            ..Default::default()
        };
        let completion = ask.ask(request, CALL_TOKENS, None).await?;
        let Some(call) = completion.tool_calls.first() else {
            last_error = "the answer called no tool".into();
            continue;
        };
        let Some(position) = names.iter().position(|n| *n == call.name) else {
            last_error = format!("there is no tool {:?}", excerpt(&call.name, 60));
            continue;
        };
        let arguments = match serde_json::from_str::<Value>(&call.arguments) {
            Ok(arguments @ Value::Object(_)) => arguments,
            _ => {
                last_error = "the arguments are not a JSON object".into();
                continue;
            }
        };
        // A model held to the grounding always passes; another is told
        // what was wrong, once, and a call that is wrong again is not made.
        match grounding.check(&arguments) {
            Err(why) => {
                tracing::debug!(part = %step.part, %arguments, %why, "a call off the grounding");
                tell(
                    &mut messages,
                    &completion.content,
                    call,
                    format!("Not run: {why}. Use the values of the request."),
                );
                last_error = why;
            }
            Ok(()) => {
                let tool = candidates[position];
                let mut arguments = arguments;
                align::align(&tools[tool], &step.part, &mut arguments);
                align::named_before(&tools[tool], &step.part, &mut arguments);
                align::bind(&tools[tool], &step.part, &mut arguments);
                align::left_first(&tools[tool], step, &mut arguments);
                // A list the part writes is taken whole, by the parameter
                // its word names or in the order written.
                if let Some(filled) = fit::fill_lists(&tools[tool], step, &arguments) {
                    arguments = filled;
                }
                // Where the model put the person's words in the wrong places
                // (or one word in two), the part's own words, in the order
                // written, fill the text parameters when they are as many.
                if fit::check(&tools[tool], step, &arguments).is_err()
                    && let Some(mut filled) = fit::fill(&tools[tool], step, &arguments)
                {
                    align::bind(&tools[tool], &step.part, &mut filled);
                    if fit::check(&tools[tool], step, &filled).is_ok()
                        && !steps.repeats(tool, &filled)
                    {
                        arguments = filled;
                    }
                }
                if let Err(why) = fit::check(&tools[tool], step, &arguments) {
                    tracing::debug!(part = %step.part, tool = %tools[tool].name, %arguments, %why, "a call that does not fit");
                    // A call that does not answer the part is not made,
                    // however it would turn out: the model is told why.
                    tell(
                        &mut messages,
                        &completion.content,
                        call,
                        format!("Not run: {why}."),
                    );
                    last_error = why;
                    continue;
                }
                return Ok(Chosen { tool, arguments });
            }
        }
    }
    Err(ask.unusable(format!(
        "the model did not make a usable call: {last_error}"
    )))
}

/// Adds the model's `call` (with what it wrote beside it, `content`) and
/// the node's answer to it, `told`, to `messages`: the model reads why a
/// call of its was not made before it tries again.
fn tell(messages: &mut Vec<Message>, content: &str, call: &crate::llm::ToolCall, told: String) {
    let mut assistant = Message::new(Role::Assistant, content.to_owned());
    assistant.tool_calls = vec![call.clone()];
    messages.push(assistant);
    let mut told = Message::new(Role::Tool, told);
    told.tool_call_id = Some(call.id.clone());
    messages.push(told);
}

/// The model's brief account of how to do `part` with one of `listed`
/// (in that order).
async fn account<A: Ask>(
    ask: &A,
    tools: &[Offered],
    listed: &[usize],
    part: &str,
) -> Result<String, A::Error> {
    let names: Vec<String> = listed
        .iter()
        .map(|&i| tools[i].name.replace('_', " "))
        .collect();
    let thought = ask
        .ask(
            ChatRequest {
                messages: vec![
                    Message::system(format!(
                        "Explain briefly how to do this, with one of: {}.",
                        names.join(", ")
                    )),
                    Message::user(part.to_owned()),
                ],
                temperature: Some(0.0),
                ..Default::default()
            },
            THOUGHT_TOKENS,
            None,
        )
        .await?;
    Ok(thought.content)
}

/// The tool of `listed` the model picks for `part` by their names and
/// what their descriptions say they do, asked with them in one order and
/// in the reverse: `None` unless both picks are one tool's name.
async fn picked_both_ways<A: Ask>(
    ask: &A,
    tools: &[Offered],
    listed: &[usize],
    part: &str,
) -> Result<Option<usize>, A::Error> {
    let reversed: Vec<usize> = listed.iter().rev().copied().collect();
    let first = pick_tool(ask, tools, listed, part).await?;
    tracing::debug!(%part, picked = ?first.map(|i| &tools[i].name), "the model's pick");
    let Some(first) = first else {
        return Ok(None);
    };
    let second = pick_tool(ask, tools, &reversed, part).await?;
    tracing::debug!(%part, picked = ?second.map(|i| &tools[i].name), "the model's pick, reversed");
    Ok(second
        .filter(|&second| tools[second].name == tools[first].name)
        .map(|_| first))
}

/// The tool of `listed` (in that order) the model picks for `part`, its
/// choice held to their names.
async fn pick_tool<A: Ask>(
    ask: &A,
    tools: &[Offered],
    listed: &[usize],
    part: &str,
) -> Result<Option<usize>, A::Error> {
    let names: Vec<String> = listed.iter().map(|&i| tools[i].name.clone()).collect();
    let described: Vec<String> = listed
        .iter()
        .map(|&i| {
            let first = tools[i]
                .description
                .split_terminator(['.', '\n'])
                .next()
                .unwrap_or_default();
            format!("- {}: {}", tools[i].name, excerpt(first.trim(), 160))
        })
        .collect();
    let system = format!(
        "Pick the tool that does what the person asks.\nTools:\n{}",
        described.join("\n")
    );
    let picked = one_of(
        ask,
        &system,
        part,
        ("pick", "The tool that does it.", "tool"),
        &names,
    )
    .await?;
    Ok(picked.and_then(|name| listed.iter().copied().find(|&i| tools[i].name == name)))
}

/// Whether `candidates` are one choice: one tool, or tools of one name on
/// several agents.
fn one_choice(tools: &[Offered], candidates: &[usize]) -> bool {
    candidates.first().is_some_and(|&first| {
        candidates
            .iter()
            .all(|&i| tools[i].name == tools[first].name)
    })
}

/// The call an agent's refusal corrects by itself: the last refused call
/// of the step with each word the agent named as unknown replaced by the
/// one word of its own it offered for it ("unknown unit \"gallons\";
/// known units: …, gal, …" → "gal"), or by the one of several the model
/// `picked` (see [`pick_symbols`]); `None` when a word is left with none,
/// or the call was made.
fn corrected(
    steps: &Steps,
    tools: &[Offered],
    step: &Step,
    picked: &BTreeMap<String, String>,
) -> Option<Chosen> {
    let refusal = Refusal::last_of(steps, tools, step)?;
    let made = refusal.made;
    let mut arguments = made.arguments.clone();
    let object = arguments.as_object_mut()?;
    // Each argument replaced, with the word of the request it stands for.
    let mut replaced: Vec<(String, String)> = Vec::new();
    for (argument, word, list) in refusal.words() {
        let Some(symbol) = steps::sure_symbol(word, list).or_else(|| picked.get(word).cloned())
        else {
            continue;
        };
        object.insert(argument.to_owned(), Value::String(symbol));
        replaced.push((argument.to_owned(), word.to_owned()));
    }
    let checked = fit::check_corrected(&tools[made.tool], step, &arguments, &replaced);
    if let Err(why) = &checked {
        tracing::debug!(part = %step.part, %arguments, %why, "a correction that does not fit");
    }
    let fits = checked.is_ok();
    let changed = !replaced.is_empty();
    (changed && fits && !steps.repeats(made.tool, &arguments)).then_some(Chosen {
        tool: made.tool,
        arguments,
    })
}

/// The step's last refused call, with what its agent said of it and what
/// its tool's description lists: where the words it refused are read.
struct Refusal<'s> {
    made: &'s steps::Made,
    said: String,
    /// The words the agent's error lists ("known units: mm, cm, …"), not
    /// the rest of its prose ("not known units of one kind").
    offered: String,
    listed: String,
}

impl<'s> Refusal<'s> {
    fn last_of(steps: &'s Steps, tools: &[Offered], step: &Step) -> Option<Refusal<'s>> {
        let &last = step.refused.last()?;
        let made = &steps.made()[last];
        let said = made.output.text();
        Some(Refusal {
            made,
            offered: fit::listed_words(&said),
            said,
            listed: fit::listed_by(&tools[made.tool]),
        })
    }

    /// The words of the call to replace, each with its argument and the
    /// list what stands for it is taken from (see [`refusal_lists`]).
    fn words(&self) -> impl Iterator<Item = (&'s str, &'s str, &str)> + '_ {
        self.made
            .arguments
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(argument, value)| {
                let word = value.as_str()?;
                let list = refusal_lists(word, &self.said, &self.offered, &self.listed)?;
                Some((argument.as_str(), word, list))
            })
    }
}

/// Where a refusal, `said`, lists what may stand for `word` of the refused
/// call: `None` when the word is not one to replace. A word the agent
/// quoted as the one it refused takes from the words its error lists
/// (`offered`), or from the tool's description's (`listed`) for an agent
/// whose error points elsewhere ("cannot convert 'grams' to 'kg' (see the
/// units tool)": "one" of "units of one kind" lists nothing); a word its
/// list of what it knows leaves out takes from that list (it stopped at
/// "gallons"; "liters" would be refused next, "l" is listed). One word
/// only: "nautical miles" is no "mi", though "miles" is.
fn refusal_lists<'a>(word: &str, said: &str, offered: &'a str, listed: &'a str) -> Option<&'a str> {
    if word.split_whitespace().nth(1).is_some() {
        return None;
    }
    if steps::quoted_in(said, word) {
        Some(match offered.is_empty() {
            true => listed,
            false => offered,
        })
    } else if !steps::written_in(said, word) {
        Some(offered)
    } else {
        None
    }
}

/// A word of a refused call that several of the agent's own words
/// abbreviate ("feet": `f`, `ft`), with the argument it is in.
#[derive(Debug, Clone, PartialEq)]
struct Unsure {
    argument: String,
    word: String,
    candidates: Vec<String>,
}

/// The words of the step's last refused call that the refusal leaves to
/// choose between (see [`corrected`]).
fn unsure(steps: &Steps, tools: &[Offered], step: &Step) -> Vec<Unsure> {
    let Some(refusal) = Refusal::last_of(steps, tools, step) else {
        return Vec::new();
    };
    refusal
        .words()
        .filter(|(_, word, list)| steps::sure_symbol(word, list).is_none())
        .filter_map(|(argument, word, list)| {
            let candidates = steps::abbreviating(word, list);
            (candidates.len() > 1).then(|| Unsure {
                argument: argument.to_owned(),
                word: word.to_owned(),
                candidates,
            })
        })
        .collect()
}

/// The model's choice of the abbreviation of each unsure word among those
/// the agent offered, asked with them listed in one order and in the
/// reverse: a choice is kept only where both agree (a model that takes
/// the first it reads does not pick "f" for "feet" by it).
async fn pick_symbols<A: Ask>(
    ask: &A,
    unsure: &[Unsure],
) -> Result<BTreeMap<String, String>, A::Error> {
    let mut picked = BTreeMap::new();
    for word in unsure {
        let reversed: Vec<String> = word.candidates.iter().rev().cloned().collect();
        let first = abbreviation(ask, word, &word.candidates).await?;
        let second = abbreviation(ask, word, &reversed).await?;
        tracing::debug!(word = %word.word, ?first, ?second, "the model's picks of a symbol");
        if let (Some(first), Some(second)) = (first, second)
            && first == second
        {
            picked.insert(word.word.clone(), first);
        }
    }
    Ok(picked)
}

/// What a word of `argument` is, in the argument's own name: "unit" of
/// `from_unit`.
fn argument_noun(argument: &str) -> String {
    argument
        .rsplit(|c: char| !c.is_alphanumeric())
        .find(|t| !t.is_empty())
        .unwrap_or("word")
        .to_lowercase()
}

/// The abbreviation of `word` the model writes, held to `candidates`.
async fn abbreviation<A: Ask>(
    ask: &A,
    word: &Unsure,
    candidates: &[String],
) -> Result<Option<String>, A::Error> {
    let noun = argument_noun(&word.argument);
    let described = format!("The abbreviation of the {noun}.");
    let asked = format!("Abbreviate the {noun} \"{}\".", word.word);
    one_of(
        ask,
        "Answer with the abbreviation.",
        &asked,
        ("abbreviation", &described, "abbreviation"),
        candidates,
    )
    .await
}

/// The one of `choices` the model answers `asked` with (after `system`),
/// held to them by a tool (its name, description and field) it must call.
async fn one_of<A: Ask>(
    ask: &A,
    system: &str,
    asked: &str,
    (tool, description, field): (&str, &str, &str),
    choices: &[String],
) -> Result<Option<String>, A::Error> {
    let completion = ask
        .ask(
            ChatRequest {
                messages: vec![Message::system(system), Message::user(asked.to_owned())],
                tools: vec![ToolSpec {
                    name: tool.into(),
                    description: description.into(),
                    parameters: serde_json::json!({
                        "type": "object",
                        "properties": {field: {"type": "string", "enum": choices}},
                        "required": [field],
                    }),
                }],
                tool_choice: ToolChoice::Named(tool.into()),
                temperature: Some(0.0),
                ..Default::default()
            },
            CALL_TOKENS,
            None,
        )
        .await?;
    Ok(completion
        .tool_calls
        .first()
        .and_then(|call| serde_json::from_str::<Value>(&call.arguments).ok())
        .and_then(|arguments| arguments[field].as_str().map(str::to_owned))
        .filter(|chosen| choices.contains(chosen)))
}

/// What the model reads when it writes a step's call.
fn call_prompt(steps: &Steps, tools: &[Offered], step: &Step) -> String {
    let mut prompt = format!("Request: {}\n", steps.request());
    for made in steps.made().iter().filter(|m| m.succeeded()) {
        prompt.push_str(&format!(
            "Done: {} = {}\n",
            wording::call_label(&tools[made.tool], &made.arguments),
            wording::result_text(made)
        ));
    }
    // What the agent said of this part's refused calls: the model learns
    // from it ("unknown unit \"gallons\"; known units: …, gal, l").
    for &refused in &step.refused {
        let made = &steps.made()[refused];
        prompt.push_str(&format!(
            "Refused: {} ({})\n",
            wording::call_label(&tools[made.tool], &made.arguments),
            crate::text::one_line(&made.output.text(), 400)
        ));
    }
    prompt.push_str(&format!("Now: {}", step.part));
    // The values the call may take, the one it must take first: a model
    // not held to them while writing reads them here.
    let values: Vec<String> = step
        .grounding
        .all_values()
        .map(|value| match value {
            Literal::Number(n) => number_literal(*n),
            Literal::Text(t) => format!("{:?}", excerpt(t, 200)),
            Literal::Document(d) => excerpt(&d.to_string(), 400).into_owned(),
        })
        .collect();
    if !values.is_empty() {
        prompt.push_str(&format!("\nValues: {}", values.join(", ")));
    }
    prompt
}

/// Names the model calls the `chosen` tools by: their own, or
/// `owner_name` where two share one.
fn function_names(tools: &[Offered], chosen: &[usize]) -> Vec<String> {
    chosen
        .iter()
        .map(|&i| {
            let clash = chosen
                .iter()
                .any(|&j| j != i && tools[j].name == tools[i].name);
            let name = if clash {
                format!("{}_{}", tools[i].owner, tools[i].name)
            } else {
                tools[i].name.clone()
            };
            name.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .take(64)
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What a scripted model answers: `tool_calls` if it makes any (then
    /// it stopped for them), else `content`.
    pub(super) fn scripted(content: String, tool_calls: Vec<crate::llm::ToolCall>) -> Completion {
        let stop_reason = match tool_calls.is_empty() {
            true => crate::llm::StopReason::EndTurn,
            false => crate::llm::StopReason::ToolCalls,
        };
        Completion {
            content,
            tool_calls,
            stop_reason,
            model: "test".into(),
            usage: Default::default(),
            time_to_first_token: None,
        }
    }

    /// A unit converter of `owner`, its amount named `amount`.
    fn converter(owner: &str, amount: &str, description: &str) -> Offered {
        Offered {
            effects: crate::answers::steps::Effects::ReadOnly,
            output_schema: None,
            owner: owner.into(),
            name: "convert".into(),
            description: description.into(),
            schema: json!({"type": "object", "properties": {
                amount: {"type": "number"},
                "from_unit": {"type": "string"},
                "to_unit": {"type": "string"}},
                "required": [amount, "from_unit", "to_unit"]}),
        }
    }

    /// The steps of `request` after `tools[tool]` refused `arguments` with
    /// `error`, and the step that follows.
    fn refused_once(
        tools: &[Offered],
        request: &str,
        tool: usize,
        arguments: Value,
        error: &str,
    ) -> (Steps, Step) {
        let mut steps = Steps::new(request);
        let step = steps.next(tools).unwrap();
        steps.record(
            tools,
            &step,
            tool,
            arguments,
            crate::agent::tool::ToolOutput::failure(error.to_owned()),
        );
        let step = steps.next(tools).unwrap();
        (steps, step)
    }

    #[test]
    fn a_refusal_that_names_the_word_is_corrected_from_what_the_tool_lists() {
        // The MCP units server's way: the error quotes what it refused and
        // points elsewhere; the description lists what it takes.
        let tools = [converter(
            "units",
            "value",
            "Converts a value between two units of the same kind: length (mm, cm, m, km, \
             in, ft, yd, mi, nmi), mass (mg, g, kg, t, oz, lb, st) or temperature (C, F, K).",
        )];
        let (steps, step) = refused_once(
            &tools,
            "How many kg are 2500 grams?",
            0,
            json!({"value": 2500, "from_unit": "grams", "to_unit": "kg"}),
            "Error executing tool convert: cannot convert 'grams' to 'kg': they are not \
             known units of one kind (see the units tool)",
        );
        let chosen = corrected(&steps, &tools, &step, &BTreeMap::new()).unwrap();
        assert_eq!(
            chosen.arguments,
            json!({"value": 2500, "from_unit": "g", "to_unit": "kg"})
        );
        // A symbol keeps the case the tool writes it in.
        assert_eq!(
            steps::sure_symbol("celsius", &fit::listed_words(&tools[0].description)).as_deref(),
            Some("C")
        );
    }

    #[test]
    fn prose_of_a_refusal_offers_no_words() {
        // "one" of "units of one kind" abbreviates "ounces", but the error
        // lists nothing: the description's list stands, and it has no
        // abbreviation of "ounces".
        let tools = [converter(
            "units",
            "value",
            "Converts a value between units: mass (g, kg, oz, lb).",
        )];
        let (steps, step) = refused_once(
            &tools,
            "How many ounces are 250 g?",
            0,
            json!({"value": 250, "from_unit": "g", "to_unit": "ounces"}),
            "cannot convert 'g' to 'ounces': they are not known units of one kind \
             (see the units tool)",
        );
        assert_eq!(corrected(&steps, &tools, &step, &BTreeMap::new()), None);
        assert!(unsure(&steps, &tools, &step).is_empty());
        assert!(
            !step.grounding.values.contains(&Literal::Text("one".into())),
            "{:?}",
            step.grounding
        );
    }

    /// A model that calls the tool of the first name it is offered with
    /// `arguments`, and keeps the names offered to each call it writes.
    struct Calls {
        arguments: Value,
        offered: std::sync::Mutex<Vec<Vec<String>>>,
    }

    #[async_trait::async_trait]
    impl Ask for Calls {
        type Error = String;

        async fn ask(
            &self,
            request: ChatRequest,
            _max_tokens: u32,
            _sink: DeltaSink,
        ) -> Result<Completion, String> {
            let names: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
            self.offered.lock().unwrap().push(names.clone());
            let tool_calls = names
                .first()
                .map(|name| crate::llm::ToolCall {
                    id: "call_1".into(),
                    name: name.clone(),
                    arguments: self.arguments.to_string(),
                })
                .into_iter()
                .collect();
            Ok(scripted(String::new(), tool_calls))
        }

        fn unusable(&self, why: String) -> String {
            why
        }
    }

    /// The name of the tool chosen for the first step of `request`, the
    /// model calling it with `arguments`.
    async fn chosen_name(tools: &[Offered], request: &str, arguments: Value) -> String {
        let model = Calls {
            arguments,
            offered: Default::default(),
        };
        let mut steps = Steps::new(request);
        let step = steps.next(tools).unwrap();
        let chosen = choose(&model, &mut steps, tools, &step).await.unwrap();
        tools[chosen.tool].name.clone()
    }

    #[tokio::test]
    async fn a_word_that_names_one_tool_alone_chooses_it_wherever_it_stands() {
        let text = |owner: &str, name: &str, description: &str| Offered {
            effects: crate::answers::steps::Effects::ReadOnly,
            output_schema: None,
            owner: owner.into(),
            name: name.into(),
            description: description.into(),
            schema: json!({"type": "object", "properties": {"text": {"type": "string"}},
                "required": ["text"]}),
        };
        let tools = [
            text(
                "text",
                "word_count",
                "Count the words, lines and bytes of a text.",
            ),
            text(
                "wordsmith",
                "reverse",
                "Says the words of the message in reverse order.",
            ),
            text("text", "lower", "Convert a text to lower case."),
        ];
        // "words", nearest the text, names two tools; "Lowercase" names
        // `lower` alone, and only it is offered to the model.
        let model = Calls {
            arguments: json!({"text": "LOUD TEXT HERE"}),
            offered: Default::default(),
        };
        let mut steps = Steps::new("Lowercase the words 'LOUD TEXT HERE'.");
        let step = steps.next(&tools).unwrap();
        let chosen = choose(&model, &mut steps, &tools, &step).await.unwrap();
        assert_eq!(tools[chosen.tool].name, "lower");
        assert_eq!(model.offered.lock().unwrap().concat(), ["lower"]);
        // A word nearest the value that names one agent's tools says what
        // the value is: 'monday' is a note's title, whatever "many" names.
        let mut tools = tools.to_vec();
        tools.push(text(
            "wordsmith",
            "count",
            "Says how many words the message has.",
        ));
        tools.push(Offered {
            schema: json!({"type": "object", "properties": {"title": {"type": "string",
                "description": "The note's title."}}, "required": ["title"]}),
            ..text("notes", "get", "Read the note with a title.")
        });
        tools.push(Offered {
            effects: crate::answers::steps::Effects::Changes,
            ..tools[4].clone()
        });
        tools[5].name = "delete".into();
        tools[5].description = "Delete the note with a title.".into();
        let monday = "How many words are in my note 'monday'?";
        let steps = Steps::new(monday);
        let step = steps.next(&tools).unwrap();
        assert!(steps.chosen_by_request(&tools, &step, 3));
        let title = || json!({"title": "monday"});
        assert_eq!(chosen_name(&tools, monday, title()).await, "get");
        // So where other words of the part name what the counters take
        // too ("What to ask the agent, in words"; "The text to count"):
        // the word beside 'monday', before it or after it, is "note".
        tools[0].schema = json!({"type": "object", "properties": {"text": {"type": "string",
            "description": "The text to count."}}, "required": ["text"]});
        tools[3].schema = json!({"type": "object", "properties": {"message": {"type": "string",
            "description": "What to ask the agent, in words."}}, "required": ["message"]});
        for request in [
            "How many words are in my note 'monday'?",
            "How many words are in my note called 'monday'?",
            "word count of the 'monday' note",
        ] {
            let chosen = chosen_name(&tools, request, title()).await;
            assert_eq!(chosen, "get", "{request}");
        }
        // A word beside the text that names what the counter takes keeps
        // the counter: "the words in this text: 'hello there'".
        let request = "Count the words in this text: 'hello there'";
        let chosen = chosen_name(&tools, request, json!({"text": "hello there"})).await;
        assert_eq!(chosen, "word_count");
    }

    #[tokio::test]
    async fn a_tool_that_refused_what_it_cannot_correct_gives_way_to_its_namesake() {
        let tools = [
            converter("unit-convert", "value", "Convert a value between units."),
            converter(
                "units",
                "value",
                "Converts a value: mass (g, kg, oz, lb, st).",
            ),
        ];
        let (mut steps, step) = refused_once(
            &tools,
            "How many kilograms is 14 stone?",
            0,
            json!({"value": 14, "from_unit": "stone", "to_unit": "kg"}),
            "unknown unit \"stone\"; known units: g, kg, lb",
        );
        let model = Calls {
            arguments: json!({"value": 14, "from_unit": "st", "to_unit": "kg"}),
            offered: Default::default(),
        };
        let chosen = choose(&model, &mut steps, &tools, &step).await.unwrap();
        // Only the other agent's `convert` is offered.
        assert_eq!(chosen.tool, 1);
        assert_eq!(model.offered.lock().unwrap().last().unwrap(), &["convert"]);
        // The converter that knows it does not give way.
        steps.record(
            &tools,
            &step,
            1,
            json!({"value": 14, "from_unit": "stone", "to_unit": "kg"}),
            crate::agent::tool::ToolOutput::failure("cannot convert 'stone' to 'kg'"),
        );
        let step = steps.next(&tools).unwrap();
        let chosen = choose(&model, &mut steps, &tools, &step).await.unwrap();
        assert_eq!(
            (chosen.tool, chosen.arguments),
            (1, json!({"value": 14, "from_unit": "st", "to_unit": "kg"}))
        );
    }

    /// A model that answers a tool of one choice (the abbreviation, the
    /// tool to pick) with `pick` of the choices it is offered, in the order
    /// offered; asked in words, it says `account`; it calls no other tool.
    struct Picks {
        pick: fn(&[Value]) -> Value,
        account: &'static str,
    }

    /// A model that picks by `pick` and explains nothing.
    fn picks(pick: fn(&[Value]) -> Value) -> Picks {
        Picks { pick, account: "" }
    }

    #[async_trait::async_trait]
    impl Ask for Picks {
        type Error = String;

        async fn ask(
            &self,
            request: ChatRequest,
            _max_tokens: u32,
            _sink: DeltaSink,
        ) -> Result<Completion, String> {
            let choice = request.tools.first().and_then(|tool| {
                let (field, choices) = tool.parameters["properties"].as_object()?.iter().next()?;
                let offered = choices["enum"].as_array()?;
                Some((tool, field, offered))
            });
            let (content, tool_calls) = match choice {
                None => (self.account.to_owned(), Vec::new()),
                Some((tool, field, offered)) => {
                    let call = crate::llm::ToolCall {
                        id: "call_1".into(),
                        name: tool.name.clone(),
                        arguments: json!({field: (self.pick)(offered)}).to_string(),
                    };
                    (String::new(), vec![call])
                }
            };
            Ok(scripted(content, tool_calls))
        }

        fn unusable(&self, why: String) -> String {
            why
        }
    }

    #[tokio::test]
    async fn a_word_several_symbols_abbreviate_takes_the_one_the_model_picks_both_ways() {
        let tools = [converter(
            "unit-convert",
            "amount",
            "Convert an amount between units.",
        )];
        let (steps, step) = refused_once(
            &tools,
            "Convert 6 feet to meters",
            0,
            json!({"amount": 6, "from_unit": "feet", "to_unit": "m"}),
            "unknown unit \"feet\"; known units: m, km, ft, mi, c, f",
        );
        assert_eq!(corrected(&steps, &tools, &step, &BTreeMap::new()), None);
        let unsure = unsure(&steps, &tools, &step);
        assert_eq!(unsure.len(), 1);
        assert_eq!(unsure[0].word, "feet");
        assert_eq!(unsure[0].candidates, ["f", "ft"]);
        // A model that takes whichever is listed first picks nothing.
        let first = pick_symbols(&picks(|offered| offered[0].clone()), &unsure)
            .await
            .unwrap();
        assert!(first.is_empty());
        // One that picks "ft" both ways corrects the call.
        let sure = pick_symbols(&picks(|_| json!("ft")), &unsure)
            .await
            .unwrap();
        let chosen = corrected(&steps, &tools, &step, &sure).unwrap();
        assert_eq!(
            chosen.arguments,
            json!({"amount": 6, "from_unit": "ft", "to_unit": "m"})
        );
    }

    #[tokio::test]
    async fn the_models_pick_of_a_tool_counts_when_it_holds_both_ways() {
        let tool = |name: &str, description: &str| Offered {
            effects: crate::answers::steps::Effects::Unknown,
            output_schema: None,
            owner: "stats".into(),
            name: name.into(),
            description: description.into(),
            schema: json!({"type": "object", "properties": {
                "values": {"type": "array", "items": {"type": "number"}}}}),
        };
        let tools = [
            tool(
                "summarize",
                "Count, mean, median and extremes of some numbers.",
            ),
            tool("histogram", "A text histogram of some numbers."),
        ];
        let listed = [0, 1];
        let asked = "Average 10, 20, 30 and 40.";
        // A model that takes whichever is listed first picks nothing.
        let first = picks(|offered| offered[0].clone());
        assert_eq!(
            picked_both_ways(&first, &tools, &listed, asked)
                .await
                .unwrap(),
            None
        );
        // One that picks `summarize` both ways chooses it.
        let sure = picks(|_| json!("summarize"));
        assert_eq!(
            picked_both_ways(&sure, &tools, &listed, asked)
                .await
                .unwrap(),
            Some(0)
        );
        // A name not offered is no pick.
        let lost = picks(|_| json!("mean"));
        assert_eq!(
            picked_both_ways(&lost, &tools, &listed, asked)
                .await
                .unwrap(),
            None
        );
    }

    #[tokio::test]
    async fn the_models_pick_counts_only_among_the_tools_its_accounts_named() {
        let tool = |owner: &str, name: &str, description: &str, schema: Value| Offered {
            effects: crate::answers::steps::Effects::ReadOnly,
            output_schema: None,
            owner: owner.into(),
            name: name.into(),
            description: description.into(),
            schema,
        };
        let two = json!({"type": "object", "properties": {"a": {"type": "number"},
            "b": {"type": "number"}}, "required": ["a", "b"]});
        let tools = [
            tool("calculator", "add", "Add two numbers.", two.clone()),
            tool("calculator", "multiply", "Multiply two numbers.", two),
            tool(
                "units",
                "convert",
                "Converts a value between two units: length (in, ft, yd, mi).",
                json!({"type": "object", "properties": {"value": {"type": "number"},
                    "from_unit": {"type": "string"}, "to_unit": {"type": "string"}},
                    "required": ["value", "from_unit", "to_unit"]}),
            ),
        ];
        let chosen = |asked: &'static str, model: Picks| {
            let tools = tools.clone();
            async move {
                let mut steps = Steps::new(asked);
                let step = steps.next(&tools).unwrap();
                let _ = choose(&model, &mut steps, &tools, &step).await;
                (0..tools.len())
                    .filter(|&i| steps.agreed_on(&step, i))
                    .map(|i| tools[i].name.clone())
                    .collect::<Vec<String>>()
            }
        };
        let explains = |account: &'static str| Picks {
            account,
            pick: |_| json!("add"),
        };
        // The account names two tools, the pick a third: nothing is chosen
        // (the pick alone took `add` for "What is 3 yards in feet, plus 4?").
        let two = "To convert 3 yards to feet, you multiply 3 yards by 3 feet.";
        assert!(
            chosen("What is 3 yards in feet, plus 4?", explains(two))
                .await
                .is_empty()
        );
        // An account that names no tool leaves the choice to the pick.
        let none = "You take both numbers and put them together.";
        assert_eq!(
            chosen("How much is 3 and 4 together?", explains(none)).await,
            ["add"]
        );
        // One that names two, the pick among them: the pick chooses.
        let both = "You add 3 and 4, or multiply them.";
        assert_eq!(
            chosen("How much is 3 and 4 together?", explains(both)).await,
            ["add"]
        );
    }

    #[test]
    fn tools_that_share_a_name_are_told_apart_by_their_owner() {
        let tool = |owner: &str, name: &str| Offered {
            effects: crate::answers::steps::Effects::ReadOnly,
            output_schema: None,
            owner: owner.into(),
            name: name.into(),
            description: String::new(),
            schema: json!({}),
        };
        let tools = [
            tool("calculator", "add"),
            tool("ledger", "add"),
            tool("text", "upper case"),
        ];
        assert_eq!(
            function_names(&tools, &[0, 1, 2]),
            ["calculator_add", "ledger_add", "upper_case"]
        );
        assert_eq!(function_names(&tools, &[0, 2]), ["add", "upper_case"]);
    }
}
