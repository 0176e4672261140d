//! The `llm` import: a language model for the agent.
//!
//! Only agents the policy grants `llm` may ask, and the grant says where
//! their requests go (see [`Route`]): by default first to the calling MCP
//! client's model when the client lends one (MCP sampling, which its user
//! approves), else to the node's own models (see [`crate::llm`]); so an
//! agent granted `llm` gets an answer from any caller, the command line,
//! another agent or another node. The grant also names the node's models
//! the agent may use and its token budgets, per call and per day.

use super::CallState;
use super::caller::CallerLink;
use crate::AgentId;
use crate::audit::Denials;
use crate::bindings::agentsite::agent::llm::{self, ChatRequest, ChatResponse, LlmError, Role};
use crate::llm::models::Models;
use crate::llm::{self as models, LlmFailure, MAX_MESSAGES, Message};
use crate::policy::llm_grant::{DEFAULT_MODEL, LlmGrant, Route};
use std::sync::Arc;
use wasmtime::component::{HasSelf, Linker};

/// Characters a request may carry, so that a guest cannot make the host
/// build an unbounded request (messages: [`crate::llm::MAX_MESSAGES`]).
const MAX_REQUEST_CHARS: usize = 1 << 20;

/// Per-call state of the `llm` import.
pub struct LlmState {
    caller: CallerLink,
    agent: AgentId,
    grant: Option<LlmGrant>,
    /// The node's models, when it has any.
    models: Option<Arc<Models>>,
    /// Tokens of the node's models this call used so far.
    used: u64,
    denials: Denials,
}

impl LlmState {
    pub(crate) fn new(
        caller: CallerLink,
        agent: AgentId,
        grant: Option<LlmGrant>,
        models: Option<Arc<Models>>,
        denials: Denials,
    ) -> Self {
        LlmState {
            caller,
            agent,
            grant,
            models,
            used: 0,
            denials,
        }
    }

    /// The node's model this request goes to: the one the hint names if the
    /// grant allows it, else the first the grant allows.
    fn choose<'a>(
        models: &'a Models,
        grant: &LlmGrant,
        hint: Option<&str>,
    ) -> Result<&'a str, LlmFailure> {
        let allowed: Vec<&str> = if grant.models.is_empty() {
            vec![models.default_name()]
        } else {
            grant
                .models
                .iter()
                .map(|name| {
                    if name == DEFAULT_MODEL {
                        models.default_name()
                    } else {
                        name.as_str()
                    }
                })
                .collect()
        };
        let name = hint
            .filter(|hint| allowed.contains(hint))
            .unwrap_or(allowed[0]);
        models.get(Some(name)).map(|m| m.name()).map_err(|_| {
            LlmFailure::Unavailable(format!(
                "this agent's grant names model {name:?}, which this node does not have (it has {})",
                models.names().join(", ")
            ))
        })
    }

    /// Fails if a budget is used up; else the most tokens the answer may
    /// have so that the budgets hold (`None`: no budget bounds it).
    fn budget_left(&self, grant: &LlmGrant, models: &Models) -> Result<Option<u64>, LlmFailure> {
        let mut left: Option<u64> = None;
        if let Some(per_call) = grant.tokens_per_call {
            let remaining = per_call.saturating_sub(self.used);
            if remaining == 0 {
                return Err(LlmFailure::BudgetExceeded(format!(
                    "this call used its budget of {per_call} tokens per call (llm grant); the operator sets it with `agentsite grant <agent> llm=...:Ntokens/call`"
                )));
            }
            left = Some(remaining);
        }
        if let (Some(per_day), Some(ledger)) = (grant.tokens_per_day, models.ledger()) {
            let used = ledger
                .used_today(&self.agent)
                .map_err(LlmFailure::Unavailable)?;
            let remaining = per_day.saturating_sub(used);
            if remaining == 0 {
                return Err(LlmFailure::BudgetExceeded(format!(
                    "this agent used its budget of {per_day} tokens per day (llm grant); it renews at 00:00 UTC"
                )));
            }
            left = Some(left.map_or(remaining, |l| l.min(remaining)));
        }
        Ok(left)
    }

    /// Asks the node's own models.
    async fn ask_node(
        &mut self,
        grant: &LlmGrant,
        request: ChatRequest,
    ) -> Result<ChatResponse, LlmError> {
        let Some(models) = self.models.clone() else {
            return Err(no_model());
        };
        let model = Self::choose(&models, grant, request.model_hint.as_deref())
            .map_err(to_wit)?
            .to_owned();
        let left = self.budget_left(grant, &models).map_err(|failure| {
            self.denials.record("llm", &failure.to_string());
            to_wit(failure)
        })?;
        let max_tokens = match (request.max_tokens, left) {
            (asked, None) => asked,
            (asked, Some(left)) => {
                let left = u32::try_from(left).unwrap_or(u32::MAX);
                Some(asked.map_or(left, |asked| asked.min(left)))
            }
        };
        let request = models::ChatRequest {
            messages: request
                .messages
                .into_iter()
                .map(|m| Message::new(role(m.role), m.content))
                .collect(),
            max_tokens,
            temperature: request.temperature,
            ..models::ChatRequest::default()
        };
        let completion = models
            .complete(
                Some(&model),
                request,
                self.caller.deadline,
                None,
                self.denials.agent(),
            )
            .await
            .map_err(to_wit)?;
        let spent = completion.usage.total();
        self.used += spent;
        if let Some(ledger) = models.ledger()
            && let Err(why) = ledger.add(&self.agent, spent)
        {
            tracing::warn!(agent = self.denials.agent(), "{why}");
        }
        Ok(ChatResponse {
            content: completion.content,
            model: completion.model,
            stop_reason: Some(completion.stop_reason.as_str().to_owned()),
        })
    }
}

fn role(role: Role) -> models::Role {
    match role {
        Role::System => models::Role::System,
        Role::User => models::Role::User,
        Role::Assistant => models::Role::Assistant,
    }
}

/// The `llm-error` of the 0.1 contract a failure of the node's model is.
fn to_wit(failure: LlmFailure) -> LlmError {
    match failure {
        LlmFailure::NotGranted(m) => LlmError::NotGranted(m),
        LlmFailure::InvalidRequest(m) => LlmError::InvalidRequest(m),
        LlmFailure::Refused(m) | LlmFailure::BudgetExceeded(m) => LlmError::Refused(m),
        LlmFailure::Busy(m) | LlmFailure::DeadlineExceeded(m) | LlmFailure::Unavailable(m) => {
            LlmError::Unavailable(m)
        }
    }
}

impl llm::Host for LlmState {
    async fn chat(
        &mut self,
        request: ChatRequest,
    ) -> wasmtime::Result<Result<ChatResponse, LlmError>> {
        let Some(grant) = self.grant.clone() else {
            self.denials.record("llm", "no language model granted");
            return Ok(Err(LlmError::NotGranted(
                "the operator has not granted this agent a language model (`agentsite grant <agent> llm`)"
                    .into(),
            )));
        };
        if request.messages.is_empty() {
            return Ok(Err(LlmError::InvalidRequest(
                "a chat request needs at least one message".into(),
            )));
        }
        let chars: usize = request.messages.iter().map(|m| m.content.len()).sum();
        if request.messages.len() > MAX_MESSAGES || chars > MAX_REQUEST_CHARS {
            return Ok(Err(LlmError::InvalidRequest(format!(
                "a chat request may carry at most {MAX_MESSAGES} messages and {MAX_REQUEST_CHARS} bytes of text"
            ))));
        }
        if grant.route != Route::Node
            && let Some(caller) = &self.caller.caller
        {
            match self
                .caller
                .until_deadline(caller.sample(request.clone()))
                .await
            {
                Some(Some(result)) => return Ok(result),
                // The caller lends no model.
                Some(None) => {}
                None => {
                    return Ok(Err(LlmError::Unavailable(
                        "the model did not answer before the call's deadline".into(),
                    )));
                }
            }
        }
        if grant.route == Route::Client {
            return Ok(Err(LlmError::Unavailable(
                "this agent's grant sends its requests to the calling client's model (route client), and this caller lends none"
                    .into(),
            )));
        }
        Ok(self.ask_node(&grant, request).await)
    }
}

fn no_model() -> LlmError {
    LlmError::Unavailable(
        "no language model: this node has none and the calling client does not offer sampling"
            .into(),
    )
}

pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    llm::add_to_linker::<CallState, HasSelf<LlmState>>(linker, |state| &mut state.llm)
}
