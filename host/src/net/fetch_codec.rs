//! The fetch protocol's wire format.
//!
//! `/agentsite/fetch/1.1.0` sends a chunk as it is: a kind byte, its length
//! and its bytes, written straight from the provider's buffer and read
//! straight into one buffer of exactly that length. Every other answer, and
//! every request, is CBOR as in 1.0.0, behind a kind byte of its own. In
//! 1.0.0 the chunk went through CBOR too, which cost each side a copy of
//! every chunk and the reader a growing buffer, zero-filled and reallocated
//! as the answer came in (issue 20's fetch profile).
//!
//! A node still answers 1.0.0, so that nodes of earlier versions can fetch
//! from it, but asks in 1.1.0 only: a single proposal is what lets
//! multistream-select send the request with it (`V1Lazy`), without waiting a
//! round trip per chunk.

use super::fetch::{FetchRequest, FetchResponse};
use crate::store::manifest::{CHUNK_SIZE, CHUNK_SIZES};
use futures::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use libp2p::StreamProtocol;
use libp2p::request_response::{Codec, cbor};
use std::io;

/// Chunks travel as they are.
pub(super) const PROTOCOL: StreamProtocol = StreamProtocol::new("/agentsite/fetch/1.1.0");
/// Everything in CBOR; answered for nodes of earlier versions.
pub(super) const PROTOCOL_CBOR: StreamProtocol = StreamProtocol::new("/agentsite/fetch/1.0.0");

/// What follows the kind byte of a 1.1.0 answer.
const KIND_CBOR: u8 = 0;
const KIND_CHUNK: u8 = 1;

/// Reads and writes fetch requests and answers in either version. A chunk
/// is at most the longest a manifest may name ([`CHUNK_SIZES`]).
#[derive(Clone)]
pub(super) struct FetchCodec {
    cbor: cbor::codec::Codec<FetchRequest, FetchResponse>,
}

impl FetchCodec {
    /// Requests up to `request_max` bytes; CBOR answers up to `response_max`.
    pub(super) fn new(request_max: u64, response_max: u64) -> Self {
        FetchCodec {
            cbor: cbor::codec::Codec::default()
                .set_request_size_maximum(request_max)
                .set_response_size_maximum(response_max),
        }
    }
}

impl Codec for FetchCodec {
    type Protocol = StreamProtocol;
    type Request = FetchRequest;
    type Response = FetchResponse;

    async fn read_request<T>(
        &mut self,
        protocol: &StreamProtocol,
        io: &mut T,
    ) -> io::Result<FetchRequest>
    where
        T: AsyncRead + Unpin + Send,
    {
        self.cbor.read_request(protocol, io).await
    }

    async fn write_request<T>(
        &mut self,
        protocol: &StreamProtocol,
        io: &mut T,
        request: FetchRequest,
    ) -> io::Result<()>
    where
        T: AsyncWrite + Unpin + Send,
    {
        self.cbor.write_request(protocol, io, request).await
    }

    async fn read_response<T>(
        &mut self,
        protocol: &StreamProtocol,
        io: &mut T,
    ) -> io::Result<FetchResponse>
    where
        T: AsyncRead + Unpin + Send,
    {
        if *protocol == PROTOCOL_CBOR {
            return self.cbor.read_response(protocol, io).await;
        }
        let mut kind = [0u8; 1];
        io.read_exact(&mut kind).await?;
        match kind[0] {
            KIND_CBOR => self.cbor.read_response(protocol, io).await,
            KIND_CHUNK => {
                let mut length = [0u8; 4];
                io.read_exact(&mut length).await?;
                let length = u32::from_be_bytes(length);
                if length > *CHUNK_SIZES.end() {
                    return Err(invalid(format!(
                        "a chunk of {length} bytes is longer than any chunk ({})",
                        CHUNK_SIZES.end()
                    )));
                }
                // The buffer grows at most a usual chunk ahead of the bytes
                // that came: announcing a long chunk costs a peer the bytes.
                let length = length as usize;
                let mut chunk = Vec::new();
                while chunk.len() < length {
                    let start = chunk.len();
                    chunk.resize(length.min(start + CHUNK_SIZE as usize), 0);
                    io.read_exact(&mut chunk[start..]).await?;
                }
                Ok(FetchResponse::Chunk(chunk.into()))
            }
            other => Err(invalid(format!("unknown kind of fetch answer {other}"))),
        }
    }

    async fn write_response<T>(
        &mut self,
        protocol: &StreamProtocol,
        io: &mut T,
        response: FetchResponse,
    ) -> io::Result<()>
    where
        T: AsyncWrite + Unpin + Send,
    {
        if *protocol == PROTOCOL_CBOR {
            return self.cbor.write_response(protocol, io, response).await;
        }
        match response {
            FetchResponse::Chunk(chunk) => {
                let length = u32::try_from(chunk.len())
                    .ok()
                    .filter(|length| length <= CHUNK_SIZES.end())
                    .ok_or_else(|| invalid(format!("a chunk of {} bytes", chunk.len())))?;
                let mut header = [0u8; 5];
                header[0] = KIND_CHUNK;
                header[1..].copy_from_slice(&length.to_be_bytes());
                io.write_all(&header).await?;
                io.write_all(&chunk).await
            }
            other => {
                io.write_all(&[KIND_CBOR]).await?;
                self.cbor.write_response(protocol, io, other).await
            }
        }
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AgentId;
    use futures::io::Cursor;
    use libp2p::request_response;

    fn codec() -> FetchCodec {
        FetchCodec::new(4 * 1024, 1024 * 1024)
    }

    /// `response` as `writer` puts it on the wire, and as `reader` reads it.
    async fn relay<W, R>(
        mut writer: W,
        mut reader: R,
        protocol: &StreamProtocol,
        response: W::Response,
    ) -> (Vec<u8>, R::Response)
    where
        W: request_response::Codec<Protocol = StreamProtocol>,
        R: request_response::Codec<Protocol = StreamProtocol>,
    {
        let mut wire = Cursor::new(Vec::new());
        writer
            .write_response(protocol, &mut wire, response)
            .await
            .unwrap();
        let wire = wire.into_inner();
        let read = reader
            .read_response(protocol, &mut Cursor::new(wire.clone()))
            .await
            .unwrap();
        (wire, read)
    }

    async fn round_trip(
        protocol: &StreamProtocol,
        response: FetchResponse,
    ) -> (Vec<u8>, FetchResponse) {
        relay(codec(), codec(), protocol, response).await
    }

    #[tokio::test]
    async fn a_chunk_travels_as_it_is() {
        let chunk: Vec<u8> = (0..CHUNK_SIZE).map(|i| i as u8).collect();
        let (wire, read) = round_trip(&PROTOCOL, FetchResponse::Chunk(chunk.clone().into())).await;
        assert_eq!(wire.len(), 5 + chunk.len());
        assert_eq!(&wire[5..], &chunk[..]);
        assert!(matches!(read, FetchResponse::Chunk(c) if c == chunk));
        // Another publisher's longer chunks, read a usual chunk at a time.
        let long: Vec<u8> = (0..4 * CHUNK_SIZE + 3).map(|i| (i % 253) as u8).collect();
        let (_, read) = round_trip(&PROTOCOL, FetchResponse::Chunk(long.clone().into())).await;
        assert!(matches!(read, FetchResponse::Chunk(c) if c == long));
    }

    #[tokio::test]
    async fn other_answers_and_the_earlier_version_are_cbor() {
        for protocol in [&PROTOCOL, &PROTOCOL_CBOR] {
            let (_, read) = round_trip(protocol, FetchResponse::Manifest(b"signed".to_vec())).await;
            assert!(matches!(read, FetchResponse::Manifest(m) if m == b"signed"));
            let (_, read) = round_trip(protocol, FetchResponse::NotFound).await;
            assert!(matches!(read, FetchResponse::NotFound));
        }
        let (wire, read) =
            round_trip(&PROTOCOL_CBOR, FetchResponse::Chunk(vec![7; 1000].into())).await;
        assert_ne!(wire[0], KIND_CHUNK, "1.0.0 has no kind byte");
        assert!(matches!(read, FetchResponse::Chunk(c) if c == vec![7; 1000]));
    }

    /// The answers as nodes of 1.0.0 declared them: chunks and manifests
    /// as `serde_bytes` vectors.
    #[derive(serde::Serialize, serde::Deserialize)]
    enum EarlierResponse {
        Manifest(#[serde(with = "serde_bytes")] Vec<u8>),
        Chunk(#[serde(with = "serde_bytes")] Vec<u8>),
        Matching(Vec<serde_bytes::ByteBuf>),
        NotFound,
    }

    #[tokio::test]
    async fn a_cbor_chunk_is_the_same_bytes_earlier_nodes_read_and_write() {
        let earlier = || cbor::codec::Codec::<FetchRequest, EarlierResponse>::default();
        let chunk = vec![7u8; 1000];
        // Written by an earlier node, read by this one.
        let (_, read) = relay(
            earlier(),
            codec(),
            &PROTOCOL_CBOR,
            EarlierResponse::Chunk(chunk.clone()),
        )
        .await;
        assert!(matches!(read, FetchResponse::Chunk(c) if c == chunk));
        // Written by this node, read by an earlier one.
        let (_, read) = relay(
            codec(),
            earlier(),
            &PROTOCOL_CBOR,
            FetchResponse::Chunk(chunk.clone().into()),
        )
        .await;
        assert!(matches!(read, EarlierResponse::Chunk(c) if c == chunk));
    }

    #[tokio::test]
    async fn requests_are_cbor_in_both_versions() {
        let id = AgentId::of(b"agent");
        for protocol in [&PROTOCOL, &PROTOCOL_CBOR] {
            let mut wire = Cursor::new(Vec::new());
            codec()
                .write_request(protocol, &mut wire, FetchRequest::Chunk { id, index: 3 })
                .await
                .unwrap();
            let read = codec()
                .read_request(protocol, &mut Cursor::new(wire.into_inner()))
                .await
                .unwrap();
            assert!(matches!(read, FetchRequest::Chunk { id: i, index: 3 } if i == id));
        }
    }

    #[tokio::test]
    async fn a_peer_cannot_announce_a_chunk_longer_than_any() {
        let mut wire = vec![KIND_CHUNK];
        wire.extend_from_slice(&u32::MAX.to_be_bytes());
        let error = codec()
            .read_response(&PROTOCOL, &mut Cursor::new(wire))
            .await
            .unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(
            error.to_string().contains("longer than any chunk"),
            "{error}"
        );
    }

    /// A swarm over the simulation's in-memory transport with `behaviour`.
    fn swarm<B: libp2p::swarm::NetworkBehaviour>(
        behaviour: impl FnOnce() -> B,
    ) -> libp2p::Swarm<B> {
        libp2p::SwarmBuilder::with_new_identity()
            .with_tokio()
            .with_other_transport(super::super::behaviour::memory_transport)
            .unwrap()
            .with_behaviour(|_| behaviour())
            .unwrap()
            .build()
    }

    /// Asks `provider` (the current fetch behaviour, answering every chunk
    /// request with `chunk`) from a swarm built by `asker`, and returns what
    /// it got.
    async fn fetch_from_current<A>(
        asker: impl FnOnce() -> request_response::Behaviour<A>,
        chunk: Vec<u8>,
    ) -> A::Response
    where
        A: Codec<Protocol = StreamProtocol, Request = FetchRequest> + Clone + Send + 'static,
        A::Response: std::fmt::Debug,
    {
        use futures::StreamExt as _;
        use libp2p::swarm::SwarmEvent;
        let mut provider = swarm(super::super::fetch::behaviour);
        let mut asker = swarm(asker);
        let address: libp2p::Multiaddr = format!("/memory/{}", rand::random::<u64>())
            .parse()
            .unwrap();
        provider.listen_on(address.clone()).unwrap();
        let provider_id = *provider.local_peer_id();
        asker.add_peer_address(provider_id, address);
        let id = AgentId::of(b"agent");
        asker
            .behaviour_mut()
            .send_request(&provider_id, FetchRequest::Chunk { id, index: 0 });
        let answer = async {
            loop {
                tokio::select! {
                    event = provider.select_next_some() => {
                        if let SwarmEvent::Behaviour(request_response::Event::Message {
                            message: request_response::Message::Request { channel, .. },
                            ..
                        }) = event
                        {
                            let chunk = FetchResponse::Chunk(chunk.clone().into());
                            provider.behaviour_mut().send_response(channel, chunk).unwrap();
                        }
                    }
                    event = asker.select_next_some() => match event {
                        SwarmEvent::Behaviour(request_response::Event::Message {
                            message: request_response::Message::Response { response, .. },
                            ..
                        }) => return response,
                        SwarmEvent::Behaviour(request_response::Event::OutboundFailure {
                            error, ..
                        }) => panic!("the request failed: {error}"),
                        _ => {}
                    },
                }
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(20), answer)
            .await
            .expect("an answer within 20 s")
    }

    #[tokio::test]
    async fn a_node_of_an_earlier_version_still_fetches_from_this_one() {
        use libp2p::request_response::{self, ProtocolSupport, cbor};
        let chunk: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        // Speaks 1.0.0 only, as nodes did before chunks travelled raw.
        let earlier = || {
            cbor::Behaviour::<FetchRequest, FetchResponse>::new(
                [(PROTOCOL_CBOR, ProtocolSupport::Outbound)],
                request_response::Config::default(),
            )
        };
        let answer = fetch_from_current(earlier, chunk.clone()).await;
        assert!(matches!(answer, FetchResponse::Chunk(c) if c == chunk));
        // And one of this version asks in 1.1.0.
        let current = || {
            request_response::Behaviour::with_codec(
                codec(),
                [(PROTOCOL, ProtocolSupport::Outbound)],
                request_response::Config::default(),
            )
        };
        let answer = fetch_from_current(current, chunk.clone()).await;
        assert!(matches!(answer, FetchResponse::Chunk(c) if c == chunk));
    }

    #[tokio::test]
    async fn a_short_chunk_or_an_unknown_kind_is_an_error() {
        let mut wire = vec![KIND_CHUNK];
        wire.extend_from_slice(&100u32.to_be_bytes());
        wire.extend_from_slice(&[1; 40]);
        let error = codec()
            .read_response(&PROTOCOL, &mut Cursor::new(wire))
            .await
            .unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
        let error = codec()
            .read_response(&PROTOCOL, &mut Cursor::new(vec![9, 1, 2]))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("unknown kind"), "{error}");
    }
}
