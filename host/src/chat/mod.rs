//! AgentChat: conversations between a person and the node's agents, kept
//! by the node ([`store`]) and answered by its language model, which uses
//! the tools of the agents the person talks to (the conversation's agent,
//! and any `@name` mentioned) wherever those agents live. A message sent
//! with "team up" becomes a goal (see [`crate::goals`]); the next such
//! message continues it.
//!
//! Each step of an answer is an entry, stored as it happens (the person's
//! message, each tool call with its result, the reply), so a page that
//! loses its stream catches up from the store; the reply's text also
//! streams as the model writes it.

pub mod api;
pub(crate) mod store;

use crate::Node;
use crate::agent::tool::ToolOutput;
use crate::answers::{self, NodeAsk, Offered, Runner};
use crate::capabilities::peers::Hop;
use crate::goals::directory::{Candidate, Directory, NodeDirectory};
use crate::goals::message::Member;
use crate::goals::{Goals, NewGoal};
use crate::hub::Hub;
use crate::llm::{ChatRequest, Delta, Message, Role};
use crate::requester::Requester;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use store::{ChatStore, StoreError};
use tokio::sync::{broadcast, mpsc};

/// The longest message a person may send, in bytes.
pub const MAX_TEXT: usize = 16 * 1024;
/// The longest title.
const MAX_TITLE: usize = 120;
/// Agents one message may bring in by `@name`.
const MAX_MENTIONS: usize = 8;
/// Tools offered to the model at most.
const MAX_TOOLS: usize = 64;
/// Entries of the conversation the model reads before the new message.
const HISTORY: usize = 16;
/// Characters of one earlier entry (or tool result) the model reads.
const ENTRY_CHARS: usize = 2000;
/// Characters of a tool result's text kept in the conversation.
const KEPT_RESULT_CHARS: usize = 16 * 1024;
/// How long one answer may take in all, and one tool call.
const ANSWER_DEADLINE: Duration = Duration::from_secs(300);
const CALL_DEADLINE: Duration = Duration::from_secs(60);

pub(crate) use crate::goals::message::unix_millis;

/// A conversation's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    pub id: String,
    pub title: String,
    /// Milliseconds since the Unix epoch.
    pub created_at: u64,
    pub updated_at: u64,
    /// The agents it is with (names or ids), besides those mentioned.
    #[serde(default)]
    pub agents: Vec<String>,
    /// The goal its "team up" messages carry on, once there is one.
    #[serde(default)]
    pub goal: Option<String>,
    /// Whether its title was given (when it was started, or renamed); a
    /// conversation without one is titled by its first message.
    #[serde(default)]
    pub titled: bool,
}

/// One step of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub seq: u64,
    pub at: u64,
    #[serde(flatten)]
    pub body: EntryBody,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EntryBody {
    /// What the person said.
    Person { text: String, team_up: bool },
    /// A tool the model called for the answer.
    ToolUse {
        agent: String,
        tool: String,
        arguments: Value,
        output: Box<ToolOutput>,
        elapsed_ms: f64,
        /// The node it ran on (a peer id, or `this node`).
        node: String,
    },
    /// The model's answer (or the node's, `model` "node").
    Reply {
        text: String,
        model: String,
        /// How far it answers the message, when tools were used for it:
        /// `answered`, `partial` (a part not done is named in the text) or
        /// `not_answered`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answered: Option<Answered>,
    },
    /// The message became (or continued) this goal.
    Goal { goal: String },
    /// Why there is no answer.
    Problem { text: String },
}

/// How far a reply that used tools answers the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answered {
    /// Every part, by calls that succeeded.
    Answered,
    /// Some parts; the others are named with why.
    Partial,
    /// None: the reply says what the agents said.
    NotAnswered,
}

impl From<answers::Outcome> for Answered {
    fn from(outcome: answers::Outcome) -> Answered {
        match outcome {
            answers::Outcome::Answered => Answered::Answered,
            answers::Outcome::Partial => Answered::Partial,
            answers::Outcome::NotAnswered => Answered::NotAnswered,
        }
    }
}

/// What a follower of a conversation is told.
#[derive(Debug, Clone)]
pub enum ChatEvent {
    Entry(Box<Entry>),
    /// Text of the reply being written.
    Delta(String),
    /// What the node is doing for the answer now (choosing a tool,
    /// calling one, writing).
    Working(String),
    /// The answer to the last message is complete.
    Idle,
}

/// Why a chat request was refused. One line each.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Busy(String),
    #[error(transparent)]
    Storage(#[from] StoreError),
}

/// The node's conversations.
pub struct Chats {
    store: ChatStore,
    node: Arc<Node>,
    directory: NodeDirectory,
    goals: Option<Arc<Goals>>,
    /// Followers of each conversation with a live answer or follower.
    live: Mutex<HashMap<String, broadcast::Sender<ChatEvent>>>,
    /// Conversations being answered now.
    answering: Mutex<std::collections::HashSet<String>>,
}

fn new_id() -> String {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    format!("c-{}", hex::encode(bytes))
}

fn check_title(title: &str) -> Result<String, ChatError> {
    let title = title.trim();
    if title.is_empty() || title.len() > MAX_TITLE || title.chars().any(char::is_control) {
        return Err(ChatError::Invalid(format!(
            "a title is 1 to {MAX_TITLE} bytes of text on one line"
        )));
    }
    Ok(title.to_owned())
}

/// A title made of a conversation's first message: its first line, cut at
/// a word to at most [`TITLE_FROM_MESSAGE`] characters.
fn title_from(message: &str) -> String {
    let line = message
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let line: String = line.chars().filter(|c| !c.is_control()).collect();
    // At most so many characters, and within a title's bytes with the "…".
    let mut cut = String::new();
    for c in line.chars() {
        if cut.chars().count() == TITLE_FROM_MESSAGE || cut.len() + c.len_utf8() > MAX_TITLE - 3 {
            break;
        }
        cut.push(c);
    }
    if cut.len() == line.len() {
        return line;
    }
    let at_word = match cut.rfind(char::is_whitespace) {
        Some(space) if space > cut.len() / 2 => &cut[..space],
        _ => &cut,
    };
    let at_word = at_word.trim_end_matches(|c: char| c.is_whitespace() || ",;:.".contains(c));
    format!("{at_word}…")
}

/// How long a title made from a message is, at most, in characters.
const TITLE_FROM_MESSAGE: usize = 60;

/// The names a message mentions with `@`, in order, each once.
pub fn mentions(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for word in text.split(|c: char| c.is_whitespace() || ",;:!?()[]".contains(c)) {
        let Some(name) = word.strip_prefix('@') else {
            continue;
        };
        let name = name.trim_end_matches(['.', '\'', '"']);
        if !name.is_empty() && name.len() <= 80 && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    names
}

/// `text` without its `@name` mentions: who a message is for is not what
/// it asks ("@calculator what is 6 times 7?" asks "what is 6 times 7?").
fn without_mentions(text: &str) -> String {
    text.split_whitespace()
        .filter(|word| !word.starts_with('@') || word.len() == 1)
        .collect::<Vec<_>>()
        .join(" ")
}

impl Chats {
    /// The conversations of `node` (the network's agents through `hub`;
    /// "team up" through `goals`).
    pub fn open(
        node: Arc<Node>,
        hub: Option<Arc<Hub>>,
        goals: Option<Arc<Goals>>,
    ) -> Result<Arc<Chats>, StoreError> {
        let store = ChatStore::open(&node.data_dir().chats())?;
        Ok(Arc::new(Chats {
            store,
            directory: NodeDirectory::new(node.clone(), hub, false),
            node,
            goals,
            live: Mutex::new(HashMap::new()),
            answering: Mutex::new(Default::default()),
        }))
    }

    pub fn goals(&self) -> Option<&Arc<Goals>> {
        self.goals.as_ref()
    }

    /// Starts a conversation, with `agent` when given.
    pub async fn create(
        &self,
        title: Option<&str>,
        agent: Option<&str>,
    ) -> Result<Conversation, ChatError> {
        let mut agents = Vec::new();
        if let Some(agent) = agent {
            let found = self
                .directory
                .resolve(agent)
                .await
                .map_err(ChatError::NotFound)?;
            agents.push(found.name);
        }
        let titled = title.is_some();
        let title = match title {
            Some(title) => check_title(title)?,
            None => match agents.first() {
                Some(agent) => format!("Chat with {agent}"),
                None => "New conversation".to_owned(),
            },
        };
        let now = unix_millis();
        let conversation = Conversation {
            id: new_id(),
            title,
            created_at: now,
            updated_at: now,
            agents,
            goal: None,
            titled,
        };
        self.store.save(conversation.clone()).await?;
        Ok(conversation)
    }

    pub async fn list(&self) -> Result<Vec<Conversation>, ChatError> {
        Ok(self.store.conversations().await?)
    }

    pub async fn get(&self, id: &str) -> Result<Conversation, ChatError> {
        self.store
            .conversation(id)
            .await?
            .ok_or_else(|| ChatError::NotFound(format!("no conversation {id:?} on this node")))
    }

    pub async fn entries(&self, id: &str, after: u64) -> Result<Vec<Entry>, ChatError> {
        Ok(self.store.entries(id, after).await?)
    }

    pub async fn rename(&self, id: &str, title: &str) -> Result<Conversation, ChatError> {
        let mut conversation = self.get(id).await?;
        conversation.title = check_title(title)?;
        conversation.titled = true;
        self.store.save(conversation.clone()).await?;
        Ok(conversation)
    }

    pub async fn delete(&self, id: &str) -> Result<(), ChatError> {
        if self.busy(id) {
            return Err(ChatError::Busy(
                "the conversation is being answered; delete it when the answer is done".into(),
            ));
        }
        if !self.store.delete(id).await? {
            return Err(ChatError::NotFound(format!(
                "no conversation {id:?} on this node"
            )));
        }
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        Ok(())
    }

    fn busy(&self, id: &str) -> bool {
        self.answering
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(id)
    }

    fn channel(&self, id: &str) -> broadcast::Sender<ChatEvent> {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(id.to_owned())
            .or_insert_with(|| broadcast::channel(1024).0)
            .clone()
    }

    async fn append(&self, id: &str, body: EntryBody) -> Result<Entry, ChatError> {
        let entry = self.store.append(id, body).await?;
        let _ = self
            .channel(id)
            .send(ChatEvent::Entry(Box::new(entry.clone())));
        Ok(entry)
    }

    /// The person says `text` in conversation `id`; the answer (or the
    /// goal, with `team_up`, given as `requester`) follows as entries.
    pub async fn send(
        self: &Arc<Self>,
        id: &str,
        text: &str,
        team_up: bool,
        requester: &Requester,
    ) -> Result<Entry, ChatError> {
        let text = text.trim();
        if text.is_empty() || text.len() > MAX_TEXT {
            return Err(ChatError::Invalid(format!(
                "a message is 1 to {MAX_TEXT} bytes of text"
            )));
        }
        if team_up && self.goals.is_none() {
            return Err(ChatError::Invalid(
                "goals are unavailable on this node, so it cannot team agents up".into(),
            ));
        }
        let mut conversation = self.get(id).await?;
        {
            let mut answering = self
                .answering
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if !answering.insert(id.to_owned()) {
                return Err(ChatError::Busy(
                    "the last message is still being answered".into(),
                ));
            }
        }
        let stored = self
            .append(
                id,
                EntryBody::Person {
                    text: text.to_owned(),
                    team_up,
                },
            )
            .await;
        let entry = match stored {
            Ok(entry) => entry,
            Err(e) => {
                self.answering
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(id);
                return Err(e);
            }
        };
        conversation.updated_at = unix_millis();
        if !conversation.titled && entry.seq == 1 {
            conversation.title = title_from(text);
            conversation.titled = true;
        }
        let _ = self.store.save(conversation.clone()).await;
        let chats = self.clone();
        let text = text.to_owned();
        let seq = entry.seq;
        let requester = requester.clone();
        tokio::spawn(async move {
            let outcome = if team_up {
                chats.team_up(&mut conversation, &text, &requester).await
            } else {
                chats.answer(&conversation, &text, seq).await
            };
            if let Err(problem) = outcome {
                let _ = chats
                    .append(&conversation.id, EntryBody::Problem { text: problem })
                    .await;
            }
            chats
                .answering
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&conversation.id);
            let _ = chats.channel(&conversation.id).send(ChatEvent::Idle);
        });
        Ok(entry)
    }

    /// Sends `id`'s entries after `after`, then its events as they happen,
    /// to `sender` until the receiver goes away.
    pub async fn follow(self: Arc<Self>, id: String, after: u64, sender: mpsc::Sender<ChatEvent>) {
        let mut live = self.channel(&id).subscribe();
        let Some(mut after) = self.replay(&id, after, &sender).await else {
            return;
        };
        if !self.busy(&id) && sender.send(ChatEvent::Idle).await.is_err() {
            return;
        }
        loop {
            let event = match live.recv().await {
                Ok(ChatEvent::Entry(entry)) if entry.seq <= after => continue,
                Ok(event) => event,
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    // Fell behind: what was missed is in the store.
                    match self.replay(&id, after, &sender).await {
                        Some(caught_up) => after = caught_up,
                        None => return,
                    }
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            if let ChatEvent::Entry(entry) = &event {
                after = entry.seq;
            }
            if sender.send(event).await.is_err() {
                return;
            }
        }
    }

    /// Sends the stored entries of `id` after `after` to `sender`; the last
    /// one sent, or `None` when the store or the receiver is gone.
    async fn replay(
        &self,
        id: &str,
        mut after: u64,
        sender: &mpsc::Sender<ChatEvent>,
    ) -> Option<u64> {
        for entry in self.store.entries(id, after).await.ok()? {
            after = entry.seq;
            sender.send(ChatEvent::Entry(Box::new(entry))).await.ok()?;
        }
        Some(after)
    }

    /// Carries the message on as the conversation's goal: the team is the
    /// agents it is with and those mentioned (the node forms one when none).
    async fn team_up(
        &self,
        conversation: &mut Conversation,
        text: &str,
        requester: &Requester,
    ) -> Result<(), String> {
        let goals = self
            .goals
            .clone()
            .ok_or("goals are unavailable on this node")?;
        let record = match &conversation.goal {
            Some(goal) => goals.say(goal, text.to_owned()).await,
            None => {
                let mut team = conversation.agents.clone();
                team.extend(mentions(text).into_iter().take(MAX_MENTIONS));
                team.dedup();
                let new = NewGoal {
                    text: text.to_owned(),
                    team,
                    limits: Default::default(),
                    model: None,
                    verify: None,
                };
                goals.start(new, requester).await
            }
        }
        .map_err(|e| e.to_string())?;
        conversation.goal = Some(record.id.clone());
        self.store
            .save(conversation.clone())
            .await
            .map_err(|e| e.to_string())?;
        self.append(&conversation.id, EntryBody::Goal { goal: record.id })
            .await
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    /// The agents an answer may use: the conversation's and those the
    /// message mentions. A mention is the agent of exactly that name (or
    /// id): one that names none is not replaced by a near one, and the
    /// person is asked whether they meant it.
    async fn participants(
        &self,
        conversation: &Conversation,
        text: &str,
    ) -> Result<Vec<Candidate>, String> {
        let mut named = conversation.agents.clone();
        for mention in mentions(text) {
            if !named.contains(&mention) {
                named.push(mention);
            }
        }
        if named.len() > MAX_MENTIONS {
            return Err(format!(
                "a message may bring in at most {MAX_MENTIONS} agents"
            ));
        }
        let mut agents = Vec::new();
        for name in named {
            let found = self.directory.resolve(&name).await;
            match found {
                Ok(found) if found.name == name || found.agent.to_string() == name => {
                    agents.push(found)
                }
                Ok(found) => {
                    return Err(format!(
                        "no agent is named @{name}; did you mean @{}? Say it again with that name.",
                        found.name
                    ));
                }
                Err(_) => {
                    let known = self.directory.installed(64).await;
                    let hint = crate::text::closest(&name, known.iter().map(|c| c.name.as_str()))
                        .map(|c| format!("; did you mean @{c}?"))
                        .unwrap_or_default();
                    return Err(format!(
                        "no agent named @{name} is installed here or found on the network{hint}"
                    ));
                }
            }
        }
        Ok(agents)
    }

    /// Answers the message `text` (entry `seq`): with the tools of the
    /// agents it is with, step by step, the reply resting on what they
    /// returned (see [`crate::answers`]); a message no tool can take is
    /// answered by the node's model from the conversation.
    async fn answer(
        &self,
        conversation: &Conversation,
        text: &str,
        seq: u64,
    ) -> Result<(), String> {
        let deadline = Instant::now() + ANSWER_DEADLINE;
        let agents = self.participants(conversation, text).await?;
        let tools: Vec<Offered> = agents
            .iter()
            .flat_map(|agent| {
                agent
                    .tools
                    .iter()
                    .map(|tool| Offered::of(&agent.name, tool))
            })
            .take(MAX_TOOLS)
            .collect();
        let ask = NodeAsk {
            models: self.node.models().clone(),
            model: None,
            requester: REQUESTER,
            caller: format!("chat {}", conversation.id),
            deadline,
        };
        let live = self.channel(&conversation.id);
        let runner = ChatRunner {
            chats: self,
            conversation,
            agents: &agents,
            deadline,
        };
        let (sink, forward) = stream_to(live.clone());
        let asked = without_mentions(text);
        let served = answers::serve(&ask, &asked, &tools, &runner, Some(sink)).await;
        let _ = forward.await;
        let served = served?;
        let answered = Answered::from(served.outcome());
        if let Some(answer) = served.answer {
            let model = match answer.by_model {
                true => self.node.models().default_name().to_owned(),
                false => "node".to_owned(),
            };
            self.append(
                &conversation.id,
                EntryBody::Reply {
                    text: answer.text,
                    model,
                    answered: Some(answered),
                },
            )
            .await
            .map_err(|e| e.to_string())?;
            return Ok(());
        }
        // The message asks something of the agents it names, and no tool
        // of theirs can take it: said plainly, not guessed by the model.
        if !agents.is_empty() && !mentions(text).is_empty() {
            let text = no_tool_for(&agents, &asked);
            self.append(
                &conversation.id,
                EntryBody::Reply {
                    text,
                    model: "node".to_owned(),
                    answered: Some(Answered::NotAnswered),
                },
            )
            .await
            .map_err(|e| e.to_string())?;
            return Ok(());
        }
        // Nothing for a tool: the model answers from the conversation.
        let _ = live.send(ChatEvent::Working("the model is writing".into()));
        let mut messages = vec![Message::system(system_prompt(&agents))];
        let earlier = self
            .store
            .entries(&conversation.id, 0)
            .await
            .map_err(|e| e.to_string())?;
        let earlier: Vec<&Entry> = earlier.iter().filter(|e| e.seq < seq).collect();
        for entry in earlier.iter().skip(earlier.len().saturating_sub(HISTORY)) {
            if let Some(message) = as_message(entry) {
                messages.push(message);
            }
        }
        messages.push(Message::user(text));
        let request = ChatRequest {
            messages,
            max_tokens: Some(REPLY_TOKENS),
            caller: Some(format!("chat {}", conversation.id)),
            ..Default::default()
        };
        let (sink, forward) = stream_to(live);
        let completion = self
            .node
            .models()
            .complete(None, request, deadline, Some(sink), REQUESTER)
            .await;
        let _ = forward.await;
        let completion =
            completion.map_err(|e| format!("the node's model could not answer: {e}"))?;
        self.append(
            &conversation.id,
            EntryBody::Reply {
                text: completion.content,
                model: completion.model,
                answered: None,
            },
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok(())
    }

    /// Runs `tool` of `agent` with `arguments` and records the call.
    async fn run_tool(
        &self,
        conversation: &Conversation,
        agent: &Candidate,
        tool: &str,
        arguments: &Value,
        deadline: Instant,
    ) -> ToolOutput {
        let member = Member {
            name: agent.name.clone(),
            agent: agent.agent,
            node: agent.node.clone(),
            local: agent.local,
            description: agent.description.clone(),
            tools: agent.tools.clone(),
            reason: String::new(),
        };
        let hop = Hop {
            depth: 0,
            deadline: (Instant::now() + CALL_DEADLINE).min(deadline),
        };
        let started = Instant::now();
        let (output, node) = match self
            .directory
            .call(&member, tool, &arguments.to_string(), hop)
            .await
        {
            Ok(answered) => (answered.output, answered.node),
            Err(failure) => (ToolOutput::failure(failure.to_string()), String::new()),
        };
        let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        let kept = ToolOutput {
            content: output
                .content
                .iter()
                .cloned()
                .map(|content| match content {
                    crate::agent::tool::Content::Text { text }
                        if text.len() > KEPT_RESULT_CHARS =>
                    {
                        crate::agent::tool::Content::Text {
                            text: format!(
                                "{}…",
                                &text[..crate::text::floor_char_boundary(&text, KEPT_RESULT_CHARS)]
                            ),
                        }
                    }
                    other => other,
                })
                .collect(),
            ..output.clone()
        };
        let node = if node.is_empty() || node == self.directory.this_node() {
            "this node".to_owned()
        } else {
            node
        };
        let _ = self
            .append(
                &conversation.id,
                EntryBody::ToolUse {
                    agent: agent.name.clone(),
                    tool: tool.to_owned(),
                    arguments: arguments.clone(),
                    output: Box::new(kept),
                    elapsed_ms,
                    node,
                },
            )
            .await;
        output
    }
}

/// Who chat's requests to the node's model are counted for.
const REQUESTER: &str = "chat";
/// Tokens a reply without tools may take.
const REPLY_TOKENS: u32 = 256;

/// A sink for the model's text that passes it on to a conversation's
/// followers as it is written, and the task doing so.
fn stream_to(
    live: broadcast::Sender<ChatEvent>,
) -> (mpsc::Sender<Delta>, tokio::task::JoinHandle<()>) {
    let (sink, mut deltas) = mpsc::channel::<Delta>(256);
    let forward = tokio::spawn(async move {
        while let Some(delta) = deltas.recv().await {
            if let Delta::Text(text) = delta {
                let _ = live.send(ChatEvent::Delta(text));
            }
        }
    });
    (sink, forward)
}

/// Runs an answer's calls on the agents a conversation is with, saying
/// what it does as it goes.
struct ChatRunner<'a> {
    chats: &'a Chats,
    conversation: &'a Conversation,
    agents: &'a [Candidate],
    deadline: Instant,
}

#[async_trait::async_trait]
impl Runner for ChatRunner<'_> {
    async fn run(&self, tool: &Offered, arguments: &Value, label: &str) -> ToolOutput {
        let Some(agent) = self.agents.iter().find(|a| a.name == tool.owner) else {
            return ToolOutput::failure(format!("no agent {} is in the conversation", tool.owner));
        };
        self.working(format!("calling {}.{label}", agent.name));
        self.chats
            .run_tool(
                self.conversation,
                agent,
                &tool.name,
                arguments,
                self.deadline,
            )
            .await
    }

    fn choosing(&self, part: &str) {
        self.working(format!(
            "choosing a tool for: {}",
            crate::text::excerpt(part, 120)
        ));
    }
}

impl ChatRunner<'_> {
    fn working(&self, text: String) {
        let _ = self
            .chats
            .channel(&self.conversation.id)
            .send(ChatEvent::Working(text));
    }
}

fn system_prompt(agents: &[Candidate]) -> String {
    let mut prompt = String::from(
        "You are the assistant of an agentsite node, talking with a person. Answer briefly and plainly.",
    );
    if !agents.is_empty() {
        prompt.push_str(" Use the tools of these agents when they help, and say what they found:");
        for agent in agents {
            prompt.push_str(&format!("\n- {}: {}", agent.name, agent.description));
        }
    }
    prompt
}

/// The reply to `asked` when no tool of `agents` can take it: which tools
/// they have, so the person can ask for what they do.
fn no_tool_for(agents: &[Candidate], asked: &str) -> String {
    let tools: Vec<String> = agents
        .iter()
        .map(|agent| {
            let names: Vec<&str> = agent.tools.iter().map(|t| t.name.as_str()).collect();
            format!("{} ({})", agent.name, names.join(", "))
        })
        .collect();
    format!(
        "Not answered: no tool of {} can do \"{}\".",
        tools.join(", "),
        crate::text::excerpt(asked, 160)
    )
}

/// An earlier entry as the model reads it.
fn as_message(entry: &Entry) -> Option<Message> {
    let cut = |text: &str| crate::text::one_line(text, ENTRY_CHARS);
    match &entry.body {
        EntryBody::Person { text, .. } => Some(Message::user(cut(text))),
        EntryBody::Reply { text, .. } => Some(Message::new(Role::Assistant, cut(text))),
        EntryBody::ToolUse {
            agent,
            tool,
            output,
            ..
        } => Some(Message::new(
            Role::Assistant,
            cut(&format!("({agent}.{tool} answered: {})", output.text())),
        )),
        EntryBody::Goal { .. } | EntryBody::Problem { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_is_titled_by_its_first_line_cut_at_a_word() {
        assert_eq!(
            title_from("  What is 6 times 7?\nand more"),
            "What is 6 times 7?"
        );
        let long = "Convert these recipes from cups and ounces to grams, then scale them for twelve people";
        let title = title_from(long);
        assert_eq!(
            title,
            "Convert these recipes from cups and ounces to grams, then…"
        );
        // Text without spaces is cut where it must be, within a title's bytes.
        let wide = "字".repeat(200);
        let title = title_from(&wide);
        assert!(title.len() <= MAX_TITLE && title.ends_with('…'), "{title}");
        check_title(&title).unwrap();
    }

    #[test]
    fn a_message_without_its_mentions_is_what_it_asks() {
        assert_eq!(
            without_mentions("@calculator what is 6 times 7? mail me @ home"),
            "what is 6 times 7? mail me @ home"
        );
    }

    #[test]
    fn mentions_are_read_once_each() {
        assert_eq!(
            mentions("ask @calculator, then @text-tools and @calculator again. Mail me@x"),
            vec!["calculator", "text-tools"]
        );
        assert!(mentions("no one here").is_empty());
    }
}
