//! What the agents of an endpoint offer to list (resources, resource
//! templates, prompts), asked of every agent at once and remembered while
//! nothing changed.
//!
//! A listing on `/mcp` needs an answer from every agent in scope, and any
//! of them may be slow or hostile. So agents are asked in parallel, each
//! under the node's listing deadline (`[limits] listing_deadline`), and the
//! list holds those that answered; one that did not is logged, counted in
//! `agentsite_listing_failures_total`, and not asked again for
//! [`RETRY_AFTER`], so that it costs other clients nothing in between.
//!
//! An answer is kept while it still holds: the agent's grants are the same,
//! no call that could change its state has run since (see
//! [`LoadedAgent::activity`](crate::runtime::LoadedAgent::activity)), and it
//! is younger than [`FRESH_FOR`] (an agent may list what it reads from a
//! granted folder or the clock, which change without a call).

use super::exposed::ExposedAgent;
use crate::policy::Grants;
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

/// One kind of list, per agent.
pub struct Listings<T> {
    what: &'static str,
    entries: Mutex<HashMap<AgentId, Listed<T>>>,
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

impl<T: Send + Sync + 'static> Listings<T> {
    /// An empty cache for lists of `what` ("resources", "prompts").
    pub fn new(what: &'static str) -> Self {
        Listings {
            what,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<AgentId, Listed<T>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
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
        Fut: Future<Output = Result<T, NodeCallError>>,
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
        Fut: Future<Output = Result<T, NodeCallError>>,
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
        if let Some(listed) = self.entries().get(&record.id)
            && listed.holds(&grants, activity)
        {
            return listed.answer.clone();
        }
        let answer = match ask(record.clone(), grants.clone()).await {
            Ok(answer) => Some(Arc::new(answer)),
            Err(e) => {
                tracing::warn!(
                    agent = name,
                    "{} not listed, left out for {}s: {e}",
                    self.what,
                    RETRY_AFTER.as_secs()
                );
                node.audit().listing_failed(name, self.what);
                None
            }
        };
        self.entries().insert(
            record.id,
            Listed {
                grants,
                activity,
                at: Instant::now(),
                answer: answer.clone(),
            },
        );
        answer
    }

    /// Forgets agents that are no longer installed.
    pub fn keep_only(&self, installed: &[AgentRecord]) {
        self.entries()
            .retain(|id, _| installed.iter().any(|record| record.id == *id));
    }
}
