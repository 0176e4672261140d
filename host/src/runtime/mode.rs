//! Which of the node's two engines a component runs on.
//!
//! A WASI 0.2 component calls and returns synchronously; its engine runs
//! with wasmtime's concurrency support off, which keeps a warm call free of
//! the component-model-async scheduler (see `engine`). A component built
//! for WASI 0.3 uses the component model's async features (async
//! functions, streams, futures, tasks) and imports `wasi:*@0.3`, which only
//! an engine with concurrency support can compile and link. Which one a
//! component is can be read from its bytes before it is compiled.

use wasmparser::{
    CanonicalFunction, CanonicalOption, ComponentDefinedType, ComponentType,
    ComponentTypeDeclaration, InstanceTypeDeclaration, Parser, Payload,
};

/// How a component's calls are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Synchronous calls (WASI 0.2): the engine without concurrency support.
    Synchronous,
    /// Calls through the component model's async scheduler (WASI 0.3).
    Concurrent,
}

impl Mode {
    /// Both modes, synchronous first.
    pub const ALL: [Mode; 2] = [Mode::Synchronous, Mode::Concurrent];

    /// The mode `bytes`, a component, needs. A component that cannot be
    /// read is given the synchronous mode, whose compiler then says what is
    /// wrong with it.
    pub fn of(bytes: &[u8]) -> Mode {
        match uses_concurrency(bytes) {
            Ok(true) => Mode::Concurrent,
            Ok(false) | Err(_) => Mode::Synchronous,
        }
    }

    /// The name the compile worker is given, and that appears in messages.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Synchronous => "synchronous",
            Mode::Concurrent => "concurrent",
        }
    }

    /// The mode called `name` (see [`Mode::name`]).
    pub fn named(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|mode| mode.name() == name)
    }
}

/// Whether the component (or one nested in it) imports WASI 0.3 or uses
/// any of the component model's async features.
fn uses_concurrency(bytes: &[u8]) -> wasmparser::Result<bool> {
    for payload in Parser::new(0).parse_all(bytes) {
        let found = match payload? {
            Payload::ComponentImportSection(imports) => {
                let mut found = false;
                for import in imports {
                    found |= is_wasi_0_3(import?.name.name);
                }
                found
            }
            Payload::ComponentCanonicalSection(functions) => {
                let mut found = false;
                for function in functions {
                    found |= is_concurrent_canon(&function?);
                }
                found
            }
            Payload::ComponentTypeSection(types) => {
                let mut found = false;
                for ty in types {
                    found |= is_concurrent_type(&ty?);
                }
                found
            }
            _ => false,
        };
        if found {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `wasi:<package>/<interface>@0.3.x`.
fn is_wasi_0_3(name: &str) -> bool {
    name.starts_with("wasi:")
        && name
            .rsplit_once('@')
            .is_some_and(|(_, version)| version.starts_with("0.3."))
}

/// A canonical function that only exists with the async features: every
/// one but the synchronous lifts and lowers, resource and thread builtins.
fn is_concurrent_canon(function: &CanonicalFunction) -> bool {
    let is_async = |options: &[CanonicalOption]| {
        options.iter().any(|option| {
            matches!(
                option,
                CanonicalOption::Async | CanonicalOption::Callback(_)
            )
        })
    };
    match function {
        CanonicalFunction::Lift { options, .. } | CanonicalFunction::Lower { options, .. } => {
            is_async(options)
        }
        CanonicalFunction::ResourceNew { .. }
        | CanonicalFunction::ResourceDrop { .. }
        | CanonicalFunction::ResourceRep { .. }
        | CanonicalFunction::ThreadSpawnRef { .. }
        | CanonicalFunction::ThreadSpawnIndirect { .. }
        | CanonicalFunction::ThreadAvailableParallelism => false,
        _ => true,
    }
}

/// An async function type, a stream or a future, at any depth of a type.
fn is_concurrent_type(ty: &ComponentType) -> bool {
    match ty {
        ComponentType::Defined(
            ComponentDefinedType::Stream(_) | ComponentDefinedType::Future(_),
        ) => true,
        ComponentType::Defined(_) | ComponentType::Resource { .. } => false,
        ComponentType::Func(func) => func.async_,
        ComponentType::Component(declarations) => declarations.iter().any(|d| match d {
            ComponentTypeDeclaration::Type(ty) => is_concurrent_type(ty),
            ComponentTypeDeclaration::Import(import) => is_wasi_0_3(import.name.name),
            _ => false,
        }),
        ComponentType::Instance(declarations) => declarations.iter().any(|d| match d {
            InstanceTypeDeclaration::Type(ty) => is_concurrent_type(ty),
            _ => false,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(wat: &str) -> Vec<u8> {
        wat::parse_str(wat).expect("valid WAT")
    }

    #[test]
    fn a_component_of_synchronous_functions_runs_synchronously() {
        let bytes = component(
            r#"(component
                (core module $m (func (export "f") (result i32) i32.const 7))
                (core instance $i (instantiate $m))
                (func (export "f") (result u32) (canon lift (core func $i "f"))))"#,
        );
        assert_eq!(Mode::of(&bytes), Mode::Synchronous);
    }

    #[test]
    fn an_async_function_a_stream_or_a_wasi_0_3_import_needs_the_concurrent_engine() {
        let async_export = component(
            r#"(component
                (core module $m
                  (func (export "f") (result i32) i32.const 0)
                  (func (export "cb") (param i32 i32 i32) (result i32) i32.const 0))
                (core instance $i (instantiate $m))
                (func (export "f") async
                  (canon lift (core func $i "f") async (callback (core func $i "cb")))))"#,
        );
        assert_eq!(Mode::of(&async_export), Mode::Concurrent);

        let stream_type = component(r#"(component (type (stream u8)))"#);
        assert_eq!(Mode::of(&stream_type), Mode::Concurrent);

        let wasi_0_3 =
            component(r#"(component (import "wasi:clocks/monotonic-clock@0.3.2" (instance)))"#);
        assert_eq!(Mode::of(&wasi_0_3), Mode::Concurrent);

        let wasi_0_2 =
            component(r#"(component (import "wasi:clocks/monotonic-clock@0.2.6" (instance)))"#);
        assert_eq!(Mode::of(&wasi_0_2), Mode::Synchronous);
    }

    #[test]
    fn what_cannot_be_read_is_left_to_the_synchronous_compiler() {
        assert_eq!(Mode::of(b"\0asm\x0d\0\x01\0garbage"), Mode::Synchronous);
    }

    #[test]
    fn each_mode_is_found_by_its_name() {
        for mode in Mode::ALL {
            assert_eq!(Mode::named(mode.name()), Some(mode));
        }
        assert_eq!(Mode::named("other"), None);
    }
}
