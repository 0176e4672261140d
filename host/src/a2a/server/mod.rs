//! A2A over HTTP: the Agent Cards (public, as discovery is) and the
//! JSON-RPC endpoints (behind the node's token, as `/mcp` is):
//!
//! | request | is |
//! |---|---|
//! | `GET /.well-known/agent-card.json` | the node's card |
//! | `POST /a2a` | the node: a message is a goal |
//! | `GET /agents/<agent>/.well-known/agent-card.json` | an agent's card |
//! | `POST /agents/<agent>/a2a` | the agent: a message is a call of one of its tools |
//!
//! Methods: `SendMessage`, `SendStreamingMessage`, `GetTask`, `ListTasks`,
//! `CancelTask`, `SubscribeToTask`; push notifications are not offered.
//! A2A 0.3's (`message/send`, `message/stream`, `tasks/get`,
//! `tasks/cancel`, `tasks/resubscribe`) are answered at the same endpoints
//! by [`compat`], in 0.3's JSON.

pub(crate) mod card;
mod compat;
mod run;
mod tasks;

use crate::a2a::v0_3;
use crate::a2a::wire::{
    self, A2AError, Binding, CARD_PATH, CancelTaskRequest, GetTaskRequest, JsonRpcId,
    JsonRpcRequest, JsonRpcResponse, ListTasksRequest, ListTasksResponse, Message, Part,
    PartContent, Role, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskState, error_code, methods,
};
use crate::goals::{GoalError, Goals, NewGoal};
use crate::http::token::{Family, Gate};
use crate::mcp::Hosted;
use crate::requester::Requester;
use crate::store::AgentRecord;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Extension, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use card::Site;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tasks::{Scope, TaskEntry, Tasks};
use tokio::sync::{broadcast, mpsc};

/// The largest request body, as on `/mcp`.
const MAX_BODY: usize = crate::http::body_limit::MAX_REQUEST_BODY;
/// Parts one message may have.
const MAX_PARTS: usize = 64;
/// The text a message to an agent may carry, in bytes (the model reads it).
const MAX_TEXT: usize = 16 * 1024;
/// Tasks one `ListTasks` page holds by default and at most.
const PAGE: usize = 50;
const MAX_PAGE: usize = 100;
/// The bytes of tasks one `ListTasks` page holds at most (a page holds at
/// least one task, whatever its size).
const MAX_PAGE_BYTES: usize = 4 << 20;
/// Named team members a message's metadata may ask for.
const MAX_TEAM: usize = 8;
/// How long `CancelTask` waits for the work to stop before answering.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// The node's A2A side.
pub struct A2a {
    hosted: Arc<Hosted>,
    goals: Option<Arc<Goals>>,
    tasks: Tasks,
    /// Whether the JSON-RPC endpoints ask for a bearer token.
    token: bool,
    /// The node's key, which signs every card it serves.
    signer: Option<libp2p::identity::Keypair>,
}

impl A2a {
    pub fn new(
        hosted: Arc<Hosted>,
        goals: Option<Arc<Goals>>,
        token: bool,
        signer: Option<libp2p::identity::Keypair>,
    ) -> Arc<A2a> {
        Arc::new(A2a {
            hosted,
            goals,
            tasks: Tasks::default(),
            token,
            signer,
        })
    }

    fn takes_goals(&self) -> bool {
        self.goals.as_ref().is_some_and(|g| g.config().enabled)
    }
}

/// The A2A routes: the cards open to anyone who may reach the node
/// (discovery), the JSON-RPC endpoints behind `gate` (the node's token).
pub fn router(a2a: Arc<A2a>, gate: Gate) -> Router {
    let cards = Router::new().route(CARD_PATH, get(node_card)).route(
        "/agents/{agent}/.well-known/agent-card.json",
        get(agent_card),
    );
    let rpc = Router::new()
        .route("/a2a", post(node_rpc))
        .route("/agents/{agent}/a2a", post(agent_rpc))
        .layer(DefaultBodyLimit::max(MAX_BODY));
    cards
        .merge(gate.for_family(Family::Json).guard(rpc))
        .with_state(a2a)
}

/// The base URL a client reached the node at, for the cards' endpoints.
/// The Host header has passed the guard, so it names this node.
fn site(a2a: &A2a, headers: &HeaderMap) -> Site {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    // Behind a TLS-terminating proxy the client used https.
    let scheme = match headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
    {
        Some("https") => "https",
        _ => "http",
    };
    Site {
        base: format!("{scheme}://{host}"),
        token: a2a.token,
    }
}

async fn node_card(State(a2a): State<Arc<A2a>>, headers: HeaderMap) -> Response {
    let card = site(&a2a, &headers).node(&a2a.hosted.records(), a2a.takes_goals());
    signed(&a2a, card)
}

/// A card as served: signed with the node's key (see
/// [`crate::a2a::signed`]), with the fields a 0.3 client reads it by
/// beside 1.0's (which 1.0 clients ignore, and the signature leaves out).
fn signed(a2a: &A2a, mut card: crate::a2a::wire::AgentCard) -> Response {
    if let Some(keypair) = &a2a.signer {
        crate::a2a::signed::sign(&mut card, keypair);
    }
    match serde_json::to_value(&card) {
        Ok(mut value) => {
            v0_3::add_card_fields(&mut value);
            Json(value).into_response()
        }
        Err(_) => Json(card).into_response(),
    }
}

/// The agent `agent` names, or the 404 that says it is not here.
fn find(a2a: &A2a, agent: &str) -> Result<AgentRecord, Box<Response>> {
    let records = a2a.hosted.records();
    crate::store::resolve_in(&records, agent)
        .cloned()
        .map_err(|e| {
            let error = json!({"error": crate::text::one_line(&e.to_string(), 500)});
            Box::new((StatusCode::NOT_FOUND, Json(error)).into_response())
        })
}

async fn agent_card(
    State(a2a): State<Arc<A2a>>,
    Path(agent): Path<String>,
    headers: HeaderMap,
) -> Response {
    match find(&a2a, &agent) {
        Ok(record) => signed(&a2a, site(&a2a, &headers).agent(&record)),
        Err(response) => *response,
    }
}

/// The address a request came from, as the front end recorded it.
type Address = Option<Extension<ConnectInfo<SocketAddr>>>;

fn requester(from: Address) -> Requester {
    Requester::new("a2a", from.map(|Extension(ConnectInfo(at))| at.ip()))
}

async fn node_rpc(
    State(a2a): State<Arc<A2a>>,
    from: Address,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    dispatch(&a2a, None, &requester(from), &headers, &body).await
}

async fn agent_rpc(
    State(a2a): State<Arc<A2a>>,
    Path(agent): Path<String>,
    from: Address,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match find(&a2a, &agent) {
        Ok(record) => dispatch(&a2a, Some(record), &requester(from), &headers, &body).await,
        Err(response) => *response,
    }
}

/// A JSON-RPC error of the binding, its message in one line.
fn rpc_error(code: i32, message: impl Into<String>) -> A2AError {
    A2AError::new(code, crate::text::one_line(&message.into(), 1000))
}

/// What a method answers with: its result, or the error.
type Outcome = Result<Value, A2AError>;

fn answer(id: JsonRpcId, outcome: Outcome) -> Response {
    let response = match outcome {
        Ok(result) => JsonRpcResponse::success(id, result),
        Err(error) => JsonRpcResponse::error(id, error.to_jsonrpc_error()),
    };
    Json(response).into_response()
}

fn parse<T: DeserializeOwned>(params: Option<Value>) -> Result<T, A2AError> {
    serde_json::from_value(params.unwrap_or_else(|| json!({})))
        .map_err(|e| rpc_error(error_code::INVALID_PARAMS, format!("invalid params: {e}")))
}

fn to_value<T: serde::Serialize>(value: &T) -> Outcome {
    serde_json::to_value(value).map_err(|e| rpc_error(error_code::INTERNAL_ERROR, e.to_string()))
}

/// The JSON-RPC request in `body`, or the error to answer with and the id
/// it answers.
fn read_request(body: &[u8]) -> Result<JsonRpcRequest, (JsonRpcId, A2AError)> {
    let invalid = |why: String| (JsonRpcId::Null, rpc_error(error_code::INVALID_REQUEST, why));
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        let error = rpc_error(
            error_code::PARSE_ERROR,
            format!("the body is not JSON: {e}"),
        );
        (JsonRpcId::Null, error)
    })?;
    match &value {
        Value::Object(_) => {}
        Value::Array(_) => return Err(invalid("batch requests are not supported".into())),
        _ => return Err(invalid("a request is a JSON object".into())),
    }
    let request: JsonRpcRequest = serde_json::from_value(value)
        .map_err(|e| invalid(format!("not a JSON-RPC request: {e}")))?;
    if request.jsonrpc != "2.0" {
        let error = rpc_error(error_code::INVALID_REQUEST, "\"jsonrpc\" must be \"2.0\"");
        return Err((request.id, error));
    }
    Ok(request)
}

/// Reads one JSON-RPC request and answers it.
async fn dispatch(
    a2a: &Arc<A2a>,
    agent: Option<AgentRecord>,
    requester: &Requester,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let JsonRpcRequest {
        id, method, params, ..
    } = match read_request(body) {
        Ok(request) => request,
        Err((id, error)) => return answer(id, Err(error)),
    };
    let version = headers
        .get(wire::VERSION_HEADER)
        .and_then(|v| v.to_str().ok());
    // A 0.3 client names 0.3's methods, and sends no version or 0.3's.
    if v0_3::is_method(&method) && v0_3::is_version(version) {
        return compat::dispatch(a2a, agent, requester, id, &method, params).await;
    }
    if let Some(version) = version
        && version.trim().split('.').next() != Some("1")
    {
        let error = rpc_error(
            error_code::VERSION_NOT_SUPPORTED,
            format!("this node speaks A2A {}, not {version:?}", wire::VERSION),
        );
        return answer(id, Err(error));
    }
    let scope = scope_of(agent.as_ref());
    let binding = Binding::V1_0;
    let outcome = match method.as_str() {
        methods::SEND_MESSAGE => match parse::<SendMessageRequest>(params) {
            Ok(request) => send(a2a, agent.as_ref(), requester, request)
                .await
                .and_then(|task| to_value(&SendMessageResponse::Task(task))),
            Err(e) => Err(e),
        },
        methods::SEND_STREAMING_MESSAGE => {
            return match parse::<SendMessageRequest>(params) {
                Ok(request) => {
                    send_streaming(a2a, agent.as_ref(), requester, request, id, binding).await
                }
                Err(e) => answer(id, Err(e)),
            };
        }
        methods::SUBSCRIBE_TO_TASK => {
            return match parse::<SubscribeToTaskRequest>(params) {
                Ok(request) => subscribe(a2a, scope, requester, &request.id, id, binding).await,
                Err(e) => answer(id, Err(e)),
            };
        }
        methods::GET_TASK => match parse::<GetTaskRequest>(params) {
            Ok(request) => get_task(a2a, scope, requester, &request.id, request.history_length)
                .await
                .and_then(|task| to_value(&task)),
            Err(e) => Err(e),
        },
        methods::LIST_TASKS => parse::<ListTasksRequest>(params).and_then(|r| list(a2a, scope, r)),
        methods::CANCEL_TASK => match parse::<CancelTaskRequest>(params) {
            Ok(request) => cancel(a2a, scope, requester, &request.id)
                .await
                .and_then(|task| to_value(&task)),
            Err(e) => Err(e),
        },
        methods::CREATE_PUSH_CONFIG
        | methods::GET_PUSH_CONFIG
        | methods::LIST_PUSH_CONFIGS
        | methods::DELETE_PUSH_CONFIG => Err(rpc_error(
            error_code::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "this node sends no push notifications; stream the task or poll it with GetTask",
        )),
        methods::GET_EXTENDED_AGENT_CARD => Err(rpc_error(
            error_code::EXTENDED_CARD_NOT_CONFIGURED,
            "this node has no extended agent card",
        )),
        other if v0_3::is_method(other) => Err(rpc_error(
            error_code::VERSION_NOT_SUPPORTED,
            format!(
                "{other:?} is an A2A 0.3 method, sent as A2A {}: send 0.3's methods with no \
                 A2A-Version header or 0.3, 1.0's (SendMessage, GetTask, ...) with 1.0",
                version.unwrap_or_default()
            ),
        )),
        other => Err(rpc_error(
            error_code::METHOD_NOT_FOUND,
            format!("no method {other:?}"),
        )),
    };
    answer(id, outcome)
}

/// Whose tasks a request reaches: the agent's it was sent to, or the node's.
fn scope_of(agent: Option<&AgentRecord>) -> Scope {
    match agent {
        Some(record) => Scope::Agent(record.id),
        None => Scope::Node,
    }
}

/// `SendStreamingMessage` (0.3's `message/stream`): the task's events as
/// they come, each written as `binding` writes it.
async fn send_streaming(
    a2a: &Arc<A2a>,
    agent: Option<&AgentRecord>,
    requester: &Requester,
    request: SendMessageRequest,
    id: JsonRpcId,
    binding: Binding,
) -> Response {
    match start(a2a, agent, requester, request.message).await {
        // The stream's client owns the work: when it goes, the work stops,
        // so no one's model time goes to no one.
        Ok(started) => {
            let owner = Owner {
                a2a: a2a.clone(),
                scope: scope_of(agent),
            };
            stream(started, id, Some(owner), binding)
        }
        Err(e) => answer(id, Err(e)),
    }
}

/// `SubscribeToTask` (0.3's `tasks/resubscribe`): the events of a task
/// that has not ended.
async fn subscribe(
    a2a: &Arc<A2a>,
    scope: Scope,
    requester: &Requester,
    task: &str,
    id: JsonRpcId,
    binding: Binding,
) -> Response {
    match lookup(a2a, scope, requester, task).await {
        Ok(entry) if entry.state().is_terminal() => {
            let error = rpc_error(
                error_code::UNSUPPORTED_OPERATION,
                format!(
                    "task {} has ended ({})",
                    entry.id(),
                    wire::state_words(&entry.state())
                ),
            );
            answer(id, Err(error))
        }
        Ok(entry) => stream(Started::new(entry), id, None, binding),
        Err(e) => answer(id, Err(e)),
    }
}

/// `GetTask` (0.3's `tasks/get`): the task, with at most `history_length`
/// messages of its history.
async fn get_task(
    a2a: &A2a,
    scope: Scope,
    requester: &Requester,
    task: &str,
    history_length: Option<i32>,
) -> Result<Task, A2AError> {
    let entry = lookup(a2a, scope, requester, task).await?;
    Ok(entry.snapshot(history(history_length), true))
}

fn history(length: Option<i32>) -> Option<usize> {
    length.map(|n| usize::try_from(n).unwrap_or(0))
}

/// Task `id` of `scope`; at the node, a goal that no task follows yet (one
/// started before the node restarted, or from its pages) is taken up.
async fn lookup(
    a2a: &A2a,
    scope: Scope,
    requester: &Requester,
    id: &str,
) -> Result<Arc<TaskEntry>, A2AError> {
    match (scope, &a2a.goals) {
        (Scope::Node, Some(goals)) => goal_task(a2a, goals, requester, id).await,
        _ => a2a
            .tasks
            .get(scope, id)
            .ok_or_else(|| rpc_error(error_code::TASK_NOT_FOUND, format!("no task {id:?} here"))),
    }
}

/// A goal's task, taken up from the goal's record when no task follows it.
async fn goal_task(
    a2a: &A2a,
    goals: &Arc<Goals>,
    requester: &Requester,
    id: &str,
) -> Result<Arc<TaskEntry>, A2AError> {
    if let Some(entry) = a2a.tasks.get(Scope::Node, id) {
        return Ok(entry);
    }
    let not_found = || rpc_error(error_code::TASK_NOT_FOUND, format!("no task {id:?} here"));
    if !crate::goals::message::is_goal_id(id) {
        return Err(not_found());
    }
    let record = goals.record(id).await.map_err(|_| not_found())?;
    let asked = Message::new(Role::User, vec![Part::text(record.text.clone())]);
    let entry = a2a
        .tasks
        .create(
            Scope::Node,
            requester,
            Some(record.id.clone()),
            &record.id,
            asked,
        )
        .map_err(|full| rpc_error(error_code::INTERNAL_ERROR, full.to_string()))?;
    run::apply(&entry, &record);
    if record.state.is_active() {
        run::follow_goal(goals.clone(), entry.clone(), record.id.clone());
    }
    Ok(entry)
}

/// Checks what a client's message may carry.
fn check(message: &Message, max_text: usize) -> Result<(), A2AError> {
    let invalid = |why: String| Err(rpc_error(error_code::INVALID_PARAMS, why));
    if message.message_id.is_empty() {
        return invalid("the message has no messageId".into());
    }
    if message.role == Role::Agent {
        return invalid("a client's message has the role ROLE_USER".into());
    }
    if message.parts.is_empty() || message.parts.len() > MAX_PARTS {
        return invalid(format!("a message has 1 to {MAX_PARTS} parts"));
    }
    let text: usize = message
        .parts
        .iter()
        .filter_map(Part::as_text)
        .map(str::len)
        .sum();
    if text > max_text {
        return invalid(format!(
            "the message's text of {text} bytes is over the limit of {max_text}"
        ));
    }
    if message
        .parts
        .iter()
        .any(|p| matches!(p.content, PartContent::Raw(_) | PartContent::Url(_)))
    {
        return Err(rpc_error(
            error_code::CONTENT_TYPE_NOT_SUPPORTED,
            "this node reads text and data parts, not files",
        ));
    }
    Ok(())
}

/// A task as it was when its events began to be listened to, and them.
struct Started {
    entry: Arc<TaskEntry>,
    first: Task,
    events: broadcast::Receiver<StreamResponse>,
}

impl Started {
    fn new(entry: Arc<TaskEntry>) -> Started {
        let events = entry.subscribe();
        let first = entry.snapshot(None, true);
        Started {
            entry,
            first,
            events,
        }
    }
}

/// Starts the task `message` asks for (or carries on the goal it names),
/// listening to its events from before it runs.
async fn start(
    a2a: &Arc<A2a>,
    agent: Option<&AgentRecord>,
    requester: &Requester,
    message: Message,
) -> Result<Started, A2AError> {
    match agent {
        Some(record) => {
            check(&message, MAX_TEXT)?;
            if !task_of(&message).is_empty() {
                return Err(rpc_error(
                    error_code::UNSUPPORTED_OPERATION,
                    "a task of an agent is one call and takes no further messages; send a new message (in the same contextId) instead",
                ));
            }
            let context = message.context_id.clone().unwrap_or_default();
            let entry = a2a
                .tasks
                .create(
                    Scope::Agent(record.id),
                    requester,
                    None,
                    &context,
                    message.clone(),
                )
                .map_err(|full| rpc_error(error_code::INTERNAL_ERROR, full.to_string()))?;
            let started = Started::new(entry.clone());
            let node = a2a.hosted.node().clone();
            tokio::spawn(run::call(node, record.clone(), entry, message));
            Ok(started)
        }
        None => {
            check(&message, crate::goals::MAX_TEXT)?;
            let goals = match &a2a.goals {
                Some(goals) if goals.config().enabled => goals.clone(),
                _ => {
                    return Err(rpc_error(
                        error_code::UNSUPPORTED_OPERATION,
                        "this node takes no goals; send the message to one of its agents at /agents/<name>/a2a",
                    ));
                }
            };
            let text = wire::text(&message);
            let task = task_of(&message).to_owned();
            if task.is_empty() {
                let new = NewGoal {
                    text,
                    team: team(&message)?,
                    ..Default::default()
                };
                let record = goals.start(new, requester).await.map_err(goal_error)?;
                let context = message.context_id.clone().unwrap_or_default();
                let entry = a2a
                    .tasks
                    .create(
                        Scope::Node,
                        requester,
                        Some(record.id.clone()),
                        &context,
                        message,
                    )
                    .map_err(|full| rpc_error(error_code::INTERNAL_ERROR, full.to_string()))?;
                let started = Started::new(entry.clone());
                run::follow_goal(goals, entry, record.id);
                return Ok(started);
            }
            let entry = goal_task(a2a, &goals, requester, &task).await?;
            if entry.state().is_terminal() {
                return Err(rpc_error(
                    error_code::UNSUPPORTED_OPERATION,
                    format!(
                        "task {} has ended ({}); send a new message in its context instead",
                        entry.id(),
                        wire::state_words(&entry.state())
                    ),
                ));
            }
            let id = entry.id();
            goals.say(&id, text).await.map_err(goal_error)?;
            entry.record(message);
            let started = Started::new(entry.clone());
            run::follow_goal(goals, entry, id);
            Ok(started)
        }
    }
}

/// The task a message continues; empty for a new one.
fn task_of(message: &Message) -> &str {
    message.task_id.as_deref().unwrap_or_default()
}

/// The team a message's metadata names: `{"team": ["agent", ...]}`.
fn team(message: &Message) -> Result<Vec<String>, A2AError> {
    let Some(team) = message.metadata.as_ref().and_then(|m| m.get("team")) else {
        return Ok(Vec::new());
    };
    let names: Option<Vec<String>> = team
        .as_array()
        .map(|names| {
            names
                .iter()
                .map(|n| n.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or(None);
    match names {
        Some(names) if names.len() <= MAX_TEAM => Ok(names),
        _ => Err(rpc_error(
            error_code::INVALID_PARAMS,
            format!("the metadata's \"team\" is a list of at most {MAX_TEAM} agent names"),
        )),
    }
}

fn goal_error(error: GoalError) -> A2AError {
    let code = match error {
        GoalError::Invalid(_) => error_code::INVALID_PARAMS,
        GoalError::NotFound(_) => error_code::TASK_NOT_FOUND,
        GoalError::Conflict(_) => error_code::UNSUPPORTED_OPERATION,
        GoalError::Busy(_) | GoalError::Storage(_) => error_code::INTERNAL_ERROR,
    };
    rpc_error(code, error.to_string())
}

/// `SendMessage` (0.3's `message/send`): the task once it has ended or
/// waits for the client (at once with `returnImmediately`).
async fn send(
    a2a: &Arc<A2a>,
    agent: Option<&AgentRecord>,
    requester: &Requester,
    request: SendMessageRequest,
) -> Result<Task, A2AError> {
    let configuration = request.configuration.as_ref();
    let return_immediately = configuration.and_then(|c| c.return_immediately) == Some(true);
    let history_length = configuration.and_then(|c| c.history_length);
    let entry = start(a2a, agent, requester, request.message).await?.entry;
    if !return_immediately {
        // The client waits for the task: if it goes, the work stops.
        let guard = StopOnDrop {
            owner: Some(Owner {
                a2a: a2a.clone(),
                scope: scope_of(agent),
            }),
            entry: &entry,
        };
        let mut state = entry.watch();
        // The task's own deadline (the call's, the goal's budget) ends it.
        let _ = state.wait_for(wire::is_settled).await;
        guard.disarm();
    }
    Ok(entry.snapshot(history(history_length), true))
}

fn list(a2a: &A2a, scope: Scope, request: ListTasksRequest) -> Outcome {
    let size = match request.page_size {
        None | Some(0) => PAGE,
        Some(n) if n < 0 => {
            return Err(rpc_error(
                error_code::INVALID_PARAMS,
                "pageSize is positive",
            ));
        }
        Some(n) => usize::try_from(n).unwrap_or(MAX_PAGE).min(MAX_PAGE),
    };
    let offset = match request.page_token.as_deref() {
        None | Some("") => 0,
        Some(token) => token.parse::<usize>().map_err(|_| {
            rpc_error(
                error_code::INVALID_PARAMS,
                "pageToken is one this node gave",
            )
        })?,
    };
    let context = request.context_id.as_deref().unwrap_or_default();
    let matching = a2a.tasks.list(scope, |entry| {
        (context.is_empty() || entry.context_id() == context)
            && request
                .status
                .as_ref()
                .is_none_or(|s| *s == TaskState::Unspecified || *s == entry.state())
    });
    let total = matching.len();
    let artifacts = request.include_artifacts.unwrap_or(false);
    // A page ends at `size` tasks or at MAX_PAGE_BYTES (after at least
    // one), whichever comes first: what concurrent listings hold is bounded
    // by bytes, not by what clients made the tasks hold.
    let mut bytes = 0;
    let tasks: Vec<Task> = matching
        .iter()
        .skip(offset)
        .take(size)
        .take_while(|entry| {
            let first = bytes == 0;
            bytes += entry.bytes().max(1);
            first || bytes <= MAX_PAGE_BYTES
        })
        .map(|entry| entry.snapshot(history(request.history_length), artifacts))
        .collect();
    let next = offset + tasks.len();
    to_value(&ListTasksResponse {
        page_size: i32::try_from(tasks.len()).unwrap_or(i32::MAX),
        tasks,
        next_page_token: if next < total {
            next.to_string()
        } else {
            String::new()
        },
        total_size: i32::try_from(total).unwrap_or(i32::MAX),
    })
}

/// `CancelTask` (0.3's `tasks/cancel`): stops the work and answers with
/// the task once it says it is canceled (or after a few seconds, as it is
/// then).
async fn cancel(
    a2a: &Arc<A2a>,
    scope: Scope,
    requester: &Requester,
    id: &str,
) -> Result<Task, A2AError> {
    let entry = lookup(a2a, scope, requester, id).await?;
    if entry.state().is_terminal() {
        return Err(rpc_error(
            error_code::TASK_NOT_CANCELABLE,
            format!(
                "task {id} has ended ({})",
                wire::state_words(&entry.state())
            ),
        ));
    }
    stop(a2a, scope, &entry);
    let mut state = entry.watch();
    let _ = tokio::time::timeout(CANCEL_WAIT, state.wait_for(|s| s.is_terminal())).await;
    Ok(entry.snapshot(None, true))
}

/// Stops the work of task `entry`: its call, or its goal.
fn stop(a2a: &A2a, scope: Scope, entry: &TaskEntry) {
    entry.cancel.cancel();
    if let (Scope::Node, Some(goals)) = (scope, &a2a.goals)
        && goals.cancel(&entry.id()).is_err()
    {
        // Not running (interrupted, waiting for a message): nothing to stop.
        let said = entry.agent_message("canceled by the client");
        entry.set_status(TaskState::Canceled, Some(said));
    }
}

/// The client whose request started a task's work, which stops the work
/// when it goes away before the work ends.
struct Owner {
    a2a: Arc<A2a>,
    scope: Scope,
}

impl Owner {
    fn gone(&self, entry: &TaskEntry) {
        if !wire::is_settled(&entry.state()) {
            tracing::info!(task = %entry.id(), "the client went away: its task is stopped");
            stop(&self.a2a, self.scope, entry);
        }
    }
}

/// Stops the task when dropped before [`StopOnDrop::disarm`]: a request that
/// waits for its task, dropped because its client went away.
struct StopOnDrop<'a> {
    owner: Option<Owner>,
    entry: &'a TaskEntry,
}

impl StopOnDrop<'_> {
    fn disarm(mut self) {
        self.owner = None;
    }
}

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(owner) = &self.owner {
            owner.gone(self.entry);
        }
    }
}

/// A task's events as server-sent events, each a JSON-RPC response with
/// request id `id` written as `binding` writes it: the task as it is, then
/// each change until it ends or waits for the client. A client that falls
/// behind is sent the whole task again. When `owner`'s client goes away
/// first, the work stops.
fn stream(started: Started, id: JsonRpcId, owner: Option<Owner>, binding: Binding) -> Response {
    let Started {
        entry,
        first,
        mut events,
    } = started;
    let (sender, items) = mpsc::channel::<String>(16);
    let wrap = move |event: &StreamResponse| stream_item(&id, event, binding);
    tokio::spawn(async move {
        let first = StreamResponse::Task(first);
        if sender.send(wrap(&first)).await.is_err() || ends(&first) {
            return;
        }
        loop {
            let received = tokio::select! {
                received = events.recv() => received,
                () = sender.closed() => {
                    if let Some(owner) = &owner {
                        owner.gone(&entry);
                    }
                    return;
                }
            };
            let event = match received {
                Ok(event) => event,
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    StreamResponse::Task(entry.snapshot(None, true))
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            if sender.send(wrap(&event)).await.is_err() {
                if let Some(owner) = &owner {
                    owner.gone(&entry);
                }
                return;
            }
            if ends(&event) {
                return;
            }
        }
    });
    crate::http::streams::event_stream(items, |item| Event::default().data(item))
}

/// One event of a stream, as the JSON-RPC response to request `id` that
/// carries it.
fn stream_item(id: &JsonRpcId, event: &StreamResponse, binding: Binding) -> String {
    let result = match binding {
        Binding::V1_0 => serde_json::to_value(event),
        Binding::V0_3 => serde_json::to_value(v0_3::Event::from(event.clone())),
    };
    let response = match result {
        Ok(result) => JsonRpcResponse::success(id.clone(), result),
        Err(e) => {
            let error = rpc_error(error_code::INTERNAL_ERROR, e.to_string());
            JsonRpcResponse::error(id.clone(), error.to_jsonrpc_error())
        }
    };
    serde_json::to_string(&response).unwrap_or_default()
}

/// Whether a stream ends with `event`.
fn ends(event: &StreamResponse) -> bool {
    let state = match event {
        StreamResponse::Task(task) => &task.status.state,
        StreamResponse::StatusUpdate(update) => &update.status.state,
        StreamResponse::Message(_) => return true,
        StreamResponse::ArtifactUpdate(_) => return false,
    };
    wire::is_settled(state)
}
