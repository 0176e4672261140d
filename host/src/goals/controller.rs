//! The conversation of one team, as a small state machine.
//!
//! ```text
//!            ┌──────────────────────────────┐
//!  Open ──▶ Turn ──assign_sync / pause──▶ Wait ──tasks done──▶ Turn
//!   │        │  ──discussion / assign_async──▶ Turn (next speaker)
//!   │        │  ──conclude──▶ Conclude ──▶ Done
//!   └────────┴──a limit is hit──▶ Conclude (forced) ──▶ Done
//! ```
//!
//! One member speaks at a time. `Open` is the first turn, which must split
//! the goal into tasks. A turn is a discussion, a synchronous assignment
//! (the conversation waits in `Wait` for the results), an asynchronous one
//! (the conversation goes on; progress and results arrive as messages
//! between turns), a pause (wait for named tasks) or a conclusion (after
//! waiting for tasks still running). Before every turn the goal's budget is
//! checked; a limit hit leads to a conclusion from what is known, naming the
//! limit. Cancelling ends the machine wherever it is and drops every task
//! it started. Tasks run as members' tool-call loops ([`super::member`]); a
//! member may hand its task to a sub-team, which runs this same machine one
//! level deeper and whose conclusion is the task's result.

use super::budget::Limit;
use super::member::{self, Floor, Step, TaskEnd, Turn, TurnKind, Work};
use super::message::{Assigned, Body, Member, Mode, Speaker};
use super::run::GoalRun;
use super::team;
use crate::text::excerpt;
use futures::future::BoxFuture;
use std::fmt::Write as _;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// Turns in a row the model may fail before the goal fails.
const MAX_FAILED_TURNS: u32 = 3;
/// Tasks of one team running at once at most.
const MAX_RUNNING_TASKS: usize = 8;
/// Tasks one team assigns at most, over its whole conversation.
const MAX_TEAM_TASKS: usize = 32;
/// The transcript a speaker reads, at most (the newest part).
const MAX_TRANSCRIPT: usize = 6000;
/// What a task is told of the team's results, at most.
const MAX_CONTEXT: usize = 3000;

/// Where the machine is.
enum State {
    /// The first turn: `speaker` splits the goal into tasks.
    Open {
        speaker: usize,
    },
    /// `speaker` takes a turn.
    Turn {
        speaker: usize,
    },
    /// The conversation waits for `tasks`, then goes on as `then`.
    Wait {
        tasks: Vec<u32>,
        then: Box<State>,
    },
    /// `speaker` writes the conclusion; `limit` is the limit that forced it.
    Conclude {
        speaker: usize,
        limit: Option<Limit>,
    },
    Done(End),
}

/// How a team's conversation ended.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    Concluded { text: String, limit: Option<Limit> },
    Failed(String),
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TaskState {
    Running,
    Done,
    Failed,
}

struct Task {
    id: u32,
    assignee: usize,
    text: String,
    state: TaskState,
    result: Option<String>,
}

/// One team's conversation.
pub struct Team {
    goal: Arc<GoalRun>,
    members: Vec<Member>,
    /// The task this team works on; `None` for the main team.
    parent: Option<u32>,
    /// 0 for the main team, one more for each sub-team level.
    depth: u32,
    /// What this team must achieve.
    text: String,
    /// A person's messages (the main team only).
    inbox: Option<mpsc::Receiver<String>>,
    running: JoinSet<(u32, TaskEnd)>,
    /// Where tasks report their steps, and where the controller reads them.
    step_sender: mpsc::UnboundedSender<(u32, Step)>,
    steps: mpsc::UnboundedReceiver<(u32, Step)>,
    tasks: Vec<Task>,
    failed_turns: u32,
}

impl Team {
    pub fn new(
        goal: Arc<GoalRun>,
        members: Vec<Member>,
        parent: Option<u32>,
        depth: u32,
        text: String,
    ) -> Team {
        let (step_sender, steps) = mpsc::unbounded_channel();
        Team {
            goal,
            members,
            parent,
            depth,
            text,
            inbox: None,
            running: JoinSet::new(),
            step_sender,
            steps,
            tasks: Vec::new(),
            failed_turns: 0,
        }
    }

    /// Lets a person's messages reach this team.
    pub fn listening(mut self, inbox: mpsc::Receiver<String>) -> Team {
        self.inbox = Some(inbox);
        self
    }

    /// Runs the conversation to its end; `open` when it starts afresh (the
    /// first turn splits the goal), not when a person's message resumes it.
    pub async fn run(mut self) -> End {
        let open = !self
            .goal
            .log
            .team_messages(self.parent)
            .iter()
            .any(|m| matches!(m.body, Body::Assign { .. }));
        let mut state = if open {
            State::Open { speaker: 0 }
        } else {
            State::Turn { speaker: 0 }
        };
        loop {
            self.collect();
            if self.goal.cancel.is_cancelled() {
                state = State::Done(End::Cancelled);
            }
            state = match state {
                State::Done(end) => {
                    self.running.abort_all();
                    return end;
                }
                State::Open { speaker } => self.turn(speaker, true).await,
                State::Turn { speaker } => self.turn(speaker, false).await,
                State::Wait { tasks, then } => self.wait(tasks, *then).await,
                State::Conclude { speaker, limit } => self.conclude(speaker, limit).await,
            };
        }
    }

    fn say(&self, speaker: Speaker, body: Body, next: Option<String>) {
        self.goal.log.append(self.parent, speaker, body, next);
    }

    fn member_speaks(&self, speaker: usize, body: Body, next: Option<usize>) {
        let next = next.map(|n| self.members[n].name.clone());
        self.say(Speaker::of(&self.members[speaker]), body, next);
    }

    /// Appends what happened since the last step: steps and results of
    /// tasks, and a person's messages.
    fn collect(&mut self) {
        while let Ok((task, step)) = self.steps.try_recv() {
            self.progress(task, step);
        }
        while let Some(joined) = self.running.try_join_next() {
            self.finished(joined);
        }
        if let Some(inbox) = &mut self.inbox {
            let mut said = Vec::new();
            while let Ok(text) = inbox.try_recv() {
                said.push(text);
            }
            for text in said {
                self.say(Speaker::Person, Body::Say { text }, None);
            }
        }
    }

    fn progress(&self, task: u32, step: Step) {
        let speaker = self
            .tasks
            .iter()
            .find(|t| t.id == task)
            .map_or(Speaker::Node, |t| Speaker::of(&self.members[t.assignee]));
        self.say(
            speaker,
            Body::Progress {
                task,
                text: step.text,
                call: step.call,
            },
            None,
        );
    }

    fn finished(&mut self, joined: Result<(u32, TaskEnd), tokio::task::JoinError>) {
        let Ok((id, end)) = joined else {
            // Aborted (the goal is ending) or panicked: the task's state
            // says running until the end is written below.
            return;
        };
        // Steps sent before the task ended come first.
        while let Ok((task, step)) = self.steps.try_recv() {
            self.progress(task, step);
        }
        let Some(index) = self.tasks.iter().position(|t| t.id == id) else {
            return;
        };
        let (ok, text) = match end {
            TaskEnd::Done(text) => (true, text),
            TaskEnd::Failed(why) => (false, why),
            TaskEnd::Delegate(_) => (false, "the sub-team was not formed".into()),
        };
        let task = &mut self.tasks[index];
        task.state = if ok {
            TaskState::Done
        } else {
            TaskState::Failed
        };
        task.result = Some(text.clone());
        self.goal.audit_task(ok);
        let speaker = Speaker::of(&self.members[task.assignee]);
        self.say(speaker, Body::Result { task: id, ok, text }, None);
    }

    fn running_ids(&self) -> Vec<u32> {
        self.tasks
            .iter()
            .filter(|t| t.state == TaskState::Running)
            .map(|t| t.id)
            .collect()
    }

    fn index_of(&self, name: &str) -> Option<usize> {
        self.members.iter().position(|m| m.name == name)
    }

    /// Who speaks after `speaker` when it named nobody else.
    fn after(&self, speaker: usize, named: Option<&str>) -> usize {
        match named.and_then(|n| self.index_of(n)) {
            Some(next) if next != speaker || self.members.len() == 1 => next,
            _ => (speaker + 1) % self.members.len(),
        }
    }

    async fn turn(&mut self, speaker: usize, opening: bool) -> State {
        if let Err(limit) = self.goal.budget.take_turn() {
            return State::Conclude {
                speaker,
                limit: Some(limit),
            };
        }
        let mut allowed: Vec<TurnKind> = if opening {
            vec![TurnKind::AssignSync, TurnKind::AssignAsync]
        } else {
            TurnKind::ALL.to_vec()
        };
        let running = self.running_ids();
        if running.is_empty() {
            allowed.retain(|k| *k != TurnKind::Pause);
        }
        if self.tasks.len() + 4 > MAX_TEAM_TASKS || running.len() >= MAX_RUNNING_TASKS {
            allowed.retain(|k| !matches!(k, TurnKind::AssignSync | TurnKind::AssignAsync));
        }
        let answer = {
            let transcript = self.transcript();
            let tasks = self.task_lines();
            let known: Vec<u32> = running.clone();
            let floor = Floor {
                goal: &self.text,
                team: &self.members,
                transcript: &transcript,
                tasks: &tasks,
                known_tasks: &known,
                note: opening.then_some(
                    "This is the first turn: split the goal into tasks for the members.",
                ),
            };
            let asker = self.goal.asker();
            let speaking = member::speak(&asker, &self.members[speaker], &floor, &allowed);
            match self.goal.until_cancelled(speaking).await {
                Some(answer) => answer,
                None => return State::Done(End::Cancelled),
            }
        };
        self.goal.audit_turn();
        let turn = match answer {
            Ok(turn) => turn,
            Err(super::ask::AskFailure::Limit(limit)) => {
                return State::Conclude {
                    speaker,
                    limit: Some(limit),
                };
            }
            Err(super::ask::AskFailure::Failed(why)) => {
                self.failed_turns += 1;
                let name = self.members[speaker].name.clone();
                self.say(
                    Speaker::Node,
                    Body::Failure {
                        text: format!("{name}'s turn failed: {why}"),
                    },
                    None,
                );
                if self.failed_turns >= MAX_FAILED_TURNS {
                    return State::Done(End::Failed(format!(
                        "the model failed {MAX_FAILED_TURNS} turns in a row; the last: {why}"
                    )));
                }
                let next = self.after(speaker, None);
                return if opening {
                    State::Open { speaker: next }
                } else {
                    State::Turn { speaker: next }
                };
            }
        };
        self.failed_turns = 0;
        self.apply(speaker, turn)
    }

    /// What a member's turn does to the conversation.
    fn apply(&mut self, speaker: usize, turn: Turn) -> State {
        let next = self.after(speaker, turn.next.as_deref());
        match turn.kind {
            TurnKind::Discussion => {
                self.member_speaks(speaker, Body::Discussion { text: turn.text }, Some(next));
                State::Turn { speaker: next }
            }
            TurnKind::AssignSync | TurnKind::AssignAsync => {
                let mode = if turn.kind == TurnKind::AssignSync {
                    Mode::Sync
                } else {
                    Mode::Async
                };
                let context = self.results();
                let mut assigned = Vec::new();
                for (assignee, text) in turn.tasks {
                    let Some(assignee) = self.index_of(&assignee) else {
                        continue;
                    };
                    let id = self.goal.new_task();
                    assigned.push(Assigned {
                        task: id,
                        assignee: self.members[assignee].name.clone(),
                        text: text.clone(),
                    });
                    self.tasks.push(Task {
                        id,
                        assignee,
                        text,
                        state: TaskState::Running,
                        result: None,
                    });
                }
                let ids: Vec<u32> = assigned.iter().map(|a| a.task).collect();
                // The assignment is said before any task reports.
                self.member_speaks(
                    speaker,
                    Body::Assign {
                        mode,
                        text: turn.text,
                        tasks: assigned,
                    },
                    Some(next),
                );
                for id in &ids {
                    self.spawn(*id, &context);
                }
                match mode {
                    Mode::Sync => State::Wait {
                        tasks: ids,
                        then: Box::new(State::Turn { speaker: next }),
                    },
                    Mode::Async => State::Turn { speaker: next },
                }
            }
            TurnKind::Pause => {
                let running = self.running_ids();
                let mut tasks: Vec<u32> = turn
                    .wait_for
                    .into_iter()
                    .filter(|id| running.contains(id))
                    .collect();
                if tasks.is_empty() {
                    tasks = running;
                }
                self.member_speaks(
                    speaker,
                    Body::Pause {
                        text: turn.text,
                        tasks: tasks.clone(),
                    },
                    Some(next),
                );
                State::Wait {
                    tasks,
                    then: Box::new(State::Turn { speaker: next }),
                }
            }
            TurnKind::Conclude => {
                let running = self.running_ids();
                if running.is_empty() {
                    self.member_speaks(
                        speaker,
                        Body::Conclusion {
                            text: turn.text.clone(),
                            limit: None,
                        },
                        None,
                    );
                    return State::Done(End::Concluded {
                        text: turn.text,
                        limit: None,
                    });
                }
                self.say(
                    Speaker::Node,
                    Body::Notice {
                        text: format!(
                            "{} would conclude; the conversation first waits for the tasks still running",
                            self.members[speaker].name
                        ),
                    },
                    None,
                );
                State::Wait {
                    tasks: running,
                    then: Box::new(State::Conclude {
                        speaker,
                        limit: None,
                    }),
                }
            }
        }
    }

    /// Starts task `id` in the background.
    fn spawn(&mut self, id: u32, context: &str) {
        let Some(task) = self.tasks.iter().find(|t| t.id == id) else {
            return;
        };
        let goal = self.goal.clone();
        let member = self.members[task.assignee].clone();
        let job = TaskJob {
            id,
            team_goal: self.text.clone(),
            text: task.text.clone(),
            context: context.to_owned(),
            depth: self.depth,
            steps: self.step_sender.clone(),
        };
        self.running
            .spawn(async move { (id, run_task(goal, member, job).await) });
    }

    /// Waits until `tasks` have finished, taking in progress, results and a
    /// person's messages meanwhile.
    async fn wait(&mut self, tasks: Vec<u32>, then: State) -> State {
        loop {
            self.collect();
            let pending = self
                .tasks
                .iter()
                .any(|t| tasks.contains(&t.id) && t.state == TaskState::Running);
            if !pending {
                return then;
            }
            let deadline = self.goal.budget.deadline;
            let speaker = match &then {
                State::Turn { speaker } | State::Conclude { speaker, .. } => *speaker,
                _ => 0,
            };
            tokio::select! {
                Some(joined) = self.running.join_next() => self.finished(joined),
                Some((task, step)) = self.steps.recv() => self.progress(task, step),
                Some(text) = recv_opt(&mut self.inbox) => {
                    self.say(Speaker::Person, Body::Say { text }, None);
                }
                _ = tokio::time::sleep_until(deadline.into()) => {
                    return State::Conclude { speaker, limit: Some(Limit::Deadline) };
                }
                _ = self.goal.cancel.cancelled() => return State::Done(End::Cancelled),
            }
        }
    }

    async fn conclude(&mut self, speaker: usize, limit: Option<Limit>) -> State {
        let stopped = self.running_ids();
        if !stopped.is_empty() {
            self.running.abort_all();
            for task in self.tasks.iter_mut().filter(|t| stopped.contains(&t.id)) {
                task.state = TaskState::Failed;
                task.result = Some("stopped before it finished: the team concluded".into());
            }
            for id in stopped {
                let assignee = self.tasks.iter().find(|t| t.id == id).map(|t| t.assignee);
                self.say(
                    assignee.map_or(Speaker::Node, |a| Speaker::of(&self.members[a])),
                    Body::Result {
                        task: id,
                        ok: false,
                        text: "stopped before it finished: the team concluded".into(),
                    },
                    None,
                );
                self.goal.audit_task(false);
            }
        }
        if let Some(limit) = limit {
            self.say(
                Speaker::Node,
                Body::Notice {
                    text: format!(
                        "the goal's {} limit was hit: the team concludes from what it knows",
                        limit.as_str()
                    ),
                },
                None,
            );
        }
        let asked = match limit {
            Some(limit) if !limit.leaves_the_model() => None,
            _ => {
                let transcript = self.transcript();
                let tasks = self.task_lines();
                let note = limit.map(|l| {
                    format!(
                        "The goal's {} limit was hit. Conclude now from what the team knows, and say what is missing.",
                        l.as_str()
                    )
                });
                let floor = Floor {
                    goal: &self.text,
                    team: &self.members,
                    transcript: &transcript,
                    tasks: &tasks,
                    known_tasks: &[],
                    note: Some(note.as_deref().unwrap_or("Write the conclusion now.")),
                };
                let asker = self.goal.asker();
                let speaking = member::speak(
                    &asker,
                    &self.members[speaker],
                    &floor,
                    &[TurnKind::Conclude],
                );
                match self.goal.until_cancelled(speaking).await {
                    Some(answer) => answer.ok(),
                    None => return State::Done(End::Cancelled),
                }
            }
        };
        let (speaker, text) = match asked {
            Some(turn) => (Speaker::of(&self.members[speaker]), turn.text),
            None => (Speaker::Node, self.summary(limit)),
        };
        let limit_name = limit.map(|l| l.as_str().to_owned());
        self.say(
            speaker,
            Body::Conclusion {
                text: text.clone(),
                limit: limit_name,
            },
            None,
        );
        State::Done(End::Concluded { text, limit })
    }

    /// A conclusion made without the model: the results so far.
    fn summary(&self, limit: Option<Limit>) -> String {
        let mut text = match limit {
            Some(limit) => format!(
                "The goal stopped at its {} limit before the team concluded.",
                limit.as_str()
            ),
            None => "The team could not write a conclusion.".to_owned(),
        };
        let results = self.results();
        if results.is_empty() {
            text.push_str(" No task had finished.");
        } else {
            text.push_str(" What the team found:\n");
            text.push_str(&results);
        }
        text
    }

    /// The finished tasks' results, for a task's context or a summary.
    fn results(&self) -> String {
        let mut text = String::new();
        for task in &self.tasks {
            let Some(result) = &task.result else { continue };
            let outcome = if task.state == TaskState::Done {
                ""
            } else {
                " (failed)"
            };
            let _ = writeln!(
                text,
                "- #{} {} ({}){outcome}: {}",
                task.id,
                excerpt(&task.text, 120),
                self.members[task.assignee].name,
                excerpt(result, 600)
            );
        }
        crate::text::truncated(text, MAX_CONTEXT)
    }

    fn task_lines(&self) -> String {
        let mut text = String::new();
        for task in &self.tasks {
            let state = match task.state {
                TaskState::Running => "running".to_owned(),
                TaskState::Done => format!(
                    "done: {}",
                    excerpt(task.result.as_deref().unwrap_or(""), 300)
                ),
                TaskState::Failed => format!(
                    "failed: {}",
                    excerpt(task.result.as_deref().unwrap_or(""), 300)
                ),
            };
            let _ = writeln!(
                text,
                "#{} {}: {} — {state}",
                task.id,
                self.members[task.assignee].name,
                excerpt(&task.text, 200)
            );
        }
        text
    }

    /// The team's conversation as the speaker reads it: the newest part.
    fn transcript(&self) -> String {
        let mut lines: Vec<String> = Vec::new();
        for message in self.goal.log.team_messages(self.parent) {
            let who = message.speaker.name().to_owned();
            let line = match &message.body {
                Body::Goal { .. } | Body::Progress { .. } | Body::Team { .. } => continue,
                Body::Say { text } => format!("{who}: {text}"),
                Body::Discussion { text } => format!("{who}: {text}"),
                Body::Assign { mode, text, tasks } => {
                    let how = if *mode == Mode::Sync {
                        "and waits"
                    } else {
                        "and goes on"
                    };
                    let list: Vec<String> = tasks
                        .iter()
                        .map(|t| {
                            format!("#{} to {}: {}", t.task, t.assignee, excerpt(&t.text, 200))
                        })
                        .collect();
                    format!("{who} assigns {how} ({}): {text}", list.join("; "))
                }
                Body::Pause { text, tasks } => format!("{who} waits for {tasks:?}: {text}"),
                Body::Result { task, ok, text } => format!(
                    "result of #{task} from {who}{}: {}",
                    if *ok { "" } else { " (failed)" },
                    excerpt(text, 800)
                ),
                Body::Failure { text } | Body::Notice { text } => format!("node: {text}"),
                Body::Conclusion { text, .. } => format!("{who} concluded: {text}"),
            };
            lines.push(line);
        }
        member::newest_lines(&lines.join("\n"), MAX_TRANSCRIPT).into_owned()
    }
}

async fn recv_opt(inbox: &mut Option<mpsc::Receiver<String>>) -> Option<String> {
    match inbox {
        Some(inbox) => inbox.recv().await,
        None => std::future::pending().await,
    }
}

/// What a task needs besides the goal and the member.
struct TaskJob {
    id: u32,
    team_goal: String,
    text: String,
    context: String,
    depth: u32,
    steps: mpsc::UnboundedSender<(u32, Step)>,
}

/// A task from start to end: the member's loop, or the sub-team it forms.
fn run_task(goal: Arc<GoalRun>, member: Member, job: TaskJob) -> BoxFuture<'static, TaskEnd> {
    Box::pin(async move {
        let asker = goal.asker();
        let steps = job.steps.clone();
        let id = job.id;
        let report = move |step: Step| {
            let _ = steps.send((id, step));
        };
        let work = Work {
            asker: &asker,
            directory: &*goal.directory,
            budget: &goal.budget,
            member: &member,
            goal: &job.team_goal,
            task: &job.text,
            context: &job.context,
            may_delegate: job.depth < goal.budget.limits.depth,
        };
        match member::do_task(work, &report).await {
            TaskEnd::Delegate(sub_goal) => {
                report(Step {
                    text: format!(
                        "{} forms a sub-team for: {}",
                        member.name,
                        excerpt(&sub_goal, 300)
                    ),
                    call: None,
                });
                sub_team(goal, sub_goal, id, job.depth + 1).await
            }
            end => end,
        }
    })
}

/// A sub-team for task `task`, `depth` levels down; its conclusion is the
/// task's result.
async fn sub_team(goal: Arc<GoalRun>, text: String, task: u32, depth: u32) -> TaskEnd {
    let formed = {
        let asker = goal.asker();
        team::discover(&asker, &*goal.directory, &text).await
    };
    let formed = match formed {
        Ok(formed) => formed,
        Err(failure) => {
            let why = failure.to_string();
            goal.log.append(
                Some(task),
                Speaker::Node,
                Body::Failure { text: why.clone() },
                None,
            );
            return TaskEnd::Failed(why);
        }
    };
    goal.log.append(
        Some(task),
        Speaker::Node,
        Body::Team {
            members: formed.members.clone(),
            queries: formed.queries,
        },
        None,
    );
    match Team::new(goal, formed.members, Some(task), depth, text)
        .run()
        .await
    {
        End::Concluded { text, limit: None } => TaskEnd::Done(text),
        End::Concluded {
            text,
            limit: Some(limit),
        } => TaskEnd::Done(format!(
            "{text} (the sub-team stopped at the {} limit)",
            limit.as_str()
        )),
        End::Failed(why) => TaskEnd::Failed(format!("the sub-team failed: {why}")),
        End::Cancelled => TaskEnd::Failed("cancelled".into()),
    }
}
