//! Stores values of `size` bytes under new keys until the node says no, and
//! reports how far it got: the kv quota must stop it.

use agentsite_sdk::{agent, kv};

struct Hoard;

/// How far a hoarding run got.
#[derive(serde::Serialize, schemars::JsonSchema)]
struct Hoarded {
    /// Values stored before the node refused.
    stored: u32,
    /// The refusal, as the node worded it.
    refusal: String,
}

/// Hoards storage.
#[agent]
impl Hoard {
    /// Store values of `size` bytes under new keys starting with `prefix`,
    /// at most `max` of them, until a store fails.
    #[tool]
    fn fill(prefix: &str, size: u32, max: u32) -> Hoarded {
        let value = vec![0xa5; size as usize];
        for stored in 0..max {
            if let Err(e) = kv::set(&format!("{prefix}{stored:08}"), &value) {
                return Hoarded {
                    stored,
                    refusal: format!("{e:?}"),
                };
            }
        }
        Hoarded {
            stored: max,
            refusal: String::new(),
        }
    }
}
