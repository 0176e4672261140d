//! The work of one team on a goal, phase by phase.
//!
//! ```text
//!             ┌──────────────────────────────────────────────┐
//!             ▼                                              │
//!   Take the next request ──▶ Choose a call ──▶ Run it ──────┘
//!     (the goal, then a         │  no step left for a part no tool
//!      person's messages)       │  of the team can serve:
//!             │                 ▼
//!             │           Look for help ──(agents found)──▶ Choose a call
//!             ▼
//!   Conclude: answered ▶ concluded · in part ▶ partial · not at all ▶ failed
//!   a limit, at any phase ▶ stopped, with what was found · a cancel ▶ cancelled
//! ```
//!
//! The controller decides what the state decides: which part of the
//! request the next call serves and which values it takes, which tools
//! can take them, when a refused call is tried again, when a part is done
//! or given up, and how the goal ends ([`crate::answers::steps`]). The
//! model is asked only what needs language: which tool a step calls and
//! with which of its values, and the wording of the conclusion, which is
//! shown only if it states every call and result
//! ([`crate::answers::wording`]). Each call is a task of the member whose
//! tool it is, made where that agent lives; a member joins the team when
//! one of its tools serves a part of the goal, and its reason names the
//! tool and the part.

use super::ask::{AskFailure, Asker};
use super::budget::Limit;
use super::member::{self, Called};
use super::message::{Assigned, Body, Member, Speaker};
use super::run::GoalRun;
use super::team;
use crate::answers::serve::Skipped;
use crate::answers::{self, Ask, Chosen, Offered, Outcome, Step, Steps, wording};
use crate::llm::{ChatRequest, Completion, DeltaSink};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Requests one round answers at most: the goal and the person's messages.
const MAX_REQUESTS: usize = 8;

/// How a team's work ended.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// Every part of every request was answered by calls that succeeded;
    /// `text` is the conclusion.
    Concluded {
        text: String,
    },
    /// Some parts were answered and others not: `text` states what was
    /// found and names each part not done, with why.
    Partial {
        text: String,
    },
    /// A limit stopped the work; `text` says what was found before.
    Stopped {
        limit: Limit,
        text: String,
    },
    /// Nothing was answered: why (the agents' own errors, no tool).
    Failed(String),
    Cancelled,
}

/// Where the team's work is.
enum Phase {
    /// Take the next request: the goal, then each message of the person's.
    NextRequest,
    /// Choose the call that serves the next step of the current request.
    Choose(Step),
    /// Run the chosen call on the member whose tool it is.
    Run(Step, Chosen),
    /// No tool of the team can serve `part`: look for agents that can.
    LookForHelp(String),
    /// Every request is served as far as it can be: say how it went.
    Conclude,
    /// A limit stopped the work.
    Stop(Limit),
    Cancel,
}

/// One team's work on a goal.
pub struct Team {
    goal: Arc<GoalRun>,
    /// Who is on the team.
    members: Vec<Member>,
    /// Who may join: agents found for the goal, not yet needed.
    candidates: Vec<Member>,
    /// The searches that found the candidates.
    queries: Vec<String>,
    /// A person's messages.
    inbox: Option<mpsc::Receiver<String>>,
    /// The requests of this round: the goal (or the person's message that
    /// started the round), then the person's messages as they come.
    requests: Vec<String>,
    /// The request being served, with the tools it may use.
    current: Option<(Steps, Vec<Offered>)>,
    /// The requests served, with the tools they used.
    done: Vec<(Steps, Vec<Offered>)>,
    /// Searches for more agents made so far (the depth bounds them).
    looked_for_help: u32,
}

impl Team {
    /// A team of `members` (named by the person, or already formed), with
    /// `candidates` that may join when their tools are needed, for `text`.
    pub fn new(
        goal: Arc<GoalRun>,
        members: Vec<Member>,
        candidates: Vec<Member>,
        queries: Vec<String>,
        text: String,
    ) -> Team {
        Team {
            goal,
            members,
            candidates,
            queries,
            inbox: None,
            requests: vec![text],
            current: None,
            done: Vec::new(),
            looked_for_help: 0,
        }
    }

    /// Lets a person's messages reach this team.
    pub fn listening(mut self, inbox: mpsc::Receiver<String>) -> Team {
        self.inbox = Some(inbox);
        self
    }

    fn say(&self, speaker: Speaker, body: Body) {
        self.goal.log.append(None, speaker, body, None);
    }

    /// Runs the work to its end, phase by phase.
    pub async fn run(mut self) -> End {
        let mut phase = Phase::NextRequest;
        loop {
            if self.goal.cancel.is_cancelled() {
                phase = Phase::Cancel;
            }
            phase = match phase {
                Phase::NextRequest => self.next_request(),
                Phase::Choose(step) => self.choose(step).await,
                Phase::Run(step, chosen) => self.run_call(step, chosen).await,
                Phase::LookForHelp(part) => self.look_for_help(&part).await,
                Phase::Conclude => return self.conclude().await,
                Phase::Stop(limit) => return self.stopped(limit),
                Phase::Cancel => return End::Cancelled,
            };
        }
    }

    /// Files the request served so far and starts the next one, if the
    /// person sent one; else concludes.
    fn next_request(&mut self) -> Phase {
        let earlier = match self.current.take() {
            Some((steps, offered)) => {
                let earlier = steps.results_for_later();
                self.done.push((steps, offered));
                earlier
            }
            None => self.goal.log.results(),
        };
        self.read_inbox();
        let Some(request) = self.requests.get(self.done.len()).cloned() else {
            return Phase::Conclude;
        };
        self.current = Some((Steps::after(&request, earlier), self.offered()));
        self.next_step()
    }

    /// The phase after the current request's last call: its next step, a
    /// search for help with a part no tool can serve, or the next request.
    fn next_step(&mut self) -> Phase {
        self.read_inbox();
        let Some((steps, offered)) = &self.current else {
            return Phase::NextRequest;
        };
        if let Some(step) = steps.next(offered) {
            return Phase::Choose(step);
        }
        match steps.stalled(offered) {
            Some(part) if self.looked_for_help < self.goal.budget.limits.depth => {
                Phase::LookForHelp(part)
            }
            _ => Phase::NextRequest,
        }
    }

    /// Asks the model for the call of `step`; a part it can make no usable
    /// call for is given up, with why.
    async fn choose(&mut self, step: Step) -> Phase {
        if let Err(limit) = self.goal.budget.take_turn() {
            return Phase::Stop(limit);
        }
        self.goal.audit_turn();
        let Some((steps, offered)) = &mut self.current else {
            return Phase::NextRequest;
        };
        let ask = GoalAsk(self.goal.asker());
        let chosen = self
            .goal
            .until_cancelled(answers::serve::call_for(&ask, steps, offered, &step))
            .await;
        match chosen {
            None => Phase::Cancel,
            Some(Ok(chosen)) => Phase::Run(step, chosen),
            Some(Err(Skipped::Unusable(AskFailure::Limit(limit)))) => Phase::Stop(limit),
            Some(Err(Skipped::Unusable(AskFailure::Failed(why)))) => {
                let text = format!("the model could not choose a call: {why}");
                steps.give_up(step.index, text.clone());
                self.say(Speaker::Node, Body::Failure { text });
                self.next_step()
            }
            Some(Err(Skipped::Repeated)) => {
                // The same call again would only repeat what it said.
                steps.give_up(
                    step.index,
                    "the only call the model chose for it was one made already".into(),
                );
                self.next_step()
            }
            Some(Err(Skipped::AnsweredBefore)) => self.next_step(),
            Some(Err(Skipped::NotRun(why))) => {
                steps.give_up(step.index, why.clone());
                self.say(Speaker::Node, Body::Notice { text: why });
                self.next_step()
            }
        }
    }

    /// Runs the chosen call as a task of the member whose tool it is, and
    /// records what it returned.
    async fn run_call(&mut self, step: Step, chosen: Chosen) -> Phase {
        let Some((_, offered)) = &self.current else {
            return Phase::NextRequest;
        };
        let tool = offered[chosen.tool].clone();
        let member = self.join(&tool.owner, &tool.name, &step.part);
        let task = self.goal.new_task();
        let label = wording::call_label(&tool, &chosen.arguments);
        self.say(
            Speaker::Node,
            Body::Assign {
                text: step.part.clone(),
                tasks: vec![Assigned {
                    task,
                    assignee: member.name.clone(),
                    text: label,
                }],
            },
        );
        let called = self
            .goal
            .until_cancelled(member::call(
                &self.goal,
                &member,
                &tool.name,
                &chosen.arguments,
            ))
            .await;
        let output = match called {
            None => return Phase::Cancel,
            Some(Called::Answered(record, output)) => {
                self.goal.log.append(
                    None,
                    Speaker::of(&member),
                    Body::Progress {
                        task,
                        text: format!(
                            "{} called {}: {}",
                            member.name,
                            record.tool,
                            crate::text::excerpt(&record.result, 200)
                        ),
                        call: Some(record.clone()),
                    },
                    None,
                );
                output
            }
            Some(Called::Limit(limit)) => {
                self.result(
                    &member,
                    task,
                    false,
                    format!("not run: the goal's {} limit was hit", limit.as_str()),
                );
                return Phase::Stop(limit);
            }
            Some(Called::Unreachable(output)) => {
                // Not a refusal of the arguments: trying again would only
                // meet the same absence.
                let why = crate::text::one_line(&output.text(), 300);
                if let Some((steps, offered)) = &mut self.current {
                    steps.record(offered, &step, chosen.tool, chosen.arguments, output);
                    steps.give_up(step.index, why.clone());
                }
                self.result(&member, task, false, why);
                return self.next_step();
            }
        };
        let ok = !output.is_error;
        let Some((steps, offered)) = &mut self.current else {
            return Phase::NextRequest;
        };
        steps.record(offered, &step, chosen.tool, chosen.arguments, output);
        let made = steps.made().last().expect("just recorded");
        let text = if ok {
            wording::result_text(made)
        } else {
            crate::text::one_line(&made.output.text(), 600)
        };
        self.result(&member, task, ok, text);
        self.next_step()
    }

    /// Takes the person's messages that came in: each is said, and
    /// answered after what the team works on now.
    fn read_inbox(&mut self) {
        let Some(inbox) = &mut self.inbox else {
            return;
        };
        let mut said = Vec::new();
        while let Ok(text) = inbox.try_recv() {
            said.push(text);
        }
        for text in said {
            self.say(Speaker::Person, Body::Say { text: text.clone() });
            if self.requests.len() < MAX_REQUESTS {
                self.requests.push(text);
            }
        }
    }

    /// The tools the steps may call: the team's, then the candidates'.
    fn offered(&self) -> Vec<Offered> {
        self.members
            .iter()
            .chain(&self.candidates)
            .flat_map(|member| {
                member
                    .tools
                    .iter()
                    .map(|tool| Offered::of(&member.name, tool))
            })
            .collect()
    }

    /// The member `owner`, who joins the team first if it is a candidate:
    /// its tool `tool` serves `part` of the goal.
    fn join(&mut self, owner: &str, tool: &str, part: &str) -> Member {
        if let Some(member) = self.members.iter().find(|m| m.name == owner) {
            return member.clone();
        }
        let position = self
            .candidates
            .iter()
            .position(|m| m.name == owner)
            .expect("an offered tool is a member's or a candidate's");
        let mut member = self.candidates.remove(position);
        member.reason = format!(
            "its tool {tool} serves: {}",
            crate::text::excerpt(part, 160)
        );
        self.members.push(member.clone());
        self.say(
            Speaker::Node,
            Body::Team {
                members: self.members.clone(),
                queries: self.queries.clone(),
            },
        );
        member
    }

    fn result(&self, member: &Member, task: u32, ok: bool, text: String) {
        self.goal.audit_task(ok);
        self.say(Speaker::of(member), Body::Result { task, ok, text });
    }

    /// Looks on this node and the network for agents that can do `part`;
    /// then the current request's next step with them.
    async fn look_for_help(&mut self, part: &str) -> Phase {
        self.looked_for_help += 1;
        self.say(
            Speaker::Node,
            Body::Notice {
                text: format!(
                    "no tool of the team can do \"{}\": the node looks for agents that can",
                    crate::text::excerpt(part, 160)
                ),
            },
        );
        let known: Vec<_> = self
            .members
            .iter()
            .chain(&self.candidates)
            .map(|m| m.agent)
            .collect();
        let asker = self.goal.asker();
        let found = self
            .goal
            .until_cancelled(team::candidates(&asker, &*self.goal.directory, part))
            .await;
        let found = match found {
            None => return Phase::Cancel,
            Some(Ok(found)) => found,
            Some(Err(_)) => return self.next_step(),
        };
        let mut added = false;
        for candidate in found.members {
            if !known.contains(&candidate.agent) {
                let named = team::unique(candidate, self.members.iter().chain(&self.candidates));
                self.candidates.push(named);
                added = true;
            }
        }
        self.queries.extend(found.queries);
        if !added {
            // Nothing new: what is left of this request stays not done.
            return Phase::NextRequest;
        }
        let offered = self.offered();
        if let Some((_, tools)) = &mut self.current {
            *tools = offered;
        }
        self.next_step()
    }

    /// The end at a limit: what was found, said by the node.
    fn stopped(&mut self, limit: Limit) -> End {
        if let Some(current) = self.current.take() {
            self.done.push(current);
        }
        let note = format!(
            "Stopped: the goal's {} limit was hit before the work was done.",
            limit.as_str()
        );
        let text = statements(&self.done, Some(&note));
        self.say(
            Speaker::Node,
            Body::Conclusion {
                text: text.clone(),
                limit: Some(limit.as_str().to_owned()),
            },
        );
        End::Stopped { limit, text }
    }

    /// The end when every request is served as far as it can be: the
    /// model's wording of what was found where it states it all, else the
    /// node's statement, each part not done named with why; concluded only
    /// when every part of every request was answered.
    async fn conclude(&mut self) -> End {
        if let Some(current) = self.current.take() {
            self.done.push(current);
        }
        let outcomes: Vec<Outcome> = self.done.iter().map(|(s, _)| s.outcome()).collect();
        if outcomes.iter().all(|o| *o == Outcome::NotAnswered) {
            return End::Failed(self.why_nothing());
        }
        if let Err(limit) = self.goal.budget.take_turn() {
            return self.stopped(limit);
        }
        self.goal.audit_turn();
        let ask = GoalAsk(self.goal.asker());
        let mut texts = Vec::new();
        let mut by_model = true;
        for (steps, offered) in self.done.iter().filter(|(s, _)| !s.made().is_empty()) {
            let note = wording::left_undone(steps, offered);
            let worded = self
                .goal
                .until_cancelled(wording::answer(&ask, steps, offered, note.as_deref(), None))
                .await;
            match worded {
                None => return End::Cancelled,
                Some(Ok(answer)) => {
                    by_model &= answer.by_model;
                    texts.push(answer.text);
                }
                Some(Err(AskFailure::Limit(limit))) => return self.stopped(limit),
                Some(Err(AskFailure::Failed(_))) => {
                    by_model = false;
                    texts.push(wording::statement(steps, offered, note.as_deref()));
                }
            }
        }
        // A request no call was made for is named too.
        for (steps, offered) in self.done.iter().filter(|(s, _)| s.made().is_empty()) {
            if let Some(note) = wording::left_undone(steps, offered) {
                texts.push(note);
            }
        }
        let text = texts.join("\n\n");
        let speaker = match self.members.first() {
            Some(member) if by_model => Speaker::of(member),
            _ => Speaker::Node,
        };
        self.say(
            speaker,
            Body::Conclusion {
                text: text.clone(),
                limit: None,
            },
        );
        if outcomes.iter().all(|o| *o == Outcome::Answered) {
            End::Concluded { text }
        } else {
            End::Partial { text }
        }
    }

    /// Why no part of any request was answered: what each part met (the
    /// agents' own errors, the model's failure), or that no agent has a
    /// tool for it.
    fn why_nothing(&self) -> String {
        let undone: Vec<String> = self
            .done
            .iter()
            .flat_map(|(steps, offered)| steps.undone(offered))
            .map(|u| format!("\"{}\": {}", crate::text::excerpt(&u.part, 160), u.why))
            .collect();
        let tried = self.done.iter().any(|(steps, _)| !steps.made().is_empty());
        let gave_up = undone
            .iter()
            .any(|u| !u.ends_with("no tool at hand does this"));
        if tried || gave_up {
            return format!("not done: {}", undone.join("; "));
        }
        if self.members.is_empty() && self.candidates.is_empty() {
            "no agent was found for the goal".to_owned()
        } else {
            format!(
                "no tool of {} can do what the goal asks",
                self.members
                    .iter()
                    .chain(&self.candidates)
                    .map(|m| m.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    }
}

/// The node's statement of every request's results, and `note`.
fn statements(done: &[(Steps, Vec<Offered>)], note: Option<&str>) -> String {
    let mut parts: Vec<String> = done
        .iter()
        .filter(|(steps, _)| !steps.made().is_empty())
        .map(|(steps, offered)| wording::statement(steps, offered, None))
        .collect();
    if parts.is_empty() {
        parts.push("No task had finished.".into());
    }
    if let Some(note) = note {
        parts.push(note.to_owned());
    }
    parts.join("\n")
}

/// A goal's model, asked through its budget.
struct GoalAsk<'a>(Asker<'a>);

#[async_trait::async_trait]
impl Ask for GoalAsk<'_> {
    type Error = AskFailure;

    async fn ask(
        &self,
        request: ChatRequest,
        max_tokens: u32,
        _sink: DeltaSink,
    ) -> Result<Completion, AskFailure> {
        self.0.complete(request, max_tokens).await
    }

    fn unusable(&self, why: String) -> AskFailure {
        AskFailure::Failed(why)
    }
}
