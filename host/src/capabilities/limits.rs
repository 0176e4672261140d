//! Per-call limits on what an instance makes the host hold: linear memory,
//! table elements, open handles and HTTP header fields.

use bytesize::ByteSize;

/// Limits the memory a call's instance may use, summed over all its linear
/// memories, and the elements of all its tables together; remembers which
/// cap was hit so that the call's error can name it instead of reporting a
/// bare trap.
pub(crate) struct CallLimiter {
    memory_cap: usize,
    memory_used: usize,
    pub(crate) memory_exceeded: bool,
    table_elements: usize,
    pub(crate) tables_exceeded: bool,
}

/// Table elements one table may hold, and all tables of a call together
/// (each is a pointer or two of host memory: at most a few MiB). Far above
/// what real programs use (a Rust agent's table holds its indirect call
/// targets, a few thousand); the per-table figure is also what a serving
/// node's instance pool reserves per table.
pub const MAX_TABLE_ELEMENTS: usize = 20_000;
pub const MAX_TABLE_ELEMENTS_PER_CALL: usize = 200_000;

/// Handles (streams, pollables, HTTP fields, requests, bodies, files) one
/// call may hold open at once in the host. Each costs host memory outside
/// the agent's linear memory; HTTP fields are further bounded by
/// [`MAX_FIELDS_BYTES`] each, so that all of them together stay within
/// 16 MiB of host memory. An HTTP request in flight takes about six.
pub const MAX_HANDLES: usize = 1024;

/// Bytes (as wasi-http counts them, data structures included) one set of
/// HTTP header fields may hold: twice what proxies accept on the wire.
pub const MAX_FIELDS_BYTES: usize = 16 * 1024;

impl CallLimiter {
    pub(crate) fn new(memory_cap: ByteSize) -> Self {
        CallLimiter {
            memory_cap: usize::try_from(memory_cap.as_u64()).unwrap_or(usize::MAX),
            memory_used: 0,
            memory_exceeded: false,
            table_elements: 0,
            tables_exceeded: false,
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
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.table_elements - current.min(self.table_elements) + desired;
        if desired > MAX_TABLE_ELEMENTS || total > MAX_TABLE_ELEMENTS_PER_CALL {
            self.tables_exceeded = true;
            wasmtime::bail!(
                "table limit exceeded: {desired} elements in one table (at most \
                 {MAX_TABLE_ELEMENTS}), {total} in all (at most {MAX_TABLE_ELEMENTS_PER_CALL})"
            );
        }
        self.table_elements = total;
        Ok(true)
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
