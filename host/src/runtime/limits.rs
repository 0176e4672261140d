//! Per-call resource limits inside a store.

use bytesize::ByteSize;

/// Limits the memory a call's instance may use, summed over all its linear
/// memories, and remembers whether the cap was hit so that the call's error
/// can name it instead of reporting a bare trap.
pub(crate) struct CallLimiter {
    memory_cap: usize,
    memory_used: usize,
    pub(crate) memory_exceeded: bool,
}

/// Table elements one table may hold: far above what real programs use,
/// low enough that a table bomb cannot exhaust host memory.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl CallLimiter {
    pub(crate) fn new(memory_cap: ByteSize) -> Self {
        CallLimiter {
            memory_cap: usize::try_from(memory_cap.as_u64()).unwrap_or(usize::MAX),
            memory_used: 0,
            memory_exceeded: false,
        }
    }
}

impl wasmtime::ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.memory_used - current.min(self.memory_used) + desired;
        if total > self.memory_cap {
            self.memory_exceeded = true;
            // An error (rather than `Ok(false)`) traps at once: guests such
            // as Rust abort on a failed grow anyway, and the caller gets a
            // precise reason.
            wasmtime::bail!(
                "memory limit of {} exceeded",
                ByteSize(self.memory_cap as u64)
            );
        }
        self.memory_used = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        64
    }

    fn tables(&self) -> usize {
        64
    }

    fn memories(&self) -> usize {
        16
    }
}
