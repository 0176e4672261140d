//! Goals and teams: a person gives the node a goal; the node forms a team of
//! agents that can help (here or anywhere on the network), runs a structured
//! conversation among them in which tasks are assigned and run, and hands
//! back the conclusion with the whole conversation and where every piece
//! came from.
//!
//! - [`team`] forms the team (named by the person, or found by search and
//!   picked by the model);
//! - [`controller`] runs a team's conversation (the state machine);
//! - [`member`] is a member speaking and doing tasks through the model;
//! - [`store`] keeps goals and messages in the node's database;
//! - [`api`] serves them over HTTP and the command line reads them there;
//! - [`mcp`] is the `goal` tool on the node's `/mcp`.
//!
//! Every step is bounded by the goal's [`budget`] and runs under the grants
//! and limits that apply to any call of an agent.

pub(crate) mod api;
pub mod ask;
pub(crate) mod budget;
pub mod config;
pub(crate) mod controller;
pub mod directory;
pub(crate) mod mcp;
pub(crate) mod member;
pub mod message;
pub(crate) mod metrics;
mod run;
pub mod store;
pub(crate) mod team;

pub use config::{GoalsConfig, Verify};
pub use message::{Body, GoalId, GoalRecord, GoalState, Member, Message, Speaker};

use crate::requester::Requester;
use ask::GoalModel;
use budget::Budget;
use config::AskedLimits;
use controller::{End, Team};
use directory::Directory;
use message::{GoalUsage, new_goal_id, unix_millis};
use run::{GoalRun, Log};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use store::GoalStore;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

/// The longest goal or message a person may send, in bytes.
pub const MAX_TEXT: usize = 8 * 1024;
/// Goals listed at most.
pub const MAX_LISTED: usize = 200;
/// Messages read from the store at a time when a listener catches up.
const REPLAY_PAGE: usize = 500;
/// A person's messages waiting for a running goal to read them, at most.
const INBOX: usize = 16;
/// How often a running goal's cost is sent to its listeners, at most.
const USAGE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Something that happened to a goal, as listeners receive it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum GoalEvent {
    /// A message was appended.
    Message { goal: GoalId, message: Box<Message> },
    /// The goal's state changed (its record as it is now).
    State {
        goal: GoalId,
        record: Box<GoalRecord>,
    },
}

impl GoalEvent {
    pub fn goal(&self) -> &str {
        match self {
            GoalEvent::Message { goal, .. } | GoalEvent::State { goal, .. } => goal,
        }
    }
}

/// A goal a person gives.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NewGoal {
    pub text: String,
    /// Agents (names, ids or search words) that are the team; the node
    /// forms one when empty.
    #[serde(default)]
    pub team: Vec<String>,
    #[serde(default)]
    pub limits: AskedLimits,
    /// The node's model to speak for the members; its default when `None`.
    #[serde(default)]
    pub model: Option<String>,
    /// How to check answers from other nodes; the node's default when `None`.
    #[serde(default)]
    pub verify: Option<Verify>,
}

/// Why a goal request was refused. Each is one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GoalError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    /// The goal is not in a state that allows it.
    #[error("{0}")]
    Conflict(String),
    /// Too many goals run already.
    #[error("{0}")]
    Busy(String),
    #[error("{0}")]
    Storage(String),
}

struct Running {
    cancel: CancellationToken,
    inbox: mpsc::Sender<String>,
    /// What the round has spent so far, for a record read while it runs.
    run: Option<Arc<GoalRun>>,
}

/// The node's goals.
pub struct Goals {
    store: Arc<GoalStore>,
    model: Arc<dyn GoalModel>,
    directory: Arc<dyn Directory>,
    config: GoalsConfig,
    /// Where goals are counted, on a node.
    metrics: Option<Arc<metrics::GoalMetrics>>,
    events: broadcast::Sender<GoalEvent>,
    running: Mutex<HashMap<GoalId, Running>>,
}

fn check_text(text: &str, what: &str) -> Result<(), GoalError> {
    if text.trim().is_empty() {
        return Err(GoalError::Invalid(format!("{what} has no text")));
    }
    if text.len() > MAX_TEXT {
        return Err(GoalError::Invalid(format!(
            "{what} of {} bytes is over the limit of {MAX_TEXT}",
            text.len()
        )));
    }
    Ok(())
}

impl Goals {
    pub fn new(
        store: GoalStore,
        model: Arc<dyn GoalModel>,
        directory: Arc<dyn Directory>,
        config: GoalsConfig,
        audit: Option<Arc<crate::audit::Audit>>,
    ) -> Arc<Goals> {
        let (events, _) = broadcast::channel(1024);
        Arc::new(Goals {
            store: Arc::new(store),
            model,
            directory,
            config,
            metrics: audit.map(|audit| audit.section()),
            events,
            running: Mutex::new(HashMap::new()),
        })
    }

    /// The goals of `node` (its database, its models, its agents and, when
    /// it is on a network, the network's).
    pub fn for_node(
        node: &Arc<crate::Node>,
        hub: Option<Arc<crate::hub::Hub>>,
        config: GoalsConfig,
    ) -> anyhow::Result<Arc<Goals>> {
        let store = GoalStore::open(&node.data_dir().goals())?;
        let directory = directory::NodeDirectory::new(node.clone(), hub, config.fetch_members);
        Ok(Goals::new(
            store,
            node.models().clone(),
            Arc::new(directory),
            config,
            Some(node.audit().clone()),
        ))
    }

    pub fn config(&self) -> &GoalsConfig {
        &self.config
    }

    /// Listens to every goal's messages and state changes.
    pub fn subscribe(&self) -> broadcast::Receiver<GoalEvent> {
        self.events.subscribe()
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<GoalId, Running>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a goal; it runs in the background. Returns its record.
    /// `requester` is who gives it, whose share of the kept goals it takes.
    pub async fn start(
        self: &Arc<Self>,
        new: NewGoal,
        requester: &Requester,
    ) -> Result<GoalRecord, GoalError> {
        if !self.config.enabled {
            return Err(GoalError::Conflict(
                "this node takes no goals ([goals] enabled = false)".into(),
            ));
        }
        check_text(&new.text, "the goal")?;
        let limits = self
            .config
            .limits(&new.limits)
            .map_err(GoalError::Invalid)?;
        let model = self
            .model
            .resolve(new.model.as_deref())
            .map_err(GoalError::Invalid)?;
        if new.team.len() > team::MAX_NAMED {
            return Err(GoalError::Invalid(format!(
                "a team has at most {} named members",
                team::MAX_NAMED
            )));
        }
        // A named team is known before the goal starts: a wrong name is the
        // person's error, said at once.
        let named = if new.team.is_empty() {
            None
        } else {
            Some(
                team::named(&*self.directory, &new.team)
                    .await
                    .map_err(|e| GoalError::Invalid(e.to_string()))?,
            )
        };
        let now = unix_millis();
        let mut record = GoalRecord {
            id: new_goal_id(),
            text: new.text.clone(),
            state: GoalState::Forming,
            created_at: now,
            updated_at: now,
            team: Vec::new(),
            model,
            limits,
            usage: GoalUsage::default(),
            conclusion: None,
            reason: None,
            requester: requester.clone(),
            verify: new.verify.unwrap_or(self.config.verify),
        };
        // Its place among the kept goals is taken now: a goal the store
        // cannot keep is refused before anything runs.
        self.store
            .admit(&record)
            .map_err(|refused| GoalError::Busy(refused.0))?;
        let first = Message {
            seq: 1,
            at: now,
            team: None,
            speaker: Speaker::Person,
            body: Body::Goal {
                text: new.text.clone(),
            },
            next: None,
        };
        let mut messages = vec![first];
        if let Some(formed) = named {
            record.team = formed.members.iter().map(|m| m.name.clone()).collect();
            messages.push(Message {
                seq: 2,
                at: now,
                team: None,
                speaker: Speaker::Node,
                body: Body::Team {
                    members: formed.members,
                    queries: Vec::new(),
                },
                next: None,
            });
        }
        if let Err(e) = self.launch(record.clone(), messages, new.model, None, new.text) {
            self.store.forget(&record.id);
            return Err(e);
        }
        Ok(record)
    }

    /// Continues goal `id` with a person's message: read by the team on its
    /// next turn when the goal runs; otherwise a new round of the goal
    /// starts with it, with the same team and fresh limits.
    pub async fn say(self: &Arc<Self>, id: &str, text: String) -> Result<GoalRecord, GoalError> {
        check_text(&text, "the message")?;
        let inbox = self.running().get(id).map(|r| r.inbox.clone());
        if let Some(inbox) = inbox {
            inbox.try_send(text).map_err(|_| {
                GoalError::Busy("the goal has not read the person's last messages yet".into())
            })?;
            return self.record(id).await;
        }
        let mut record = self.record(id).await?;
        let mut messages = self
            .store
            .messages(id, 0, run::MAX_MESSAGES)
            .await
            .map_err(|e| GoalError::Storage(e.to_string()))?;
        let seq = messages.last().map_or(1, |m| m.seq + 1);
        messages.push(Message {
            seq,
            at: unix_millis(),
            team: None,
            speaker: Speaker::Person,
            body: Body::Say { text: text.clone() },
            next: None,
        });
        record.state = GoalState::Running;
        record.conclusion = None;
        record.reason = None;
        let model = Some(record.model.clone());
        let stored = messages.len() - 1;
        self.launch(record.clone(), messages, model, Some(stored), text)?;
        Ok(record)
    }

    /// Stops goal `id` and every call it started.
    pub fn cancel(&self, id: &str) -> Result<(), GoalError> {
        match self.running().get(id) {
            Some(running) => {
                running.cancel.cancel();
                Ok(())
            }
            None => Err(GoalError::Conflict(format!(
                "goal {id} is not running; only a running goal can be cancelled"
            ))),
        }
    }

    /// The record of goal `id`; a running goal's with what it has spent
    /// so far.
    pub async fn record(&self, id: &str) -> Result<GoalRecord, GoalError> {
        let record = self
            .store
            .goal(id)
            .await
            .map_err(|e| GoalError::Storage(e.to_string()))?
            .ok_or_else(|| GoalError::NotFound(format!("no goal {id} on this node")))?;
        Ok(self.live(record))
    }

    /// `record` as it is now: a running goal's usage counts its round so
    /// far, and its team is the one working.
    fn live(&self, mut record: GoalRecord) -> GoalRecord {
        let run = self
            .running()
            .get(&record.id)
            .and_then(|running| running.run.clone());
        if let Some(run) = run
            && record.state.is_active()
        {
            add_round(&mut record, &run);
        }
        record
    }

    /// The messages of goal `id` after `after`, at most `limit`.
    pub async fn messages(
        &self,
        id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Message>, GoalError> {
        self.store
            .messages(id, after, limit)
            .await
            .map_err(|e| GoalError::Storage(e.to_string()))
    }

    /// The newest goals, at most `limit`.
    pub async fn list(&self, limit: usize) -> Result<Vec<GoalRecord>, GoalError> {
        let records = self
            .store
            .goals(limit.min(MAX_LISTED))
            .await
            .map_err(|e| GoalError::Storage(e.to_string()))?;
        Ok(records.into_iter().map(|r| self.live(r)).collect())
    }

    /// Waits until goal `id` is no longer running; returns its record.
    pub async fn finished(&self, id: &str) -> Result<GoalRecord, GoalError> {
        let mut events = self.subscribe();
        loop {
            let record = self.record(id).await?;
            if !record.state.is_active() && !self.running().contains_key(id) {
                return Ok(record);
            }
            loop {
                match events.recv().await {
                    Ok(GoalEvent::State { goal, record }) if goal == id => {
                        if !record.state.is_active() {
                            break;
                        }
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => break,
                    Err(broadcast::error::RecvError::Closed) => {
                        return Err(GoalError::Conflict("the node is stopping".into()));
                    }
                }
            }
        }
    }

    /// Sends goal `id`'s messages after `after` to `sender`, then its events
    /// as they happen, until it stops or `sender`'s receiver goes away. The
    /// stored messages are read after listening starts, so that none falls
    /// in between; a listener that falls behind catches up from the store.
    /// The state sent after them may be older than the last of them (read
    /// first, see below); a newer state then follows from the live events.
    pub async fn follow(
        self: Arc<Self>,
        id: GoalId,
        mut after: u64,
        sender: mpsc::Sender<GoalEvent>,
    ) {
        let mut live = self.subscribe();
        loop {
            // The state is read before the messages: a goal that has ended
            // stored all of its messages before its final state, so none
            // of them is missed by a follower that stops at that state.
            let Ok(record) = self.record(&id).await else {
                return;
            };
            loop {
                let Ok(page) = self.messages(&id, after, REPLAY_PAGE).await else {
                    return;
                };
                let done = page.len() < REPLAY_PAGE;
                for message in page {
                    after = message.seq;
                    let event = GoalEvent::Message {
                        goal: id.clone(),
                        message: Box::new(message),
                    };
                    if sender.send(event).await.is_err() {
                        return;
                    }
                }
                if done {
                    break;
                }
            }
            let active = record.state.is_active();
            let state = GoalEvent::State {
                goal: id.clone(),
                record: Box::new(record),
            };
            if sender.send(state).await.is_err() || !active {
                return;
            }
            loop {
                match live.recv().await {
                    Ok(event) if event.goal() == id => {
                        let ended = match &event {
                            GoalEvent::Message { message, .. } if message.seq <= after => continue,
                            GoalEvent::Message { message, .. } => {
                                after = message.seq;
                                false
                            }
                            GoalEvent::State { record, .. } => !record.state.is_active(),
                        };
                        if sender.send(event).await.is_err() || ended {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => break,
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        }
    }

    /// Runs a round of a goal in the background: forms the team first when
    /// `earlier` holds none. The first `stored` messages of `earlier` are in
    /// the store already (none of a new goal's).
    fn launch(
        self: &Arc<Self>,
        mut record: GoalRecord,
        earlier: Vec<Message>,
        model: Option<String>,
        stored: Option<usize>,
        request: String,
    ) -> Result<(), GoalError> {
        let cancel = CancellationToken::new();
        let (inbox, person) = mpsc::channel(INBOX);
        {
            let mut running = self.running();
            if running.contains_key(&record.id) {
                return Err(GoalError::Conflict(format!(
                    "goal {} is running",
                    record.id
                )));
            }
            if running.len() >= self.config.running as usize {
                return Err(GoalError::Busy(format!(
                    "this node runs {} goals at once ([goals] running); try again when one ends",
                    self.config.running
                )));
            }
            running.insert(
                record.id.clone(),
                Running {
                    cancel: cancel.clone(),
                    inbox,
                    run: None,
                },
            );
        }
        let last_task = earlier
            .iter()
            .filter_map(|m| match &m.body {
                Body::Assign { tasks, .. } => tasks.iter().map(|t| t.task).max(),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        // The messages not yet stored (a new goal's first, a person's
        // message resuming it) are stored now, in order.
        let unstored = stored.unwrap_or(0);
        record.updated_at = unix_millis();
        self.store.save(&record);
        for message in &earlier[unstored..] {
            self.store.append(&record.id, message);
            let _ = self.events.send(GoalEvent::Message {
                goal: record.id.clone(),
                message: Box::new(message.clone()),
            });
        }
        self.publish_state(&record);
        let log = Log::new(
            record.id.clone(),
            self.store.clone(),
            self.events.clone(),
            earlier,
        );
        let goal = Arc::new(
            GoalRun::new(
                record.id.clone(),
                self.model.clone(),
                model,
                self.directory.clone(),
                Budget::new(record.limits),
                log,
                cancel,
                self.metrics.clone(),
                last_task,
            )
            .verifying(record.verify),
        );
        if let Some(running) = self.running().get_mut(&record.id) {
            running.run = Some(goal.clone());
        }
        let goals = self.clone();
        tokio::spawn(async move {
            let reporting = goals.report_while_running(record.id.clone(), goal.clone());
            let end = goals.round(&goal, &mut record, person, request).await;
            reporting.abort();
            goals.end(&goal, record, end);
        });
        Ok(())
    }

    /// Sends goal `id`'s record, with what its round `run` has spent so
    /// far, to its listeners while it runs and its cost changes, at most
    /// each second. The cost is read from the round's budget; the record
    /// only when it changed.
    fn report_while_running(
        self: &Arc<Self>,
        id: GoalId,
        run: Arc<GoalRun>,
    ) -> tokio::task::JoinHandle<()> {
        let goals = self.clone();
        tokio::spawn(async move {
            let mut last = run.budget.spent();
            loop {
                tokio::time::sleep(USAGE_EVERY).await;
                let spent = run.budget.spent();
                if spent == last {
                    continue;
                }
                last = spent;
                let Ok(record) = goals.record(&id).await else {
                    return;
                };
                if !record.state.is_active() {
                    return;
                }
                goals.publish_state(&record);
            }
        })
    }

    /// One round: the team (the one named or working already, or the
    /// candidates found for the goal), then its work on `request`.
    async fn round(
        &self,
        goal: &Arc<GoalRun>,
        record: &mut GoalRecord,
        person: mpsc::Receiver<String>,
        request: String,
    ) -> End {
        let (members, candidates, queries) = match goal.log.main_team() {
            Some(members) => (members, Vec::new(), Vec::new()),
            None => {
                let found = goal
                    .until_cancelled(team::candidates(
                        &goal.asker(),
                        &*goal.directory,
                        &record.text,
                    ))
                    .await;
                match found {
                    None => return End::Cancelled,
                    Some(Ok(found)) => (Vec::new(), found.members, found.queries),
                    Some(Err(failure)) => return End::Failed(failure.to_string()),
                }
            }
        };
        record.team = members.iter().map(|m| m.name.clone()).collect();
        record.state = GoalState::Running;
        record.updated_at = unix_millis();
        self.store.save(record);
        self.publish_state(record);
        Team::new(goal.clone(), members, candidates, queries, request)
            .listening(person)
            .run()
            .await
    }

    /// Writes how a round ended.
    fn end(&self, goal: &GoalRun, mut record: GoalRecord, end: End) {
        let spent = add_round(&mut record, goal);
        match end {
            End::Concluded { text } => {
                record.state = GoalState::Concluded;
                record.conclusion = Some(text);
                record.reason = None;
            }
            End::Partial { text } => {
                record.state = GoalState::Partial;
                record.reason = Some(not_done_reason(&text));
                record.conclusion = Some(text);
            }
            End::Stopped { limit, text } => {
                record.state = GoalState::Stopped;
                record.conclusion = Some(text);
                record.reason = Some(format!("stopped: the {} limit was hit", limit.as_str()));
            }
            End::Failed(why) => {
                goal.log.append(
                    None,
                    Speaker::Node,
                    Body::Failure { text: why.clone() },
                    None,
                );
                record.state = GoalState::Failed;
                record.reason = Some(why);
            }
            End::Cancelled => {
                goal.log.append(
                    None,
                    Speaker::Node,
                    Body::Notice {
                        text: "cancelled by a person; every call it started was stopped".into(),
                    },
                    None,
                );
                record.state = GoalState::Cancelled;
                record.reason = Some("cancelled by a person".into());
            }
        }
        record.updated_at = unix_millis();
        if let Some(metrics) = &self.metrics {
            metrics.ended(record.state.as_str(), spent.tokens, spent.tool_calls);
        }
        tracing::info!(
            target: crate::audit::TARGET,
            goal = %record.id,
            state = record.state.as_str(),
            turns = spent.turns,
            tokens = spent.tokens,
            tool_calls = spent.tool_calls,
            tasks = spent.tasks,
            "goal"
        );
        self.store.save(&record);
        self.running().remove(&record.id);
        self.publish_state(&record);
    }

    fn publish_state(&self, record: &GoalRecord) {
        let _ = self.events.send(GoalEvent::State {
            goal: record.id.clone(),
            record: Box::new(record.clone()),
        });
    }
}

/// Why a partial goal is not concluded: its parts not done, as the
/// conclusion names them.
fn not_done_reason(conclusion: &str) -> String {
    let undone: Vec<&str> = conclusion
        .lines()
        .filter(|l| l.starts_with("Not done: "))
        .collect();
    match undone.len() {
        0 => "partial: a part of the goal was not done".to_owned(),
        1 => format!("partial: {}", undone[0].trim_start_matches("Not done: ")),
        n => format!("partial: {n} parts were not done"),
    }
}

/// Adds what the round `run` spent so far, and its team, to `record`;
/// what it spent.
fn add_round(record: &mut GoalRecord, run: &GoalRun) -> GoalUsage {
    let spent = run.budget.spent();
    record.usage.turns += spent.turns;
    record.usage.tokens += spent.tokens;
    record.usage.tool_calls += spent.tool_calls;
    record.usage.tasks += spent.tasks;
    if let Some(team) = run.log.main_team() {
        record.team = team.iter().map(|m| m.name.clone()).collect();
    }
    spent
}
