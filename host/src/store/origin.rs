//! Where an installed agent came from: what its record keeps, and what the
//! operator's policy reads to decide what it may reach.

use libp2p::PeerId;
use serde::{Deserialize, Serialize};

/// Where it came from, as `inspect` and the agent page say it: `fetched
/// from the network, published by 12D3KooW… (did:key:z6Mk…)`.
impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Local => f.write_str("added on this machine"),
            Origin::Registry {
                reference,
                manifest,
                signer,
            } => {
                write!(f, "pulled from oci://{reference} (manifest {manifest})")?;
                match signer {
                    Some(signer) => write!(f, ", signed by {}", crate::did::shown(signer)),
                    None => f.write_str(", not signed by a key trusted here"),
                }
            }
            Origin::Network { publisher } => {
                write!(f, "fetched from the network, published by {publisher}")?;
                match crate::did::of_peer(publisher) {
                    Some(did) => write!(f, " ({did})"),
                    None => Ok(()),
                }
            }
            Origin::Attached => f.write_str("attached on this machine"),
        }
    }
}

/// Where an installed agent came from, as far as can be verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Origin {
    /// The operator added the file on this machine.
    Local,
    /// Pulled from an OCI registry by the operator (`agentsite add
    /// oci://…`): chosen on this machine as a file is, so the same grants
    /// apply. `reference` is where it was pulled from (never with
    /// credentials), `manifest` the digest of the manifest it came under,
    /// `signer` the trusted key whose cosign signature of that manifest
    /// was verified when it was pulled (none: unsigned, or by no key
    /// trusted then).
    Registry {
        reference: String,
        manifest: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signer: Option<PeerId>,
    },
    /// Fetched from the network under a manifest this publisher signed.
    Network { publisher: PeerId },
    /// An MCP server or A2A agent the operator attached (see
    /// [`crate::bridge`]): it runs outside the sandbox, so there is nothing
    /// to grant it; only the limits of a call (deadline, concurrency)
    /// apply.
    Attached,
}
