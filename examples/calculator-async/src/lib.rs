//! The calculator's own source, built for the `async-agent` world: the
//! same tools, exported as the component model's async functions, so that
//! a call goes through WASI 0.3's scheduler. The benchmarks compare a warm
//! call of each.

#[path = "../../calculator/src/lib.rs"]
mod calculator;
