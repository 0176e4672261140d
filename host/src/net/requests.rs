//! The request-response protocols' requests: fetches of chunks and calls
//! (JSON-RPC) this node sent and waits for, and those of other nodes it
//! serves, worked on off the event loop and sent back through it.

use super::behaviour::Behaviour;
use super::fetch::{FetchRequest, FetchResponse};
use super::{Library, NetError, rpc};
use libp2p::identity::Keypair;
use libp2p::request_response::{self, OutboundRequestId, ResponseChannel};
use libp2p::{PeerId, Swarm};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

type Reply<T> = oneshot::Sender<T>;

/// An answer the library computed off the event loop, to send back.
pub(super) enum Answer {
    Fetch(ResponseChannel<FetchResponse>, FetchResponse),
    /// The answer to a request, and the key under which it could be
    /// cancelled while it ran.
    Rpc(ResponseChannel<Value>, Value, Option<(PeerId, u64)>),
}

pub(super) struct Requests {
    library: Arc<dyn Library>,
    /// This node's identity, which signs the receipts of the calls it runs.
    signer: Keypair,
    fetches: HashMap<OutboundRequestId, Reply<Result<FetchResponse, NetError>>>,
    rpcs: HashMap<OutboundRequestId, Reply<Result<Value, NetError>>>,
    /// Requests of other nodes being worked on, by their sender and id, so
    /// that their sender can cancel them. Bounded by the streams a
    /// connection may have open.
    serving: HashMap<(PeerId, u64), CancellationToken>,
    answers: mpsc::UnboundedSender<Answer>,
}

impl Requests {
    /// The requests, and where the answers worked out off the loop arrive
    /// (for the loop to hand to [`Requests::send_answer`]).
    pub fn new(
        library: Arc<dyn Library>,
        signer: Keypair,
    ) -> (Self, mpsc::UnboundedReceiver<Answer>) {
        let (answers, answered) = mpsc::unbounded_channel();
        let requests = Requests {
            library,
            signer,
            fetches: HashMap::new(),
            rpcs: HashMap::new(),
            serving: HashMap::new(),
            answers,
        };
        (requests, answered)
    }

    pub fn fetch(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        peer: PeerId,
        request: FetchRequest,
        reply: Reply<Result<FetchResponse, NetError>>,
    ) {
        let id = swarm.behaviour_mut().fetch.send_request(&peer, request);
        self.fetches.insert(id, reply);
    }

    pub fn call(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        peer: PeerId,
        message: Value,
        reply: Reply<Result<Value, NetError>>,
    ) {
        let id = swarm.behaviour_mut().rpc.send_request(&peer, message);
        self.rpcs.insert(id, reply);
    }

    pub fn send_answer(&mut self, swarm: &mut Swarm<Behaviour>, answer: Answer) {
        let behaviour = swarm.behaviour_mut();
        // A failure here means the requester went away; nothing to do.
        match answer {
            Answer::Fetch(channel, response) => {
                let _ = behaviour.fetch.send_response(channel, response);
            }
            Answer::Rpc(channel, response, key) => {
                let _ = behaviour.rpc.send_response(channel, response);
                if let Some(key) = key {
                    self.serving.remove(&key);
                }
            }
        }
    }

    pub fn on_fetch_event(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        event: request_response::Event<FetchRequest, FetchResponse>,
    ) {
        let Some((peer, request, channel)) = settle(&mut self.fetches, event) else {
            return;
        };
        let request = match self.library.answer_now(peer, request) {
            Ok(response) => {
                self.send_answer(swarm, Answer::Fetch(channel, response));
                return;
            }
            Err(request) => request,
        };
        let library = self.library.clone();
        let answers = self.answers.clone();
        // The library may read the disk: keep that off the event loop.
        tokio::task::spawn_blocking(move || {
            let response = library.answer(peer, request);
            let _ = answers.send(Answer::Fetch(channel, response));
        });
    }

    pub fn on_rpc_event(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        event: request_response::Event<Value, Value>,
    ) {
        let Some((peer, message, channel)) = settle(&mut self.rpcs, event) else {
            return;
        };
        // A message that is no request of ours, and a cancel, are answered
        // here; the others reach the library.
        let request = match rpc::Inbound::from_json(&message) {
            Ok(rpc::Inbound::Cancel(id)) => {
                if let Some(work) = self.serving.get(&(peer, id)) {
                    work.cancel();
                }
                Err(Ok(serde_json::json!({})))
            }
            Ok(request) => Ok(request),
            Err(error) => Err(Err(error)),
        };
        let request = match request {
            Ok(request) => request,
            Err(answer) => {
                let response = rpc::response(answer);
                let _ = swarm.behaviour_mut().rpc.send_response(channel, response);
                return;
            }
        };
        // A request with an id its sender does not use already can be
        // cancelled by it.
        let id = rpc::request_id(&message);
        let cancel = CancellationToken::new();
        let key = (id != 0 && !self.serving.contains_key(&(peer, id))).then(|| {
            self.serving.insert((peer, id), cancel.clone());
            (peer, id)
        });
        let library = self.library.clone();
        let answers = self.answers.clone();
        let signer = self.signer.clone();
        tokio::spawn(async move {
            let work = async {
                match request {
                    rpc::Inbound::Call(call) => {
                        let ran = library.call(peer, &call).await;
                        rpc::call_response(ran, &call, &signer)
                    }
                    rpc::Inbound::Chat(chat) => rpc::response(library.chat(peer, chat).await),
                    rpc::Inbound::Models => rpc::response(Ok(serde_json::json!({
                        "models": library.shared_models(),
                    }))),
                    rpc::Inbound::Cancel(_) => unreachable!("answered above"),
                }
            };
            // Dropping the work stops it (an agent at its next epoch check).
            let response = tokio::select! {
                response = work => response,
                _ = cancel.cancelled() => rpc::response::<()>(Err(rpc::RpcError {
                    code: rpc::code::CANCELLED,
                    message: "cancelled by the caller".into(),
                })),
            };
            let _ = answers.send(Answer::Rpc(channel, response, key));
        });
    }
}

/// Hands a response or failure of a request-response protocol to whoever
/// waits for it in `waiting`; returns an inbound request for the caller to
/// answer.
fn settle<Request, Response>(
    waiting: &mut HashMap<OutboundRequestId, Reply<Result<Response, NetError>>>,
    event: request_response::Event<Request, Response>,
) -> Option<(PeerId, Request, ResponseChannel<Response>)> {
    match event {
        request_response::Event::Message { peer, message, .. } => match message {
            request_response::Message::Request {
                request, channel, ..
            } => return Some((peer, request, channel)),
            request_response::Message::Response {
                request_id,
                response,
            } => {
                if let Some(reply) = waiting.remove(&request_id) {
                    let _ = reply.send(Ok(response));
                }
            }
        },
        request_response::Event::OutboundFailure {
            peer,
            request_id,
            error,
            ..
        } => {
            if let Some(reply) = waiting.remove(&request_id) {
                let _ = reply.send(Err(NetError::Request {
                    peer,
                    reason: error.to_string(),
                }));
            }
        }
        _ => {}
    }
    None
}
