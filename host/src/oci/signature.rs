//! Signatures of OCI artifacts in cosign's keyed format, the one cosign,
//! sigstore-rs, Kyverno and hyper-mcp read: beside a manifest with digest
//! `sha256:H`, the same repository holds a manifest tagged
//! `sha256-H.sig` whose layers are "simple signing" payloads (JSON naming
//! the digest signed) and whose `dev.cosignproject.cosign/signature`
//! annotations are signatures of those payloads' bytes.
//!
//! Keys are ed25519 (cosign's `ED25519` scheme: the payload signed as it
//! is, not hashed first): the node's identity, its publisher key, or an
//! operator's PKCS#8 key file. Verification is offline: no transparency
//! log is consulted, so a signature proves who signed, not when.

use base64::Engine as _;
use libp2p::PeerId;
use libp2p::identity::{PublicKey, ed25519};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The media type of a signature layer.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The annotation of a signature layer that holds the signature (base64).
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The `type` every cosign signature payload names.
const PAYLOAD_TYPE: &str = "cosign container image signature";
/// The most signature layers read of one manifest: a registry (or anyone
/// who may push to the repository) could list thousands, each a key
/// check against each trusted publisher.
pub const MAX_LAYERS: usize = 16;
/// The largest payload read: cosign's are a few hundred bytes, with
/// optional annotations a few KiB.
pub const MAX_PAYLOAD: u64 = 64 * 1024;

/// The tag of the manifest holding the signatures of `manifest_digest`.
pub fn tag(manifest_digest: &str) -> String {
    format!("{}.sig", manifest_digest.replacen(':', "-", 1))
}

/// The simple signing payload: what is signed, field for field as cosign
/// writes it (`github.com/sigstore/cosign/pkg/cosign/payload`).
#[derive(Debug, Serialize, Deserialize)]
pub struct Payload {
    pub critical: Critical,
    /// Claims beside the signed digest (cosign's `-a key=value`): kept in
    /// the payload signed, not read by the node.
    pub optional: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Critical {
    pub identity: Identity,
    pub image: Image,
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Identity {
    /// The repository the signer pushed to (`registry/repository`). Not
    /// checked on pull, as cosign does not: an artifact copied to another
    /// registry keeps its digest and its signatures.
    #[serde(rename = "docker-reference")]
    pub docker_reference: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Image {
    #[serde(rename = "docker-manifest-digest")]
    pub docker_manifest_digest: String,
}

impl Payload {
    /// The payload signing `manifest_digest`, pushed to `repository`.
    pub fn new(repository: &str, manifest_digest: &str) -> Self {
        Self {
            critical: Critical {
                identity: Identity {
                    docker_reference: repository.to_owned(),
                },
                image: Image {
                    docker_manifest_digest: manifest_digest.to_owned(),
                },
                kind: PAYLOAD_TYPE.to_owned(),
            },
            optional: None,
        }
    }

    /// The bytes signed: compact JSON, as cosign marshals it.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a payload serializes")
    }
}

/// A key that signs artifacts, and the identity it shows as.
pub struct Signer {
    keypair: ed25519::Keypair,
}

/// Why a key file cannot sign.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read the key {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "{path} is an encrypted cosign key: this node reads unencrypted PKCS#8 ed25519 keys \
         (`openssl genpkey -algorithm ed25519 -out KEY.pem`), or signs with its own key when --key is left out"
    )]
    Encrypted { path: String },
    #[error(
        "{path} is not an ed25519 private key in PKCS#8 PEM (-----BEGIN PRIVATE KEY-----): {problem}"
    )]
    NotEd25519 { path: String, problem: String },
}

impl Signer {
    pub fn new(keypair: ed25519::Keypair) -> Self {
        Self { keypair }
    }

    /// The signer of a PKCS#8 PEM file, as `openssl genpkey -algorithm
    /// ed25519` writes one.
    pub fn from_pem_file(path: &Path) -> Result<Self, KeyError> {
        use ed25519_dalek::pkcs8::DecodePrivateKey as _;
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
            path: shown.clone(),
            source,
        })?;
        if text.contains("ENCRYPTED SIGSTORE PRIVATE KEY")
            || text.contains("ENCRYPTED COSIGN PRIVATE KEY")
        {
            return Err(KeyError::Encrypted { path: shown });
        }
        let key =
            ed25519_dalek::SigningKey::from_pkcs8_pem(&text).map_err(|e| KeyError::NotEd25519 {
                path: shown.clone(),
                problem: e.to_string(),
            })?;
        let secret = ed25519::SecretKey::try_from_bytes(key.to_bytes())
            .expect("32 bytes are an ed25519 secret key");
        Ok(Self::new(ed25519::Keypair::from(secret)))
    }

    /// The key's peer id: what `[publishers]` names it by.
    pub fn peer(&self) -> PeerId {
        PublicKey::from(self.keypair.public()).to_peer_id()
    }

    /// The key as a did:key, as people are shown it.
    pub fn did(&self) -> String {
        crate::did::of_ed25519(&self.keypair.public())
    }

    /// The signature of `payload`, in base64 as the annotation holds it.
    pub fn sign(&self, payload: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.keypair.sign(payload))
    }
}

/// The peer id of the ed25519 key in a PEM public key file (SPKI, as
/// `cosign public-key` and `openssl pkey -pubout` write it).
pub fn peer_of_public_pem(text: &str) -> anyhow::Result<PeerId> {
    use ed25519_dalek::pkcs8::DecodePublicKey as _;
    let key = ed25519_dalek::VerifyingKey::from_public_key_pem(text).map_err(|e| {
        anyhow::anyhow!("not an ed25519 public key in PEM (-----BEGIN PUBLIC KEY-----): {e}")
    })?;
    let key = ed25519::PublicKey::try_from_bytes(key.as_bytes())
        .map_err(|e| anyhow::anyhow!("not an ed25519 public key: {e}"))?;
    Ok(PublicKey::from(key).to_peer_id())
}

/// One signature layer as a registry holds it: the payload's bytes and
/// the annotation's text, neither checked yet.
#[derive(Debug, Clone)]
pub struct Found {
    pub payload: Vec<u8>,
    pub signature: String,
}

/// What the signatures beside a manifest say of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A signature of this manifest by a trusted key.
    Signed { by: PeerId },
    /// Signatures, but none by a trusted key for this manifest: why the
    /// most telling one is not.
    Untrusted { why: String },
    /// No signature at all.
    Unsigned,
    /// The signatures could not be read: why.
    Unreadable { why: String },
}

impl Verdict {
    /// The verdict as `add` reports it.
    pub fn describe(&self) -> String {
        match self {
            Verdict::Signed { by } => format!("signed by {}", crate::did::shown(by)),
            Verdict::Untrusted { why } => format!("signed, but {why}"),
            Verdict::Unsigned => "not signed".to_owned(),
            Verdict::Unreadable { why } => why.clone(),
        }
    }
}

/// Checks the signatures `found` beside the manifest `manifest_digest`
/// against the `trusted` keys (ed25519 peer ids; others are skipped).
pub fn check(found: &[Found], manifest_digest: &str, trusted: &[PeerId]) -> Verdict {
    if found.is_empty() {
        return Verdict::Unsigned;
    }
    let keys: Vec<(PeerId, ed25519::PublicKey)> = trusted
        .iter()
        .filter_map(|peer| Some((*peer, crate::did::ed25519_of_peer(peer)?)))
        .collect();
    // The reasons, most telling last: a trusted key's signature of another
    // manifest says more than a payload that does not parse.
    let mut why = Why::NoTrustedKey;
    for layer in found.iter().take(MAX_LAYERS) {
        let Some(signature) = decode_signature(&layer.signature) else {
            why = why.max(Why::Malformed);
            continue;
        };
        let Some(signer) = keys
            .iter()
            .find(|(_, key)| key.verify(&layer.payload, &signature))
        else {
            continue;
        };
        match serde_json::from_slice::<Payload>(&layer.payload) {
            Ok(payload) if payload.critical.kind != PAYLOAD_TYPE => {
                why = why.max(Why::NotCosign);
            }
            Ok(payload) if payload.critical.image.docker_manifest_digest == manifest_digest => {
                return Verdict::Signed { by: signer.0 };
            }
            Ok(payload) => {
                why = why.max(Why::OtherManifest {
                    by: signer.0,
                    digest: crate::text::excerpt(
                        &payload.critical.image.docker_manifest_digest,
                        80,
                    )
                    .into_owned(),
                });
            }
            Err(_) => why = why.max(Why::NotCosign),
        }
    }
    Verdict::Untrusted {
        why: why.to_string(),
    }
}

/// Why no signature was accepted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Why {
    NoTrustedKey,
    Malformed,
    NotCosign,
    OtherManifest { by: PeerId, digest: String },
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::NoTrustedKey => f.write_str(
                "by no key this node trusts (`agentsite trust KEY` trusts a publisher's key)",
            ),
            Why::Malformed => f.write_str("no signature is an ed25519 signature in base64"),
            Why::NotCosign => f.write_str("what a trusted key signed is not a cosign payload"),
            Why::OtherManifest { by, digest } => write!(
                f,
                "{} signed {digest}, not this manifest: a signature moved from another artifact",
                crate::did::shown(by)
            ),
        }
    }
}

fn decode_signature(text: &str) -> Option<Vec<u8>> {
    // An ed25519 signature is 64 bytes, 88 characters of base64.
    if text.len() > 128 {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()?;
    (bytes.len() == 64).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0b5f6f2b4b1f3f5e5b0a0e6d3f2c1b0a9f8e7d6c5b4a39281706f5e4d3c2b1a0";

    fn signed(signer: &Signer, digest: &str) -> Found {
        let payload = Payload::new("registry.example/agents/hello", digest).to_bytes();
        Found {
            signature: signer.sign(&payload),
            payload,
        }
    }

    #[test]
    fn the_payload_is_cosigns_simple_signing_json() {
        let payload = Payload::new("registry.example/agents/hello", DIGEST).to_bytes();
        assert_eq!(
            String::from_utf8(payload).unwrap(),
            format!(
                r#"{{"critical":{{"identity":{{"docker-reference":"registry.example/agents/hello"}},"image":{{"docker-manifest-digest":"{DIGEST}"}},"type":"cosign container image signature"}},"optional":null}}"#
            )
        );
        assert_eq!(
            tag(DIGEST),
            "sha256-0b5f6f2b4b1f3f5e5b0a0e6d3f2c1b0a9f8e7d6c5b4a39281706f5e4d3c2b1a0.sig"
        );
    }

    #[test]
    fn a_trusted_keys_signature_of_this_manifest_is_accepted_and_others_say_why_not() {
        let ann = Signer::new(ed25519::Keypair::generate());
        let bob = Signer::new(ed25519::Keypair::generate());
        let other = DIGEST.replace("0b5f", "ffff");

        assert_eq!(check(&[], DIGEST, &[ann.peer()]), Verdict::Unsigned);
        assert_eq!(
            check(
                &[signed(&bob, DIGEST), signed(&ann, DIGEST)],
                DIGEST,
                &[ann.peer()]
            ),
            Verdict::Signed { by: ann.peer() }
        );
        let Verdict::Untrusted { why } = check(&[signed(&bob, DIGEST)], DIGEST, &[ann.peer()])
        else {
            panic!("bob is not trusted")
        };
        assert!(why.contains("no key this node trusts"), "{why}");
        let Verdict::Untrusted { why } = check(&[signed(&ann, &other)], DIGEST, &[ann.peer()])
        else {
            panic!("a signature of another manifest")
        };
        assert!(why.contains(&other) && why.contains(&ann.did()), "{why}");

        let mut forged = signed(&ann, DIGEST);
        forged.payload = Payload::new("registry.example/agents/hello", &other).to_bytes();
        assert!(matches!(
            check(&[forged], DIGEST, &[ann.peer()]),
            Verdict::Untrusted { .. }
        ));
        let mut garbled = signed(&ann, DIGEST);
        garbled.signature = "not base64!".repeat(50);
        let Verdict::Untrusted { why } = check(&[garbled], DIGEST, &[ann.peer()]) else {
            panic!("garbled")
        };
        assert!(why.contains("base64"), "{why}");
    }

    #[test]
    fn only_the_first_layers_are_tried() {
        let ann = Signer::new(ed25519::Keypair::generate());
        let bob = Signer::new(ed25519::Keypair::generate());
        let mut found = vec![signed(&bob, DIGEST); MAX_LAYERS];
        found.push(signed(&ann, DIGEST));
        assert!(matches!(
            check(&found, DIGEST, &[ann.peer()]),
            Verdict::Untrusted { .. }
        ));
    }

    #[test]
    fn pem_key_files_are_read_and_encrypted_ones_named() {
        use ed25519_dalek::pkcs8::{EncodePrivateKey as _, EncodePublicKey as _};
        let dir = tempfile::tempdir().unwrap();
        let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
        let pem = key.to_pkcs8_pem(Default::default()).unwrap();
        let file = dir.path().join("key.pem");
        std::fs::write(&file, pem.as_bytes()).unwrap();
        let signer = Signer::from_pem_file(&file).unwrap();
        let public = key
            .verifying_key()
            .to_public_key_pem(Default::default())
            .unwrap();
        assert_eq!(peer_of_public_pem(&public).unwrap(), signer.peer());

        std::fs::write(
            &file,
            "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAA==\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n",
        )
        .unwrap();
        let error = Signer::from_pem_file(&file).err().unwrap().to_string();
        assert!(error.contains("encrypted cosign key"), "{error}");
        std::fs::write(&file, "hello").unwrap();
        let error = Signer::from_pem_file(&file).err().unwrap().to_string();
        assert!(error.contains("not an ed25519 private key"), "{error}");
    }
}
