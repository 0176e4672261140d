//! The `user` import: asking the person at the calling MCP client for input
//! (MCP elicitation). Only a call that serves such a client has someone to ask.

use super::caller::{CallerLink, ElicitAction, ElicitFailure};
use super::{CallContext, CallPart, CallState};
use crate::capabilities::bindings::agentsite::agent::user::{
    self, ElicitAction as WitAction, ElicitError, ElicitResponse,
};
use crate::capabilities::sources::Used;
use serde_json::Value;
use wasmtime::component::{HasSelf, Linker};

/// Longest message and schema a guest may send.
const MAX_MESSAGE_LEN: usize = 16 * 1024;
const MAX_SCHEMA_LEN: usize = 64 * 1024;

/// Per-call state of the `user` import.
pub struct UserState {
    caller: CallerLink,
}

impl UserState {
    pub(crate) fn new(caller: CallerLink) -> Self {
        UserState { caller }
    }
}

impl user::Host for UserState {
    async fn elicit(
        &mut self,
        message: String,
        requested_schema: String,
    ) -> wasmtime::Result<Result<ElicitResponse, ElicitError>> {
        if message.len() > MAX_MESSAGE_LEN || requested_schema.len() > MAX_SCHEMA_LEN {
            return Ok(Err(ElicitError::InvalidRequest(format!(
                "the message may be at most {MAX_MESSAGE_LEN} bytes and the schema {MAX_SCHEMA_LEN}"
            ))));
        }
        let schema = match serde_json::from_str::<Value>(&requested_schema) {
            Ok(schema) if schema.is_object() => schema,
            Ok(_) => {
                return Ok(Err(ElicitError::InvalidRequest(
                    "the requested schema must be a JSON object".into(),
                )));
            }
            Err(e) => {
                return Ok(Err(ElicitError::InvalidRequest(format!(
                    "the requested schema is not JSON: {e}"
                ))));
            }
        };
        let Some(caller) = &self.caller.caller else {
            return Ok(Err(ElicitError::Unavailable(
                "nobody to ask: this call does not come from an MCP client".into(),
            )));
        };
        let answer = self
            .caller
            .until_deadline(caller.elicit(message, schema))
            .await;
        Ok(match answer {
            Some(Ok(elicitation)) => Ok(ElicitResponse {
                action: match elicitation.action {
                    ElicitAction::Accept => WitAction::Accept,
                    ElicitAction::Decline => WitAction::Decline,
                    ElicitAction::Cancel => WitAction::Cancel,
                },
                content: elicitation.content.map(|c| c.to_string()),
            }),
            Some(Err(ElicitFailure::Unavailable(reason))) => Err(ElicitError::Unavailable(reason)),
            Some(Err(ElicitFailure::InvalidRequest(reason))) => {
                Err(ElicitError::InvalidRequest(reason))
            }
            None => Err(ElicitError::Unavailable(
                "no answer before the call's deadline".into(),
            )),
        })
    }
}

impl CallPart for UserState {
    fn for_call(call: &CallContext<'_>) -> anyhow::Result<UserState> {
        Ok(UserState::new(call.caller.clone()))
    }

    fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        user::add_to_linker::<CallState, HasSelf<UserState>>(linker, |state| {
            state.sources.record(Used::PERSON);
            &mut state.user
        })
    }
}
