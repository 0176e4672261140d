//! The calls a request needs, part by part, steered by its values.
//!
//! A request is split into its parts ([`super::parts`]): "add 1200 and
//! 345, then count the words in 'the quick brown fox'" is two. Each part
//! is served by calls in turn:
//!
//! - a part that gives values (numbers, quoted texts) takes them, the
//!   earliest not used yet first, with the values written right after it,
//!   and earlier results where the part cannot be done without them ("then
//!   multiply the count by 3");
//! - a part that gives none is served when its words name a tool ("what
//!   currency does Kenya use?"), or when it carries on the part before it
//!   with other values; it takes an earlier result only where it refers to
//!   one ("then give its SHA-256");
//! - a call the agent refused is made again, with the agent's error shown
//!   to the model, at most [`MAX_RETRIES`] times a part.
//!
//! A part is done when a call for it succeeded and took every value it
//! gave. What is not done is named with the reason ([`Steps::undone`]),
//! and the request's [`Outcome`] says whether it was answered, in part or
//! not at all.
//!
//! The model makes the choices that need language: it says in a few words
//! how to do the step, and the tool its words (or the person's) name is
//! called; when they name none, it chooses among the tools itself. The
//! values are held to the step's grounding while the call is written.

use super::notation::{operations, operations_at};
use super::parts::parts;
use crate::agent::tool::ToolOutput;
use crate::llm::grounding::{Grounding, Literal, numbers_in, values_in};
use crate::store::terms::terms;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ops::Range;

/// Calls one request makes at most.
pub const MAX_CALLS: usize = 12;
/// Calls a part may make after one its agent refused, at most.
pub const MAX_RETRIES: usize = 2;
/// Values written after a step's first one that the step may also take,
/// at most (a tool of three values takes the next two).
const NEIGHBOURS: usize = 2;
/// Values after the first that a list of numbers may also take, at most
/// (the grammar writes lists of up to eight items).
const LIST_NEIGHBOURS: usize = 7;
/// A result's values offered to later steps, at most.
const RESULT_VALUES: usize = 8;
/// Words by which a part refers to what an earlier one found: then it
/// takes that result ("then give its SHA-256", "double it").
const REFERRING: [&str; 9] = [
    "it", "its", "that", "this", "result", "answer", "them", "those", "these",
];

/// A tool a step may call, as the steps see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Offered {
    /// Who owns it (an agent's name), for the record.
    pub owner: String,
    pub name: String,
    pub description: String,
    pub schema: Value,
    /// The JSON Schema of its structured results, where its agent gives
    /// one: the descriptions of their fields say what each answers.
    pub output_schema: Option<Value>,
    /// What its agent says calling it does (see [`Steps::may_run`]).
    pub effects: Effects,
}

/// What calling a tool does, as its agent's MCP annotations say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effects {
    /// It changes nothing (`readOnlyHint: true`).
    ReadOnly,
    /// Its agent does not say (no hints: a plain MCP server, an A2A
    /// agent's skill).
    Unknown,
    /// It changes things (`readOnlyHint: false`, or `destructiveHint:
    /// true`): a note's `put` and `delete`.
    Changes,
}

impl Effects {
    /// What the annotations of the tool called `name` say; where they say
    /// nothing, what its name says (see [`Effects::named`]).
    pub fn of(name: &str, annotations: &crate::agent::tool::ToolAnnotations) -> Effects {
        match (annotations.read_only_hint, annotations.destructive_hint) {
            (Some(true), _) => Effects::ReadOnly,
            (None, None) => Effects::named(name),
            _ => Effects::Changes,
        }
    }

    /// What a tool that carries no annotations (a client's over `/v1`, a
    /// plain MCP server's, an A2A skill) does, as far as its name says: a
    /// name that destroys (`delete_note`, `cancelBooking`) changes things,
    /// however the model came to choose it; any other, unknown. The model's
    /// accounts agreed on `delete` for "what does the note 'groceries'
    /// say?" and for "write a note called 'plumber'".
    pub fn named(name: &str) -> Effects {
        match name_destroys(name) {
            true => Effects::Changes,
            false => Effects::Unknown,
        }
    }
}

/// Words that, in a tool's name, say that calling it destroys something.
const DESTROYING: [&str; 14] = [
    "delete",
    "remove",
    "erase",
    "destroy",
    "drop",
    "purge",
    "wipe",
    "clear",
    "cancel",
    "truncate",
    "revoke",
    "kill",
    "terminate",
    "uninstall",
];

/// Whether a tool's name says that calling it destroys something.
fn name_destroys(name: &str) -> bool {
    name_words(name).any(|word| DESTROYING.contains(&word.as_str()))
}

/// Whether a term of the person's (stemmed, as [`terms`] gives it) is a
/// word that destroys: "remove my note" and "drop the monday note" ask for
/// what a tool whose name destroys does, whichever of those words its
/// name uses.
fn destroying(term: &str) -> bool {
    DESTROYING
        .iter()
        .any(|word| terms(word).next().is_some_and(|t| t == term))
}

/// The words of a tool's name, lower case: `delete_note`, `deleteNote`,
/// `delete-note` and `DeleteNote` are "delete" and "note".
fn name_words(name: &str) -> impl Iterator<Item = String> + '_ {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if (!c.is_alphanumeric() || (c.is_uppercase() && previous_lower)) && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
        previous_lower = c.is_lowercase();
    }
    if !word.is_empty() {
        words.push(word);
    }
    words.into_iter()
}

impl Offered {
    /// The tool `tool` of the agent `owner`.
    pub fn of(owner: &str, tool: &crate::agent::tool::ToolSpec) -> Offered {
        Offered {
            owner: owner.to_owned(),
            name: tool.name.clone(),
            description: tool.description.clone(),
            schema: tool.input_schema.clone(),
            output_schema: tool.output_schema.clone(),
            effects: Effects::of(&tool.name, &tool.annotations),
        }
    }

    /// The terms of its name and of the first clause of its description:
    /// what it does ("Delete the note with a title", not "says whether it
    /// existed").
    fn doing(&self) -> Vec<String> {
        let description = self.description.trim_start();
        let first = description
            .find(['.', ';', ':', '\n'])
            .map_or(description, |end| &description[..end]);
        terms(&format!("{} {first}", self.name))
            .filter(|t| !is_number(t))
            .collect()
    }

    /// Whether the person's `term` names it: a term of its name or
    /// description, or a word that destroys where its name destroys.
    fn named_by_term(&self, term: &str, own: &[String]) -> bool {
        own.iter().any(|t| same_word(term, t)) || (destroying(term) && name_destroys(&self.name))
    }

    /// The terms of its name and description.
    fn terms(&self) -> Vec<String> {
        terms(&super::fit::without_examples(&format!(
            "{} {}",
            self.name, self.description
        )))
        .filter(|t| !is_number(t))
        .collect()
    }
}

/// A value the person wrote, in which part, and whether a call that
/// succeeded has used it.
#[derive(Debug, Clone)]
struct Given {
    range: Range<usize>,
    value: Literal,
    part: usize,
    used: bool,
}

/// A part of the request and whether it was given up.
#[derive(Debug, Clone)]
struct Part {
    range: Range<usize>,
    /// Why no more calls are made for it, when it was given up.
    gave_up: Option<String>,
    /// The tools the model's accounts of how to do it agreed on, asked
    /// with the tools listed in two orders (see [`Steps::agree`]).
    agreed: Vec<usize>,
}

/// A call a step made and what it returned.
#[derive(Debug, Clone)]
pub struct Made {
    /// Index into the offered tools.
    pub tool: usize,
    pub arguments: Value,
    pub output: ToolOutput,
    /// The part of the request it was made for.
    pub part: usize,
    /// The values of the result later steps may take, and whether one has.
    values: Vec<Literal>,
    /// The result's fields the request names ("count the words": `words`).
    named: Vec<String>,
    used: bool,
    /// Whether its tool was chosen for certain: by the person's words (a
    /// word of the part names it, or it was the only tool that could take
    /// the part's values), or by the model's accounts of the part agreeing
    /// whichever order the tools were listed in. A tool the model chose
    /// once, where the order of the list may have chosen it ("what is 81
    /// minus 9": `add`, the first listed), answers nothing for certain,
    /// whatever it returns.
    pub chosen: bool,
}

impl Made {
    /// The names of the result's fields the request asked about.
    pub fn named_fields(&self) -> &[String] {
        &self.named
    }

    /// The values of the result a person asked about: those under keys
    /// the request names ("count the words" → `words`), else all of them
    /// but those that only echo what the call was given.
    pub fn values(&self) -> &[Literal] {
        &self.values
    }

    pub fn succeeded(&self) -> bool {
        !self.output.is_error
    }

    /// Whether it took `value` as one of its arguments.
    fn took(&self, value: &Literal) -> bool {
        let mut taken: Vec<&Value> = Vec::new();
        leaves(&self.arguments, &mut taken);
        taken.iter().any(|v| value.matches(v))
    }
}

/// What the next step is for.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The values its call takes.
    pub grounding: Grounding,
    /// The part of the request it serves, in the person's words.
    pub part: String,
    /// Which part that is.
    pub index: usize,
    /// Where in `part` its first value is written (the words nearest it
    /// say most about what to do with it).
    pub at: usize,
    /// The tools that may make it (indices into the offered tools).
    pub tools: Vec<usize>,
    /// The calls made for this part that their agents refused, in order
    /// (indices into [`Steps::made`]): the model reads what they said.
    pub refused: Vec<usize>,
    /// The lists of numbers the part writes ("4, 8 and 12"), where a tool
    /// on offer takes a list: each is one value (see [`written_lists`]).
    pub lists: Vec<WrittenList>,
}

/// A list of numbers a part writes, and the word written right before it
/// ("y" of "y = 4, 7, 10"), which may name the parameter it is for.
#[derive(Debug, Clone, PartialEq)]
pub struct WrittenList {
    pub values: Vec<f64>,
    pub label: Option<String>,
}

impl WrittenList {
    pub fn contains(&self, n: &f64) -> bool {
        self.values.contains(n)
    }
}

/// A part of the request that was not done, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Undone {
    pub part: String,
    pub why: String,
}

/// How far a request was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every part was done by calls that succeeded.
    Answered,
    /// Some parts were done, others not.
    Partial,
    /// No part was done.
    NotAnswered,
}

/// The steps of one request.
#[derive(Debug, Clone)]
pub struct Steps {
    request: String,
    parts: Vec<Part>,
    given: Vec<Given>,
    made: Vec<Made>,
    /// The request's words that name what to do (not its values).
    words: Vec<String>,
    /// Results of earlier requests of the same conversation, latest
    /// first: what "it" in "now double it" is.
    earlier: Vec<Literal>,
}

impl Steps {
    pub fn new(request: &str) -> Steps {
        // "254mm" is a number and its unit.
        let request = &*crate::llm::grounding::spaced_units(request);
        let ranges = parts(request);
        let part_of = |at: usize| {
            ranges
                .iter()
                .position(|r| r.start <= at && at < r.end.max(r.start + 1))
        };
        let given: Vec<Given> = values_in(request)
            .into_iter()
            .filter_map(|(range, value)| {
                Some(Given {
                    part: part_of(range.start)?,
                    range,
                    value,
                    used: false,
                })
            })
            .collect();
        let mut value_words: Vec<String> = Vec::new();
        for g in &given {
            value_words.extend(terms(&request[g.range.clone()]));
        }
        let words = terms(request)
            .filter(|t| !is_number(t) && !value_words.contains(t))
            .collect();
        // A number beyond what a float holds (`10^400`) is no argument any
        // tool takes: its part is given up at once, saying so, rather than
        // left to a model that would write it as something else.
        let beyond = |range: &Range<usize>| {
            given
                .iter()
                .find(|g| {
                    range.contains(&g.range.start)
                        && matches!(g.value, Literal::Number(n) if !n.is_finite())
                })
                .map(|g| {
                    format!(
                        "{} is beyond the largest number a tool takes (about 1.8e308)",
                        &request[g.range.clone()]
                    )
                })
        };
        Steps {
            request: request.to_owned(),
            parts: ranges
                .into_iter()
                .map(|range| Part {
                    agreed: Vec::new(),
                    gave_up: beyond(&range),
                    range,
                })
                .collect(),
            given,
            made: Vec::new(),
            words,
            earlier: Vec::new(),
        }
    }

    /// The steps of `request`, which follows requests whose calls
    /// returned `earlier` (latest first): a part that refers to what was
    /// found, or cannot be done without it, takes it.
    pub fn after(request: &str, earlier: Vec<Literal>) -> Steps {
        let mut steps = Steps::new(request);
        steps.earlier = earlier;
        steps.earlier.truncate(RESULT_VALUES);
        steps
    }

    /// The values of this request's results, latest first, then those it
    /// was given from earlier requests: what a request after it may take.
    pub fn results_for_later(&self) -> Vec<Literal> {
        let mut values: Vec<Literal> = self
            .made
            .iter()
            .rev()
            .flat_map(|m| m.values.iter().cloned())
            .collect();
        values.extend(self.earlier.iter().cloned());
        values.truncate(RESULT_VALUES);
        values
    }

    pub fn request(&self) -> &str {
        &self.request
    }

    /// The calls made so far.
    pub fn made(&self) -> &[Made] {
        &self.made
    }

    /// The text of part `index`.
    pub fn part_text(&self, index: usize) -> &str {
        self.parts
            .get(index)
            .map_or("", |p| &self.request[p.range.clone()])
    }

    /// The lists of numbers part `index` writes that no call took yet
    /// (what a later call of the part works on is their result, not
    /// them): three numbers or more in a
    /// row with nothing but commas, "and" or "&" between them ("4, 8 and
    /// 12", "4 8 12"), each as its values, with the word before it. An
    /// "and" joins a list's last number only: where commas go on after it,
    /// it parts two lists ("between 1, 2, 3 and 6, 4, 2").
    fn written_lists(&self, index: usize) -> Vec<WrittenList> {
        let numbers: Vec<(&Range<usize>, f64)> = self
            .given
            .iter()
            .filter(|g| g.part == index && !g.used)
            .filter_map(|g| match g.value {
                Literal::Number(n) => Some((&g.range, n)),
                _ => None,
            })
            .collect();
        // How the number at `b` follows the one at `a`: not in one list
        // (`None`), or in one, by an "and" (`Some(true)`) or not.
        let joined = |a: &Range<usize>, b: &Range<usize>| -> Option<bool> {
            let between = self.request.get(a.end..b.start)?;
            let mut by_and = false;
            for word in between.split(|c: char| c.is_whitespace() || c == ',' || c == '&') {
                match word {
                    "" => {}
                    w if w.eq_ignore_ascii_case("and") => by_and = true,
                    _ => return None,
                }
            }
            Some(by_and)
        };
        let label = |at: usize| -> Option<String> {
            let before = self.request.get(..numbers[at].0.start)?;
            before
                .split(|c: char| !c.is_alphanumeric())
                .rfind(|w| !w.is_empty())
                .filter(|w| !is_number(w))
                .map(str::to_owned)
        };
        let mut lists: Vec<WrittenList> = Vec::new();
        // The run of numbers in one list: where it starts, and where the
        // number after its "and" is.
        let mut start = 0;
        let mut after_and: Option<usize> = None;
        let close = |from: usize, to: usize, lists: &mut Vec<WrittenList>| {
            if to - from >= 3 {
                lists.push(WrittenList {
                    values: numbers[from..to].iter().map(|(_, n)| *n).collect(),
                    label: label(from),
                });
            }
        };
        for at in 1..=numbers.len() {
            let join = numbers
                .get(at)
                .and_then(|(range, _)| joined(numbers[at - 1].0, range));
            match join {
                None => {
                    close(start, at, &mut lists);
                    start = at;
                    after_and = None;
                }
                Some(true) => after_and = Some(at),
                Some(false) => {
                    if let Some(second) = after_and.take() {
                        close(start, second, &mut lists);
                        start = second;
                    }
                }
            }
        }
        lists
    }

    /// The terms of part `index` outside the values it writes: what it
    /// says to do, not what it says it of ("text" of 'LOUD TEXT HERE').
    pub(super) fn said_terms(&self, index: usize) -> Vec<String> {
        let Some(part) = self.parts.get(index) else {
            return Vec::new();
        };
        let mut said = self.request[part.range.clone()].to_owned();
        for given in self.given.iter().filter(|g| g.part == index) {
            let (start, end) = (
                given.range.start - part.range.start,
                given.range.end - part.range.start,
            );
            if end <= said.len() {
                said.replace_range(start..end, &" ".repeat(end - start));
            }
        }
        let mut words: Vec<String> = terms(&said).filter(|w| !is_number(w)).collect();
        words.extend(operations(self.part_text(index)));
        words.sort();
        words.dedup();
        words
    }

    /// The terms written right beside the texts part `index` gives, which
    /// say what each text is: the word before it (past an article, a
    /// possessive, a word that gives a name, and a colon) or the word
    /// right after it — "note" of "my note 'monday'", of "my note called
    /// 'monday'" and of "the 'monday' note".
    pub(super) fn words_beside_texts(&self, index: usize) -> Vec<String> {
        const PASSED_OVER: &[&str] = &[
            "a", "an", "the", "my", "your", "our", "his", "her", "their", "its", "this", "that",
            "called", "named", "titled", "entitled",
        ];
        let Some(part) = self.parts.get(index) else {
            return Vec::new();
        };
        let term_of = |word: &str| {
            word.chars()
                .all(char::is_alphanumeric)
                .then(|| terms(word).next())
                .flatten()
        };
        let mut words = Vec::new();
        let texts = self
            .given
            .iter()
            .filter(|g| g.part == index && matches!(g.value, Literal::Text(_)));
        for given in texts {
            let before = &self.request[part.range.start..given.range.start];
            let before = before.trim_end();
            let before = before.strip_suffix(':').unwrap_or(before);
            let word = before
                .split_whitespace()
                .rev()
                .find(|w| !PASSED_OVER.iter().any(|d| d.eq_ignore_ascii_case(w)));
            words.extend(word.and_then(term_of));
            let after = &self.request[given.range.end..part.range.end];
            if after.starts_with(char::is_whitespace) {
                let word = after.split_whitespace().next().unwrap_or("");
                let word = word.trim_end_matches(|c: char| c.is_ascii_punctuation());
                words.extend(term_of(word));
            }
        }
        words.sort();
        words.dedup();
        words
    }

    /// Whether part `index` quotes text: then a string is one of its
    /// quotes, not any run of its words.
    fn quotes(&self, index: usize) -> bool {
        self.given
            .iter()
            .any(|g| g.part == index && matches!(g.value, Literal::Text(_)))
    }

    /// Whether part `index` was done: a call for it succeeded and every
    /// value it gave was used.
    pub fn done(&self, index: usize) -> bool {
        let called = self
            .made
            .iter()
            .any(|m| m.part == index && m.succeeded() && m.chosen);
        (called || self.asks_a_field_found(index))
            && !self.given.iter().any(|g| g.part == index && !g.used)
    }

    /// Whether part `index`, which writes no value, asks for a field of
    /// what an earlier part found ("… and give me its slope": the line
    /// `regress` fitted has one): that result answers it, no call needed.
    fn asks_a_field_found(&self, index: usize) -> bool {
        if index == 0 || !self.refers_back(index) || self.given.iter().any(|g| g.part == index) {
            return false;
        }
        let words: Vec<String> = terms(self.part_text(index)).collect();
        self.made.iter().any(|m| {
            m.part < index
                && m.succeeded()
                && m.chosen
                && !named_fields(&m.output, &words, None).is_empty()
        })
    }

    /// Whether the person's words of `step` choose `tool`: it is the only
    /// tool that can take the part's values, or a word of the part names
    /// it and no other that could, and no word names another alone
    /// ("lowercase the words" names `lower` by one word and `word_count`
    /// by another: the words do not choose). Tools of one name on two
    /// agents (two converters' `convert`) are one choice: a word naming
    /// both names either.
    pub fn chosen_by_request(&self, tools: &[Offered], step: &Step, tool: usize) -> bool {
        self.at_hand(tools, step) == [tool]
            || self.named_alone(tools, step, tool, Offered::terms)
            || self.named_most(tools, step, tool)
    }

    /// The tools of `step` that may make its call: a tool that changes
    /// things runs only where a word of the part names what it does (see
    /// [`Steps::may_run`]), and one no word names is not at hand, which may
    /// leave another the only one that takes the part's values ("what does
    /// the note 'groceries' say?": `get`, not `delete`). It still counts
    /// against another tool a word names: "note" names `get` and `delete`,
    /// and chooses neither.
    pub fn at_hand(&self, tools: &[Offered], step: &Step) -> Vec<usize> {
        step.tools
            .iter()
            .copied()
            .filter(|&i| {
                tools[i].effects != Effects::Changes
                    || self.named_alone(tools, step, i, Offered::doing)
            })
            .collect()
    }

    /// Whether two of the part's words at least name `tool`, and every
    /// word that names another candidate names it too: "count the words"
    /// names word_count and a word counter by both words, a word reverser
    /// by one of them. Tools named by the same words are all chosen: by
    /// two words, they do the same thing. "The SHA-256 of 'abc' in upper
    /// case" chooses nothing: "upper case" names `upper`, "SHA" `sha256`.
    fn named_most(&self, tools: &[Offered], step: &Step, tool: usize) -> bool {
        let words = self.said_terms(step.index);
        let naming = |i: usize| -> Vec<&String> {
            let named = tools[i].terms();
            words
                .iter()
                .filter(|w| named.iter().any(|t| same_word(w, t)))
                .collect()
        };
        let mine = naming(tool);
        mine.len() >= 2
            && step
                .tools
                .iter()
                .all(|&other| naming(other).iter().all(|w| mine.contains(w)))
    }

    /// Whether a word of `step`'s part names `tool` (or tools of its name)
    /// and no other that could serve it, by the words `terms_of` gives.
    fn named_alone(
        &self,
        tools: &[Offered],
        step: &Step,
        tool: usize,
        terms_of: fn(&Offered) -> Vec<String>,
    ) -> bool {
        let candidates: Vec<usize> = if step.tools.contains(&tool) {
            step.tools.clone()
        } else {
            let mut all = step.tools.clone();
            all.push(tool);
            all
        };
        // For each word of what is left of the part, the candidates it
        // names: a call after an earlier one of the part is named by the
        // words after what that one took ("times" of "2 plus 3, times 4",
        // not "plus" again).
        let part = match step.part.is_empty() {
            true => self.part_text(step.index),
            false => step.part.as_str(),
        };
        // A word that names a tool an earlier part called, one that cannot
        // serve this part, speaks of what that call found: "the count" of
        // "then add 4 to the count" is the word counter's, and names no
        // statistics tool that counts too.
        let called_before: Vec<usize> = self
            .made
            .iter()
            .filter(|m| m.part < step.index && m.succeeded() && !candidates.contains(&m.tool))
            .map(|m| m.tool)
            .collect();
        let said: Vec<String> = terms(part).filter(|w| !is_number(w)).collect();
        let earlier = naming_by_word(tools, &called_before, &said, Offered::terms);
        let words: Vec<String> = said
            .into_iter()
            .zip(earlier)
            .filter(|(_, earlier)| earlier.is_empty())
            .map(|(word, _)| word)
            .chain(operations(part))
            .collect();
        let mut naming = naming_by_word(tools, &candidates, &words, terms_of);
        // A common word that is a tool's very name names it ("Get the
        // note 'monday'": `get`).
        for word in part
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty() && terms(w).next().is_none())
        {
            let exact: Vec<usize> = candidates
                .iter()
                .copied()
                .filter(|&i| tools[i].name.eq_ignore_ascii_case(word))
                .collect();
            if !exact.is_empty() {
                naming.push(exact);
            }
        }
        let name = |i: usize| tools[i].name.to_lowercase();
        let alone = |i: usize| {
            naming
                .iter()
                .any(|n| n.contains(&i) && n.iter().all(|&j| name(j) == name(i)))
        };
        alone(tool)
            && !candidates
                .iter()
                .any(|&other| name(other) != name(tool) && alone(other))
    }

    /// The calls of part `index` its agents refused since the last that
    /// succeeded.
    fn refused_in_a_row(&self, index: usize) -> Vec<usize> {
        let mut refused: Vec<usize> = self
            .made
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, m)| m.part == index)
            .take_while(|(_, m)| !m.succeeded())
            .map(|(i, _)| i)
            .collect();
        refused.reverse();
        refused
    }

    /// Whether no more calls are made for part `index`.
    fn settled(&self, index: usize) -> bool {
        self.parts[index].gave_up.is_some()
            || self.done(index)
            || self.refused_in_a_row(index).len() > MAX_RETRIES
    }

    /// Gives up part `index`: no more calls are made for it, and `why` is
    /// said of it.
    pub fn give_up(&mut self, index: usize, why: String) {
        if let Some(part) = self.parts.get_mut(index)
            && part.gave_up.is_none()
        {
            part.gave_up = Some(why);
        }
    }

    /// The next step, given the tools on offer: for the first part not
    /// settled that a tool can serve. `None` when every part is settled or
    /// no tool on offer can serve what is left.
    pub fn next(&self, tools: &[Offered]) -> Option<Step> {
        if self.made.len() >= MAX_CALLS {
            return None;
        }
        (0..self.parts.len())
            .filter(|&index| !self.settled(index))
            .find_map(|index| self.step_for(index, tools))
    }

    /// The first part not settled that no tool on offer can serve: what to
    /// look for more agents for.
    pub fn stalled(&self, tools: &[Offered]) -> Option<String> {
        if self.made.len() >= MAX_CALLS {
            return None;
        }
        (0..self.parts.len())
            .find(|&index| !self.settled(index) && self.step_for(index, tools).is_none())
            .map(|index| self.part_text(index).to_owned())
    }

    /// The results of earlier calls no call has taken yet, latest first.
    fn unused_results(&self) -> Vec<Literal> {
        self.made
            .iter()
            .rev()
            .filter(|m| !m.used && m.succeeded())
            .flat_map(|m| m.values.iter().take(RESULT_VALUES).cloned())
            .chain(self.earlier.iter().cloned())
            .collect()
    }

    /// The values the successful calls of parts before `index` took,
    /// latest first: what they were about.
    fn taken_before(&self, index: usize) -> Vec<Literal> {
        let mut values: Vec<Literal> = Vec::new();
        for made in self
            .made
            .iter()
            .rev()
            .filter(|m| m.part < index && m.succeeded())
        {
            fields(&made.arguments, None, &mut |_, value| {
                if !values.contains(&value) {
                    values.push(value);
                }
            });
        }
        values
    }

    /// Whether part `index` refers to what was found before ("it", "the
    /// result").
    fn refers_back(&self, index: usize) -> bool {
        self.part_text(index)
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| REFERRING.contains(&w.to_lowercase().as_str()))
    }

    /// Where in part `index` what its successful calls took was last
    /// written: a later call of the part reads what follows ("convert 10
    /// km to mi and 20 c to f": the second call reads "and 20 c to f").
    fn read_up_to(&self, index: usize) -> usize {
        let part = self.part_text(index).to_lowercase();
        let start = self.parts[index].range.start;
        let mut end = 0;
        for given in self.given.iter().filter(|g| g.part == index && g.used) {
            end = end.max(given.range.end - start);
        }
        for made in self
            .made
            .iter()
            .filter(|m| m.part == index && m.succeeded())
        {
            let mut taken: Vec<&Value> = Vec::new();
            leaves(&made.arguments, &mut taken);
            for text in taken.iter().filter_map(|v| v.as_str()) {
                let text = text.to_lowercase();
                if let Some((at, _)) = part
                    .match_indices(&text)
                    .find(|(at, _)| super::align::whole_word_at(&part, *at, text.len()))
                {
                    end = end.max(at + text.len());
                }
            }
        }
        end.min(part.len())
    }

    /// The step that serves part `index` next, if a tool can take it.
    fn step_for(&self, index: usize, tools: &[Offered]) -> Option<Step> {
        let offered = tools;
        let whole = self.part_text(index);
        let start = self.parts[index].range.start;
        // What is left of the part to read: all of it, or after what an
        // earlier call of it took.
        let mut read_from = self.read_up_to(index);
        while !whole.is_char_boundary(read_from) {
            read_from -= 1;
        }
        let part = &whole[read_from..];
        let start = start + read_from;
        // A string takes a run of the part's own words, not of a
        // document it writes.
        let texts = if self.quotes(index) {
            Vec::new()
        } else {
            vec![crate::llm::grounding::without_documents(part.trim())]
        };
        let unused: Vec<&Given> = self
            .given
            .iter()
            .filter(|g| g.part == index && !g.used)
            .collect();
        let refused = self.refused_in_a_row(index);
        let (grounding, at, candidates) = match unused.split_first() {
            Some((first, rest)) => {
                // As many values as the largest call takes, from the first;
                // a list of numbers takes all the part's (as many as a list
                // is written with).
                let slots = tools
                    .iter()
                    .map(|t| crate::llm::grounding::slot_kinds(&t.schema).len())
                    .max()
                    .unwrap_or(1);
                let lists = tools
                    .iter()
                    .any(|t| crate::llm::grounding::number_lists(&t.schema) > 0);
                let neighbours = if lists {
                    rest.len().min(LIST_NEIGHBOURS)
                } else {
                    rest.len().min(slots.saturating_sub(1)).min(NEIGHBOURS)
                };
                let mut grounding = Grounding {
                    required: Some(first.value.clone()),
                    values: rest[..neighbours].iter().map(|g| g.value.clone()).collect(),
                    texts: texts.clone(),
                };
                // Earlier results fill what the part's own values cannot,
                // or what it refers to. What they can fill is judged by the
                // tools the part's words name, where some do: "add 4 to
                // the count" names `add`, which one number cannot fill,
                // though a converter's `convert(4, …)` could.
                let named = self.named_by_words(index, tools);
                let judged = match named.is_empty() {
                    true => (0..tools.len()).collect(),
                    false => named,
                };
                let fillable = judged
                    .iter()
                    .any(|&i| crate::llm::grounding::can_fill(&tools[i].schema, &grounding));
                if !fillable || self.refers_back(index) {
                    grounding.values.extend(self.unused_results());
                }
                // An operator that starts what is left of the part ("…,
                // minus 5") takes what came before as its left operand:
                // the earlier result first (see `fit::left_operand`).
                if super::notation::leading_operation(part).is_some()
                    && let Some(result) = self.unused_results().into_iter().next()
                {
                    grounding.values.retain(|v| *v != result);
                    if let Some(own) = grounding.required.replace(result) {
                        grounding.values.insert(0, own);
                    }
                }
                (
                    grounding,
                    first.range.start.saturating_sub(start),
                    (0..tools.len()).collect::<Vec<usize>>(),
                )
            }
            None => {
                if self.made.iter().any(|m| m.part == index && m.succeeded()) {
                    return None;
                }
                // No values: the tools its words name, or the one the part
                // before it used, whose work it carries on when it only
                // names another thing to do it for ("the capital of Kenya,
                // and of Peru"), not when it asks something of its own
                // ("and the population of Kenya").
                let mut named = self.named_by_words(index, tools);
                if named.is_empty()
                    && self.only_names(index)
                    && let Some(before) = index.checked_sub(1)
                    && let Some(call) = self
                        .made
                        .iter()
                        .rev()
                        .find(|m| m.part == before && m.succeeded())
                {
                    named.push(call.tool);
                }
                if named.is_empty() {
                    return None;
                }
                let mut results = if self.refers_back(index) {
                    self.unused_results()
                } else {
                    Vec::new()
                };
                // A part whose every word names the tool ("peru: capital
                // and currency") asks it of what the part before was about.
                let carries_on = results.is_empty() && self.only_naming(index, tools, &named);
                if carries_on {
                    results = self.taken_before(index);
                }
                // "Its" may be what an earlier call was about rather than
                // what it found ("the capital of Peru and its currency":
                // the almanac refused currency("Lima")): once the agent
                // refused each result, the values the earlier calls took
                // stand in for them.
                if !refused.is_empty()
                    && !results.is_empty()
                    && results
                        .iter()
                        .all(|r| refused.iter().any(|&k| self.made[k].took(r)))
                {
                    results = self.taken_before(index);
                }
                let mut results = results.into_iter();
                let grounding = Grounding {
                    required: results.next(),
                    values: results.collect(),
                    // Its words name the tool: no value of it is among them.
                    texts: if carries_on { Vec::new() } else { texts },
                };
                (grounding, 0, named)
            }
        };
        let mut grounding = grounding;
        // After a refusal, the agent's words may name what it takes ("known
        // units: …, gal, l"): a short word of them that stands for a word
        // the refused call took ("gallons") is a value the next may take.
        for &r in &refused {
            let made = &self.made[r];
            let mut taken: Vec<&Value> = Vec::new();
            leaves(&made.arguments, &mut taken);
            let said = made.output.text();
            let words: Vec<&str> = taken
                .iter()
                .filter_map(|v| v.as_str())
                .filter(|w| quoted_in(&said, w))
                .collect();
            for symbol in standing_for(&words, &super::fit::listed_words(&said)) {
                let symbol = Literal::Text(symbol);
                if !grounding.values.contains(&symbol) {
                    grounding.values.push(symbol);
                }
            }
        }
        let tools: Vec<usize> = candidates
            .into_iter()
            .filter(|&i| crate::llm::grounding::can_fill(&tools[i].schema, &grounding))
            // A part that writes a document asks about it: only a tool that
            // takes a document can answer it (not a note titled by its path).
            .filter(|&i| {
                !grounding
                    .all_values()
                    .any(|v| matches!(v, Literal::Document(_)))
                    || crate::llm::grounding::slot_kinds(&tools[i].schema)
                        .contains(&crate::llm::grounding::ValueKind::Document)
            })
            .collect();
        if tools.is_empty() {
            return None;
        }
        // Where a tool takes a list of numbers, a list the part writes is
        // one value: not split between calls, nor joined by another number;
        // and the part asks about the list, so only such tools serve it
        // (`add` would take two of its numbers and leave the rest).
        let taking_lists: Vec<usize> = tools
            .iter()
            .copied()
            .filter(|&i| crate::llm::grounding::number_lists(&offered[i].schema) > 0)
            .collect();
        let lists = match taking_lists.is_empty() {
            true => Vec::new(),
            false => self.written_lists(index),
        };
        let tools = match lists.is_empty() {
            true => tools,
            false => taking_lists,
        };
        let step = Step {
            grounding,
            part: part.to_owned(),
            index,
            at,
            tools,
            refused,
            lists,
        };
        // Only tools that change things and that no word names: none is
        // at hand.
        (!self.at_hand(offered, &step).is_empty()).then_some(step)
    }

    /// Whether part `index` asks nothing of its own: every word of it that
    /// is not a common one is a name, capitalised as "Peru" is (its first
    /// word only when it is the only one: a sentence starts capitalised).
    fn only_names(&self, index: usize) -> bool {
        let words: Vec<&str> = self
            .part_text(index)
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        let content: Vec<(usize, &str)> = words
            .iter()
            .enumerate()
            .filter(|(_, w)| terms(w).next().is_some())
            .map(|(at, w)| (at, *w))
            .collect();
        let capitalised = |w: &str| w.chars().next().is_some_and(char::is_uppercase);
        !content.is_empty()
            && content
                .iter()
                .all(|(at, w)| capitalised(w) && (*at > 0 || content.len() == 1))
    }

    /// Whether every word of part `index` names one of `named` (its words
    /// ask for what those tools do, and give nothing to do it with), and a
    /// part before it exists to say what of.
    fn only_naming(&self, index: usize, tools: &[Offered], named: &[usize]) -> bool {
        let words: Vec<String> = terms(self.part_text(index)).collect();
        index > 0
            && !words.is_empty()
            && words.iter().all(|w| {
                named
                    .iter()
                    .any(|&i| tools[i].named_by_term(w, &tools[i].terms()))
            })
    }

    /// The tools not called for part `index` whose name or description
    /// shares a word with the part's words.
    fn named_by_words(&self, index: usize, tools: &[Offered]) -> Vec<usize> {
        let words: Vec<String> = terms(self.part_text(index))
            .filter(|w| self.words.contains(w))
            .collect();
        named_by_any(tools, 0..tools.len(), &words)
    }

    /// The tools at hand for `step` (see [`Steps::at_hand`]) that words
    /// name: the person's words of the step's part, nearest its value
    /// first, then `thought` (the model's account of how to do it). Each
    /// word that names some of the remaining tools but not all narrows the
    /// choice; a word that names only tools earlier steps called says what
    /// those did, and is passed over unless no other word names a tool.
    /// The tools left, which may be all.
    pub fn named_by(&self, tools: &[Offered], step: &Step, thought: &str) -> Vec<usize> {
        let called: Vec<usize> = self
            .made
            .iter()
            .filter(|m| m.part != step.index)
            .map(|m| m.tool)
            .collect();
        let mut words: Vec<(usize, String)> = Vec::new();
        let mut offset: usize = 0;
        for piece in step.part.split_inclusive(|c: char| !c.is_alphanumeric()) {
            for term in terms(piece) {
                words.push((offset.abs_diff(step.at), term));
            }
            offset += piece.len();
        }
        for (at, term) in operations_at(&step.part) {
            words.push((at.abs_diff(step.at), term));
        }
        words.sort_by_key(|(distance, _)| *distance);
        let words: Vec<String> = words
            .into_iter()
            .map(|(_, w)| w)
            .chain(naming_terms(thought))
            .filter(|w| !is_number(w))
            .collect();
        // First without the words that name only called tools ("multiply
        // the count": `count` says what word_count did), or a called tool
        // that cannot serve this part (then "count" speaks of the word
        // counter's result, not of a statistics tool that counts too); if
        // nothing else names a tool, with them ("then add 30 and 40" adds
        // again).
        let at_hand = self.at_hand(tools, step);
        let called_elsewhere: Vec<usize> = called
            .iter()
            .copied()
            .filter(|i| !at_hand.contains(i))
            .collect();
        // Each tool's terms, read once (not once a word).
        let own: BTreeMap<usize, Vec<String>> = at_hand
            .iter()
            .chain(&called_elsewhere)
            .map(|&i| (i, tools[i].terms()))
            .collect();
        let names = |i: usize, word: &str| tools[i].named_by_term(word, &own[&i]);
        for pass_over_called in [true, false] {
            let mut left = at_hand.clone();
            for word in &words {
                let naming: Vec<usize> = left.iter().copied().filter(|&i| names(i, word)).collect();
                if naming.is_empty() || naming.len() == left.len() {
                    continue;
                }
                let speaks_of_a_call = naming.iter().all(|i| called.contains(i))
                    || called_elsewhere.iter().any(|&i| names(i, word));
                if pass_over_called && speaks_of_a_call {
                    continue;
                }
                left = naming;
                if left.len() == 1 {
                    break;
                }
            }
            if left.len() < at_hand.len() || !pass_over_called {
                return left;
            }
        }
        at_hand
    }

    /// Records a call the step made. When it succeeded, the values it took
    /// are used and its result's values are offered to later steps; a
    /// refused call uses nothing, so that the next try may take the same.
    pub fn record(
        &mut self,
        tools: &[Offered],
        step: &Step,
        tool: usize,
        arguments: Value,
        output: ToolOutput,
    ) {
        let succeeded = !output.is_error;
        if succeeded {
            // The values the call took: a document given is taken whole.
            let documents: Vec<&Value> = self
                .given
                .iter()
                .filter_map(|g| match &g.value {
                    Literal::Document(d) => Some(d),
                    _ => None,
                })
                .collect();
            let mut taken: Vec<&Value> = Vec::new();
            crate::llm::grounding::visit(&arguments, &documents, &mut |v| taken.push(v));
            let mut progressed = false;
            for value in taken {
                if let Some(given) = self
                    .given
                    .iter_mut()
                    .find(|g| g.part == step.index && !g.used && g.value.matches(value))
                {
                    given.used = true;
                    progressed = true;
                } else if let Some(made) = self
                    .made
                    .iter_mut()
                    .find(|m| !m.used && m.values.iter().any(|v| v.matches(value)))
                {
                    made.used = true;
                } else if let Some(at) = self.earlier.iter().position(|v| v.matches(value)) {
                    self.earlier.remove(at);
                } else if let Some(given) = self
                    .given
                    .iter_mut()
                    .find(|g| !g.used && g.value.matches(value))
                {
                    given.used = true;
                }
            }
            // A call that took none of the values it was to start from (a
            // model not held to the grounding) still moves the steps on.
            if !progressed
                && let Some(required) = &step.grounding.required
                && let Some(given) = self
                    .given
                    .iter_mut()
                    .find(|g| g.part == step.index && !g.used && &g.value == required)
            {
                given.used = true;
            }
        }
        let (values, named) = if succeeded {
            let named = named_fields(&output, &self.words, tools.get(tool));
            (
                result_values(&output, &self.words, &named, &arguments),
                named,
            )
        } else {
            (Vec::new(), Vec::new())
        };
        let mut chosen = succeeded
            && tool < tools.len()
            && (self.chosen(tools, step, tool)
                || self.answered_by_a_field(tools, step, tool, &output));
        if succeeded && !chosen {
            tracing::debug!(
                part = %step.part,
                tool = %tools.get(tool).map_or("", |t| t.name.as_str()),
                candidates = ?step.tools.iter().map(|&i| &tools[i].name).collect::<Vec<_>>(),
                "a call no choice holds"
            );
            // Its result is on record, and no answer rests on it.
            let why = match tools.get(tool) {
                Some(offered) => format!(
                    "no word of it names {}, and the model's choice of it did not hold \
                     with the tools listed in reverse: {} returned {}",
                    offered.name,
                    super::wording::call_label(offered, &arguments),
                    crate::text::one_line(&output.text(), 120)
                ),
                None => "the model chose the tool, and no word of it names one".to_owned(),
            };
            self.give_up(step.index, why);
        } else if chosen && let Some(text) = returned_as_given(&output, &arguments) {
            // A text handed back as it came shows nothing done to it: a
            // word reverser's "stressed" for "reverse the letters of
            // 'stressed'" is no answer, however sure the choice was.
            let offered = &tools[tool];
            chosen = false;
            self.give_up(
                step.index,
                format!(
                    "{} returned {:?} unchanged, as it was given",
                    super::wording::call_label(offered, &arguments),
                    crate::text::excerpt(&text, 60)
                ),
            );
        }
        self.made.push(Made {
            tool,
            arguments,
            output,
            part: step.index,
            values,
            named,
            used: false,
            chosen,
        });
    }

    /// Notes that the model's accounts of how to do `step`'s part, asked
    /// with the tools listed in one order and in the reverse, both named
    /// `tools` (one tool, or tools of one name on several agents): a
    /// choice the list's order did not make, which a call of them may
    /// answer the part by.
    pub fn agree(&mut self, step: &Step, tools: Vec<usize>) {
        if let Some(part) = self.parts.get_mut(step.index) {
            part.agreed = tools;
        }
    }

    /// Whether the model's accounts of `step`'s part, in both orders,
    /// agreed on `tool` (see [`Steps::agree`]).
    pub fn agreed_on(&self, step: &Step, tool: usize) -> bool {
        self.parts
            .get(step.index)
            .is_some_and(|part| part.agreed.contains(&tool))
    }

    /// Whether a word of `step`'s part names a tool of `tools` other than
    /// `listed` ("corr" of "corr of [1,2,3]", where `correlate` could
    /// not take one list).
    pub fn names_another(&self, tools: &[Offered], step: &Step, listed: &[usize]) -> bool {
        let others =
            (0..tools.len()).filter(|i| !listed.iter().any(|&l| tools[l].name == tools[*i].name));
        !named_by_any(tools, others, &self.said_terms(step.index)).is_empty()
    }

    /// Whether `tool` was chosen for `step` for certain: by the person's
    /// words, by the model's accounts in both orders, or as the one
    /// reading tool of the agent the words name (see
    /// [`Steps::reads_what_the_words_name`]).
    fn chosen(&self, tools: &[Offered], step: &Step, tool: usize) -> bool {
        self.chosen_by_request(tools, step, tool)
            || self.agreed_on(step, tool)
            || self.reads_what_the_words_name(tools, step, tool)
    }

    /// Whether the call of `tool` the model made for `step` reads what the
    /// part's words name: every word of the part that names a tool names
    /// `tool` and only tools of its agent ("note" of the notes agent's
    /// `get`, `put`, `list` and `delete`: which agent, not which of its
    /// tools), `tool` changes nothing and is the only such tool of them
    /// that could take the part's values, and the call took every value
    /// the part wrote. Among what one agent offers, a part that names no
    /// change and writes nothing the read left over asks to read ("What
    /// does the note 'groceries' say?"); "drop the note" names `delete`,
    /// and "note 'call mom': 'Sunday at 5'" leaves a text no read takes.
    fn reads_what_the_words_name(&self, tools: &[Offered], step: &Step, tool: usize) -> bool {
        let Some(offered) = tools.get(tool).filter(|t| t.effects == Effects::ReadOnly) else {
            return false;
        };
        let all: Vec<usize> = (0..tools.len()).collect();
        let by_word = naming_by_word(tools, &all, &self.said_terms(step.index), Offered::terms);
        // A word that names no tool is one a text parameter could take.
        let free = by_word.iter().any(Vec::is_empty);
        let naming: Vec<Vec<usize>> = by_word
            .into_iter()
            .filter(|named| !named.is_empty())
            .collect();
        let named = |i: usize| naming.iter().any(|n| n.contains(&i));
        // Another reader counts where it could take what the part gives:
        // `list()` takes nothing of "groceries note?", and `get` takes no
        // title from "which notes do I have?", whose every word names a
        // tool or is a common one.
        let mut grounding = step.grounding.clone();
        if !free {
            grounding.texts.clear();
        }
        let gives = grounding.required.is_some() || free;
        let takes_what_is_given =
            |i: usize| match crate::llm::grounding::slot_kinds(&tools[i].schema).is_empty() {
                true => !gives,
                false => crate::llm::grounding::can_fill(&tools[i].schema, &grounding),
            };
        let other_reader = step.tools.iter().any(|&i| {
            i != tool
                && tools[i].effects == Effects::ReadOnly
                && tools[i].owner == offered.owner
                && named(i)
                && takes_what_is_given(i)
        });
        !naming.is_empty()
            && naming
                .iter()
                .all(|n| n.contains(&tool) && n.iter().all(|&i| tools[i].owner == offered.owner))
            && !other_reader
            && !self.given.iter().any(|g| g.part == step.index && !g.used)
    }

    /// Whether the result of `tool` answers `step`'s part by a field its
    /// words name, where the words named several tools and chose none:
    /// every word of the part that names a tool that could take the
    /// part's values names `tool` too, and its agent says it changes
    /// nothing. "words in 'a b c d e'?"
    /// names a word counter and a word reverser by "words": the counter's
    /// result has `words`, the reverser's nothing. "Lowercase the words"
    /// names `lower` by a word that does not name the counter; "multiply
    /// the count by 3" names `multiply`, not a summary's `count`.
    fn answered_by_a_field(
        &self,
        tools: &[Offered],
        step: &Step,
        tool: usize,
        output: &ToolOutput,
    ) -> bool {
        let Some(offered) = tools.get(tool).filter(|t| t.effects == Effects::ReadOnly) else {
            return false;
        };
        let said = self.said_terms(step.index);
        if named_fields(output, &said, Some(offered)).is_empty() {
            return false;
        }
        let could: Vec<usize> = step
            .tools
            .iter()
            .copied()
            .filter(|&i| crate::llm::grounding::can_fill(&tools[i].schema, &step.grounding))
            .collect();
        naming_by_word(tools, &could, &said, Offered::terms)
            .iter()
            .all(|named| named.is_empty() || named.iter().any(|&i| tools[i].name == offered.name))
    }

    /// Whether a call of `tool` may run for `step`, or why not. A tool
    /// that changes things (by its agent's annotations) runs only when a
    /// word of the person's names what it does (its name, or the first
    /// clause of its description) and no other tool's: a guess that
    /// deletes a note has done its harm by the time its result is set
    /// aside, however sure the model was of it. A tool whose agent does
    /// not say runs when it was chosen for certain (by the words, or by
    /// the model's accounts in both orders); a read-only one always (a
    /// guess is on record and answers nothing).
    pub fn may_run(&self, tools: &[Offered], step: &Step, tool: usize) -> Result<(), String> {
        let Some(offered) = tools.get(tool) else {
            return Ok(());
        };
        let allowed = match offered.effects {
            Effects::ReadOnly => true,
            Effects::Unknown => self.chosen(tools, step, tool),
            Effects::Changes => self.named_alone(tools, step, tool, Offered::doing),
        };
        if allowed {
            return Ok(());
        }
        Err(match offered.effects {
            Effects::Changes => format!(
                "the model chose {}, which changes things, and no word of it names what \
                 that tool does: it was not run",
                offered.name
            ),
            _ => format!(
                "the model chose {}, whose agent does not say it changes nothing, and \
                 neither the request's words nor the model's accounts in both orders chose \
                 it: it was not run",
                offered.name
            ),
        })
    }

    /// Whether the call `tool(arguments)`, made already for another part,
    /// answers `step`'s part too: it succeeded, a word of this part names
    /// a field of its result ("the mean and the median of 1, 2, 4 and 9":
    /// `summarize`'s `median`), and its tool was chosen for this part for
    /// certain. Then it is on record for this part as well, run once.
    pub fn answered_before(
        &mut self,
        tools: &[Offered],
        step: &Step,
        tool: usize,
        arguments: &Value,
    ) -> bool {
        let Some(earlier) = self
            .made
            .iter()
            .find(|m| {
                m.tool == tool && &m.arguments == arguments && m.succeeded() && m.part != step.index
            })
            .cloned()
        else {
            return false;
        };
        let words: Vec<String> = terms(self.part_text(step.index)).collect();
        let names_a_field = !named_fields(&earlier.output, &words, tools.get(tool)).is_empty();
        if !names_a_field || !self.chosen(tools, step, tool) {
            return false;
        }
        self.record(tools, step, tool, arguments.clone(), earlier.output);
        true
    }

    /// Whether a call of `tool` with `arguments` was made already.
    pub fn repeats(&self, tool: usize, arguments: &Value) -> bool {
        self.made
            .iter()
            .any(|m| m.tool == tool && &m.arguments == arguments)
    }

    /// How far the request was answered.
    pub fn outcome(&self) -> Outcome {
        let done = (0..self.parts.len()).filter(|&i| self.done(i)).count();
        match done {
            0 => Outcome::NotAnswered,
            n if n == self.parts.len() => Outcome::Answered,
            _ => Outcome::Partial,
        }
    }

    /// The parts not done, each with why: the agent's own error when its
    /// call was refused, the reason it was given up, the values no call
    /// took, or that no tool at hand does it.
    pub fn undone(&self, tools: &[Offered]) -> Vec<Undone> {
        (0..self.parts.len())
            .filter(|&index| !self.done(index))
            .map(|index| {
                let refused = self.refused_in_a_row(index);
                let why = if let Some(&last) = refused.last() {
                    let made = &self.made[last];
                    let said = crate::text::one_line(&made.output.text(), 300);
                    match tools.get(made.tool) {
                        // A client's own tool has no agent to name.
                        Some(tool) if tool.owner.is_empty() => format!(
                            "{} failed: {said}",
                            super::wording::call_label(tool, &made.arguments)
                        ),
                        Some(tool) => format!(
                            "{}'s {} failed: {said}",
                            tool.owner,
                            super::wording::call_label(tool, &made.arguments)
                        ),
                        None => format!("the agent's call failed: {said}"),
                    }
                } else if let Some(why) = &self.parts[index].gave_up {
                    why.clone()
                } else if self.made.iter().any(|m| m.part == index && m.succeeded()) {
                    let left: Vec<String> = self
                        .given
                        .iter()
                        .filter(|g| g.part == index && !g.used)
                        .map(|g| g.value.plain())
                        .collect();
                    format!("no call of the tools at hand took {}", left.join(", "))
                } else if self.made.len() >= MAX_CALLS {
                    format!("the request took its {MAX_CALLS} calls before this part")
                } else {
                    "no tool at hand does this".to_owned()
                };
                Undone {
                    part: self.part_text(index).to_owned(),
                    why,
                }
            })
            .collect()
    }
}

/// The tools of `listed` that a word of `text` names alone (see
/// [`Offered::named_by_term`]): a word that names several ("case" of
/// `upper` and `lower`) says what kind of thing is done, not which.
pub fn named_in(tools: &[Offered], listed: &[usize], text: &str) -> Vec<usize> {
    let words: Vec<String> = naming_terms(text).filter(|w| !is_number(w)).collect();
    let mut named: Vec<usize> = Vec::new();
    for by_word in naming_by_word(tools, listed, &words, Offered::terms) {
        let one_name = by_word
            .first()
            .is_some_and(|&first| by_word.iter().all(|&i| tools[i].name == tools[first].name));
        if one_name {
            for i in by_word {
                if !named.contains(&i) {
                    named.push(i);
                }
            }
        }
    }
    named
}

/// The terms of a model's account that may name a tool: its words, then
/// the operations its arithmetic writes ("250 + 750" names `add` as "add"
/// would).
fn naming_terms(account: &str) -> impl Iterator<Item = String> + '_ {
    terms(account).chain(operations(account))
}

/// For each of `words`, the tools of `candidates` it names (see
/// [`Offered::named_by_term`]), by the terms `terms_of` gives, read once
/// for each tool.
fn naming_by_word(
    tools: &[Offered],
    candidates: &[usize],
    words: &[String],
    terms_of: fn(&Offered) -> Vec<String>,
) -> Vec<Vec<usize>> {
    let own: Vec<Vec<String>> = candidates.iter().map(|&i| terms_of(&tools[i])).collect();
    words
        .iter()
        .map(|word| {
            candidates
                .iter()
                .zip(&own)
                .filter(|(i, own)| tools[**i].named_by_term(word, own))
                .map(|(&i, _)| i)
                .collect()
        })
        .collect()
}

/// The tools of `candidates` that one of `words` names.
fn named_by_any(
    tools: &[Offered],
    candidates: impl Iterator<Item = usize>,
    words: &[String],
) -> Vec<usize> {
    candidates
        .filter(|&i| {
            let own = tools[i].terms();
            words.iter().any(|w| tools[i].named_by_term(w, &own))
        })
        .collect()
}

/// The short words of `said` (an agent's error, or a tool's description)
/// that may stand for `words` (what a refused call took, the request's
/// own): for each word, the one that surely does (see [`sure_symbol`]),
/// else every one that abbreviates it, for the model to choose from.
pub fn standing_for(words: &[&str], said: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for word in split_words(words) {
        let candidates = abbreviations(&word, said);
        let offered = match pick(&word, &candidates) {
            Some(sure) => vec![sure],
            None => candidates,
        };
        for symbol in offered {
            if !found.contains(&symbol) {
                found.push(symbol);
            }
        }
    }
    found
}

/// The short word of `said` that surely stands for `word` as an
/// abbreviation does: the only one that abbreviates it ("l" for
/// "liters"; see [`super::fit::abbreviates`]), or, of several, the only
/// one that starts the word and is at least a third of it ("gal" of "g"
/// and "gal" for "gallons", "mi" for "miles"). Where that does not tell
/// ("f" or "ft" for "feet"; "mi", "mm" or "ml" for "millimetres"), none:
/// a guess between them can be a wrong unit that converts.
pub fn sure_symbol(word: &str, said: &str) -> Option<String> {
    pick(&word.to_lowercase(), &abbreviating(word, said))
}

/// The short words of `said` that abbreviate `word` (see
/// [`sure_symbol`], which picks among them where one surely does).
pub fn abbreviating(word: &str, said: &str) -> Vec<String> {
    let word = word.to_lowercase();
    if word.chars().count() < 3 || !word.chars().all(char::is_alphabetic) {
        return Vec::new();
    }
    abbreviations(&word, said)
}

fn split_words(words: &[&str]) -> Vec<String> {
    words
        .iter()
        .flat_map(|w| w.split(|c: char| !c.is_alphabetic()))
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 3)
        .collect()
}

/// The short words of `said` that abbreviate `word` (lower case), as
/// `said` writes them ("C" where a tool takes "C"), sorted.
fn abbreviations(word: &str, said: &str) -> Vec<String> {
    let mut found: Vec<String> = said
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && w.chars().count() <= 5)
        .filter(|s| !s.eq_ignore_ascii_case(word) && super::fit::abbreviates(s, word))
        .map(str::to_owned)
        .collect();
    found.sort_by_key(|s| s.to_lowercase());
    found.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    found
}

/// Of `candidates` for `word`, the one that surely stands for it.
fn pick(word: &str, candidates: &[String]) -> Option<String> {
    let length = word.chars().count();
    let prefixes: Vec<&String> = candidates
        .iter()
        .filter(|s| {
            let n = s.chars().count();
            n >= 2 && 3 * n >= length && word.starts_with(&s.to_lowercase())
        })
        .collect();
    match (candidates, prefixes.as_slice()) {
        ([only], _) => Some(only.clone()),
        (_, [prefix]) => Some((*prefix).clone()),
        _ => None,
    }
}

/// The text `output` holds when it is one of the texts of `arguments` as
/// it was given: a result of words (not a number, which a sum with zero
/// may rightly return) that the call only handed back.
fn returned_as_given(output: &ToolOutput, arguments: &Value) -> Option<String> {
    if output.structured_content.is_some() {
        return None;
    }
    let text = output.text();
    let text = text.trim();
    if !text.chars().any(char::is_alphabetic) || !numbers_in(text).is_empty() {
        return None;
    }
    let mut given: Vec<&Value> = Vec::new();
    leaves(arguments, &mut given);
    given
        .iter()
        .any(|v| v.as_str().is_some_and(|s| s.trim() == text))
        .then(|| text.to_owned())
}

/// Whether `said` (an agent's error) quotes `word`: the word it refused
/// (`unknown unit "gallons"`), not one it lists as known.
pub fn quoted_in(said: &str, word: &str) -> bool {
    ['"', '\'', '`']
        .iter()
        .any(|q| said.contains(&format!("{q}{word}{q}")))
}

/// Whether `said` writes `word` as a word of its own, in any case.
pub fn written_in(said: &str, word: &str) -> bool {
    said.split(|c: char| !c.is_alphanumeric())
        .any(|w| w.eq_ignore_ascii_case(word))
}

/// The leaves of `value`, in lists and objects too.
pub(super) fn leaves<'v>(value: &'v Value, out: &mut Vec<&'v Value>) {
    crate::llm::grounding::visit(value, &[], &mut |leaf| out.push(leaf));
}

/// The values of a tool's result: the fields of its structured content
/// (only those the request names, when it names some: `fields_named`, or
/// a field whose name the request's `words` name; a field that echoes
/// what the call was given is not a result while another field is), else
/// its text (a number when it is one, with the numbers it writes beside
/// a word the request names).
pub fn result_values(
    output: &ToolOutput,
    words: &[String],
    fields_named: &[String],
    arguments: &Value,
) -> Vec<Literal> {
    let mut given: Vec<&Value> = Vec::new();
    leaves(arguments, &mut given);
    let argument_names: Vec<String> = match arguments {
        Value::Object(map) => map.keys().map(|k| k.to_lowercase()).collect(),
        _ => Vec::new(),
    };
    if let Some(structured) = &output.structured_content {
        let value = structured.to_value();
        let mut named = Vec::new();
        let mut found = Vec::new();
        let mut echoes = Vec::new();
        fields(&value, None, &mut |key, literal| {
            // An echo: a field named as an argument is, holding what it
            // held ({"amount": 20, "from_unit": "c", "result": 68}).
            let echo = key.is_some_and(|k| argument_names.contains(&k.to_lowercase()))
                && given.iter().any(|g| literal.matches(g));
            let is_named = key
                .is_some_and(|k| fields_named.iter().any(|n| n == k) || named_by_words(k, words));
            if echo {
                echoes.push(literal);
            } else {
                if is_named {
                    named.push(literal.clone());
                }
                found.push(literal);
            }
        });
        let mut values = if !named.is_empty() {
            named
        } else if !found.is_empty() {
            found
        } else {
            echoes
        };
        values.truncate(RESULT_VALUES);
        if !values.is_empty() {
            return values;
        }
    }
    let text = output.text();
    let text = text.trim();
    if text.is_empty() {
        return Vec::new();
    }
    match text.parse::<f64>() {
        Ok(n) if n.is_finite() => vec![Literal::Number(n)],
        _ => {
            let mut values = numbers_beside(text, words);
            values.truncate(RESULT_VALUES - 1);
            if text.len() <= crate::llm::grounding::MAX_TEXT_VALUE {
                values.push(Literal::Text(text.to_owned()));
            }
            values
        }
    }
}

/// The numbers a text writes right after or before a word of `words`:
/// "on channel 6" gives 6 to "add 9 to the channel", as a field the
/// request names gives its value.
fn numbers_beside(text: &str, words: &[String]) -> Vec<Literal> {
    let named = |word: Option<&str>| word.is_some_and(|w| named_by_words(w, words));
    crate::llm::grounding::numbers_at(text)
        .into_iter()
        .filter(|(range, _)| {
            let before = text[..range.start]
                .trim_end_matches([' ', ':', '='])
                .rsplit(|c: char| !c.is_alphanumeric())
                .next();
            let after = text[range.end..]
                .trim_start()
                .split(|c: char| !c.is_alphanumeric())
                .next();
            named(before) || named(after)
        })
        .map(|(_, n)| Literal::Number(n))
        .collect()
}

/// Whether a term of `text` (a field's name, a word of a result) is one
/// of the request's `words`.
fn named_by_words(text: &str, words: &[String]) -> bool {
    terms(text).any(|t| words.iter().any(|w| same_word(w, &t)))
}

/// The values of a result as its text reads (a number, the fields of a
/// JSON object, or the text): a result kept or passed on as text.
pub fn values_of_text(text: &str) -> Vec<Literal> {
    let output = ToolOutput {
        content: vec![crate::agent::tool::Content::Text {
            text: text.to_owned(),
        }],
        structured_content: crate::agent::tool::StructuredContent::from_text(text.to_owned())
            .ok()
            .filter(|s| s.to_value().is_object()),
        is_error: false,
    };
    result_values(&output, &[], &[], &Value::Null)
}

/// Fields a question asks for by what they measure, where the question
/// does not say the field's name (terms, as [`terms`] gives them): "how
/// many" asks for a `count`.
const ASKED_FOR: &[(&str, &str)] = &[("mani", "count")];

/// The top-level fields of a structured result that the request's
/// `words` name: by the field's own name ("count the words": `words`) or
/// by the question that asks for it ("how many": `count`), else by the
/// words of its description in the tool's output schema, those it shares
/// the most words with, but for the words that describe what the tool
/// takes ("how many values" names `count`, "how many numbers"; "the
/// biggest number" names no field of a summary of numbers).
fn named_fields(output: &ToolOutput, words: &[String], tool: Option<&Offered>) -> Vec<String> {
    let Some(structured) = &output.structured_content else {
        return Vec::new();
    };
    let Value::Object(map) = structured.to_value() else {
        return Vec::new();
    };
    // How many distinct words of `text`, but those of `left_out`, the
    // request's words name.
    let said = |text: &str, left_out: &[String]| {
        let mut shared: Vec<String> = terms(text)
            .filter(|t| !is_number(t) && !left_out.iter().any(|l| same_word(l, t)))
            .filter(|t| words.iter().any(|w| same_word(w, t)))
            .collect();
        shared.sort();
        shared.dedup();
        shared.len()
    };
    let asked = |key: &str| {
        ASKED_FOR.iter().any(|(question, measure)| {
            words.iter().any(|w| w == question) && terms(key).any(|t| t == *measure)
        })
    };
    let by_name: Vec<String> = map
        .keys()
        .filter(|k| said(k, &[]) > 0 || asked(k))
        .cloned()
        .collect();
    if !by_name.is_empty() {
        return by_name;
    }
    let properties = tool
        .and_then(|t| t.output_schema.as_ref())
        .and_then(|schema| schema.get("properties"));
    // A word the tool's parameters are described by names what it takes,
    // not what it gives: "number" of "the numbers" it summarizes names
    // no field, though `count` is "how many numbers".
    let inputs: Vec<String> = tool
        .map(|t| terms(&super::fit::described(&t.schema)).collect())
        .unwrap_or_default();
    let described = |key: &str| {
        properties
            .and_then(|p| p.get(key))
            .and_then(|p| p.get("description"))
            .and_then(Value::as_str)
            .map_or(0, |description| said(description, &inputs))
    };
    let most = map.keys().map(|k| described(k)).max().unwrap_or(0);
    if most == 0 {
        return Vec::new();
    }
    map.keys()
        .filter(|k| described(k) == most)
        .cloned()
        .collect()
}

/// The leaf values of `value`, each with the name of the field it is in.
fn fields(value: &Value, key: Option<&str>, f: &mut impl FnMut(Option<&str>, Literal)) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                fields(v, Some(k), f);
            }
        }
        Value::Array(items) => items
            .iter()
            .take(RESULT_VALUES)
            .for_each(|v| fields(v, key, f)),
        Value::Number(n) => {
            if let Some(n) = n.as_f64() {
                f(key, Literal::Number(n));
            }
        }
        Value::String(s) if !s.is_empty() && s.len() <= crate::llm::grounding::MAX_TEXT_VALUE => {
            f(key, Literal::Text(s.clone()))
        }
        // A yes or no is what a person reads: "flags.beta" is `true`.
        Value::Bool(b) => f(key, Literal::Text(b.to_string())),
        _ => {}
    }
}

pub(super) fn is_number(term: &str) -> bool {
    term.bytes().all(|b| b.is_ascii_digit())
}

/// Whether two terms are forms of one word: equal, one the start of the
/// other (four letters at least), or sharing their first five letters
/// ("multiplication" and "multiply" stem apart).
pub fn same_word(a: &str, b: &str) -> bool {
    let common = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    a == b || common >= 5 || (common >= 4 && common == a.len().min(b.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tool::{Content, StructuredContent};
    use serde_json::json;

    fn tool(owner: &str, name: &str, description: &str, schema: Value) -> Offered {
        Offered {
            effects: Effects::ReadOnly,
            output_schema: None,
            owner: owner.into(),
            name: name.into(),
            description: description.into(),
            schema,
        }
    }

    fn tools() -> Vec<Offered> {
        let two = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]});
        let text = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
        vec![
            tool("calculator", "add", "Add two numbers.", two.clone()),
            tool("calculator", "multiply", "Multiply two numbers.", two),
            tool(
                "text",
                "word_count",
                "Count the words, lines, characters and bytes of a text.",
                text.clone(),
            ),
            tool(
                "text",
                "upper",
                "Convert a text to upper case.",
                text.clone(),
            ),
            tool(
                "text",
                "sha256",
                "The SHA-256 digest of a text's UTF-8 bytes.",
                text,
            ),
        ]
    }

    /// The notes agent's reader, by its title.
    fn notes_get() -> Offered {
        tool(
            "notes",
            "get",
            "Read the note with a title.",
            json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}),
        )
    }

    fn number(n: f64) -> ToolOutput {
        structured(&format!("{n:?}"), json!({"result": n}))
    }

    /// A result that says `text` and holds the record `value`.
    fn structured(text: &str, value: Value) -> ToolOutput {
        ToolOutput {
            content: vec![Content::Text { text: text.into() }],
            structured_content: StructuredContent::from_value(&value).ok(),
            is_error: false,
        }
    }

    fn text(t: &str) -> ToolOutput {
        ToolOutput {
            content: vec![Content::Text { text: t.into() }],
            structured_content: None,
            is_error: false,
        }
    }

    #[test]
    fn each_step_starts_from_the_earliest_unused_value() {
        let tools = tools();
        let mut steps =
            Steps::new("Add 1200 and 345, then count the words in 'the quick brown fox'.");
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.grounding.required, Some(Literal::Number(1200.0)));
        assert_eq!(step.part, "Add 1200 and 345");
        // Only the number tools can start from a number.
        assert_eq!(step.tools, [0, 1]);
        assert_eq!(steps.named_by(&tools, &step, ""), [0]);
        steps.record(
            &tools,
            &step,
            0,
            json!({"a": 1200, "b": 345}),
            number(1545.0),
        );

        let step = steps.next(&tools).unwrap();
        assert_eq!(
            step.grounding.required,
            Some(Literal::Text("the quick brown fox".into()))
        );
        assert_eq!(step.part, "count the words in 'the quick brown fox'.");
        assert_eq!(&step.part[step.at..step.at + 5], "'the ");
        assert_eq!(steps.named_by(&tools, &step, ""), [2]);
        let counts = structured(
            "",
            json!({"words": 4, "lines": 1, "characters": 19, "bytes": 19}),
        );
        steps.record(
            &tools,
            &step,
            2,
            json!({"text": "the quick brown fox"}),
            counts,
        );
        // The result the person asked about is the word count.
        assert_eq!(steps.made()[1].values(), [Literal::Number(4.0)]);
        assert!(steps.next(&tools).is_none());
    }

    #[test]
    fn a_later_step_takes_an_earlier_result() {
        let tools = tools();
        let mut steps = Steps::new("Add 2 and 3, then multiply the result by 4.");
        let step = steps.next(&tools).unwrap();
        steps.record(&tools, &step, 0, json!({"a": 2, "b": 3}), number(5.0));
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.grounding.required, Some(Literal::Number(4.0)));
        assert_eq!(step.grounding.values, [Literal::Number(5.0)]);
        // The model's words choose: "multiply" names one tool.
        assert_eq!(
            steps.named_by(&tools, &step, "To do this, multiply 5 by 4."),
            [1]
        );
    }

    #[test]
    fn an_earlier_result_fills_what_the_tool_the_words_name_needs() {
        // A converter could take "4" alone; "add" names a tool of two
        // numbers, and the count is the other.
        let mut tools = tools();
        tools.extend(convert());
        let mut steps = Steps::new("Count the words in 'a b c d', then add 4 to the count.");
        let step = steps.next(&tools).unwrap();
        let counts = structured("4 words", json!({"words": 4}));
        steps.record(&tools, &step, 2, json!({"text": "a b c d"}), counts);
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.part, "add 4 to the count.");
        assert_eq!(step.grounding.values, [Literal::Number(4.0)]);
        assert!(step.tools.contains(&0), "{:?}", step.tools);
        assert_eq!(steps.named_by(&tools, &step, ""), [0]);
        // "count" speaks of the word count, not of a counting tool that
        // could take the numbers: "add" alone chooses.
        let mut with_stats = tools.clone();
        with_stats.push(tool(
            "stats",
            "summarize",
            "Count, mean and median of some numbers.",
            json!({"type": "object", "properties": {"values": {"type": "array", "items": {"type": "number"}}}, "required": ["values"]}),
        ));
        let mut steps = Steps::new("Count the words in 'a b c d', then add 4 to the count.");
        let step = steps.next(&with_stats).unwrap();
        let counts = structured("4 words", json!({"words": 4}));
        steps.record(&with_stats, &step, 2, json!({"text": "a b c d"}), counts);
        let step = steps.next(&with_stats).unwrap();
        assert!(step.tools.contains(&6), "{:?}", step.tools);
        assert!(steps.chosen_by_request(&with_stats, &step, 0));
        // The word nearest the value names the counting tool too; it
        // still speaks of the count found, and "multiply" chooses.
        let mut steps =
            Steps::new("Count the words in 'to be or not to be', then multiply the count by 3.");
        let step = steps.next(&with_stats).unwrap();
        let counts = structured("6 words", json!({"words": 6}));
        steps.record(
            &with_stats,
            &step,
            2,
            json!({"text": "to be or not to be"}),
            counts,
        );
        let step = steps.next(&with_stats).unwrap();
        assert_eq!(steps.named_by(&with_stats, &step, ""), [1]);
        // Where the words name a tool the part's own values fill, they
        // are all it takes.
        let mut steps = Steps::new("Count the words in 'a b c d', then convert 4 km to mi.");
        let step = steps.next(&tools).unwrap();
        let counts = structured("4 words", json!({"words": 4}));
        steps.record(&tools, &step, 2, json!({"text": "a b c d"}), counts);
        let step = steps.next(&tools).unwrap();
        assert!(step.grounding.values.is_empty(), "{:?}", step.grounding);
    }

    #[test]
    fn words_that_name_an_uncalled_tool_make_a_step_of_the_last_result() {
        let tools = tools();
        let mut steps = Steps::new("Convert 'abc' to upper case, then give its SHA-256.");
        let step = steps.next(&tools).unwrap();
        assert_eq!(steps.named_by(&tools, &step, ""), [3]);
        steps.record(&tools, &step, 3, json!({"text": "abc"}), text("ABC"));
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.tools, [4]);
        assert_eq!(step.grounding.required, Some(Literal::Text("ABC".into())));
        steps.record(&tools, &step, 4, json!({"text": "ABC"}), text("b5d4"));
        assert!(steps.next(&tools).is_none());
    }

    #[test]
    fn the_words_nearest_a_value_say_what_to_do_with_it() {
        let tools = tools();
        let mut steps = Steps::new("Convert 'hello' to upper case and hash 'abc' with sha256.");
        let step = steps.next(&tools).unwrap();
        steps.record(&tools, &step, 3, json!({"text": "hello"}), text("HELLO"));
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.part, "hash 'abc' with sha256.");
        assert_eq!(
            steps.named_by(&tools, &step, "To convert it to upper case"),
            [4]
        );
        // Two numbers at most: the next value is the one right after.
        let steps = Steps::new("Multiply 12 by 11 and subtract 8 from 50.");
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.grounding.values, [Literal::Number(11.0)]);
        let mut steps = steps;
        steps.record(&tools, &step, 1, json!({"a": 12, "b": 11}), number(132.0));
        // The person's own values fill the next call: no earlier result.
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.grounding.required, Some(Literal::Number(8.0)));
        assert_eq!(step.grounding.values, [Literal::Number(50.0)]);
    }

    #[test]
    fn a_request_after_others_takes_what_they_found() {
        let tools = tools();
        let steps = Steps::after("Now double it.", vec![Literal::Number(5.0)]);
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.grounding.required, Some(Literal::Number(2.0)));
        assert_eq!(step.grounding.values, [Literal::Number(5.0)]);
    }

    #[test]
    fn a_request_with_nothing_left_ends() {
        let tools = tools();
        let mut steps = Steps::new("What is 23 plus 19?");
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.part, "What is 23 plus 19?");
        steps.record(&tools, &step, 0, json!({"a": 23, "b": 19}), number(42.0));
        assert!(steps.next(&tools).is_none());
        assert!(steps.repeats(0, &json!({"a": 23, "b": 19})));
    }

    #[test]
    fn a_text_handed_back_as_it_was_given_answers_nothing() {
        let tools = vec![tool(
            "wordsmith",
            "reverse",
            "Says the words of the message in reverse order.",
            json!({"type": "object", "properties": {"message": {"type": "string"}}}),
        )];
        let mut steps = Steps::new("Reverse the letters of 'stressed'");
        let step = steps.next(&tools).unwrap();
        let echo = text("stressed");
        steps.record(&tools, &step, 0, json!({"message": "stressed"}), echo);
        assert_eq!(steps.outcome(), Outcome::NotAnswered);
        let undone = steps.undone(&tools);
        assert!(undone[0].why.contains("unchanged"), "{undone:?}");
        // A changed text answers.
        let mut steps = Steps::new("Reverse 'a b'");
        let step = steps.next(&tools).unwrap();
        let reversed = text("b a");
        steps.record(&tools, &step, 0, json!({"message": "a b"}), reversed);
        assert_eq!(steps.outcome(), Outcome::Answered);
    }

    fn convert() -> Vec<Offered> {
        let schema = json!({"type": "object", "properties": {
            "amount": {"type": "number"},
            "from_unit": {"type": "string"},
            "to_unit": {"type": "string"}},
            "required": ["amount", "from_unit", "to_unit"]});
        vec![tool(
            "unit-convert",
            "convert",
            "Convert an amount from one unit to another. Units: m, km, mi, l, gal.",
            schema,
        )]
    }

    fn refused(error: &str) -> ToolOutput {
        ToolOutput::failure(error.to_owned())
    }

    #[test]
    fn a_refused_call_is_tried_again_with_what_the_agent_said_a_bounded_number_of_times() {
        let tools = convert();
        let mut steps = Steps::new("Convert 5 gallons to liters");
        let step = steps.next(&tools).unwrap();
        assert!(step.refused.is_empty());
        steps.record(
            &tools,
            &step,
            0,
            json!({"amount": 5, "from_unit": "gallons", "to_unit": "liters"}),
            refused("unknown unit \"gallons\"; known units: m, km, mi, l, gal"),
        );
        // The value was not used: the next try takes it again, and may
        // take the agent's words that stand for the person's.
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.refused, [0]);
        assert_eq!(step.grounding.required, Some(Literal::Number(5.0)));
        // Only for the word it quoted as refused, not for "liters" (which
        // it has not said it refuses), nor "g" for its own "gal".
        assert!(step.grounding.values.contains(&Literal::Text("gal".into())));
        assert!(!step.grounding.values.contains(&Literal::Text("l".into())));
        assert!(!step.grounding.values.contains(&Literal::Text("g".into())));
        for _ in 0..MAX_RETRIES {
            let step = steps.next(&tools).unwrap();
            steps.record(
                &tools,
                &step,
                0,
                json!({"amount": 5}),
                refused("unknown unit"),
            );
        }
        assert!(steps.next(&tools).is_none(), "two more calls at most");
        assert_eq!(steps.outcome(), Outcome::NotAnswered);
        let undone = steps.undone(&tools);
        assert_eq!(undone.len(), 1);
        assert!(undone[0].why.contains("unknown unit"), "{undone:?}");
        assert!(
            undone[0].why.starts_with("unit-convert's convert("),
            "{undone:?}"
        );
    }

    /// An almanac's `capital` and `currency`, each of a country's name.
    fn almanac() -> Vec<Offered> {
        let country = json!({"type": "object", "properties": {"country_name": {"type": "string"}}, "required": ["country_name"]});
        vec![
            tool(
                "almanac",
                "capital",
                "The capital city of a country.",
                country.clone(),
            ),
            tool(
                "almanac",
                "currency",
                "The currency a country uses.",
                country,
            ),
        ]
    }

    /// Records the almanac's `tool` asked of `country`.
    fn asked(
        steps: &mut Steps,
        tools: &[Offered],
        step: &Step,
        tool: usize,
        country: &str,
        output: ToolOutput,
    ) {
        steps.record(tools, step, tool, json!({"country_name": country}), output);
    }

    #[test]
    fn its_is_what_the_earlier_call_was_about_when_its_result_is_refused() {
        let tools = almanac();
        let mut steps = Steps::new("What is the capital of Peru, and what is its currency?");
        let step = steps.next(&tools).unwrap();
        asked(&mut steps, &tools, &step, 0, "Peru", text("Lima"));
        // "Its" is first what was found.
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.tools, [1]);
        assert_eq!(step.grounding.required, Some(Literal::Text("Lima".into())));
        asked(
            &mut steps,
            &tools,
            &step,
            1,
            "Lima",
            refused("no country named \"Lima\" in the almanac"),
        );
        // Refused, it is what the earlier call was about.
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.refused, [1]);
        assert_eq!(step.grounding.required, Some(Literal::Text("Peru".into())));
        asked(&mut steps, &tools, &step, 1, "Peru", text("Sol"));
        assert!(steps.next(&tools).is_none());
        assert_eq!(steps.outcome(), Outcome::Answered);
    }

    #[test]
    fn a_part_that_only_names_a_tool_asks_it_of_what_the_part_before_was_about() {
        let tools = almanac();
        let mut steps = Steps::new("peru: capital and currency");
        let step = steps.next(&tools).unwrap();
        asked(&mut steps, &tools, &step, 0, "peru", text("Lima"));
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.tools, [1]);
        assert_eq!(step.grounding.required, Some(Literal::Text("peru".into())));
        assert!(
            step.grounding.texts.is_empty(),
            "\"currency\" is no country"
        );
        // A part of its own words takes them, not the earlier subject.
        let mut steps = Steps::new("capital of Kenya, and currency of the Peruvian state");
        let step = steps.next(&tools).unwrap();
        asked(&mut steps, &tools, &step, 0, "Kenya", text("Nairobi"));
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.grounding.required, None);
        assert!(!step.grounding.texts.is_empty());
    }

    #[test]
    fn an_operator_starting_the_rest_of_a_part_works_on_what_came_before() {
        let two = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]});
        let tools = vec![
            tool("calculator", "subtract", "Subtract b from a.", two.clone()),
            tool("calculator", "divide", "Divide a by b.", two),
        ];
        let (subtract, divide) = (0, 1);
        let mut steps = Steps::new("What is 50 divided by 2, minus 5?");
        let step = steps.next(&tools).unwrap();
        assert!(steps.chosen_by_request(&tools, &step, divide));
        steps.record(
            &tools,
            &step,
            divide,
            json!({"a": 50, "b": 2}),
            number(25.0),
        );
        let step = steps.next(&tools).expect("the subtraction");
        assert_eq!(step.grounding.required, Some(Literal::Number(25.0)));
        assert!(step.grounding.values.contains(&Literal::Number(5.0)));
        assert!(steps.chosen_by_request(&tools, &step, subtract));
        assert!(!steps.chosen_by_request(&tools, &step, divide));
        // The earlier result is the left operand.
        let fits = |arguments| super::super::fit::check(&tools[subtract], &step, &arguments);
        assert!(fits(json!({"a": 25, "b": 5})).is_ok());
        assert!(fits(json!({"a": 5, "b": 25})).is_err());
        // The model's order is mended, values unchanged.
        let mut written = json!({"a": 5, "b": 25});
        super::super::align::left_first(&tools[subtract], &step, &mut written);
        assert_eq!(written, json!({"a": 25, "b": 5}));
        steps.record(
            &tools,
            &step,
            subtract,
            json!({"a": 25, "b": 5}),
            number(20.0),
        );
        assert!(steps.next(&tools).is_none());
        assert_eq!(steps.outcome(), Outcome::Answered);
    }

    #[test]
    fn a_later_part_takes_its_own_words_and_values() {
        let tools = convert();
        let mut steps = Steps::new("Convert 26.2 mi to km, then convert 5 kg to lb");
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.grounding.texts, ["Convert 26.2 mi to km"]);
        let conversion = structured(
            "42.16",
            json!({"amount": 26.2, "from_unit": "mi", "to_unit": "km", "result": 42.1648}),
        );
        steps.record(
            &tools,
            &step,
            0,
            json!({"amount": 26.2, "from_unit": "mi", "to_unit": "km"}),
            conversion,
        );
        // What the call echoes of its arguments is not its result.
        assert_eq!(steps.made()[0].values(), [Literal::Number(42.1648)]);
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.grounding.texts, ["convert 5 kg to lb"]);
        assert_eq!(step.grounding.required, Some(Literal::Number(5.0)));
        assert!(step.grounding.values.is_empty(), "{:?}", step.grounding);
        assert_eq!(steps.outcome(), Outcome::Partial);
    }

    #[test]
    fn a_part_without_values_is_served_by_the_tool_its_words_name() {
        let tools = almanac();
        let mut steps =
            Steps::new("What is the capital of Kenya, and what currency does Kenya use?");
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.tools, [0]);
        assert_eq!(step.grounding.required, None);
        steps.record(
            &tools,
            &step,
            0,
            json!({"country_name": "Kenya"}),
            text("Nairobi"),
        );
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.tools, [1]);
        // "Nairobi" is not what the second part asks about.
        assert_eq!(step.grounding.required, None);
        assert!(step.grounding.values.is_empty());
        assert_eq!(steps.outcome(), Outcome::Partial);
        let undone = steps.undone(&tools);
        assert_eq!(undone[0].part, "what currency does Kenya use?");
        steps.record(
            &tools,
            &step,
            1,
            json!({"country_name": "Kenya"}),
            text("Kenyan shilling"),
        );
        assert!(steps.next(&tools).is_none());
        assert_eq!(steps.outcome(), Outcome::Answered);
        // A part no tool's words name, and nothing before it to carry on,
        // gets no step: it is named as not done.
        let steps = Steps::new("What is the population of Kenya?");
        assert!(steps.next(&tools).is_none());
        assert_eq!(steps.undone(&tools)[0].why, "no tool at hand does this");
    }

    #[test]
    fn a_number_beyond_any_float_gives_its_part_up_saying_so() {
        let tools = tools();
        let steps = Steps::new("Add 10^400 and 1, then add 1e308 and 2");
        let undone = steps.undone(&tools);
        assert_eq!(undone[0].part, "Add 10^400 and 1");
        assert_eq!(
            undone[0].why,
            "10^400 is beyond the largest number a tool takes (about 1.8e308)"
        );
        // The other part is served, with the number it writes.
        let step = steps.next(&tools).expect("the second part's step");
        assert!(step.part.contains("1e308"), "{}", step.part);
        assert!(
            step.grounding
                .all_values()
                .any(|v| *v == Literal::Number(1e308))
        );
    }

    #[test]
    fn a_later_call_of_a_part_is_named_by_the_words_after_the_earlier_ones() {
        let tools = tools();
        let mut steps = Steps::new("What is 2 plus 3, times 4?");
        let step = steps.next(&tools).unwrap();
        assert!(steps.chosen_by_request(&tools, &step, 0));
        steps.record(
            &tools,
            &step,
            0,
            json!({"a": 2, "b": 3}),
            ToolOutput {
                content: vec![crate::agent::tool::Content::Text { text: "5".into() }],
                structured_content: None,
                is_error: false,
            },
        );
        // What is left, ", times 4", does not say "plus": `add` again is
        // no choice of the person's words.
        let step = steps.next(&tools).unwrap();
        assert!(!step.part.contains("plus"), "{}", step.part);
        assert!(!steps.chosen_by_request(&tools, &step, 0));
    }

    #[test]
    fn a_tool_is_chosen_by_the_request_when_a_word_names_it_alone() {
        let tools = tools();
        let steps = Steps::new("Lowercase the words 'LOUD TEXT HERE'.");
        let step = steps.next(&tools).unwrap();
        // "lowercase" names nothing here ("lower" is no tool of these), and
        // "words" names word_count alone.
        assert!(steps.chosen_by_request(&tools, &step, 2));
        assert!(!steps.chosen_by_request(&tools, &step, 3));
        let mut with_lower = tools.clone();
        with_lower.push(tool(
            "text",
            "lower",
            "Convert a text to lower case.",
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        ));
        let step = steps.next(&with_lower).unwrap();
        // Two words name two tools alone: the words do not choose.
        assert!(!steps.chosen_by_request(&with_lower, &step, 2));
        assert!(!steps.chosen_by_request(&with_lower, &step, 5));
        let steps = Steps::new("Convert 'hello' to upper case.");
        let step = steps.next(&with_lower).unwrap();
        assert!(steps.chosen_by_request(&with_lower, &step, 3));
        assert!(!steps.chosen_by_request(&with_lower, &step, 5));
        // Arithmetic written between two numbers names its operation.
        for written in ["What is 6 times 7?", "6 x 7", "six × seven", "6*7"] {
            let steps = Steps::new(written);
            let step = steps.next(&with_lower).unwrap();
            assert!(steps.chosen_by_request(&with_lower, &step, 1), "{written}");
            assert!(!steps.chosen_by_request(&with_lower, &step, 0), "{written}");
        }
        // And narrows the tools the model chooses among to it.
        let steps = Steps::new("What is six times seven?");
        let step = steps.next(&with_lower).unwrap();
        assert_eq!(steps.named_by(&with_lower, &step, ""), [1]);
        for unread in ["6 and 7", "times: 6, 7", "4x4, 6 and 7"] {
            let steps = Steps::new(unread);
            let step = steps.next(&with_lower).unwrap();
            assert!(!steps.chosen_by_request(&with_lower, &step, 1), "{unread}");
        }
        // Two words name `upper`, another `sha256`: the part asks for both.
        let steps = Steps::new("What is the SHA-256 of 'abc' in upper case?");
        let step = steps.next(&with_lower).unwrap();
        assert!(!steps.chosen_by_request(&with_lower, &step, 3));
        assert!(!steps.chosen_by_request(&with_lower, &step, 4));
    }

    #[test]
    fn a_list_of_numbers_takes_every_number_of_the_part() {
        let mut tools = tools();
        tools.push(tool(
            "stats",
            "summarize",
            "Count, mean, median, standard deviation, extremes and quartiles of some numbers.",
            json!({"type": "object", "properties": {"values": {"type": "array",
                "items": {"type": "number"}, "description": "the numbers"}}, "required": ["values"]}),
        ));
        let summarize = tools.len() - 1;
        let steps = Steps::new("Compute the mean of 10, 20, 30 and 40.");
        let step = steps.next(&tools).unwrap();
        assert!(step.tools.contains(&summarize), "{:?}", step.tools);
        let offered: Vec<&Literal> = step.grounding.all_values().collect();
        assert_eq!(offered.len(), 4, "{offered:?}");
        assert!(steps.chosen_by_request(&tools, &step, summarize));
    }

    #[test]
    fn a_call_made_for_one_part_answers_another_whose_words_name_a_field_of_its_result() {
        let tools = vec![tool(
            "stats",
            "summarize",
            "Count, mean, median, standard deviation, extremes and quartiles of some numbers.",
            json!({"type": "object", "properties": {"values": {"type": "array",
                "items": {"type": "number"}}}, "required": ["values"]}),
        )];
        let summary = || structured("…", json!({"count": 4, "mean": 4.0, "median": 3.0}));
        let arguments = json!({"values": [1, 2, 4, 9]});
        let mut steps = Steps::new("Give me the mean and the median of 1, 2, 4 and 9.");
        let step = steps.next(&tools).unwrap();
        steps.record(&tools, &step, 0, arguments.clone(), summary());
        let step = steps.next(&tools).expect("the other part");
        assert!(steps.repeats(0, &arguments));
        assert!(steps.answered_before(&tools, &step, 0, &arguments));
        assert!(steps.next(&tools).is_none());
        assert_eq!(steps.outcome(), Outcome::Answered);
        // A part whose words name no field of the result is not answered
        // by it: the same call again is only a repeat.
        let mut steps = Steps::new("Summarize 1, 2, 4 and 9, then give the range of them.");
        let step = steps.next(&tools).unwrap();
        steps.record(&tools, &step, 0, arguments.clone(), summary());
        if let Some(step) = steps.next(&tools) {
            assert!(!steps.answered_before(&tools, &step, 0, &arguments));
        }
    }

    #[test]
    fn a_part_asking_for_a_field_of_what_an_earlier_part_found_is_answered_by_it() {
        let tools = vec![two_series(
            "regress",
            "Fits a straight line to points by least squares.",
        )];
        let line = || {
            structured(
                "…",
                json!({"slope": 3.0, "intercept": 4.0, "r_squared": 1.0}),
            )
        };
        let arguments = json!({"x": [0, 1, 2], "y": [4, 7, 10]});
        let asked = |asked: &str| {
            let mut steps = Steps::new(asked);
            let step = steps.next(&tools).unwrap();
            steps.record(&tools, &step, 0, arguments.clone(), line());
            assert!(steps.next(&tools).is_none());
            steps.outcome()
        };
        assert_eq!(
            asked("Fit a line through x = 0, 1, 2 and y = 4, 7, 10 and give me its slope."),
            Outcome::Answered
        );
        // A field the result does not have is not done.
        assert_ne!(
            asked("Fit a line through x = 0, 1, 2 and y = 4, 7, 10 and give me its colour."),
            Outcome::Answered
        );
    }

    /// A stats tool of two series of numbers, `x` and `y`.
    fn two_series(name: &str, description: &str) -> Offered {
        tool(
            "stats",
            name,
            description,
            json!({"type": "object", "properties": {
                "x": {"type": "array", "items": {"type": "number"}},
                "y": {"type": "array", "items": {"type": "number"}}},
                "required": ["x", "y"]}),
        )
    }

    fn with_stats() -> Vec<Offered> {
        let summarize = tool(
            "stats",
            "summarize",
            "Count, mean, median, standard deviation, extremes and quartiles of some numbers.",
            json!({"type": "object", "properties": {"values": {"type": "array",
                "items": {"type": "number"}}}, "required": ["values"]}),
        );
        let histogram = tool(
            "stats",
            "histogram",
            "A text histogram of some numbers, one line per bin.",
            summarize.schema.clone(),
        );
        vec![summarize, histogram]
    }

    #[test]
    fn a_list_the_part_writes_is_one_value_where_a_tool_takes_lists() {
        let mut tools = tools();
        let calculator_only = tools.clone();
        tools.push(tool(
            "stats",
            "summarize",
            "Count, mean, median, standard deviation, extremes and quartiles of some numbers.",
            json!({"type": "object", "properties": {"values": {"type": "array",
                "items": {"type": "number"}}}, "required": ["values"]}),
        ));
        let lists = |asked: &str, tools: &[Offered]| -> Vec<Vec<f64>> {
            let step = Steps::new(asked).next(tools).unwrap();
            step.lists.into_iter().map(|l| l.values).collect()
        };
        assert_eq!(
            lists("What is three times the average of 4, 8 and 12?", &tools),
            [vec![4.0, 8.0, 12.0]]
        );
        assert_eq!(
            lists("mean of 4 8 12, times 3", &tools),
            [vec![4.0, 8.0, 12.0]]
        );
        assert_eq!(
            lists("slope for x 0 1 2, y 4 7 10", &tools),
            [vec![0.0, 1.0, 2.0], vec![4.0, 7.0, 10.0]]
        );
        // An "and" joins a list's last number: with commas after it, it
        // parts two lists.
        assert_eq!(
            lists(
                "What is the correlation between 1, 2, 3 and 6, 4, 2?",
                &tools
            ),
            [vec![1.0, 2.0, 3.0], vec![6.0, 4.0, 2.0]]
        );
        // The word before a list is kept: it may name its parameter.
        let labels: Vec<Option<String>> = Steps::new("regression of y = 4, 7, 10 on x = 0, 1, 2")
            .next(&tools)
            .unwrap()
            .lists
            .into_iter()
            .map(|l| l.label)
            .collect();
        assert_eq!(labels, [Some("y".to_owned()), Some("x".to_owned())]);
        // A text that names two tools names no one of them; a word that
        // names two ("case") names neither alone.
        let all: Vec<usize> = (0..with_stats().len()).collect();
        assert_eq!(
            named_in(
                &with_stats(),
                &all,
                "The histogram with the mean and the deviation"
            )
            .len(),
            2
        );
        let mut text = self::tools();
        let schema = text[3].schema.clone();
        text.push(tool(
            "text",
            "lower",
            "Convert a text to lower case.",
            schema,
        ));
        let all: Vec<usize> = (0..text.len()).collect();
        let named = named_in(&text, &all, "Hello World is written in upper case.");
        let names: Vec<&str> = named.iter().map(|&i| text[i].name.as_str()).collect();
        assert_eq!(names, ["upper"]);
        // Arithmetic an account writes names its operation.
        let calculator = self::tools();
        let all: Vec<usize> = (0..calculator.len()).collect();
        let named = named_in(&calculator, &all, "The sum of 250 and 750 is 250 + 750 =");
        assert_eq!(named, [0], "add");
        // A list a call took is not one for the part's next call, which
        // works on its result.
        let mut steps = Steps::new("mean of 4 8 12, times 3");
        let step = steps.next(&tools).unwrap();
        let summarize = tools.len() - 1;
        steps.record(
            &tools,
            &step,
            summarize,
            json!({"values": [4, 8, 12]}),
            number(8.0),
        );
        let next = steps.next(&tools).expect("times 3");
        assert!(next.lists.is_empty());
        // A word naming a tool that cannot take the part's one list.
        let step = Steps::new("corr of 1, 2, 3").next(&tools).unwrap();
        let with_correlate = {
            let mut all = tools.clone();
            all.push(two_series(
                "correlate",
                "How strongly two series move together.",
            ));
            all
        };
        let steps = Steps::new("corr of 1, 2, 3");
        assert!(steps.names_another(&with_correlate, &step, &step.tools));
        let plain = Steps::new("average of 1, 2, 3");
        let step = plain.next(&with_correlate).unwrap();
        assert!(!plain.names_another(&with_correlate, &step, &step.tools));
        // Two numbers are no list; nor are numbers where no tool takes one.
        assert!(lists("Add 2 and 3.", &tools).is_empty());
        assert!(lists("Add 2, 3 and 4.", &calculator_only).is_empty());
        // A part that writes a list is served by the tools that take one:
        // `add` would take two of its numbers and leave the third.
        let serving = |asked: &str, tools: &[Offered]| -> Vec<String> {
            let step = Steps::new(asked).next(tools).unwrap();
            step.tools.iter().map(|&i| tools[i].name.clone()).collect()
        };
        assert_eq!(serving("Add 2, 3 and 4.", &tools), ["summarize"]);
        assert_eq!(
            serving("Add 2, 3 and 4.", &calculator_only),
            ["add", "multiply"]
        );
        assert_eq!(
            serving("Add 2 and 3.", &tools),
            ["add", "multiply", "summarize"]
        );
    }

    #[test]
    fn what_a_tool_does_decides_whose_choice_runs_it() {
        let mut tools = tools();
        // The A2A agent's skills: its card says nothing of their effects.
        let skill = |name: &str, description: &str| Offered {
            effects: Effects::Unknown,
            ..tool(
                "wordsmith",
                name,
                description,
                json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
            )
        };
        tools.push(skill("count", "Counts the words of the message."));
        let count = tools.len() - 1;
        tools.push(skill(
            "reverse",
            "Says the words of the message in reverse order.",
        ));
        let reverse = tools.len() - 1;
        let steps = Steps::new("Count the words in 'a b c'.");
        let step = steps.next(&tools).unwrap();
        // Both words name word_count and count, one the reverser: either
        // counter is the words' choice, the reverser is not.
        assert!(steps.may_run(&tools, &step, count).is_ok());
        assert!(steps.chosen_by_request(&tools, &step, 2));
        assert!(steps.may_run(&tools, &step, reverse).is_err());
        let mut steps = Steps::new("How many words are in 'a b c'?");
        let step = steps.next(&tools).unwrap();
        // "words" alone names word_count and count: the words do not choose.
        assert!(steps.may_run(&tools, &step, count).is_err());
        // The model's accounts in both orders do.
        steps.agree(&step, vec![count]);
        assert!(steps.may_run(&tools, &step, count).is_ok());
        // A tool that changes things runs only on the words.
        tools[count].effects = Effects::Changes;
        assert!(steps.may_run(&tools, &step, count).is_err());
    }

    #[test]
    fn a_tool_whose_name_destroys_runs_only_where_a_word_names_it() {
        assert_eq!(
            name_words("deleteNote_v2-all").collect::<Vec<_>>(),
            ["delete", "note", "v2", "all"]
        );
        assert_eq!(Effects::named("delete_note"), Effects::Changes);
        assert_eq!(Effects::named("CancelBooking"), Effects::Changes);
        assert_eq!(Effects::named("read_note"), Effects::Unknown);
        // "clearance" and "dropdown" are no destroying words.
        assert_eq!(Effects::named("clearance_level"), Effects::Unknown);
        let note = json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]});
        // A client's tools, as /v1 offers them: no annotations.
        let client = |name: &str, description: &str| Offered {
            effects: Effects::named(name),
            ..tool("", name, description, note.clone())
        };
        let tools = vec![
            client("read_note", "Read the note with a title."),
            client("delete_note", "Delete the note with a title."),
        ];
        let delete = 1;
        let mut steps = Steps::new("What does the note 'groceries' say?");
        let step = steps.next(&tools).unwrap();
        // The model's accounts in both orders agree on it: not enough.
        steps.agree(&step, vec![delete]);
        assert!(steps.may_run(&tools, &step, delete).is_err());
        let steps = Steps::new("Delete the note 'groceries'.");
        let step = steps.next(&tools).unwrap();
        assert!(steps.may_run(&tools, &step, delete).is_ok());
    }

    #[test]
    fn the_one_reading_tool_of_the_agent_the_words_name_answers_a_part_that_names_no_change() {
        let title = json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]});
        let put = json!({"type": "object", "properties": {"title": {"type": "string"},
            "text": {"type": "string"}}, "required": ["title", "text"]});
        let notes = |name: &str, description: &str, schema: &Value, effects: Effects| Offered {
            effects,
            ..tool("notes", name, description, schema.clone())
        };
        // A node's goal offers every agent's tools.
        let mut tools = tools();
        for offered in &mut tools {
            offered.effects = Effects::ReadOnly;
        }
        let get = tools.len();
        tools.extend([
            notes(
                "get",
                "Read the note with a title.",
                &title,
                Effects::ReadOnly,
            ),
            notes(
                "list",
                "List the titles of all notes.",
                &json!({}),
                Effects::ReadOnly,
            ),
            notes("put", "Save a note under a title.", &put, Effects::Changes),
            notes(
                "delete",
                "Delete the note with a title.",
                &title,
                Effects::Changes,
            ),
        ]);
        let read = |asked: &str| {
            let mut steps = Steps::new(asked);
            let step = steps.next(&tools).unwrap();
            steps.record(
                &tools,
                &step,
                get,
                json!({"title": "groceries"}),
                text("milk"),
            );
            steps.made.last().unwrap().chosen
        };
        assert!(read("What does the note 'groceries' say?"));
        assert!(read("What is in my 'groceries' note?"));
        // A word that names a change ("drop" names `delete`), or a tool of
        // another agent ("words" names `word_count`), is not asking to read.
        assert!(!read("drop the 'groceries' note"));
        assert!(!read("How many words are in my note 'groceries'?"));
        // A text the read left over was meant for something else.
        assert!(!read("note 'groceries': 'milk'"));
        // `get` takes no title from a part whose every word names a tool
        // or is a common one: `list` is the one reader left.
        let listed = |asked: &str| {
            let mut steps = Steps::new(asked);
            let step = steps.next(&tools).unwrap();
            let titles = structured(r#"["groceries"]"#, json!({"result": ["groceries"]}));
            steps.record(&tools, &step, get + 1, json!({}), titles);
            steps.made.last().unwrap().chosen
        };
        assert!(listed("Which notes do I have?"));
        assert!(!listed("Which notes mention milk?"));
        // A part that names its note without quotes reads it.
        assert!(read("groceries note?"));
    }

    #[test]
    fn a_number_a_text_result_writes_beside_a_word_the_request_names_is_its_value() {
        let mut tools = tools();
        tools.push(notes_get());
        let get = tools.len() - 1;
        // The step after the note was read.
        let after_reading = |note: &str| {
            let mut steps = Steps::new("Read my note 'wifi' and add 9 to the channel.");
            let step = steps.next(&tools).unwrap();
            steps.record(&tools, &step, get, json!({"title": "wifi"}), text(note));
            steps.next(&tools)
        };
        let step = after_reading("network agentsite-home on channel 6").unwrap();
        assert_eq!(step.part, "add 9 to the channel.");
        assert!(
            step.grounding
                .all_values()
                .any(|v| *v == Literal::Number(6.0)),
            "{:?}",
            step.grounding
        );
        assert!(step.tools.contains(&0), "{:?}", step.tools);
        // A number beside no word the request names is not offered.
        let offered = after_reading("dentist at 9, room 4").map(|step| step.grounding);
        assert!(
            offered
                .as_ref()
                .is_none_or(|g| !g.all_values().any(|v| *v == Literal::Number(4.0))),
            "{offered:?}"
        );
    }

    #[test]
    fn a_result_answers_by_a_field_the_words_name_where_they_chose_no_tool() {
        let numbers = json!({"type": "object", "properties": {"values": {"type": "array",
            "items": {"type": "number"}, "description": "the numbers"}}, "required": ["values"]});
        let mut tools = tools();
        let words = json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]});
        tools.push(tool(
            "wordsmith",
            "reverse",
            "Says the words of the message in reverse order.",
            words,
        ));
        tools.push(Offered {
            output_schema: Some(json!({"type": "object", "properties": {
                "count": {"type": "integer", "description": "how many numbers"},
                "mean": {"type": "number", "description": "their arithmetic mean"},
                "stdev": {"type": "number", "description": "sample standard deviation (0 for one number)"}
            }})),
            ..tool(
                "stats",
                "summarize",
                "Count, mean and standard deviation of some numbers.",
                numbers.clone(),
            )
        });
        tools.push(tool(
            "stats",
            "histogram",
            "Bins of equal width over some numbers.",
            numbers.clone(),
        ));
        let (word_count, summarize) = (2, tools.len() - 2);
        let summary = || structured("{}", json!({"count": 6, "mean": 18.0, "stdev": 13.49}));
        let counted = || {
            structured(
                "{}",
                json!({"bytes": 9, "characters": 9, "lines": 1, "words": 5}),
            )
        };
        let answers = |asked: &str, tool: usize, arguments: Value, output: ToolOutput| {
            let mut steps = Steps::new(asked);
            let step = steps.next(&tools).unwrap();
            steps.record(&tools, &step, tool, arguments, output);
            let made = steps.made.last().unwrap();
            (made.chosen, made.named_fields().to_vec())
        };
        let all = json!({"values": [4, 8, 15, 16, 23, 42]});
        // "numbers" and "many" are words of `count`'s description, more
        // of them than of `stdev`'s.
        assert_eq!(
            answers(
                "how many numbers: 4 8 15 16 23 42",
                summarize,
                all.clone(),
                summary()
            ),
            (true, vec!["count".to_owned()])
        );
        assert_eq!(
            answers(
                "How many values are in the list 4, 8, 15, 16, 23, 42?",
                summarize,
                all.clone(),
                summary()
            ),
            (true, vec!["count".to_owned()])
        );
        // Without an output schema (a `/v1` client's tool), "how many"
        // asks for the field named `count`.
        let mut bare = tools.clone();
        bare[summarize].output_schema = None;
        let mut steps = Steps::new("how many numbers: 4 8 15 16 23 42");
        let step = steps.next(&bare).unwrap();
        steps.record(&bare, &step, summarize, all.clone(), summary());
        assert_eq!(steps.made[0].named_fields(), ["count"]);
        assert_eq!(steps.made[0].values(), [Literal::Number(6.0)]);
        // "number" describes what the summary takes: it names no field.
        let three = json!({"values": [3, 17, 9]});
        assert!(
            !answers(
                "Which is the biggest number of 3, 17 and 9?",
                summarize,
                three,
                summary()
            )
            .0
        );
        // No field is named: the summary answers nothing asked.
        assert!(
            !answers(
                "Take 7 away from 30.",
                summarize,
                json!({"values": [7, 30]}),
                summary()
            )
            .0
        );
        // "multiply" names a tool that is not the summary.
        // "words" names the counter and the reverser: the counter's result
        // has `words`. "Lowercase" names a tool that is not the counter.
        let abcde = json!({"text": "a b c d e"});
        assert!(
            answers(
                "words in 'a b c d e'?",
                word_count,
                abcde.clone(),
                counted()
            )
            .0
        );
        assert!(
            !answers(
                "Upper case the words 'a b c d e'",
                word_count,
                abcde,
                counted()
            )
            .0
        );
    }

    #[test]
    fn a_tool_that_changes_things_no_word_names_is_not_at_hand() {
        let note = json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]});
        let client = |name: &str, description: &str| Offered {
            effects: Effects::named(name),
            ..tool("", name, description, note.clone())
        };
        let tools = vec![
            client("get", "Read the note with a title."),
            client("delete", "Delete the note with a title."),
        ];
        let (get, delete) = (0, 1);
        // Nothing asks to delete: the reader is the one tool that takes
        // the title, and the words choose it.
        for asked in ["What does the note 'groceries' say?", "note 'monday'"] {
            let steps = Steps::new(asked);
            let step = steps.next(&tools).unwrap();
            assert_eq!(steps.at_hand(&tools, &step), [get], "{asked}");
            // "note" names both: it chooses neither by itself.
            assert!(!steps.named_alone(&tools, &step, get, Offered::terms));
            assert!(steps.chosen_by_request(&tools, &step, get), "{asked}");
        }
        // Words that destroy name the tool whose name destroys, whichever
        // word each uses; the reader is then not chosen.
        for asked in [
            "Can you remove my note called 'monday'?",
            "drop the 'monday' note",
            "Delete the note 'monday'.",
        ] {
            let steps = Steps::new(asked);
            let step = steps.next(&tools).unwrap();
            assert_eq!(steps.named_by(&tools, &step, ""), [delete], "{asked}");
            assert!(steps.may_run(&tools, &step, delete).is_ok(), "{asked}");
            assert!(!steps.chosen_by_request(&tools, &step, get), "{asked}");
        }
    }

    #[test]
    fn a_part_that_writes_a_document_is_served_by_tools_that_take_one() {
        let mut tools = tools();
        tools.push(notes_get());
        tools.push(tool(
            "jsontools",
            "pick",
            "The values at a path in a JSON document.",
            json!({"type": "object", "properties": {"document": {"description": "the document"},
                "path": {"type": "string"}}, "required": ["document", "path"]}),
        ));
        let pick = tools.len() - 1;
        let mut steps =
            Steps::new("Get user.name from {\"user\": {\"name\": \"Ada\"}}, then add 2 and 3.");
        let step = steps.next(&tools).unwrap();
        // "Get" names the notes' get, but a note titled "user.name" is no
        // answer about the document.
        assert_eq!(step.tools, [pick]);
        assert_eq!(
            step.part,
            "Get user.name from {\"user\": {\"name\": \"Ada\"}}"
        );
        let call = json!({"document": {"user": {"name": "Ada"}}, "path": "user.name"});
        assert!(crate::answers::fit::check(&tools[pick], &step, &call).is_ok());
        let without = json!({"document": {"user": {}}, "path": "user.name"});
        assert!(crate::answers::fit::check(&tools[pick], &step, &without).is_err());
        steps.record(&tools, &step, pick, call, text("Ada"));
        // The document was taken whole: the next step is the next part's.
        let step = steps.next(&tools).unwrap();
        assert_eq!(step.grounding.required, Some(Literal::Number(2.0)));
    }

    #[test]
    fn a_common_word_that_is_a_tools_name_names_it() {
        let mut tools = tools();
        for (name, description) in [
            ("get", "Read the note with a title."),
            (
                "delete",
                "Delete the note with a title; says whether it existed.",
            ),
        ] {
            tools.push(tool(
                "notes",
                name,
                description,
                json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}),
            ));
        }
        let get = tools.len() - 2;
        let steps = Steps::new("Get the note 'monday'.");
        let step = steps.next(&tools).unwrap();
        assert!(steps.chosen_by_request(&tools, &step, get));
        assert!(!steps.chosen_by_request(&tools, &step, get + 1));
    }

    #[test]
    fn two_agents_tools_of_one_name_are_one_choice() {
        let converter = |owner: &str, description: &str| {
            tool(
                owner,
                "convert",
                description,
                json!({"type": "object", "properties": {
                    "value": {"type": "number"}, "from_unit": {"type": "string"},
                    "to_unit": {"type": "string"}}, "required": ["value", "from_unit", "to_unit"]}),
            )
        };
        let mut tools = tools();
        tools.push(converter(
            "unit-convert",
            "Convert an amount between units: km, mi, kg, lb.",
        ));
        tools.push(converter(
            "units",
            "Converts lengths (km, mi, ft) and masses (kg, lb).",
        ));
        let steps = Steps::new("How many km is 40 mi?");
        let step = steps.next(&tools).unwrap();
        let (first, second) = (tools.len() - 2, tools.len() - 1);
        // "km" names both converters, and nothing else.
        assert!(steps.chosen_by_request(&tools, &step, first));
        assert!(steps.chosen_by_request(&tools, &step, second));
        assert!(!steps.chosen_by_request(&tools, &step, 0));
    }

    #[test]
    fn short_words_stand_for_the_words_they_abbreviate() {
        let said = "unknown unit \"gallons\"; known units: mm, m, km, mi, ml, l, gal, c, f, ft, k";
        assert_eq!(standing_for(&["gallons", "liters"], said), ["gal", "l"]);
        assert_eq!(standing_for(&["km", "miles"], said), ["mi"]);
        // "f" or "ft" for Fahrenheit: both are offered, and neither is sure.
        assert_eq!(
            standing_for(&["Fahrenheit", "Celsius"], said),
            ["f", "ft", "c"]
        );
        assert_eq!(sure_symbol("fahrenheit", said), None);
        assert_eq!(sure_symbol("Celsius", said).as_deref(), Some("c"));
        assert_eq!(sure_symbol("gallons", said).as_deref(), Some("gal"));
        assert!(standing_for(&["parsecs", "pounds"], said).is_empty());
        // "mi" starts "millimetres" as it starts "miles": too little of it
        // to tell it from "mm" and "ml".
        assert_eq!(sure_symbol("millimetres", said), None);
    }

    #[test]
    fn words_are_the_same_across_their_forms() {
        assert!(same_word("multipli", "multipl"));
        assert!(same_word("sha", "sha"));
        assert!(!same_word("sha", "sha256"));
        assert!(same_word("lowercas", "lower"));
        assert!(!same_word("add", "address"));
        assert!(!same_word("to", "tool"));
    }
}
