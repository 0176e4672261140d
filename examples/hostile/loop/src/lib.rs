//! Spins forever. The node's deadline (epoch interruption) must stop it.

use agentsite_sdk::agent;

struct Spin;

/// Never returns.
#[agent]
impl Spin {
    /// Loop forever, counting.
    #[tool]
    fn spin() -> u64 {
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
}
