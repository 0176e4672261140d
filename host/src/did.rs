//! `did:key` identifiers for ed25519 keys (the W3C CCG did:key method):
//! how a node's and a publisher's keys are shown to systems that name
//! identities with DIDs, such as signed A2A agent cards. The same key as a
//! libp2p peer id (`12D3KooW…`) and as a did:key (`did:key:z6Mk…`) are two
//! spellings of one identity; either is accepted where a key is named.

use libp2p::PeerId;
use libp2p::identity::{PublicKey, ed25519};

/// The multicodec of an ed25519 public key (0xed, as an unsigned varint).
const ED25519_PUB: [u8; 2] = [0xed, 0x01];
/// The prefix of every did:key, and of its base58btc multibase value.
const PREFIX: &str = "did:key:z";
/// The longest did:key read, in bytes (an ed25519 one is 56): base58
/// decoding takes time that grows with the square of the length, and a
/// card's `kid` or a typed key is anyone's text.
pub const MAX_DID_KEY: usize = 64;

/// Why a text is not the did:key of an ed25519 key.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DidError {
    #[error("{0:?} is not a did:key (did:key:z6Mk…)")]
    NotDidKey(String),
    #[error("{0:?} is not base58")]
    NotBase58(String),
    #[error("{0:?} is not an ed25519 key (only ed25519 did:keys name agentsite identities)")]
    NotEd25519(String),
    #[error("a did:key of {0} bytes is longer than an ed25519 did:key ({MAX_DID_KEY} at most)")]
    TooLong(usize),
}

/// The did:key of an ed25519 public key.
pub fn of_ed25519(key: &ed25519::PublicKey) -> String {
    let mut bytes = ED25519_PUB.to_vec();
    bytes.extend_from_slice(&key.to_bytes());
    format!("{PREFIX}{}", bs58::encode(bytes).into_string())
}

/// The did:key of a peer id, when the id carries its ed25519 key (as every
/// agentsite node's and publisher's does).
pub fn of_peer(peer: &PeerId) -> Option<String> {
    Some(of_ed25519(&ed25519_of_peer(peer)?))
}

/// The ed25519 key a peer id carries, if it carries one.
pub fn ed25519_of_peer(peer: &PeerId) -> Option<ed25519::PublicKey> {
    let multihash = peer.as_ref();
    // An identity multihash (code 0) holds the key itself.
    if multihash.code() != 0 {
        return None;
    }
    PublicKey::try_decode_protobuf(multihash.digest())
        .ok()?
        .try_into_ed25519()
        .ok()
}

/// A key as people are shown it: its did:key, or the peer id of a key
/// that is not ed25519.
pub fn shown(peer: &PeerId) -> String {
    of_peer(peer).unwrap_or_else(|| peer.to_string())
}

/// [`of_peer`] of a peer id as text; `None` for what is not one.
pub fn of_peer_text(peer: &str) -> Option<String> {
    of_peer(&peer.parse().ok()?)
}

/// The ed25519 key a did:key names (a `#fragment` after it is allowed).
pub fn key_of(did: &str) -> Result<ed25519::PublicKey, DidError> {
    let did = did.split('#').next().unwrap_or(did);
    if did.len() > MAX_DID_KEY {
        return Err(DidError::TooLong(did.len()));
    }
    let encoded = did
        .strip_prefix(PREFIX)
        .ok_or_else(|| DidError::NotDidKey(crate::text::excerpt(did, 80).into_owned()))?;
    let bytes = bs58::decode(encoded)
        .into_vec()
        .map_err(|_| DidError::NotBase58(crate::text::excerpt(did, 80).into_owned()))?;
    let raw = bytes
        .strip_prefix(&ED25519_PUB)
        .ok_or_else(|| DidError::NotEd25519(crate::text::excerpt(did, 80).into_owned()))?;
    ed25519::PublicKey::try_from_bytes(raw)
        .map_err(|_| DidError::NotEd25519(crate::text::excerpt(did, 80).into_owned()))
}

/// The peer id of the key a did:key names.
pub fn peer_of(did: &str) -> Result<PeerId, DidError> {
    Ok(PublicKey::from(key_of(did)?).to_peer_id())
}

/// The verification method of a did:key: the DID and, as its fragment, its
/// own multibase value (`did:key:z6Mk…#z6Mk…`), as the method defines it.
pub fn key_id(did: &str) -> String {
    let value = did.strip_prefix("did:key:").unwrap_or(did);
    format!("{did}#{value}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_did_key_methods_test_vector_is_read_and_written() {
        // did:key method spec, "ed25519-x25519.json": the key's bytes.
        let did = "did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp";
        let key = key_of(did).unwrap();
        assert_eq!(
            hex::encode(key.to_bytes()),
            "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29"
        );
        assert_eq!(of_ed25519(&key), did);
        assert_eq!(key_of(&key_id(did)).unwrap(), key);
    }

    #[test]
    fn a_peer_id_and_its_did_key_name_one_identity() {
        let keypair = libp2p::identity::Keypair::generate_ed25519();
        let peer = keypair.public().to_peer_id();
        let did = of_peer(&peer).unwrap();
        assert!(did.starts_with("did:key:z6Mk"), "{did}");
        assert_eq!(peer_of(&did).unwrap(), peer);
        // Trust and grants name a publisher either way.
        assert_eq!(crate::policy::edit::parse_publisher(&did).unwrap(), peer);
        let table = format!("[publishers.\"{did}\"]\nllm = true\n");
        let policy: crate::policy::Policy = toml::from_str(&table).unwrap();
        assert!(policy.publishers.contains_key(&peer));
    }

    #[test]
    fn what_is_not_an_ed25519_did_key_is_refused() {
        assert!(matches!(
            key_of("did:web:example.com"),
            Err(DidError::NotDidKey(_))
        ));
        assert!(matches!(
            key_of("did:key:z0OIl"),
            Err(DidError::NotBase58(_))
        ));
        // A secp256k1 did:key (multicodec 0xe7).
        let secp = format!(
            "did:key:z{}",
            bs58::encode([0xe7, 0x01, 2, 3]).into_string()
        );
        assert!(matches!(key_of(&secp), Err(DidError::NotEd25519(_))));
        // Refused by its length before it is decoded (300,000 base58
        // digits took 20 s to decode).
        let long = format!("did:key:z{}", "2".repeat(300_000));
        assert_eq!(key_of(&long), Err(DidError::TooLong(300_009)));
    }
}
