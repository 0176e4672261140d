//! Static bounds on what a component asks the compiler to do, checked
//! before anything is compiled.
//!
//! Compiling is the one step of `add` and of installing a fetched agent
//! whose cost the agent's author controls, and Cranelift's time grows
//! faster than linearly with some shapes of code: a 468 KiB module with one
//! function of 40,000 locals took 23 to 54 s to compile. wasmparser's own
//! limits are those of the specification's implementations (50,000 locals,
//! 7.6 MB per function), far above what compilers emit for real programs.
//! These are tighter, and checked in one pass over the bytes, so a refused
//! agent costs milliseconds. Locals alone are not what costs: blocks with
//! values live across them are (see [`MAX_BLOCKS`]). These bounds cannot
//! tell a slow shape from a fast one of the same size; the compile deadline
//! of `compiler` does. BENCHMARKS.md ("Compiling at the complexity limits")
//! has the compile time of shapes at and past them.

use wasmparser::{Operator, Parser, Payload};

/// Locals of one function, parameters included.
pub const MAX_LOCALS: u64 = 10_000;
/// Bytes of one function's body.
pub const MAX_FUNCTION_SIZE: usize = 1024 * 1024;
/// Blocks, loops and ifs in one function. Compile time grows with the
/// square of these when values stay live across them (10,000 ifs over 100
/// locals took 20 s), so this is only a coarse first bound: the compile
/// deadline (see `compiler`) is what stops a slow shape. It admits the
/// interpreters inside Python (3,112 blocks in CPython's eval loop) and
/// JavaScript agents (4,216 in StarlingMonkey's) with room; Rust agents have
/// at most a few hundred.
pub const MAX_BLOCKS: u64 = 8_000;
/// Functions defined in all of a component's core modules together.
pub const MAX_FUNCTIONS: u64 = 200_000;
/// Core modules in one component (each is compiled on its own).
pub const MAX_MODULES: u64 = 256;

/// Tables and memories one core module may define, and the elements a
/// table may start with: what a serving node's instance pool holds for a
/// module (see `engine`), checked here so that `add` refuses what serving
/// would, rather than installing an agent that can never run.
pub const MAX_TABLES_PER_MODULE: u32 = 1;
pub const MAX_MEMORIES_PER_MODULE: u32 = 1;
pub const MAX_INITIAL_TABLE_ELEMENTS: u64 = 20_000;

/// A component beyond one of the bounds, named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TooComplex {
    #[error(
        "function {function} of core module {module} has {locals} locals, above the limit of {MAX_LOCALS}"
    )]
    Locals {
        module: u64,
        function: u64,
        locals: u64,
    },
    #[error(
        "function {function} of core module {module} is {size} bytes, above the limit of {MAX_FUNCTION_SIZE}"
    )]
    FunctionSize {
        module: u64,
        function: u64,
        size: usize,
    },
    #[error(
        "core module {module} defines {tables} tables; a serving node holds {MAX_TABLES_PER_MODULE} per module"
    )]
    Tables { module: u64, tables: u32 },
    #[error(
        "core module {module} defines {memories} memories; a serving node holds {MAX_MEMORIES_PER_MODULE} per module"
    )]
    Memories { module: u64, memories: u32 },
    #[error(
        "a table of core module {module} starts with {elements} elements, above the limit of {MAX_INITIAL_TABLE_ELEMENTS}"
    )]
    TableElements { module: u64, elements: u64 },
    #[error(
        "function {function} of core module {module} has more than {MAX_BLOCKS} blocks, loops and ifs"
    )]
    Blocks { module: u64, function: u64 },
    #[error("it defines more than {MAX_FUNCTIONS} functions")]
    Functions,
    #[error("it has more than {MAX_MODULES} core modules")]
    Modules,
    #[error("not valid WebAssembly: {0}")]
    Invalid(String),
}

impl From<wasmparser::BinaryReaderError> for TooComplex {
    fn from(error: wasmparser::BinaryReaderError) -> Self {
        TooComplex::Invalid(error.message().to_owned())
    }
}

/// Checks `bytes` (a component) against the bounds, without compiling or
/// validating it (compiling validates).
pub fn check(bytes: &[u8]) -> Result<(), TooComplex> {
    let mut modules: u64 = 0;
    let mut functions: u64 = 0;
    // Index of the current function within its module.
    let mut function: u64 = 0;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload?;
        match payload {
            Payload::ModuleSection { .. } => {
                modules += 1;
                if modules > MAX_MODULES {
                    return Err(TooComplex::Modules);
                }
            }
            Payload::TableSection(tables) => {
                let module = modules.saturating_sub(1);
                if tables.count() > MAX_TABLES_PER_MODULE {
                    return Err(TooComplex::Tables {
                        module,
                        tables: tables.count(),
                    });
                }
                for table in tables {
                    let table = table?;
                    if table.ty.initial > MAX_INITIAL_TABLE_ELEMENTS {
                        return Err(TooComplex::TableElements {
                            module,
                            elements: table.ty.initial,
                        });
                    }
                }
            }
            Payload::MemorySection(memories) if memories.count() > MAX_MEMORIES_PER_MODULE => {
                return Err(TooComplex::Memories {
                    module: modules.saturating_sub(1),
                    memories: memories.count(),
                });
            }
            Payload::CodeSectionStart { count, .. } => {
                function = 0;
                functions += u64::from(count);
                if functions > MAX_FUNCTIONS {
                    return Err(TooComplex::Functions);
                }
            }
            Payload::CodeSectionEntry(body) => {
                let module = modules.saturating_sub(1);
                let size = body.range().len();
                if size > MAX_FUNCTION_SIZE {
                    return Err(TooComplex::FunctionSize {
                        module,
                        function,
                        size,
                    });
                }
                let mut locals: u64 = 0;
                let reader = body.get_locals_reader()?;
                for declaration in reader {
                    let (count, _) = declaration?;
                    locals += u64::from(count);
                    if locals > MAX_LOCALS {
                        // Counted on to the end only to say how many.
                        locals = body
                            .get_locals_reader()
                            .into_iter()
                            .flatten()
                            .flatten()
                            .map(|(count, _)| u64::from(count))
                            .sum();
                        return Err(TooComplex::Locals {
                            module,
                            function,
                            locals,
                        });
                    }
                }
                let mut blocks: u64 = 0;
                let operators = body.get_operators_reader()?;
                for operator in operators {
                    let operator = operator?;
                    if matches!(
                        operator,
                        Operator::Block { .. } | Operator::Loop { .. } | Operator::If { .. }
                    ) {
                        blocks += 1;
                        if blocks > MAX_BLOCKS {
                            return Err(TooComplex::Blocks { module, function });
                        }
                    }
                }
                function += 1;
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component_with_function(locals: u32) -> Vec<u8> {
        wat::parse_str(format!(
            "(component (core module (func (local {})) (func)))",
            "i32 ".repeat(locals as usize)
        ))
        .unwrap()
    }

    #[test]
    fn ordinary_code_passes() {
        assert_eq!(check(&component_with_function(100)), Ok(()));
    }

    #[test]
    fn a_function_with_too_many_branches_is_named() {
        let ifs = "(if (local.get 0) (then (nop)))".repeat(MAX_BLOCKS as usize + 1);
        let component = wat::parse_str(format!(
            "(component (core module (func (param i32) {ifs})))"
        ))
        .unwrap();
        assert_eq!(
            check(&component),
            Err(TooComplex::Blocks {
                module: 0,
                function: 0
            })
        );
    }

    #[test]
    fn what_a_serving_pool_cannot_hold_is_refused() {
        let tables =
            wat::parse_str("(component (core module (table 10 funcref) (table 10 funcref)))")
                .unwrap();
        assert_eq!(
            check(&tables),
            Err(TooComplex::Tables {
                module: 0,
                tables: 2
            })
        );
        let big = wat::parse_str("(component (core module (table 1000000 funcref)))").unwrap();
        assert_eq!(
            check(&big),
            Err(TooComplex::TableElements {
                module: 0,
                elements: 1_000_000
            })
        );
    }

    #[test]
    fn a_function_with_too_many_locals_is_named() {
        assert_eq!(
            check(&component_with_function(40_000)),
            Err(TooComplex::Locals {
                module: 0,
                function: 0,
                locals: 40_000
            })
        );
    }
}
