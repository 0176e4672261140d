#!/usr/bin/env bash
# Fuzzes each target in fuzz/ (cargo fuzz, libFuzzer) for a bounded time:
# the MCP request path, manifest decoding, component loading and OpenAI
# answers. Seeds and
# every input that once crashed live in fuzz/regressions/<target>/, which
# the test suite replays (tests/fuzz_regressions.rs). A crash stops the run
# and names the input to add there.
#
#   scripts/fuzz.sh                 # FUZZ_SECONDS (default 60) per target
#   FUZZ_SECONDS=600 scripts/fuzz.sh mcp_request
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

seconds=${FUZZ_SECONDS:-60}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(mcp_request manifest component openai)

if ! command -v cargo-fuzz >/dev/null; then
    echo "==> installing cargo-fuzz"
    cargo install cargo-fuzz --locked --quiet
fi
# cargo fuzz passes nightly-only flags; the machine's one toolchain is
# stable, which accepts them when told it is building itself.
export RUSTC_BOOTSTRAP=1
# Its own target folder: the fuzzing instrumentation changes every crate.
export CARGO_TARGET_DIR="$CARGO_TARGET_DIR/fuzz"

for target in "${targets[@]}"; do
    echo "==> fuzz: $target for ${seconds}s"
    corpus="$CARGO_TARGET_DIR/corpus/$target"
    artifacts="$CARGO_TARGET_DIR/artifacts/$target/"
    mkdir -p "$corpus" "$artifacts"
    # Safe Rust: panics, aborts and hangs are what is looked for, so no
    # address sanitizer (which also fights wasmtime's signal handlers).
    if ! cargo fuzz run --fuzz-dir fuzz --sanitizer none "$target" \
        "$corpus" "fuzz/regressions/$target" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
        -artifact_prefix="$artifacts" -print_final_stats=1; then
        echo "fuzz: $target crashed; the input is in $artifacts" >&2
        echo "copy it into fuzz/regressions/$target/, fix the cause, and run cargo test --test suite fuzz_regressions::" >&2
        exit 1
    fi
done
