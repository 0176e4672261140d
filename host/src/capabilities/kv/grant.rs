//! How `kv` is granted: a store with its quota.
//!
//! ```toml
//! kv = "10 MiB"   # "0 B" withdraws a store a less specific table gives
//! ```

use crate::capabilities::grant::{Capability, parse_size, value_of};
use bytesize::ByteSize;

/// The `kv` capability.
pub struct Kv;

impl Capability for Kv {
    const IMPORTS: &'static [&'static str] = &["agentsite:agent/kv"];
    type Grant = ByteSize;
    /// The quota in bytes; `None` when the agent has no store.
    type Granted = Option<u64>;

    fn parse(item: &str, value: Option<&str>, _now: Option<&ByteSize>) -> anyhow::Result<ByteSize> {
        parse_size(value_of(item, value, "QUOTA, such as 1MiB")?)
    }

    fn resolve(quota: &ByteSize) -> Option<u64> {
        Some(quota.as_u64()).filter(|q| *q > 0)
    }

    fn describe(quota: &Option<u64>) -> Vec<String> {
        quota
            .iter()
            .map(|q| format!("kv       quota {}", ByteSize(*q)))
            .collect()
    }

    fn revocable(quota: &ByteSize) -> Vec<(String, String)> {
        vec![(format!("kv, quota {quota}"), "kv".into())]
    }
}
