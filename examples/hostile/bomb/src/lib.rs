//! Allocates without end. The node's memory cap must stop it.

use agentsite_sdk::agent;

struct Bomb;

/// Grabs all the memory it can.
#[agent]
impl Bomb {
    /// Allocate and touch 1 MiB blocks until something gives.
    #[tool]
    fn explode() -> usize {
        let mut blocks: Vec<Vec<u8>> = Vec::new();
        loop {
            blocks.push(std::hint::black_box(vec![0xAB; 1 << 20]));
            if blocks.len() == usize::MAX {
                return blocks.len();
            }
        }
    }
}
