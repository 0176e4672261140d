//! Content ids: an agent is named by the sha256 of its component bytes.
//!
//! The written form is `sha256:<64 lowercase hex digits>`. Because the id is
//! derived from the bytes, anyone holding bytes can check that they are the
//! agent they asked for; the store does so on every load.

use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;

pub(super) const PREFIX: &str = "sha256:";

/// The content id of an agent: the sha256 digest of its component bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentId([u8; 32]);

impl AgentId {
    /// The id of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        AgentId(Sha256::digest(bytes).into())
    }

    /// The id whose sha256 digest is `digest` (for hashes computed
    /// incrementally).
    pub fn from_digest(digest: [u8; 32]) -> Self {
        AgentId(digest)
    }

    /// The 64 lowercase hex digits, without the `sha256:` prefix.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The first 12 hex digits, enough to tell agents apart in listings.
    pub fn short(&self) -> String {
        self.hex()[..12].to_owned()
    }

    /// The raw digest.
    pub fn digest(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", self.hex())
    }
}

impl fmt::Debug for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A string that is not a well-formed agent id.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not an agent id: expected sha256:<64 hex digits>")]
pub struct ParseAgentIdError(String);

impl FromStr for AgentId {
    type Err = ParseAgentIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex_digits = s.strip_prefix(PREFIX).unwrap_or(s);
        let mut digest = [0u8; 32];
        if hex_digits.len() != 64 || hex::decode_to_slice(hex_digits, &mut digest).is_err() {
            return Err(ParseAgentIdError(s.to_owned()));
        }
        if hex_digits.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(ParseAgentIdError(s.to_owned()));
        }
        Ok(AgentId(digest))
    }
}

super::serde_as_text!(AgentId);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_of_bytes_round_trips_through_text() {
        let id = AgentId::of(b"hello");
        let text = id.to_string();
        assert_eq!(
            text,
            "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(text.parse::<AgentId>().unwrap(), id);
        assert_eq!(id.short(), "2cf24dba5fb0");
    }

    #[test]
    fn malformed_ids_are_refused() {
        for bad in [
            "sha256:abc",
            "sha256:zz24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
            "sha256:2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824",
            "",
        ] {
            assert!(bad.parse::<AgentId>().is_err(), "{bad} should be refused");
        }
    }
}
