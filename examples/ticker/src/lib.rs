//! A component that exports plain functions, as a Wassette component does,
//! built for WASI 0.3 without the agentsite SDK: one function is `async`
//! (it waits on WASI 0.3's clock), the other synchronous. The node serves
//! each as a tool.

wit_bindgen::generate!({
    inline: r#"
        package example:ticker;

        world ticker {
            /// Waits `millis` milliseconds, then says how many passed.
            export wait-then-tell: async func(millis: u64) -> u64;
            /// Twice `n`.
            export double: func(n: u32) -> u32;
        }
    "#,
});

use wasip3::clocks::monotonic_clock;

struct Ticker;

impl Guest for Ticker {
    async fn wait_then_tell(millis: u64) -> u64 {
        let started = monotonic_clock::now();
        monotonic_clock::wait_for(millis.min(10_000) * 1_000_000).await;
        (monotonic_clock::now() - started) / 1_000_000
    }

    fn double(n: u32) -> u32 {
        n.wrapping_mul(2)
    }
}

export!(Ticker);
