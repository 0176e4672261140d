//! A2A 0.3 clients at the node's A2A endpoints: 0.3's methods, read into
//! the 1.0 requests the node answers (the same tasks, owners, bounds and
//! calls) and answered as 0.3 writes its results.

use super::{
    Binding, answer, cancel, get_task, parse, rpc_error, scope_of, send, send_streaming, subscribe,
    to_value,
};
use crate::a2a::server::A2a;
use crate::a2a::v0_3::{self, IdParams, QueryParams, SendParams, methods};
use crate::a2a::wire::{JsonRpcId, error_code};
use crate::requester::Requester;
use crate::store::AgentRecord;
use axum::response::Response;
use serde_json::Value;
use std::sync::Arc;

/// Answers the 0.3 request `method` with `params`, request id `id`.
pub(super) async fn dispatch(
    a2a: &Arc<A2a>,
    agent: Option<AgentRecord>,
    requester: &Requester,
    id: JsonRpcId,
    method: &str,
    params: Option<Value>,
) -> Response {
    let scope = scope_of(agent.as_ref());
    let binding = Binding::V0_3;
    let outcome = match method {
        methods::SEND => match parse::<SendParams>(params) {
            Ok(params) => send(a2a, agent.as_ref(), requester, params.into())
                .await
                .and_then(|task| to_value(&v0_3::Task::from(task))),
            Err(e) => Err(e),
        },
        methods::STREAM => {
            return match parse::<SendParams>(params) {
                Ok(params) => {
                    send_streaming(a2a, agent.as_ref(), requester, params.into(), id, binding).await
                }
                Err(e) => answer(id, Err(e)),
            };
        }
        methods::RESUBSCRIBE => {
            return match parse::<IdParams>(params) {
                Ok(params) => subscribe(a2a, scope, requester, &params.id, id, binding).await,
                Err(e) => answer(id, Err(e)),
            };
        }
        methods::GET => match parse::<QueryParams>(params) {
            Ok(params) => get_task(a2a, scope, requester, &params.id, params.history_length)
                .await
                .and_then(|task| to_value(&v0_3::Task::from(task))),
            Err(e) => Err(e),
        },
        methods::CANCEL => match parse::<IdParams>(params) {
            Ok(params) => cancel(a2a, scope, requester, &params.id)
                .await
                .and_then(|task| to_value(&v0_3::Task::from(task))),
            Err(e) => Err(e),
        },
        methods::SET_PUSH_CONFIG
        | methods::GET_PUSH_CONFIG
        | methods::LIST_PUSH_CONFIGS
        | methods::DELETE_PUSH_CONFIG => Err(rpc_error(
            error_code::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "this node sends no push notifications; stream the task or poll it with tasks/get",
        )),
        methods::EXTENDED_CARD => Err(rpc_error(
            error_code::EXTENDED_CARD_NOT_CONFIGURED,
            "this node has no extended agent card",
        )),
        other => Err(rpc_error(
            error_code::METHOD_NOT_FOUND,
            format!("no method {other:?}"),
        )),
    };
    answer(id, outcome)
}
