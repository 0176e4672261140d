//! Recurses without end. The wasm stack limit must stop it.

use agentsite_sdk::agent;

struct Recurse;

#[inline(never)]
#[allow(unconditional_recursion)] // the point of this agent
fn descend(depth: u64, pad: [u64; 8]) -> u64 {
    let pad = std::hint::black_box(pad);
    std::hint::black_box(descend(depth + 1, pad)) + pad[(depth % 8) as usize]
}

/// Overflows its stack.
#[agent]
impl Recurse {
    /// Recurse until the stack runs out.
    #[tool]
    fn dive() -> u64 {
        descend(0, [1; 8])
    }
}
