//! Manifests: what a node tells the network about an agent it publishes.
//!
//! A manifest names the agent by content id, lists the sha256 of every chunk
//! of its bytes (so a download can be checked a chunk at a time, from several
//! providers that may lie), and carries the card, tools and imports a search
//! shows. The publisher signs it with its ed25519 key. Every manifest that
//! comes from the network goes through [`SignedManifest::decode`], which
//! checks the signature and the shape before anything else looks at it.

use crate::AgentId;
use crate::agent::tool::{AgentCard, ToolSpec};
use crate::store::AgentRecord;
use base64::Engine as _;
use libp2p::identity::{Keypair, PublicKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// Bytes per chunk of a published agent. Small enough that a bad chunk costs
/// little to fetch again, large enough that a 16 MiB agent is 64 requests.
pub const CHUNK_SIZE: u32 = 256 * 1024;
/// The chunk sizes a manifest may name (other publishers may choose theirs).
pub const CHUNK_SIZES: std::ops::RangeInclusive<u32> = 4096..=4 * 1024 * 1024;
/// The largest agent the network moves.
pub const MAX_AGENT_SIZE: u64 = 256 * 1024 * 1024;
/// The largest encoded manifest accepted (a DHT record holds at most 64 KiB).
pub const MAX_MANIFEST_BYTES: usize = 60 * 1024;
/// Keywords an agent is published under at most: each is a DHT provider
/// record, so a card with a long description cannot flood the DHT.
pub const MAX_KEYWORDS: usize = 24;

/// Signatures are over this prefix and the manifest body, so that a
/// signature made for anything else with the same key never verifies here.
const SIGNING_DOMAIN: &[u8] = b"agentsite-manifest-v1\0";

/// What a publisher says about one agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub id: AgentId,
    /// Size of the component in bytes.
    pub size: u64,
    /// Bytes per chunk; the last chunk may be shorter.
    pub chunk_size: u32,
    /// The sha256 of each chunk, as hex.
    pub chunks: Vec<String>,
    pub card: AgentCard,
    pub tools: Vec<ToolSpec>,
    /// The interfaces the agent imports: what it will ask a host to grant.
    pub capabilities: Vec<String>,
    /// The publisher's public key (libp2p protobuf encoding, base64).
    pub publisher: String,
    /// When it was signed, in seconds since the Unix epoch.
    pub published_at: u64,
    /// Set for an attached server the publisher's node serves (such as
    /// "MCP server (stdio)"): it has no bytes (size 0, no chunks), is
    /// never fetched, and is reached by remote call on that node only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
}

/// A manifest with its publisher's signature, exactly as it travels.
#[derive(Debug, Clone, PartialEq)]
pub struct SignedManifest {
    manifest: Manifest,
    publisher: PublicKey,
    /// The encoded form: what the DHT stores and gossip carries.
    encoded: Vec<u8>,
    /// [`Manifest::keywords`], computed once: every search a peer asks
    /// for is matched against them.
    keywords: Vec<String>,
}

/// The wire form: the body is kept as text so the signature covers exactly
/// the bytes that were signed, whatever a JSON library does to whitespace.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    body: String,
    signature: String,
}

/// Why bytes from the network are not a valid manifest.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ManifestError {
    #[error("manifest is {0} bytes, above the {MAX_MANIFEST_BYTES}-byte limit")]
    TooLarge(usize),
    #[error("manifest is not well-formed: {0}")]
    Malformed(String),
    #[error("manifest signature does not verify against its publisher key")]
    BadSignature,
    #[error("manifest is inconsistent: {0}")]
    Inconsistent(String),
}

impl Manifest {
    /// The manifest of an installed agent, whose bytes are `bytes`.
    pub fn describe(record: &AgentRecord, bytes: &[u8], publisher: &PublicKey) -> Manifest {
        Manifest {
            id: record.id,
            size: bytes.len() as u64,
            chunk_size: CHUNK_SIZE,
            chunks: bytes
                .chunks(CHUNK_SIZE as usize)
                .map(|chunk| hex::encode(Sha256::digest(chunk)))
                .collect(),
            card: record.card.clone(),
            tools: record.tools.clone(),
            capabilities: record.imports.clone(),
            publisher: base64::engine::general_purpose::STANDARD
                .encode(publisher.encode_protobuf()),
            published_at: crate::clock::unix_seconds(),
            service: None,
        }
    }

    /// The manifest of an attached server, published as a service: its
    /// card and tools, and no bytes.
    pub fn service(record: &AgentRecord, kind: &str, publisher: &PublicKey) -> Manifest {
        Manifest {
            id: record.id,
            size: 0,
            chunk_size: CHUNK_SIZE,
            chunks: Vec::new(),
            card: record.card.clone(),
            tools: record.tools.clone(),
            capabilities: Vec::new(),
            publisher: base64::engine::general_purpose::STANDARD
                .encode(publisher.encode_protobuf()),
            published_at: crate::clock::unix_seconds(),
            service: Some(kind.to_owned()),
        }
    }

    /// Whether this is a service reached by remote call only (see
    /// [`Manifest::service`]).
    pub fn is_service(&self) -> bool {
        self.service.is_some()
    }

    /// How many chunks an agent of this size has.
    pub fn chunk_count(&self) -> usize {
        self.size.div_ceil(u64::from(self.chunk_size.max(1))) as usize
    }

    /// The byte range of chunk `index` within the agent.
    pub fn chunk_range(&self, index: usize) -> std::ops::Range<usize> {
        let start = index * self.chunk_size as usize;
        let end = (start + self.chunk_size as usize).min(self.size as usize);
        start..end
    }

    /// Whether `bytes` are chunk `index` of this agent.
    pub fn chunk_matches(&self, index: usize, bytes: &[u8]) -> bool {
        let Some(expected) = self.chunks.get(index) else {
            return false;
        };
        bytes.len() == self.chunk_range(index).len()
            && hex::encode(Sha256::digest(bytes)) == *expected
    }

    /// The terms this agent is found by (see [`super::terms`]): those of
    /// its name, tags and tool names, then of its descriptions, at most
    /// [`MAX_KEYWORDS`]. Each becomes a provider key in the DHT.
    pub fn keywords(&self) -> Vec<String> {
        let named = std::iter::once(self.card.name.as_str())
            .chain(self.card.tags.iter().map(String::as_str))
            .chain(self.tools.iter().map(|t| t.name.as_str()));
        let described = std::iter::once(self.card.description.as_str())
            .chain(self.tools.iter().map(|t| t.description.as_str()));
        let mut words: Vec<String> = Vec::new();
        for term in named.chain(described).flat_map(super::terms::terms) {
            if words.len() == MAX_KEYWORDS {
                break;
            }
            if !words.contains(&term) {
                words.push(term);
            }
        }
        words.sort();
        words
    }

    fn check(&self) -> Result<(), ManifestError> {
        let bad = |reason: String| Err(ManifestError::Inconsistent(reason));
        if let Some(kind) = &self.service {
            if kind.is_empty() || kind.len() > 64 || kind.chars().any(char::is_control) {
                return bad("the service kind must be 1 to 64 printable bytes".into());
            }
            if self.size != 0 || !self.chunks.is_empty() || !self.capabilities.is_empty() {
                return bad("a service has no bytes, chunks or capabilities".into());
            }
        } else if self.size == 0 || self.size > MAX_AGENT_SIZE {
            return bad(format!(
                "size {} is outside 1..={MAX_AGENT_SIZE}",
                self.size
            ));
        }
        if !CHUNK_SIZES.contains(&self.chunk_size) {
            return bad(format!(
                "chunk size {} is outside 4 KiB..4 MiB",
                self.chunk_size
            ));
        }
        if self.chunks.len() != self.chunk_count() {
            return bad(format!(
                "{} chunk hashes for {} bytes in {}-byte chunks",
                self.chunks.len(),
                self.size,
                self.chunk_size
            ));
        }
        if let Some(bad_hash) = self
            .chunks
            .iter()
            .find(|h| h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return bad(format!("chunk hash {bad_hash:?} is not 64 hex digits"));
        }
        crate::agent::tool::validate_agent_name(&self.card.name)
            .map_err(|e| ManifestError::Inconsistent(e.0))?;
        for tool in &self.tools {
            crate::agent::tool::validate_tool_name(&tool.name)
                .map_err(|e| ManifestError::Inconsistent(e.0))?;
        }
        crate::agent::tool::check_card_size(&self.card, &self.tools)
            .map_err(|e| ManifestError::Inconsistent(e.0))
    }
}

/// A keyword as stored in the DHT: lowercase, trimmed.
pub fn normalize_keyword(word: &str) -> String {
    word.trim().to_lowercase()
}

impl SignedManifest {
    /// Signs `manifest` with `keypair`, which must be the manifest's publisher.
    pub fn sign(manifest: Manifest, keypair: &Keypair) -> Result<Self, ManifestError> {
        let body = serde_json::to_string(&manifest)
            .map_err(|e| ManifestError::Malformed(e.to_string()))?;
        let signature = keypair
            .sign(&signed_bytes(&body))
            .map_err(|e| ManifestError::Malformed(format!("cannot sign: {e}")))?;
        let envelope = Envelope {
            body,
            signature: base64::engine::general_purpose::STANDARD.encode(signature),
        };
        let encoded =
            serde_json::to_vec(&envelope).map_err(|e| ManifestError::Malformed(e.to_string()))?;
        // Decoding what was just signed runs every check a receiver runs.
        Self::decode(&encoded)
    }

    /// Reads and checks a manifest from the network: size, shape, publisher
    /// key, signature and internal consistency.
    pub fn decode(bytes: &[u8]) -> Result<Self, ManifestError> {
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(ManifestError::TooLarge(bytes.len()));
        }
        let malformed = |e: &dyn std::fmt::Display| ManifestError::Malformed(e.to_string());
        let envelope: Envelope = serde_json::from_slice(bytes).map_err(|e| malformed(&e))?;
        let manifest: Manifest = serde_json::from_str(&envelope.body).map_err(|e| malformed(&e))?;
        let key_bytes = base64::engine::general_purpose::STANDARD
            .decode(&manifest.publisher)
            .map_err(|e| malformed(&format!("publisher key: {e}")))?;
        let publisher = PublicKey::try_decode_protobuf(&key_bytes)
            .map_err(|e| malformed(&format!("publisher key: {e}")))?;
        if publisher.clone().try_into_ed25519().is_err() {
            return Err(ManifestError::Malformed(
                "publisher key is not ed25519".into(),
            ));
        }
        let signature = base64::engine::general_purpose::STANDARD
            .decode(&envelope.signature)
            .map_err(|e| malformed(&format!("signature: {e}")))?;
        if !publisher.verify(&signed_bytes(&envelope.body), &signature) {
            return Err(ManifestError::BadSignature);
        }
        manifest.check()?;
        Ok(SignedManifest {
            keywords: manifest.keywords(),
            manifest,
            publisher,
            encoded: bytes.to_vec(),
        })
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The terms the agent is found by (see [`Manifest::keywords`]).
    pub fn keywords(&self) -> &[String] {
        &self.keywords
    }

    pub fn id(&self) -> AgentId {
        self.manifest.id
    }

    /// The publisher's public key.
    pub fn publisher(&self) -> &PublicKey {
        &self.publisher
    }

    /// The publisher as a libp2p peer id (the form people compare).
    pub fn publisher_id(&self) -> libp2p::PeerId {
        self.publisher.to_peer_id()
    }

    /// The bytes as they travel.
    pub fn encoded(&self) -> &[u8] {
        &self.encoded
    }
}

fn signed_bytes(body: &str) -> Vec<u8> {
    [SIGNING_DOMAIN, body.as_bytes()].concat()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample(bytes: &[u8], keypair: &Keypair) -> SignedManifest {
        let record = AgentRecord {
            id: AgentId::of(bytes),
            card: AgentCard {
                name: "calculator".into(),
                version: "1.0.0".into(),
                description: "Adds numbers".into(),
                tags: vec!["Math".into(), "arithmetic".into()],
                homepage: None,
            },
            tools: Vec::new(),
            imports: vec!["agentsite:agent/host@0.1.0".into()],
            size: bytes.len() as u64,
            origin: crate::store::Origin::Local,
            added_at: 0,
            attached: None,
        };
        SignedManifest::sign(
            Manifest::describe(&record, bytes, &keypair.public()),
            keypair,
        )
        .unwrap()
    }

    #[test]
    fn a_signed_manifest_round_trips_and_checks_chunks() {
        let keypair = Keypair::generate_ed25519();
        let bytes: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
        let signed = sample(&bytes, &keypair);
        let decoded = SignedManifest::decode(signed.encoded()).unwrap();
        assert_eq!(decoded, signed);
        assert_eq!(decoded.publisher_id(), keypair.public().to_peer_id());
        let manifest = decoded.manifest();
        assert_eq!(manifest.chunk_count(), 3);
        assert!(manifest.chunk_matches(2, &bytes[manifest.chunk_range(2)]));
        assert!(!manifest.chunk_matches(1, &bytes[manifest.chunk_range(2)]));
        assert_eq!(
            manifest.keywords(),
            ["add", "arithmet", "calcul", "math", "number"]
        );
    }

    #[test]
    fn a_long_description_cannot_flood_the_keywords() {
        let signed = sample(b"\0asm component bytes", &Keypair::generate_ed25519());
        let mut manifest = signed.manifest().clone();
        manifest.card.description = (0..200).map(|n| format!("topic{n} ")).collect();
        let keywords = manifest.keywords();
        assert_eq!(keywords.len(), MAX_KEYWORDS);
        // Name and tags come before description words.
        for term in ["calcul", "math", "arithmet"] {
            assert!(keywords.iter().any(|k| k == term), "{keywords:?}");
        }
    }

    #[test]
    fn tampering_breaks_the_signature() {
        let keypair = Keypair::generate_ed25519();
        let signed = sample(b"\0asm component bytes", &keypair);
        let text = String::from_utf8(signed.encoded().to_vec()).unwrap();
        let tampered = text.replace("Adds numbers", "Steals secrets");
        assert_eq!(
            SignedManifest::decode(tampered.as_bytes()),
            Err(ManifestError::BadSignature)
        );
        // Re-signing with another key under the original publisher fails too.
        let envelope: Envelope = serde_json::from_str(&text).unwrap();
        let other = Keypair::generate_ed25519();
        let forged = Envelope {
            signature: base64::engine::general_purpose::STANDARD
                .encode(other.sign(&signed_bytes(&envelope.body)).unwrap()),
            body: envelope.body,
        };
        assert_eq!(
            SignedManifest::decode(&serde_json::to_vec(&forged).unwrap()),
            Err(ManifestError::BadSignature)
        );
        assert!(matches!(
            SignedManifest::decode(b"not json"),
            Err(ManifestError::Malformed(_))
        ));
    }
}
