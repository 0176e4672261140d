#!/usr/bin/env bash
# Fuzzes each target in fuzz/ (libFuzzer) for a bounded time:
# the MCP request path, manifest decoding, component loading, OpenAI
# answers, policy files, A2A cards and did:keys. Seeds and
# every input that once crashed live in fuzz/regressions/<target>/, which
# the test suite replays (tests/fuzz_regressions.rs). A crash fails the run
# and names the input to add there.
#
#   scripts/fuzz.sh                 # FUZZ_SECONDS (default 60) per target,
#                                   # FUZZ_JOBS (default: the cores) at once
#   FUZZ_SECONDS=600 scripts/fuzz.sh mcp_request
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
# FUZZ_LINTS: the targets linted as they are built (scripts/fuzz-rustc.sh),
# with -D warnings as everywhere else, also when this runs alone.
[ -z "${FUZZ_LINTS:-}" ] || . scripts/lints.sh

seconds=${FUZZ_SECONDS:-60}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(mcp_request manifest component openai policy_file card did_key)

# The targets, instrumented for libFuzzer where the code under test is
# (see scripts/fuzz-rustc.sh); their dependencies are those of the
# workspace's other builds.
echo "==> building the fuzz targets"
RUSTC_WORKSPACE_WRAPPER="$PWD/scripts/fuzz-rustc.sh" \
    cargo build --quiet -p agentsite-fuzz --bins
work="$CARGO_TARGET_DIR/fuzz"

# One target per core at a time: each is one process on one core.
fuzz_one() {
    local target=$1
    local corpus="$work/corpus/$target"
    local artifacts="$work/artifacts/$target/"
    local log="$work/$target.log"
    mkdir -p "$corpus" "$artifacts"
    # Safe Rust: panics, aborts and hangs are what is looked for, so no
    # address sanitizer (which also fights wasmtime's signal handlers).
    if ! "$CARGO_TARGET_DIR/debug/$target" "$corpus" "fuzz/regressions/$target" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
        -artifact_prefix="$artifacts" -print_final_stats=1 >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "fuzz: $target crashed; the input is in $artifacts" >&2
        echo "copy it into fuzz/regressions/$target/, fix the cause, and run cargo test --test suite fuzz_regressions::" >&2
        return 1
    fi
    echo "==> fuzz: $target for ${seconds}s: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') runs"
}

at_once=${FUZZ_JOBS:-$(nproc)}
running=0
crashed=0
for target in "${targets[@]}"; do
    if [ "$running" -ge "$at_once" ]; then
        wait -n || crashed=1
        running=$((running - 1))
    fi
    fuzz_one "$target" &
    running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
    wait -n || crashed=1
    running=$((running - 1))
done
exit "$crashed"
