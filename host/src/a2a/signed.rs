//! Signed Agent Cards (A2A v1.0, section "Agent Card Signing"): a JWS
//! (RFC 7515) with a detached payload, the card canonicalized by JCS (RFC
//! 8785) without its `signatures` and without empty values. This node
//! signs its cards with its own ed25519 key (`alg: EdDSA`), naming the key
//! by its did:key in `kid`, so that any client can check a card against
//! the identity without fetching anything; a signed card of another agent
//! is checked the same way.

use crate::a2a::wire::{AgentCard, AgentCardSignature};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use libp2p::identity::Keypair;
use serde_json::{Value, json};

/// How deep a card's JSON may nest to be canonicalized (the a2a-sdk's
/// bound): extension parameters are free-form.
const MAX_DEPTH: usize = 128;

/// Signs `card` with `keypair` (an ed25519 key), adding one signature.
pub fn sign(card: &mut AgentCard, keypair: &Keypair) {
    let Ok(key) = keypair.public().try_into_ed25519() else {
        return;
    };
    let did = crate::did::of_ed25519(&key);
    let mut value = serde_json::to_value(&*card).expect("a card serializes");
    let payload = canonical_card(&mut value).expect("a card of this node is shallow");
    let header = json!({ "alg": "EdDSA", "typ": "JOSE", "kid": crate::did::key_id(&did) });
    let protected = B64.encode(header.to_string());
    let input = format!("{protected}.{}", B64.encode(payload));
    let signature = keypair
        .sign(input.as_bytes())
        .expect("an ed25519 key signs");
    card.signatures
        .get_or_insert_with(Vec::new)
        .push(AgentCardSignature {
            protected,
            signature: B64.encode(signature),
            header: None,
        });
}

/// What checking a card's signatures found.
#[derive(Debug, PartialEq, Eq)]
pub enum Checked {
    /// The card carries no signature.
    Unsigned,
    /// A signature by this did:key verifies.
    SignedBy(String),
}

/// Why a signed card is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SignatureError {
    #[error(
        "its card is signed, but no signature verifies: it was changed after signing, or signed by another key than it names"
    )]
    Invalid,
    #[error(
        "its card is signed only with keys agentsite cannot check (it checks EdDSA signatures by a did:key `kid`)"
    )]
    Uncheckable,
    #[error("its card is signed by a `kid` that is no ed25519 did:key: {0}")]
    BadKey(String),
    #[error("its card nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
}

/// Checks the signatures of a card as served (its JSON): one that
/// verifies is enough, as the A2A SDKs require.
pub fn check(card: &Value) -> Result<Checked, SignatureError> {
    let signatures = match card.get("signatures").and_then(Value::as_array) {
        Some(signatures) if !signatures.is_empty() => signatures,
        _ => return Ok(Checked::Unsigned),
    };
    let payload = canonical_card(&mut signed_fields(card)).ok_or(SignatureError::TooDeep)?;
    let payload = B64.encode(payload);
    let mut checkable = false;
    let mut bad_key = None;
    for signature in signatures {
        let (Some(protected), Some(signed)) = (
            signature.get("protected").and_then(Value::as_str),
            signature.get("signature").and_then(Value::as_str),
        ) else {
            continue;
        };
        let Some(header) = B64
            .decode(protected)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        else {
            continue;
        };
        let (Some("EdDSA"), Some(kid)) = (
            header.get("alg").and_then(Value::as_str),
            header.get("kid").and_then(Value::as_str),
        ) else {
            continue;
        };
        let key = match crate::did::key_of(kid) {
            Ok(key) => key,
            Err(error) => {
                bad_key.get_or_insert(error);
                continue;
            }
        };
        checkable = true;
        let input = format!("{protected}.{payload}");
        let verified = B64
            .decode(signed)
            .is_ok_and(|bytes| key.verify(input.as_bytes(), &bytes));
        if verified {
            return Ok(Checked::SignedBy(crate::did::of_ed25519(&key)));
        }
    }
    Err(match (checkable, bad_key) {
        (true, _) => SignatureError::Invalid,
        (false, Some(error)) => SignatureError::BadKey(error.to_string()),
        (false, None) => SignatureError::Uncheckable,
    })
}

/// The top-level fields of A2A 1.0's Agent Card.
const CARD_FIELDS: &[&str] = &[
    "name",
    "description",
    "supportedInterfaces",
    "provider",
    "version",
    "documentationUrl",
    "capabilities",
    "securitySchemes",
    "securityRequirements",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
    "signatures",
    "iconUrl",
];

/// What a signature of `card` covers: of a 1.0 card (one with
/// `supportedInterfaces`), 1.0's fields only, as the A2A SDKs verify a
/// card parsed into 1.0's type, which drops the rest (the fields a card
/// carries for 0.3 clients beside them, see `v0_3::add_card_fields`);
/// of another card, all of it.
fn signed_fields(card: &Value) -> Value {
    match card.as_object() {
        Some(object) if object.contains_key("supportedInterfaces") => Value::Object(
            object
                .iter()
                .filter(|(name, _)| CARD_FIELDS.contains(&name.as_str()))
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect(),
        ),
        _ => card.clone(),
    }
}

/// The signed form of a card: without `signatures` and empty values
/// (empty strings, arrays and objects, as the a2a-sdk drops them), in
/// JCS. `None` past [`MAX_DEPTH`].
fn canonical_card(card: &mut Value) -> Option<String> {
    if let Some(object) = card.as_object_mut() {
        object.remove("signatures");
    }
    let cleaned = without_empty(card, 1)?.unwrap_or(json!({}));
    let mut out = String::new();
    jcs(&cleaned, &mut out);
    Some(out)
}

/// `value` without empty strings, arrays and objects (an object or array
/// that only held them is empty too); `None` inside is "drop it".
fn without_empty(value: &Value, depth: usize) -> Option<Option<Value>> {
    if depth > MAX_DEPTH && (value.is_object() || value.is_array()) {
        return None;
    }
    Some(match value {
        Value::String(s) if s.is_empty() => None,
        Value::Null => None,
        Value::Array(items) => {
            let mut kept = Vec::new();
            for item in items {
                if let Some(item) = without_empty(item, depth + 1)? {
                    kept.push(item);
                }
            }
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        Value::Object(fields) => {
            let mut kept = serde_json::Map::new();
            for (key, field) in fields {
                if let Some(field) = without_empty(field, depth + 1)? {
                    kept.insert(key.clone(), field);
                }
            }
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        other => Some(other.clone()),
    })
}

/// RFC 8785: keys sorted by their UTF-16 code units, no whitespace,
/// strings with only the required escapes, numbers as ECMAScript writes
/// them (integral numbers without a fraction).
fn jcs(value: &Value, out: &mut String) {
    match value {
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                jcs(&fields[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                jcs(item, out);
            }
            out.push(']');
        }
        Value::Number(number) => match number.as_f64() {
            Some(x)
                if number.is_f64() && x.fract() == 0.0 && x.abs() < 9.007_199_254_740_992e15 =>
            {
                out.push_str(&(x as i64).to_string());
            }
            _ => out.push_str(&number.to_string()),
        },
        // serde_json escapes `"`, `\` and control characters as RFC 8785
        // does, and writes everything else as UTF-8.
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jcs_sorts_keys_by_utf16_and_drops_empty_values() {
        let mut card = json!({
            "b": 1, "a": [true, "", {}], "é": "x", "\u{1F600}": 2.0, "\u{FB33}": 3,
            "empty": {"nothing": ""}, "signatures": [{"protected": "x"}],
        });
        assert_eq!(
            canonical_card(&mut card).unwrap(),
            "{\"a\":[true],\"b\":1,\"é\":\"x\",\"\u{1F600}\":2,\"\u{FB33}\":3}"
        );
    }

    fn signed_card() -> (Value, Keypair) {
        let keypair = Keypair::generate_ed25519();
        let site = crate::a2a::server::card::Site {
            base: "http://127.0.0.1:7777".into(),
            token: false,
        };
        let mut card = site.node(&[], true);
        sign(&mut card, &keypair);
        (serde_json::to_value(&card).unwrap(), keypair)
    }

    #[test]
    fn a_signed_card_verifies_and_a_changed_one_does_not() {
        let (card, keypair) = signed_card();
        let did = crate::did::of_peer(&keypair.public().to_peer_id()).unwrap();
        assert_eq!(check(&card), Ok(Checked::SignedBy(did)));
        let mut changed = card.clone();
        changed["name"] = json!("another node");
        assert_eq!(check(&changed), Err(SignatureError::Invalid));
        let mut unsigned = card.clone();
        unsigned.as_object_mut().unwrap().remove("signatures");
        assert_eq!(check(&unsigned), Ok(Checked::Unsigned));
        let mut foreign = card;
        foreign["signatures"][0]["protected"] =
            json!(B64.encode(r#"{"alg":"RS256","jku":"https://x"}"#));
        assert_eq!(check(&foreign), Err(SignatureError::Uncheckable));
    }

    #[test]
    fn the_fields_a_card_carries_for_0_3_clients_are_outside_its_signature() {
        let (mut card, keypair) = signed_card();
        crate::a2a::v0_3::add_card_fields(&mut card);
        assert!(card.get("url").is_some(), "{card}");
        let did = crate::did::of_peer(&keypair.public().to_peer_id()).unwrap();
        assert_eq!(check(&card), Ok(Checked::SignedBy(did)));
        // 1.0's own fields stay covered.
        card["supportedInterfaces"][0]["url"] = json!("http://elsewhere/a2a");
        assert_eq!(check(&card), Err(SignatureError::Invalid));
    }
}
