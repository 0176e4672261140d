//! The work of one team on a goal, step by step.
//!
//! ```text
//!   request ──▶ step ──call──▶ result ──▶ step … ──▶ conclusion
//!      ▲          │ no tool can take what is left: more agents (depth)
//!      └── a person's message is the next request
//!   a limit, at any point ──▶ stopped: <limit>, with what was found
//! ```
//!
//! The controller decides what the state decides: which values the next
//! call takes, which tools can take them, when the request is served and
//! when a limit stops the work ([`crate::answers::steps`]). The model is
//! asked only what needs language: which tool the step calls and with which
//! of its values, and the wording of the conclusion, which is shown only if
//! it states every call and result ([`crate::answers::wording`]). Each call
//! is a task of the member whose tool it is, made where that agent lives; a
//! member joins the team when one of its tools serves a part of the goal,
//! and its reason names the tool and the part.

use super::ask::{AskFailure, Asker};
use super::budget::Limit;
use super::member::{self, Called};
use super::message::{Assigned, Body, Member, Mode, Speaker};
use super::run::GoalRun;
use super::team;
use crate::answers::{self, Ask, Offered, Steps, wording};
use crate::llm::{ChatRequest, Completion, DeltaSink};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Model failures in a row after which the team stops trying.
const MAX_FAILED_STEPS: u32 = 3;
/// Requests one round answers at most: the goal and the person's messages.
const MAX_REQUESTS: usize = 8;

/// How a team's work ended.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// The team did what the goal asked and wrote its conclusion.
    Concluded {
        text: String,
    },
    /// A limit stopped the work; `text` says what was found before.
    Stopped {
        limit: Limit,
        text: String,
    },
    Failed(String),
    Cancelled,
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
    /// What the team must achieve.
    text: String,
    /// A person's messages.
    inbox: Option<mpsc::Receiver<String>>,
    /// Why the model's last failed step failed, if one did.
    model_failure: Option<String>,
}

/// Why the steps of a round ended.
enum Halt {
    /// The requests are served (or nothing more can be done).
    Done,
    Limit(Limit),
    Cancelled,
}

impl Team {
    /// A team of `members` (named by the person, or already formed), with
    /// `candidates` that may join when their tools are needed.
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
            text,
            inbox: None,
            model_failure: None,
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

    /// Runs the work to its end.
    pub async fn run(mut self) -> End {
        let mut requests = vec![self.text.clone()];
        let mut done: Vec<(Steps, Vec<Offered>)> = Vec::new();
        let mut halt = Halt::Done;
        let mut failed_steps = 0;
        let mut looked_for_help = 0;
        let mut next = 0;
        let mut earlier = self.goal.log.results();
        while next < requests.len() {
            let mut steps = Steps::after(&requests[next], std::mem::take(&mut earlier));
            next += 1;
            let mut offered = self.offered();
            loop {
                self.read_inbox(&mut requests);
                if self.goal.cancel.is_cancelled() {
                    halt = Halt::Cancelled;
                    break;
                }
                let step = match steps.next(&offered) {
                    Some(step) => step,
                    None => {
                        // Values left that no tool of the team can take:
                        // look for agents that can, as the depth allows.
                        let stalled = steps.unused_part();
                        if let Some(part) = stalled
                            && looked_for_help < self.goal.budget.limits.depth
                        {
                            looked_for_help += 1;
                            if self.look_for_help(&part).await {
                                offered = self.offered();
                                continue;
                            }
                        }
                        break;
                    }
                };
                if let Err(limit) = self.goal.budget.take_turn() {
                    halt = Halt::Limit(limit);
                    break;
                }
                self.goal.audit_turn();
                let ask = GoalAsk(self.goal.asker());
                let chosen = self
                    .goal
                    .until_cancelled(answers::choose(&ask, &steps, &offered, &step))
                    .await;
                let chosen = match chosen {
                    None => {
                        halt = Halt::Cancelled;
                        break;
                    }
                    Some(Err(AskFailure::Limit(limit))) => {
                        halt = Halt::Limit(limit);
                        break;
                    }
                    Some(Err(AskFailure::Failed(why))) => {
                        failed_steps += 1;
                        let text = format!("the model could not choose a call: {why}");
                        self.say(Speaker::Node, Body::Failure { text: text.clone() });
                        self.model_failure = Some(text);
                        if failed_steps >= MAX_FAILED_STEPS {
                            break;
                        }
                        continue;
                    }
                    Some(Ok(chosen)) => chosen,
                };
                failed_steps = 0;
                if steps.repeats(chosen.tool, &chosen.arguments) {
                    // The same call again would only repeat its answer.
                    break;
                }
                let tool = &offered[chosen.tool];
                let member = self.join(&tool.owner, &tool.name, &step.part);
                let task = self.goal.new_task();
                let label = wording::call_label(tool, &chosen.arguments);
                self.say(
                    Speaker::Node,
                    Body::Assign {
                        mode: Mode::Sync,
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
                let called = match called {
                    None => {
                        halt = Halt::Cancelled;
                        break;
                    }
                    Some(called) => called,
                };
                let output = match called {
                    Called::Answered(record, output) => {
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
                    Called::Limit(limit) => {
                        self.result(
                            &member,
                            task,
                            false,
                            format!("not run: the goal's {} limit was hit", limit.as_str()),
                        );
                        halt = Halt::Limit(limit);
                        break;
                    }
                    Called::Unreachable(output) => output,
                };
                let ok = !output.is_error;
                steps.record(&step, chosen.tool, chosen.arguments, output);
                let made = steps.made().last().expect("just recorded");
                let text = if ok {
                    wording::result_text(made)
                } else {
                    crate::text::one_line(&made.output.text(), 600)
                };
                self.result(&member, task, ok, text);
            }
            earlier = steps.results_for_later();
            done.push((steps, offered));
            if !matches!(halt, Halt::Done) || requests.len() >= MAX_REQUESTS {
                break;
            }
        }
        match halt {
            Halt::Cancelled => End::Cancelled,
            Halt::Limit(limit) => self.stopped(&done, limit),
            Halt::Done => self.conclude(&done).await,
        }
    }

    /// Takes the person's messages that came in: each is said, and
    /// answered after what the team works on now.
    fn read_inbox(&mut self, requests: &mut Vec<String>) {
        let Some(inbox) = &mut self.inbox else {
            return;
        };
        let mut said = Vec::new();
        while let Ok(text) = inbox.try_recv() {
            said.push(text);
        }
        for text in said {
            self.say(Speaker::Person, Body::Say { text: text.clone() });
            if requests.len() < MAX_REQUESTS {
                requests.push(text);
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
    /// whether any was found.
    async fn look_for_help(&mut self, part: &str) -> bool {
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
        let Some(Ok(found)) = found else {
            return false;
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
        added
    }

    /// The end at a limit: what was found, said by the node.
    fn stopped(&self, done: &[(Steps, Vec<Offered>)], limit: Limit) -> End {
        let note = format!(
            "Stopped: the goal's {} limit was hit before the work was done.",
            limit.as_str()
        );
        let text = statements(done, Some(&note));
        self.say(
            Speaker::Node,
            Body::Conclusion {
                text: text.clone(),
                limit: Some(limit.as_str().to_owned()),
            },
        );
        End::Stopped { limit, text }
    }

    /// The conclusion: the model's wording of each request's results where
    /// it states them all, else the node's statement.
    async fn conclude(&self, done: &[(Steps, Vec<Offered>)]) -> End {
        if done.iter().all(|(steps, _)| steps.made().is_empty()) {
            if let Some(why) = &self.model_failure {
                return End::Failed(why.clone());
            }
            return End::Failed(if self.members.is_empty() && self.candidates.is_empty() {
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
            });
        }
        if let Err(limit) = self.goal.budget.take_turn() {
            return self.stopped(done, limit);
        }
        self.goal.audit_turn();
        let ask = GoalAsk(self.goal.asker());
        let mut texts = Vec::new();
        let mut by_model = true;
        for (steps, offered) in done.iter().filter(|(s, _)| !s.made().is_empty()) {
            let note = wording::left_undone(steps);
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
                Some(Err(AskFailure::Limit(limit))) => return self.stopped(done, limit),
                Some(Err(AskFailure::Failed(_))) => {
                    by_model = false;
                    texts.push(wording::statement(steps, offered, note.as_deref()));
                }
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
        End::Concluded { text }
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
