//! Panics in the middle of a call, after doing some work; or exits the
//! whole program with a status, as a command-line program would.

use agentsite_sdk::agent;

struct Trap;

/// Fails halfway through.
#[agent]
impl Trap {
    /// Do half the work, then panic.
    #[tool]
    fn crash(
        /// A value to work on.
        value: u32,
    ) -> u32 {
        let half = std::hint::black_box(value / 2);
        agentsite_sdk::host::info(&format!("halfway: {half}"));
        panic!("crashed halfway through with {half}");
    }

    /// Exit the program with `status`, as `std::process::exit` does.
    #[tool]
    fn quit(status: i32) -> u32 {
        std::process::exit(status)
    }
}
