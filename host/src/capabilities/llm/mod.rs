//! The `llm` and `chat` imports: a language model for the agent.
//!
//! Only agents the policy grants `llm` may ask, and the grant says where
//! their requests go (see [`Route`]): by default first to the calling MCP
//! client's model when the client lends one (MCP sampling, which its user
//! approves), else to the node's own models (see [`crate::llm`]); so an
//! agent granted `llm` gets an answer from any caller, the command line,
//! another agent or another node. The grant also names the node's models
//! the agent may use and its token budgets, per call and per day.
//!
//! `llm` (contract 0.1.0) carries text conversations; `chat` (0.1.1) adds
//! tools, schemas and streamed answers. Both go through one [`Router`].

pub mod grant;

use super::caller::CallerLink;
use super::{CallContext, CallPart, CallState};
use crate::AgentId;
use crate::audit::Denials;
use crate::capabilities::bindings::agentsite::agent::chat;
use crate::capabilities::bindings::agentsite::agent::llm::{
    self, ChatRequest, ChatResponse, LlmError,
};
use crate::capabilities::sources::Used;
use crate::llm::models::Models;
use crate::llm::{
    self as models, Completion, Delta, DeltaSink, LlmFailure, MAX_MESSAGES, Message, Role,
    StopReason, ToolCall, ToolChoice, ToolSpec,
};
use grant::{DEFAULT_MODEL, LlmGrant, Route};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use wasmtime::component::{HasSelf, Linker, Resource, ResourceTable, ResourceTableError};

/// Bytes of text a request may carry (messages, tool calls, tool schemas
/// together), so that a guest cannot make the host build an unbounded
/// request (messages: [`crate::llm::MAX_MESSAGES`]).
const MAX_REQUEST_CHARS: usize = 1 << 20;
/// Tools one request may offer the model.
const MAX_TOOLS: usize = 128;
/// Generations one call may have running at once.
const MAX_GENERATIONS: usize = 4;
/// Pieces of a streamed answer held for the agent before the model waits.
const PIECES_BUFFERED: usize = 64;

/// Per-call state of the `llm` and `chat` imports.
pub struct LlmState {
    router: Router,
    /// The call's running generations (`chat.start`).
    generations: ResourceTable,
}

impl LlmState {
    pub(crate) fn new(
        caller: CallerLink,
        agent: AgentId,
        grant: Option<LlmGrant>,
        models: Option<Arc<Models>>,
        denials: Denials,
    ) -> Self {
        let mut generations = ResourceTable::new();
        generations.set_max_capacity(MAX_GENERATIONS);
        // Only a grant lets a call use the node's models: a call without
        // one (most) counts nothing and allocates no counter.
        let used = grant.as_ref().map(|_| Arc::new(AtomicU64::new(0)));
        LlmState {
            router: Router {
                caller,
                agent,
                grant,
                models,
                used,
                denials,
            },
            generations,
        }
    }
}

/// Sends one call's requests where its grant says, within its budgets.
#[derive(Clone)]
struct Router {
    caller: CallerLink,
    agent: AgentId,
    grant: Option<LlmGrant>,
    /// The node's models, when it has any.
    models: Option<Arc<Models>>,
    /// Tokens of the node's models this call used so far (with a grant).
    used: Option<Arc<AtomicU64>>,
    denials: Denials,
}

impl Router {
    /// Completes `request` for the agent, sending pieces to `sink` as the
    /// model writes them.
    async fn complete(
        &self,
        request: models::ChatRequest,
        hint: Option<String>,
        sink: DeltaSink,
    ) -> Result<Completion, LlmFailure> {
        let Some(grant) = self.grant.clone() else {
            self.denials.record("llm", "no language model granted");
            return Err(LlmFailure::NotGranted(
                "the operator has not granted this agent a language model (`agentsite grant <agent> llm`)"
                    .into(),
            ));
        };
        check_bounds(&request)?;
        if grant.route != Route::Node
            && let Some(caller) = &self.caller.caller
        {
            match self
                .caller
                .until_deadline(caller.sample(&request, hint.as_deref()))
                .await
            {
                Some(Some(result)) => {
                    if let (Ok(completion), Some(sink)) = (&result, &sink) {
                        models::send_whole(completion, sink).await;
                    }
                    return result;
                }
                // The caller lends no model able to take this request.
                Some(None) => {}
                None => {
                    return Err(LlmFailure::DeadlineExceeded(
                        "the model did not answer before the call's deadline".into(),
                    ));
                }
            }
        }
        if grant.route == Route::Client {
            return Err(LlmFailure::Unavailable(
                "this agent's grant sends its requests to the calling client's model (route client), and this caller lends none that takes this request (tools and schemas need the node's models)"
                    .into(),
            ));
        }
        self.ask_node(&grant, request, hint.as_deref(), sink).await
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
            let used = self.used.as_ref().map_or(0, |u| u.load(Ordering::Relaxed));
            let remaining = per_call.saturating_sub(used);
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
        &self,
        grant: &LlmGrant,
        mut request: models::ChatRequest,
        hint: Option<&str>,
        sink: DeltaSink,
    ) -> Result<Completion, LlmFailure> {
        let Some(models) = self.models.clone() else {
            return Err(LlmFailure::Unavailable(
                "no language model: this node has none and the calling client does not offer sampling"
                    .into(),
            ));
        };
        let model = Self::choose(&models, grant, hint)?.to_owned();
        let left = self.budget_left(grant, &models).inspect_err(|failure| {
            self.denials.record("llm", &failure.to_string());
        })?;
        if let Some(left) = left {
            let left = u32::try_from(left).unwrap_or(u32::MAX);
            request.max_tokens = Some(request.max_tokens.map_or(left, |asked| asked.min(left)));
        }
        let completion = models
            .complete(
                Some(&model),
                request,
                self.caller.deadline,
                sink,
                self.denials.agent(),
            )
            .await?;
        let spent = completion.usage.total();
        if let Some(used) = &self.used {
            used.fetch_add(spent, Ordering::Relaxed);
        }
        if let Some(ledger) = models.ledger()
            && let Err(why) = ledger.add(&self.agent, spent)
        {
            tracing::warn!(agent = self.denials.agent(), "{why}");
        }
        Ok(completion)
    }
}

/// Refuses requests the node will not build: empty, or past the bounds on
/// messages, tools and text.
fn check_bounds(request: &models::ChatRequest) -> Result<(), LlmFailure> {
    if request.messages.is_empty() {
        return Err(LlmFailure::InvalidRequest(
            "a chat request needs at least one message".into(),
        ));
    }
    let chars: usize = request
        .messages
        .iter()
        .map(|m| {
            m.content.len()
                + m.tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.len())
                    .sum::<usize>()
        })
        .sum::<usize>()
        + request
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
            .sum::<usize>();
    if request.messages.len() > MAX_MESSAGES
        || request.tools.len() > MAX_TOOLS
        || chars > MAX_REQUEST_CHARS
    {
        return Err(LlmFailure::InvalidRequest(format!(
            "a chat request may carry at most {MAX_MESSAGES} messages, {MAX_TOOLS} tools and {MAX_REQUEST_CHARS} bytes of text"
        )));
    }
    Ok(())
}

// ---- llm (contract 0.1.0): text conversations ----

fn request_from_llm(request: ChatRequest) -> (models::ChatRequest, Option<String>) {
    let messages = request
        .messages
        .into_iter()
        .map(|m| {
            let role = match m.role {
                llm::Role::System => Role::System,
                llm::Role::User => Role::User,
                llm::Role::Assistant => Role::Assistant,
            };
            Message::new(role, m.content)
        })
        .collect();
    let request_out = models::ChatRequest {
        messages,
        max_tokens: request.max_tokens,
        temperature: request.temperature,
        ..models::ChatRequest::default()
    };
    (request_out, request.model_hint)
}

/// The `llm-error` of the 0.1.0 interface a failure is.
fn to_llm_error(failure: LlmFailure) -> LlmError {
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
        let (request, hint) = request_from_llm(request);
        Ok(self
            .router
            .complete(request, hint, None)
            .await
            .map(|completion| ChatResponse {
                content: completion.content,
                model: completion.model,
                stop_reason: Some(completion.stop_reason.as_str().to_owned()),
            })
            .map_err(to_llm_error))
    }
}

// ---- chat (contract 0.1.1): tools, schemas, streaming ----

/// An answer being generated for the agent (`chat.start`).
pub struct Generation {
    pieces: mpsc::Receiver<Delta>,
    task: JoinHandle<Result<Completion, LlmFailure>>,
    /// The completion, once `finish` has had it.
    finished: Option<Result<Completion, LlmFailure>>,
}

impl Drop for Generation {
    fn drop(&mut self) {
        // Stops the model: dropping its future abandons the generation.
        self.task.abort();
    }
}

fn request_from_chat(
    request: chat::Request,
) -> Result<(models::ChatRequest, Option<String>), LlmFailure> {
    let tool_call = |c: chat::ToolCall| ToolCall {
        id: c.id,
        name: c.name,
        arguments: c.arguments,
    };
    let messages = request
        .messages
        .into_iter()
        .map(|m| Message {
            role: match m.role {
                chat::Role::System => Role::System,
                chat::Role::User => Role::User,
                chat::Role::Assistant => Role::Assistant,
                chat::Role::Tool => Role::Tool,
            },
            content: m.content,
            tool_calls: m.tool_calls.into_iter().map(tool_call).collect(),
            tool_call_id: m.tool_call_id,
        })
        .collect();
    let tools = request
        .tools
        .into_iter()
        .map(|tool| {
            let parameters = serde_json::from_str(&tool.parameters).map_err(|e| {
                LlmFailure::InvalidRequest(format!(
                    "the parameters of tool {:?} are not a JSON schema: {e}",
                    tool.name
                ))
            })?;
            Ok(ToolSpec {
                name: tool.name,
                description: tool.description,
                parameters,
            })
        })
        .collect::<Result<Vec<_>, LlmFailure>>()?;
    let response_schema = request
        .response_schema
        .map(|schema| {
            serde_json::from_str(&schema).map_err(|e| {
                LlmFailure::InvalidRequest(format!("the response schema is not JSON: {e}"))
            })
        })
        .transpose()?;
    let tool_choice = match request.tool_choice {
        chat::ToolChoice::Auto => ToolChoice::Auto,
        chat::ToolChoice::None => ToolChoice::None,
        chat::ToolChoice::Required => ToolChoice::Required,
        chat::ToolChoice::Named(name) => ToolChoice::Named(name),
    };
    let converted = models::ChatRequest {
        messages,
        tools,
        tool_choice,
        max_tokens: request.max_tokens,
        temperature: request.temperature,
        response_schema,
        seed: request.seed,
        frequency_penalty: None,
        presence_penalty: None,
        parallel_tool_calls: None,
        grounding: None,
        caller: None,
    };
    Ok((converted, request.model_hint))
}

fn tool_call_to_chat(call: ToolCall) -> chat::ToolCall {
    chat::ToolCall {
        id: call.id,
        name: call.name,
        arguments: call.arguments,
    }
}

fn completion_to_chat(completion: Completion) -> chat::Completion {
    let usage = completion.usage;
    chat::Completion {
        content: completion.content,
        tool_calls: completion
            .tool_calls
            .into_iter()
            .map(tool_call_to_chat)
            .collect(),
        model: completion.model,
        stop_reason: match completion.stop_reason {
            StopReason::EndTurn => chat::StopReason::EndTurn,
            StopReason::MaxTokens => chat::StopReason::MaxTokens,
            StopReason::ToolCalls => chat::StopReason::ToolCalls,
        },
        usage: (usage.total() > 0).then_some(chat::Usage {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
        }),
    }
}

fn to_chat_error(failure: LlmFailure) -> chat::ChatError {
    use chat::ChatError as E;
    match failure {
        LlmFailure::NotGranted(m) => E::NotGranted(m),
        LlmFailure::InvalidRequest(m) => E::InvalidRequest(m),
        LlmFailure::Refused(m) => E::Refused(m),
        LlmFailure::BudgetExceeded(m) => E::BudgetExceeded(m),
        LlmFailure::Busy(m) => E::Busy(m),
        LlmFailure::DeadlineExceeded(m) => E::DeadlineExceeded(m),
        LlmFailure::Unavailable(m) => E::Unavailable(m),
    }
}

fn past_deadline() -> LlmFailure {
    LlmFailure::DeadlineExceeded("the call's deadline passed during generation".into())
}

impl chat::Host for LlmState {
    async fn complete(
        &mut self,
        request: chat::Request,
    ) -> wasmtime::Result<Result<chat::Completion, chat::ChatError>> {
        let result = match request_from_chat(request) {
            Ok((request, hint)) => self.router.complete(request, hint, None).await,
            Err(failure) => Err(failure),
        };
        Ok(result.map(completion_to_chat).map_err(to_chat_error))
    }

    async fn start(
        &mut self,
        request: chat::Request,
    ) -> wasmtime::Result<Result<Resource<Generation>, chat::ChatError>> {
        let (request, hint) = match request_from_chat(request) {
            Ok(converted) => converted,
            Err(failure) => return Ok(Err(to_chat_error(failure))),
        };
        let (sink, pieces) = mpsc::channel(PIECES_BUFFERED);
        let router = self.router.clone();
        let task = tokio::spawn(async move { router.complete(request, hint, Some(sink)).await });
        let generation = Generation {
            pieces,
            task,
            finished: None,
        };
        match self.generations.push(generation) {
            Ok(handle) => Ok(Ok(handle)),
            // The generation was dropped, and its model stopped, on the way.
            Err(ResourceTableError::Full) => Ok(Err(chat::ChatError::InvalidRequest(format!(
                "a call may run at most {MAX_GENERATIONS} generations at once; finish or drop one first"
            )))),
            Err(other) => Err(other.into()),
        }
    }
}

impl chat::HostGeneration for LlmState {
    async fn next(
        &mut self,
        generation: Resource<Generation>,
    ) -> wasmtime::Result<Result<Option<chat::Delta>, chat::ChatError>> {
        let deadline = self.router.caller.deadline;
        let generation = self.generations.get_mut(&generation)?;
        if let Some(finished) = &generation.finished {
            return Ok(finished.clone().map(|_| None).map_err(to_chat_error));
        }
        let piece = tokio::time::timeout_at(deadline.into(), generation.pieces.recv()).await;
        Ok(match piece {
            Err(_) => Err(to_chat_error(past_deadline())),
            Ok(Some(Delta::Text(text))) => Ok(Some(chat::Delta::Text(text))),
            Ok(Some(Delta::ToolCall(call))) => {
                Ok(Some(chat::Delta::ToolCall(tool_call_to_chat(call))))
            }
            // The model is done: a failure is the last thing to report.
            Ok(None) => finish(generation, deadline)
                .await
                .map(|_| None)
                .map_err(to_chat_error),
        })
    }

    async fn finish(
        &mut self,
        generation: Resource<Generation>,
    ) -> wasmtime::Result<Result<chat::Completion, chat::ChatError>> {
        let deadline = self.router.caller.deadline;
        let generation = self.generations.get_mut(&generation)?;
        Ok(finish(generation, deadline)
            .await
            .map(completion_to_chat)
            .map_err(to_chat_error))
    }

    async fn drop(&mut self, generation: Resource<Generation>) -> wasmtime::Result<()> {
        self.generations.delete(generation)?;
        Ok(())
    }
}

/// Waits for `generation` to end (pieces the agent did not read are passed
/// over) and keeps its result for later questions.
async fn finish(
    generation: &mut Generation,
    deadline: std::time::Instant,
) -> Result<Completion, LlmFailure> {
    if let Some(finished) = &generation.finished {
        return finished.clone();
    }
    let ended = tokio::time::timeout_at(deadline.into(), async {
        while generation.pieces.recv().await.is_some() {}
        (&mut generation.task).await
    })
    .await;
    let result = match ended {
        Err(_) => return Err(past_deadline()),
        Ok(Ok(result)) => result,
        Ok(Err(join)) => Err(LlmFailure::Unavailable(format!(
            "the generation stopped: {join}"
        ))),
    };
    generation.finished = Some(result.clone());
    result
}

impl CallPart for LlmState {
    fn for_call(call: &CallContext<'_>) -> anyhow::Result<LlmState> {
        Ok(LlmState::new(
            call.caller.clone(),
            call.agent,
            call.grants.llm.clone(),
            call.services.models.get().cloned(),
            call.denials.clone(),
        ))
    }

    fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        llm::add_to_linker::<CallState, HasSelf<LlmState>>(linker, |state| {
            state.sources.record(Used::MODELS);
            &mut state.llm
        })?;
        chat::add_to_linker::<CallState, HasSelf<LlmState>>(linker, |state| {
            state.sources.record(Used::MODELS);
            &mut state.llm
        })
    }
}
