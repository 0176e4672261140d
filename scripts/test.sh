#!/usr/bin/env bash
# The whole test suite, on a fresh machine or a warm one: installs the
# wasm32-wasip2 target, the test tools (the MCP conformance suite, the MCP
# Python SDK, ...) and the embedded language model if needed, builds
# the example agents, then runs the format check, the check of the vendored
# crates, the SDK's packaging, every test (built with clippy's lints), the
# README's install (an empty CARGO_HOME) and a bounded fuzz run of each fuzz
# target. CI runs this through .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/env.sh
. scripts/tools.sh
. scripts/model.sh
. scripts/prune-target.sh

prune_target
install_test_tools
install_default_model
install_gemma_model

echo "==> building example agents (examples/target/wasm32-wasip2/release)"
build_examples

echo "==> cargo fmt --check"
cargo fmt --all --check
(cd examples && cargo fmt --all --check)

echo "==> vendor/: each crate is its release plus its patch"
bash scripts/check-vendor.sh

echo "==> the Rust SDK's crates package and build as crates.io would take them"
# Together, so that each finds the others it depends on as packaged; the
# package must carry all it builds from (the WIT contract included).
# cargo takes a crate from a registry for unchanging, so the packaged SDK
# crates (the same version each run) are checked in a target folder of
# their own, rid of the last run's builds of them: in the shared one a
# change to the SDK's macros was checked against an earlier run's build.
package_target="$CARGO_TARGET_DIR/sdk-package"
for unpacked in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/agentsite-{json-words,sdk}-*; do
    case "$unpacked" in
        */index.crates.io-*) ;;
        *) rm -rf "$unpacked" ;;
    esac
done
find "$package_target" -name '*agentsite*' -prune -exec rm -rf {} + 2>/dev/null || true
cargo package --quiet --allow-dirty --target-dir "$package_target" \
  -p agentsite-json-words -p agentsite-sdk-macros -p agentsite-sdk

. scripts/lints.sh
echo "==> building the tests and benchmarks, with clippy's lints (-D warnings)"
# One cargo command for all of them: two left a core idle while the first
# one's last binaries linked. Without the fuzz targets, which fuzz.sh builds
# (and lints): their crate asks for the node's `fuzz-build` feature, which
# in this build would make the node another than the one the install
# builds, and the fuzz build's instrumented node overwrite this one.
linted_cargo test --workspace --exclude agentsite-fuzz --all-targets --no-run --quiet

echo "==> cargo test"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The simulated networks of a hundred nodes and more (the test modules that
# take support::testnet::alone()) keep both cores busy for minutes: beside
# other tests they ran past their time limits. They run after the rest,
# one at a time.
networks=()
for file in $(grep -l 'testnet::alone()' tests/*.rs); do
    networks+=("$(basename "$file" .rs)::")
done
skips=()
for module in "${networks[@]}"; do
    skips+=(--skip "$module")
done
linted_cargo test --workspace --exclude agentsite-fuzz -- "${skips[@]}" 2>&1 | tee "$log"
echo "==> cargo test: the simulated networks, one at a time (${networks[*]})"
# The same command as above, filtered: `-p agentsite --test suite` would
# resolve other features and build the suite again (2 minutes warm).
linted_cargo test --workspace --exclude agentsite-fuzz -- "${networks[@]}" --test-threads=1 2>&1 | tee -a "$log"
# One closing line for the whole suite (cargo prints one per test binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } }
     END { printf "all tests: %d passed, %d failed\n", p, f }' "$log"

# After the test build, whose dependencies the install's build then finds
# built (only agentsite itself is compiled again); before it, on a machine
# with empty caches, the install built them all and the test build then
# rebuilt those its dev-dependencies give other features: 16 minutes more.
echo "==> the README's install, with an empty CARGO_HOME"
bash scripts/install-check.sh

# 30 seconds a target, a target per core: the corpus a run grows is kept
# for the next (in the target folder), so runs on one machine add up.
export FUZZ_SECONDS=${FUZZ_SECONDS:-30}
echo "==> fuzzing, ${FUZZ_SECONDS}s per target"
FUZZ_LINTS=1 bash scripts/fuzz.sh
