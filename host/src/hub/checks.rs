//! Checking another node's answer: a replayable call (its receipt says it
//! read no clock, randomness, network, stored data or model) is run again
//! here, after fetching the agent by its hash, or else on a second node
//! that hosts it, and the results compared.
//!
//! A node whose signed answer differs from the agent's own is blocked, as
//! a node that sends a chunk that does not match is, and its receipt is
//! kept with the call's arguments and its result as [`Evidence`] in the
//! data directory's `evidence/` folder: any node can check the evidence by
//! running the agent itself ([`Hub::check_evidence`]).

use super::{Hub, HubError};
use crate::AgentId;
use crate::capabilities::peers::Hop;
use crate::did;
use crate::net::PeerId;
use crate::net::rpc::{Answer, CallRequest};
use crate::receipt::{self, Evidence, Receipt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Evidence files kept at most; the oldest go first.
const EVIDENCE_KEPT: usize = 256;

/// What checking an answer found.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "check", rename_all = "snake_case")]
pub enum Verdict {
    /// Run again, the call gave the same result.
    Confirmed {
        /// Where it ran again: "this node", or the did:key of a second host.
        by: String,
    },
    /// Run again, the call gave another result: the node that answered
    /// signed a result the agent does not give.
    Refuted {
        /// The did:key of the node whose answer was wrong.
        node: String,
        /// The result the agent gives.
        expected: Value,
        /// Where the evidence was kept, if it could be written.
        evidence: Option<PathBuf>,
        why: String,
    },
    /// The answer could not be checked.
    Unchecked { why: String },
}

impl Verdict {
    fn unchecked(why: impl Into<String>) -> Verdict {
        Verdict::Unchecked { why: why.into() }
    }

    /// Whether the answer was found wrong.
    pub fn refuted(&self) -> bool {
        matches!(self, Verdict::Refuted { .. })
    }
}

/// How a run of the call here came out.
enum Rerun {
    /// The result's canonical JSON as a value.
    Result(Value),
    /// The agent read a source of nondeterminism after all.
    Read(Vec<&'static str>),
    /// It could not run here: why.
    Failed(String),
}

impl Hub {
    /// Checks `answer`, which `host` gave to the call of `tool` of `id`
    /// with `arguments`, by running the call again, within `deadline`.
    pub async fn check_answer(
        &self,
        id: AgentId,
        tool: &str,
        arguments: &Value,
        answer: &Answer,
        host: PeerId,
        deadline: Instant,
    ) -> Verdict {
        let Some(receipt) = &answer.receipt else {
            return Verdict::unchecked("the node gave no receipt");
        };
        if !receipt.replayable {
            return Verdict::unchecked(format!(
                "the call read {}: another run need not give the same result",
                receipt.used.join(", ")
            ));
        }
        let answered = Answered {
            receipt,
            arguments,
            result: &answer.result,
        };
        match self.rerun_here(id, tool, arguments, deadline).await {
            Ok(rerun) => self.judge(answered, host, rerun),
            Err(why) => {
                self.rerun_elsewhere(id, tool, arguments, receipt, host, deadline, why)
                    .await
            }
        }
    }

    /// Checks evidence another node handed this one: the receipt must be
    /// signed and cover the arguments and result, and the call is run
    /// again here. A refuted node is blocked here too.
    pub async fn check_evidence(&self, evidence: &Evidence, deadline: Instant) -> Verdict {
        let signer = match evidence.check() {
            Ok(signer) => signer,
            Err(e) => return Verdict::unchecked(format!("the evidence does not hold: {e}")),
        };
        let receipt = &evidence.receipt;
        if !receipt.replayable {
            return Verdict::unchecked("the receipt's call is not replayable");
        }
        let answered = Answered {
            receipt,
            arguments: &evidence.arguments,
            result: &evidence.result,
        };
        match self
            .rerun_here(receipt.agent, &receipt.tool, &evidence.arguments, deadline)
            .await
        {
            Ok(rerun) => self.judge(answered, signer, rerun),
            Err(why) => Verdict::unchecked(why),
        }
    }

    /// Runs the call here with nothing granted, fetching the agent by its
    /// hash first if this node does not have it. `Err` says why it could
    /// not run here at all.
    async fn rerun_here(
        &self,
        id: AgentId,
        tool: &str,
        arguments: &Value,
        deadline: Instant,
    ) -> Result<Rerun, String> {
        let node = &self.shared.node;
        // An agent here already is run as it is (a load checks its bytes
        // against its id); fetching it again would hash it whole each time.
        let record = match node.resolve(&id.to_string()) {
            Ok(record) => record,
            Err(_) => {
                tokio::time::timeout_at(deadline.into(), self.fetch(id, &|_| {}))
                    .await
                    .map_err(|_| "the agent could not be fetched in time".to_owned())?
                    .map_err(|e: HubError| format!("the agent could not be fetched: {e}"))?
                    .record
            }
        };
        if record.is_attached() {
            return Err("the agent runs outside the sandbox and cannot be run again".into());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("no time was left to run the call again".into());
        }
        Ok(
            match node
                .replay(&record, tool, &arguments.to_string(), left)
                .await
            {
                Ok(ran) if !ran.used.replayable() => Rerun::Read(ran.used.names()),
                Ok(ran) => match serde_json::to_value(&ran.output) {
                    Ok(result) => Rerun::Result(result),
                    Err(e) => Rerun::Failed(format!("its result could not be read: {e}")),
                },
                Err(e) => Rerun::Failed(format!("the run here failed: {e}")),
            },
        )
    }

    /// Asks a second host of the agent for the same call; only a matching
    /// answer settles anything, as two nodes that disagree cannot both be
    /// judged from here.
    #[allow(clippy::too_many_arguments)]
    async fn rerun_elsewhere(
        &self,
        id: AgentId,
        tool: &str,
        arguments: &Value,
        receipt: &Receipt,
        host: PeerId,
        deadline: Instant,
        not_here: String,
    ) -> Verdict {
        let hosts = self.providers(id, 4).await.unwrap_or_default();
        let Some(second) = hosts.into_iter().find(|peer| *peer != host) else {
            return Verdict::unchecked(format!("{not_here}, and no other node hosts it"));
        };
        let request = CallRequest {
            agent: id,
            tool: tool.to_owned(),
            arguments: arguments.clone(),
            depth: 0,
            deadline: deadline.saturating_duration_since(Instant::now()),
        };
        let hop = Hop { depth: 0, deadline };
        match self.network.call(second, request, hop.remaining()).await {
            Ok(Ok(theirs)) if theirs.receipt.as_ref().is_some_and(|r| r.replayable) => {
                if receipt::digest(&theirs.result) == receipt.result {
                    Verdict::Confirmed {
                        by: did::shown(&second),
                    }
                } else {
                    Verdict::unchecked(format!(
                        "{not_here}, and {} answered differently: which is right can only be \
                         told by running the agent",
                        did::shown(&second)
                    ))
                }
            }
            Ok(Ok(_)) => Verdict::unchecked(format!(
                "{not_here}, and the second host's answer is not replayable"
            )),
            Ok(Err(e)) => {
                Verdict::unchecked(format!("{not_here}, and the second host refused: {e}"))
            }
            Err(e) => Verdict::unchecked(format!("{not_here}, and the second host: {e}")),
        }
    }

    /// Compares a run here with the receipt's result; blocks the node and
    /// keeps the evidence when they differ.
    fn judge(&self, answered: Answered<'_>, node: PeerId, rerun: Rerun) -> Verdict {
        let receipt = answered.receipt;
        let (expected, why) = match rerun {
            Rerun::Failed(why) => return Verdict::unchecked(why),
            Rerun::Result(result) if receipt::digest(&result) == receipt.result => {
                return Verdict::Confirmed {
                    by: "this node".to_owned(),
                };
            }
            Rerun::Result(result) => (
                result,
                format!(
                    "its {}, run here, gives another result than the one the node signed",
                    receipt.tool
                ),
            ),
            Rerun::Read(read) => (
                Value::Null,
                format!(
                    "the node signed the call as replayable, but the agent reads {}",
                    read.join(", ")
                ),
            ),
        };
        tracing::warn!(node = %did::shown(&node), "a checked answer was wrong: {why}");
        self.network
            .penalise(node, &format!("signed a wrong answer: {why}"));
        // Only a refuted answer is kept: the copies are made here.
        let evidence = Evidence {
            receipt: receipt.clone(),
            arguments: answered.arguments.clone(),
            result: answered.result.clone(),
        };
        let kept = self.keep_evidence(&evidence, &node);
        Verdict::Refuted {
            node: did::shown(&node),
            expected,
            evidence: kept,
            why,
        }
    }

    /// Writes `evidence` against `node` to `<data>/evidence/`, keeping at
    /// most [`EVIDENCE_KEPT`] files.
    fn keep_evidence(&self, evidence: &Evidence, node: &PeerId) -> Option<PathBuf> {
        let folder = self.shared.node.data_dir().root().join("evidence");
        let written = (|| -> std::io::Result<PathBuf> {
            std::fs::create_dir_all(&folder)?;
            let path = folder.join(format!("{}-{node}.json", receipt::now_ms()));
            let bytes = serde_json::to_vec_pretty(evidence).map_err(std::io::Error::other)?;
            crate::store::write_atomic(&path, &bytes).map_err(std::io::Error::other)?;
            prune_oldest(&folder, EVIDENCE_KEPT);
            Ok(path)
        })();
        written
            .inspect_err(|e| tracing::warn!("cannot keep the evidence: {e}"))
            .ok()
    }
}

/// An answer as a check reads it: the receipt, and the arguments and result
/// it covers.
struct Answered<'a> {
    receipt: &'a Receipt,
    arguments: &'a Value,
    result: &'a Value,
}

/// Where refuted evidence was kept, as a person is told.
pub fn where_kept(evidence: Option<&std::path::Path>) -> String {
    evidence.map_or_else(
        || "its receipt could not be kept".to_owned(),
        |path| format!("its receipt is kept in {}", path.display()),
    )
}

/// Removes the oldest files of `folder` past the newest `keep` (their
/// names begin with the time they were written).
fn prune_oldest(folder: &std::path::Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    let mut names: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    if names.len() <= keep {
        return;
    }
    names.sort();
    for old in &names[..names.len() - keep] {
        let _ = std::fs::remove_file(old);
    }
}

/// How long a check may take beside the call it checks.
pub const CHECK_DEADLINE: Duration = Duration::from_secs(60);
