//! What the agents of an endpoint offer to list (resources, resource
//! templates, prompts), asked of every agent at once and remembered while
//! nothing changed.
//!
//! A listing on `/mcp` needs an answer from every agent in scope, and any
//! of them may be slow or hostile. So agents are asked in parallel, each in
//! a task of its own under the node's listing deadline (`[limits]
//! listing_deadline`), and a listing waits for none beyond what is known of
//! it: an agent asked for the first time, or that answered within
//! [`CUT_OFF`] last time, is waited for up to that, and one that was slower
//! or failed is not waited for at all. The listing then holds what
//! arrived, or the agent's last answer while its grants are the same; the
//! ask goes on in its task and its answer serves the next listing. The
//! serving side asks every agent once when it starts and when agents are
//! added ([`Listings::warm`]), so a client's first listing finds answers
//! rather than first asks. An agent that failed to answer is logged,
//! counted in `agentsite_listing_failures_total`, and not asked again for
//! [`RETRY_AFTER`]. So no agent delays a listing by more than [`CUT_OFF`],
//! however many are silent (`tools/list`, whose tools are in the cards,
//! waits for none).
//!
//! An answer is kept while it still holds: the agent's grants are the same,
//! no call that could change its state has run since (see
//! [`LoadedAgent::activity`](crate::runtime::LoadedAgent::activity)), and it
//! is younger than [`FRESH_FOR`] (an agent may list what it reads from a
//! granted folder or the clock, which change without a call).

use super::exposed::ExposedAgent;
use crate::capabilities::grant::Grants;
use crate::store::AgentRecord;
use crate::{AgentId, Node, NodeCallError};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a listing is used without asking the agent again, while
/// nothing else says it changed.
pub const FRESH_FOR: Duration = Duration::from_secs(10);

/// How long an agent that failed to list (past the listing deadline, a
/// trap, a malformed answer) is left out before it is asked again.
pub const RETRY_AFTER: Duration = Duration::from_secs(30);

/// How long a listing waits for an agent that answered this fast last
/// time; one that took longer is not waited for again until it is fast.
pub const CUT_OFF: Duration = Duration::from_millis(250);

/// One kind of list, per agent.
pub struct Listings<T> {
    what: &'static str,
    entries: Arc<Mutex<HashMap<AgentId, Agent<T>>>>,
}

/// What is known of one agent's listing.
struct Agent<T> {
    /// Its last answer, if it was ever asked.
    listed: Option<Listed<T>>,
    /// Whether the last ask took longer than [`CUT_OFF`] or failed.
    slow: bool,
    /// Says when the ask in progress, if any, has ended.
    asking: Option<tokio::sync::watch::Receiver<bool>>,
}

impl<T> Default for Agent<T> {
    fn default() -> Self {
        Agent {
            listed: None,
            slow: false,
            asking: None,
        }
    }
}

/// An agent's answer, and what it depended on.
struct Listed<T> {
    grants: Grants,
    activity: u64,
    at: Instant,
    /// `None` when the agent failed to answer.
    answer: Option<Arc<T>>,
}

impl<T> Listed<T> {
    fn holds(&self, grants: &Grants, activity: u64) -> bool {
        let age = self.at.elapsed();
        match self.answer {
            Some(_) => age < FRESH_FOR && self.grants == *grants && self.activity == activity,
            // A failure is not retried sooner for a changed agent: its
            // calls are exactly what a hostile agent controls.
            None => age < RETRY_AFTER,
        }
    }
}

fn lock<T>(
    entries: &Mutex<HashMap<AgentId, Agent<T>>>,
) -> std::sync::MutexGuard<'_, HashMap<AgentId, Agent<T>>> {
    entries.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<T: Send + Sync + 'static> Listings<T> {
    /// An empty cache for lists of `what` ("resources", "prompts").
    pub fn new(what: &'static str) -> Self {
        Listings {
            what,
            entries: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<AgentId, Agent<T>>> {
        lock(&self.entries)
    }

    /// What each of `agents` lists, in their order, leaving out those that
    /// did not answer. `ask` asks one agent under the grants it is given.
    pub async fn of<'a, F, Fut>(
        &self,
        node: &Node,
        agents: &'a [ExposedAgent],
        ask: F,
    ) -> Vec<(&'a ExposedAgent, Arc<T>)>
    where
        F: Fn(Arc<AgentRecord>, Grants) -> Fut,
        Fut: Future<Output = Result<T, NodeCallError>> + Send + 'static,
    {
        let ask = &ask;
        let answers = agents
            .iter()
            .map(|agent| async move { (agent, self.of_one(node, agent, ask).await) });
        futures::future::join_all(answers)
            .await
            .into_iter()
            .filter_map(|(agent, answer)| Some((agent, answer?)))
            .collect()
    }

    async fn of_one<F, Fut>(&self, node: &Node, agent: &ExposedAgent, ask: &F) -> Option<Arc<T>>
    where
        F: Fn(Arc<AgentRecord>, Grants) -> Fut,
        Fut: Future<Output = Result<T, NodeCallError>> + Send + 'static,
    {
        let record = &agent.record;
        let name = record.card.name.as_str();
        // An agent the policy refuses lists nothing (the refusal is audited).
        let grants = node.grants(record).ok()?;
        let activity = match node.activity(record) {
            Ok(activity) => activity,
            Err(e) => {
                tracing::warn!(agent = name, "{} not listed: {e}", self.what);
                return None;
            }
        };
        let (mut ended, wait, last) = {
            let mut entries = self.entries();
            let known = entries.entry(record.id).or_default();
            if let Some(listed) = &known.listed
                && listed.holds(&grants, activity)
            {
                return listed.answer.clone();
            }
            let ended = match &known.asking {
                Some(ended) => ended.clone(),
                None => {
                    let ended = self.ask_in_background(node, record, grants.clone(), activity, ask);
                    known.asking = Some(ended.clone());
                    ended
                }
            };
            // Nothing known is not reason enough to wait out a silent
            // agent's deadline: a first ask gets what a fast agent gets.
            let wait = match (&known.listed, known.slow) {
                (None, _) | (Some(_), false) => CUT_OFF,
                (Some(_), true) => Duration::ZERO,
            };
            let last = known
                .listed
                .as_ref()
                .filter(|listed| listed.grants == grants)
                .and_then(|listed| listed.answer.clone());
            (ended, wait, last)
        };
        let answered = matches!(
            tokio::time::timeout(wait, ended.wait_for(|ended| *ended)).await,
            Ok(Ok(_))
        );
        if answered
            && let Some(listed) = &self
                .entries()
                .get(&record.id)
                .and_then(|k| k.listed.as_ref())
            && listed.grants == grants
        {
            return listed.answer.clone();
        }
        last
    }

    /// Asks each of `records` that was never asked for its list, in the
    /// background, so that the first listing a client asks for finds its
    /// answer.
    pub fn warm<F, Fut>(&self, node: &Node, records: &[AgentRecord], ask: F)
    where
        F: Fn(Arc<AgentRecord>, Grants) -> Fut,
        Fut: Future<Output = Result<T, NodeCallError>> + Send + 'static,
    {
        for record in records {
            let Ok(grants) = node.grants(record) else {
                continue;
            };
            let Ok(activity) = node.activity(record) else {
                continue;
            };
            let record = Arc::new(record.clone());
            let mut entries = self.entries();
            let known = entries.entry(record.id).or_default();
            if known.listed.is_none() && known.asking.is_none() {
                known.asking = Some(self.ask_in_background(node, &record, grants, activity, &ask));
            }
        }
    }

    /// Asks `record` for its list in a task of its own, which records the
    /// answer (or the failure) when it comes; the receiver says when.
    fn ask_in_background<F, Fut>(
        &self,
        node: &Node,
        record: &Arc<AgentRecord>,
        grants: Grants,
        activity: u64,
        ask: &F,
    ) -> tokio::sync::watch::Receiver<bool>
    where
        F: Fn(Arc<AgentRecord>, Grants) -> Fut,
        Fut: Future<Output = Result<T, NodeCallError>> + Send + 'static,
    {
        let (done, ended) = tokio::sync::watch::channel(false);
        let asked = ask(record.clone(), grants.clone());
        let entries = self.entries.clone();
        let audit = node.audit().clone();
        let (id, name, what) = (record.id, record.card.name.clone(), self.what);
        tokio::spawn(async move {
            let started = Instant::now();
            let answer = match asked.await {
                Ok(answer) => Some(Arc::new(answer)),
                Err(e) => {
                    tracing::warn!(
                        agent = name.as_str(),
                        "{what} not listed, left out for {}s: {e}",
                        RETRY_AFTER.as_secs()
                    );
                    audit.listing_failed(&name, what);
                    None
                }
            };
            {
                let mut entries = lock(&entries);
                // Not there when the agent was removed meanwhile.
                let Some(known) = entries.get_mut(&id) else {
                    return;
                };
                known.slow = answer.is_none() || started.elapsed() > CUT_OFF;
                known.listed = Some(Listed {
                    grants,
                    activity,
                    at: Instant::now(),
                    answer,
                });
                known.asking = None;
            }
            let _ = done.send(true);
        });
        ended
    }

    /// Forgets agents that are no longer installed.
    pub fn keep_only(&self, installed: &[AgentRecord]) {
        self.entries()
            .retain(|id, _| installed.iter().any(|record| record.id == *id));
    }
}
