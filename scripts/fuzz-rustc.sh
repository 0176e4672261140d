#!/usr/bin/env bash
# rustc for the workspace's own crates while scripts/fuzz.sh builds the fuzz
# targets (cargo's RUSTC_WORKSPACE_WRAPPER): libFuzzer's coverage
# instrumentation, as cargo fuzz adds it, on the code under test (the node
# and the targets). Everything else is built as every other build of the
# workspace builds it, and the dependencies (wasmtime, libp2p, ...) are
# shared with those builds: on a fresh machine, cargo fuzz's build of them
# all, instrumented, took 19 of CI's minutes.
rustc=$1
shift
case " $* " in
    *" --crate-type proc-macro "* | *" --crate-name build_script_"*) ;;
    *" --crate-name agentsite "* | *" --crate-name agentsite_fuzz "* | *" fuzz/fuzz_targets/"*)
        # The fuzz targets are linted as they are built when FUZZ_LINTS
        # is set (scripts/test.sh; fuzz.sh then takes CLIPPY_ARGS from
        # scripts/lints.sh: no `cargo clippy` of its own covers them);
        # clippy-driver takes rustc's place, as under cargo clippy.
        driver=()
        case " $* " in
            *" --crate-name agentsite "*) ;;
            *) [ -z "${FUZZ_LINTS:-}" ] || driver=(clippy-driver) ;;
        esac
        exec "${driver[@]}" "$rustc" "$@" \
            -Cpasses=sancov-module \
            -Cllvm-args=-sanitizer-coverage-level=4 \
            -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
            -Cllvm-args=-sanitizer-coverage-pc-table \
            -Cllvm-args=-sanitizer-coverage-trace-compares \
            -Cllvm-args=-sanitizer-coverage-stack-depth \
            --cfg fuzzing ;;
esac
exec "$rustc" "$@"
