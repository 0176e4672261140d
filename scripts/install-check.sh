#!/usr/bin/env bash
# The README's install as a new user runs it: `cargo install --locked --path
# host` with a CARGO_HOME of nothing (no registry cache, no config, no tools
# installed), `agentsite` from $CARGO_HOME/bin on PATH; then, outside the
# checkout, `agentsite new`, a build of the scaffold with the SDK that binary
# carries, `agentsite add` and a call. Run by test.sh; alone:
#   bash scripts/install-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

cache="${XDG_CACHE_HOME:-$HOME/.cache}/agentsite-install"
home="$cache/cargo-home"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Emptied each run: the install has nothing but the network's registry.
# Its path stays the same from run to run, and so do the build folders
# beside it: cargo reuses a build only for sources at the same paths, and
# a release build of the whole tree from nothing takes long.
rm -rf "$home"
mkdir -p "$home"

# As a new user's shell has it: none of the suite's build settings, rustup's
# cargo on PATH, CARGO_HOME the empty one.
run_as_new_user() {
    env -u RUSTFLAGS -u CARGO_INCREMENTAL -u CARGO_BUILD_JOBS \
        -u AGENTSITE_DATA_DIR -u AGENTSITE_CONFIG -u AGENTSITE_POLICY \
        CARGO_HOME="$home" CARGO_TARGET_DIR="$1" PATH="$home/bin:$PATH" "${@:2}"
}

echo "install: cargo install --locked --path host (CARGO_HOME empty)"
run_as_new_user "$cache/target" cargo install --locked --path host --quiet
installed="$home/bin/agentsite"
[ -x "$installed" ] || { echo "install: no agentsite in $home/bin" >&2; exit 1; }
[ "$(run_as_new_user "$cache/target" sh -c 'command -v agentsite')" = "$installed" ] || {
    echo "install: agentsite on PATH is not the installed one" >&2
    exit 1
}

cd "$work"
data="$work/data"
agentsite() { run_as_new_user "$cache/scaffold-target" "$installed" --data-dir "$data" "$@"; }
agentsite new tally >/dev/null 2>&1
if grep -q "$repo" tally/Cargo.toml; then
    echo "install: the scaffold points into the checkout:" >&2
    cat tally/Cargo.toml >&2
    exit 1
fi
echo "install: a scaffold made in $work builds with the SDK the binary wrote"
(cd tally && run_as_new_user "$cache/scaffold-target" \
    cargo build --release --target wasm32-wasip2 --quiet)
agentsite add "$cache/scaffold-target/wasm32-wasip2/release/tally.wasm" >/dev/null 2>&1
answer=$(agentsite call tally greet '{"name": "world"}')
case "$answer" in
    *'"Hello, world!"'*) echo "install: the installed agentsite adds and calls it: $answer" ;;
    *) echo "install: the scaffold's greet answered $answer" >&2; exit 1 ;;
esac
