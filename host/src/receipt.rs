//! Signed receipts of remote calls: what a node that ran a call for another
//! node states about it, signed with its identity (its did:key), so that a
//! wrong answer is not only wrong but provably this node's.
//!
//! A receipt names the agent (its sha256 id), the tool, a hash of the
//! arguments and of the result, the grants in force, the time, and the
//! sources of nondeterminism the call read ([`Used`]). A call that read none
//! is *replayable*: the same component and arguments give the same bytes on
//! any node, so anyone holding the receipt, the arguments and the result
//! ([`Evidence`]) can run the agent again and see whether the node told the
//! truth. A receipt proves what a node answered and, for a replayable call,
//! what it should have answered; it says nothing of whether the agent
//! itself is honest or right.
//!
//! Arguments and results are hashed in one canonical JSON form (object keys
//! sorted, no spaces, serde_json's numbers and escapes), so that two nodes
//! that hold the same JSON value hash the same bytes whatever order its keys
//! came in.

use crate::AgentId;
use crate::capabilities::sources::Used;
use crate::did;
use base64::Engine as _;
use libp2p::PeerId;
use libp2p::identity::Keypair;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::Write as _;

/// The receipt format this node writes and reads.
pub const VERSION: u64 = 1;
/// What a signature covers first: a receipt's signature can never be taken
/// for a signature of anything else the node signs.
const DOMAIN: &[u8] = b"agentsite receipt v1\n";
/// The most grant lines, and bytes per line or name, a receipt read from
/// another node may carry (a node's own describe in a few dozen bytes).
pub const MAX_GRANT_LINES: usize = 64;
pub const MAX_LINE: usize = 512;
/// The longest tool name a receipt may carry.
pub const MAX_TOOL: usize = 256;
/// The most sources a receipt may name.
const MAX_USED: usize = 32;

/// A call's result with what it ran under: what a receipt states.
#[derive(Debug, Clone)]
pub struct Ran {
    pub output: crate::agent::tool::ToolOutput,
    /// One line per capability granted (none for a pure call).
    pub grants: Vec<String>,
    /// The sources of nondeterminism the call read; none: replayable.
    pub used: Used,
}

/// A node's signed statement of one call it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    /// The format, [`VERSION`].
    pub v: u64,
    /// The did:key of the node that ran the call and signed this.
    pub node: String,
    pub agent: AgentId,
    pub tool: String,
    /// `sha256:<hex>` of the arguments' canonical JSON.
    pub arguments: String,
    /// `sha256:<hex>` of the result's canonical JSON (an MCP
    /// `CallToolResult`, without `_meta`).
    pub result: String,
    /// The capabilities granted to the call, one line each.
    pub grants: Vec<String>,
    /// The sources of nondeterminism the call read, by name.
    pub used: Vec<String>,
    /// Whether the call read none: any node running it again gets the
    /// same result.
    pub replayable: bool,
    /// When the call ended, in milliseconds since the Unix epoch.
    pub at: u64,
    /// The ed25519 signature of the node, base64.
    pub signature: String,
}

/// Why a receipt cannot be taken for what it says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReceiptError {
    #[error("the receipt is not one this node reads: {0}")]
    Malformed(String),
    #[error("the receipt's signature is not {0}'s")]
    BadSignature(String),
    #[error("the receipt is signed by {signer}, not by {expected}, which answered")]
    WrongSigner { signer: String, expected: String },
    #[error("the receipt is for {0}, not for the call that was made")]
    OtherCall(&'static str),
    #[error("the receipt calls the call replayable but names what it read ({0})")]
    Inconsistent(String),
}

/// What a node states in a receipt, before it is signed.
pub struct Statement<'a> {
    pub agent: AgentId,
    pub tool: &'a str,
    pub arguments: &'a Value,
    pub result: &'a Value,
    pub grants: &'a [String],
    pub used: Used,
    /// Milliseconds since the Unix epoch.
    pub at: u64,
}

impl Receipt {
    /// The receipt of `statement`, signed with this node's `keypair`.
    pub fn sign(keypair: &Keypair, statement: Statement<'_>) -> Receipt {
        let node = keypair
            .public()
            .try_into_ed25519()
            .map(|key| did::of_ed25519(&key))
            .unwrap_or_else(|_| keypair.public().to_peer_id().to_string());
        let mut receipt = Receipt {
            v: VERSION,
            node,
            agent: statement.agent,
            tool: statement.tool.to_owned(),
            arguments: digest(statement.arguments),
            result: digest(statement.result),
            grants: statement.grants.to_vec(),
            used: statement
                .used
                .names()
                .into_iter()
                .map(str::to_owned)
                .collect(),
            replayable: statement.used.replayable(),
            at: statement.at,
            signature: String::new(),
        };
        // An ed25519 key signs anything; another kind of key is no
        // agentsite node's, and its receipt fails to verify.
        let signature = keypair.sign(&receipt.signed_bytes()).unwrap_or_default();
        receipt.signature = base64::engine::general_purpose::STANDARD.encode(signature);
        receipt
    }

    /// A receipt from another node's JSON, with every list and text in it
    /// bounded; its signature is not checked yet ([`Receipt::verify`]).
    pub fn from_value(value: &Value) -> Result<Receipt, ReceiptError> {
        let receipt = Receipt::deserialize(value).map_err(|e| {
            ReceiptError::Malformed(crate::text::excerpt(&e.to_string(), 200).into_owned())
        })?;
        let too_long = |what: &str| Err(ReceiptError::Malformed(format!("{what} is too long")));
        if receipt.v != VERSION {
            return Err(ReceiptError::Malformed(format!(
                "version {} (this node reads {VERSION})",
                receipt.v
            )));
        }
        if receipt.node.len() > did::MAX_DID_KEY + 8 {
            return too_long("the node's key");
        }
        if receipt.tool.len() > MAX_TOOL {
            return too_long("the tool's name");
        }
        if receipt.grants.len() > MAX_GRANT_LINES
            || receipt.grants.iter().any(|l| l.len() > MAX_LINE)
        {
            return too_long("the list of grants");
        }
        if receipt.used.len() > MAX_USED || receipt.used.iter().any(|l| l.len() > MAX_LINE) {
            return too_long("the list of sources");
        }
        if receipt.arguments.len() > 80
            || receipt.result.len() > 80
            || receipt.signature.len() > 128
        {
            return too_long("a hash or the signature");
        }
        Ok(receipt)
    }

    /// Checks the signature; the node that signed.
    pub fn verify(&self) -> Result<PeerId, ReceiptError> {
        let key = did::key_of(&self.node)
            .map_err(|e| ReceiptError::Malformed(format!("the node's key: {e}")))?;
        let bad = || ReceiptError::BadSignature(self.node.clone());
        let signature = base64::engine::general_purpose::STANDARD
            .decode(&self.signature)
            .map_err(|_| bad())?;
        if !key.verify(&self.signed_bytes(), &signature) {
            return Err(bad());
        }
        if self.replayable && !self.used.is_empty() {
            return Err(ReceiptError::Inconsistent(self.used.join(", ")));
        }
        Ok(libp2p::identity::PublicKey::from(key).to_peer_id())
    }

    /// Checks that this receipt, signed by `node`, is of the call of `tool`
    /// of `agent` with `arguments` that answered `result`.
    pub fn check(
        &self,
        node: &PeerId,
        agent: &AgentId,
        tool: &str,
        arguments: &Value,
        result: &Value,
    ) -> Result<(), ReceiptError> {
        let signer = self.verify()?;
        if signer != *node {
            return Err(ReceiptError::WrongSigner {
                signer: self.node.clone(),
                expected: did::shown(node),
            });
        }
        if self.agent != *agent {
            return Err(ReceiptError::OtherCall("another agent"));
        }
        if self.tool != tool {
            return Err(ReceiptError::OtherCall("another tool"));
        }
        if self.arguments != digest(arguments) {
            return Err(ReceiptError::OtherCall("other arguments"));
        }
        if self.result != digest(result) {
            return Err(ReceiptError::OtherCall("another result"));
        }
        Ok(())
    }

    /// The sources the receipt names; `None` if it names one this node
    /// does not know (a newer node's: not replayable here either).
    pub fn used(&self) -> Option<Used> {
        Used::from_names(self.used.iter().map(String::as_str))
    }

    /// The bytes the signature covers: the domain, then the receipt's
    /// canonical JSON without its signature.
    fn signed_bytes(&self) -> Vec<u8> {
        let mut value = serde_json::to_value(self).expect("a receipt is JSON");
        if let Some(object) = value.as_object_mut() {
            object.remove("signature");
        }
        let mut bytes = DOMAIN.to_vec();
        canonical(&value, &mut bytes);
        bytes
    }
}

/// A receipt with the arguments and result it covers: what a node hands a
/// third to show what another answered. Any node can check it by running
/// the agent again ([`Evidence::check`] and `Hub::check_evidence`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    pub receipt: Receipt,
    pub arguments: Value,
    pub result: Value,
}

impl Evidence {
    /// Checks that the receipt is signed and covers these arguments and
    /// this result; the node that signed it.
    pub fn check(&self) -> Result<PeerId, ReceiptError> {
        let receipt = &self.receipt;
        let signer = receipt.verify()?;
        receipt.check(
            &signer,
            &receipt.agent,
            &receipt.tool,
            &self.arguments,
            &self.result,
        )?;
        Ok(signer)
    }
}

/// `sha256:<hex>` of `value`'s canonical JSON.
pub fn digest(value: &Value) -> String {
    let mut bytes = Vec::new();
    canonical(value, &mut bytes);
    format!("sha256:{}", hex::encode(Sha256::digest(&bytes)))
}

/// Writes `value` as canonical JSON: object keys sorted by their bytes, no
/// whitespace, numbers and strings as serde_json writes them.
fn canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(object) => {
            let mut entries: Vec<(&String, &Value)> = object.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (index, (key, value)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key).expect("writing to memory");
                out.push(b':');
                canonical(value, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                canonical(item, out);
            }
            out.push(b']');
        }
        scalar => {
            let _ = out.write_all(
                serde_json::to_string(scalar)
                    .expect("a scalar is JSON")
                    .as_bytes(),
            );
        }
    }
}

/// Now, in milliseconds since the Unix epoch, as receipts state times.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn statement<'a>(arguments: &'a Value, result: &'a Value, used: Used) -> Statement<'a> {
        Statement {
            agent: AgentId::of(b"calculator"),
            tool: "add",
            arguments,
            result,
            grants: &[],
            used,
            at: 1_700_000_000_000,
        }
    }

    #[test]
    fn canonical_json_does_not_depend_on_key_order_or_spacing() {
        let one: Value =
            serde_json::from_str(r#"{"b": [1, {"y": 2, "x": "é\n"}], "a": 1.5}"#).unwrap();
        let other: Value = serde_json::from_str(r#"{"a":1.5,"b":[1,{"x":"é\n","y":2}]}"#).unwrap();
        assert_eq!(digest(&one), digest(&other));
        let mut bytes = Vec::new();
        canonical(&one, &mut bytes);
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            r#"{"a":1.5,"b":[1,{"x":"é\n","y":2}]}"#
        );
        assert_ne!(digest(&json!({"a": 1})), digest(&json!({"a": 2})));
        assert_ne!(digest(&json!([1, 2])), digest(&json!([2, 1])));
    }

    #[test]
    fn a_signed_receipt_checks_and_any_change_breaks_it() {
        let keypair = Keypair::generate_ed25519();
        let node = keypair.public().to_peer_id();
        let (arguments, result) = (
            json!({"a": 2, "b": 3}),
            json!({"content": [{"type": "text", "text": "5"}]}),
        );
        let receipt = Receipt::sign(&keypair, statement(&arguments, &result, Used::empty()));
        assert!(receipt.replayable);
        assert_eq!(receipt.node, did::of_peer(&node).unwrap());
        let agent = AgentId::of(b"calculator");
        receipt
            .check(&node, &agent, "add", &arguments, &result)
            .unwrap();
        // Read back from the wire, it is the same receipt.
        let read = Receipt::from_value(&serde_json::to_value(&receipt).unwrap()).unwrap();
        assert_eq!(read, receipt);

        let other = json!({"content": [{"type": "text", "text": "6"}]});
        assert_eq!(
            receipt.check(&node, &agent, "add", &arguments, &other),
            Err(ReceiptError::OtherCall("another result"))
        );
        assert_eq!(
            receipt.check(&node, &agent, "add", &json!({"a": 2, "b": 4}), &result),
            Err(ReceiptError::OtherCall("other arguments"))
        );
        let stranger = Keypair::generate_ed25519().public().to_peer_id();
        assert!(matches!(
            receipt.check(&stranger, &agent, "add", &arguments, &result),
            Err(ReceiptError::WrongSigner { .. })
        ));
        // A field changed after signing: the signature no longer holds.
        let mut forged = receipt.clone();
        forged.result = digest(&other);
        assert!(matches!(
            forged.verify(),
            Err(ReceiptError::BadSignature(_))
        ));
        let mut forged = receipt.clone();
        forged.replayable = false;
        assert!(matches!(
            forged.verify(),
            Err(ReceiptError::BadSignature(_))
        ));
        // Signed by another key under this node's name.
        let mut forged = Receipt::sign(
            &Keypair::generate_ed25519(),
            statement(&arguments, &other, Used::empty()),
        );
        forged.node = receipt.node.clone();
        assert!(matches!(
            forged.verify(),
            Err(ReceiptError::BadSignature(_))
        ));
    }

    #[test]
    fn a_receipt_says_what_the_call_read() {
        let keypair = Keypair::generate_ed25519();
        let (arguments, result) = (json!({}), json!({"content": []}));
        let receipt = Receipt::sign(
            &keypair,
            statement(&arguments, &result, Used::CLOCK | Used::HTTP),
        );
        assert!(!receipt.replayable);
        assert_eq!(receipt.used, ["clock", "http"]);
        assert_eq!(receipt.used(), Some(Used::CLOCK | Used::HTTP));
        receipt.verify().unwrap();
    }

    #[test]
    fn receipts_from_other_nodes_are_bounded() {
        let keypair = Keypair::generate_ed25519();
        let (arguments, result) = (json!({}), json!({"content": []}));
        let receipt = Receipt::sign(&keypair, statement(&arguments, &result, Used::empty()));
        let mut value = serde_json::to_value(&receipt).unwrap();
        value["grants"] = json!(vec!["kv 1 MiB"; MAX_GRANT_LINES + 1]);
        assert!(matches!(
            Receipt::from_value(&value),
            Err(ReceiptError::Malformed(_))
        ));
        let mut value = serde_json::to_value(&receipt).unwrap();
        value["tool"] = json!("x".repeat(MAX_TOOL + 1));
        assert!(matches!(
            Receipt::from_value(&value),
            Err(ReceiptError::Malformed(_))
        ));
        let mut value = serde_json::to_value(&receipt).unwrap();
        value["extra"] = json!(1);
        assert!(matches!(
            Receipt::from_value(&value),
            Err(ReceiptError::Malformed(_))
        ));
        let mut value = serde_json::to_value(&receipt).unwrap();
        value["v"] = json!(2);
        assert!(matches!(
            Receipt::from_value(&value),
            Err(ReceiptError::Malformed(_))
        ));
    }

    #[test]
    fn evidence_checks_by_itself() {
        let keypair = Keypair::generate_ed25519();
        let (arguments, result) = (json!({"a": 1}), json!({"content": []}));
        let receipt = Receipt::sign(&keypair, statement(&arguments, &result, Used::empty()));
        let evidence = Evidence {
            receipt,
            arguments,
            result,
        };
        assert_eq!(evidence.check().unwrap(), keypair.public().to_peer_id());
        let mut altered = evidence.clone();
        altered.result = json!({"content": [], "isError": true});
        assert_eq!(
            altered.check(),
            Err(ReceiptError::OtherCall("another result"))
        );
    }
}
