#!/usr/bin/env bash
# The README's install as a new user runs it: `cargo install --locked --path
# host` with a CARGO_HOME of nothing but rustup's proxies (no registry
# cache, no config, no tools installed), `agentsite` from $CARGO_HOME/bin on
# PATH; then, outside the checkout, `agentsite new`, a build of the scaffold
# with the SDK that binary carries, `agentsite add` and a call. Run by
# test.sh; alone:
#   bash scripts/install-check.sh
#
# What it costs: cargo reuses a build of a registry crate only for sources at
# the same path, so an empty CARGO_HOME anywhere else than the suite's own
# rebuilds all of wasmtime and libp2p (27 minutes on a fresh machine). Where
# it can (root, or unprivileged user namespaces), the check runs in a mount
# namespace of its own in which the suite's CARGO_HOME path *is* the empty
# folder: the registry is fetched into it from nothing, at the paths the
# suite's build knows, and `cargo install --debug` into the suite's target
# folder builds nothing: the node is the one the suite's build made (the
# same features, clippy's lints in both builds). The debug profile is the
# one difference from the README's command: both profiles build the same
# code with the same features, and only the release one's optimization would
# cost the 27 minutes again.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lints.sh
repo=$(pwd)

cache="${XDG_CACHE_HOME:-$HOME/.cache}/agentsite-install"
suite_home="${CARGO_HOME:-$HOME/.cargo}"
suite_target="${CARGO_TARGET_DIR:-$HOME/.cache/agentsite-target}"

if [ -z "${AGENTSITE_INSTALL_ISOLATED:-}" ]; then
    # Emptied each run: the install has nothing but the network's registry
    # and the rustup proxies a new user's CARGO_HOME starts with.
    rm -rf "$cache/cargo-home"
    mkdir -p "$cache/cargo-home/bin"
    rustup_bin=$(command -v rustup)
    cp "$rustup_bin" "$cache/cargo-home/bin/rustup"
    for proxy in cargo rustc rustdoc clippy-driver cargo-clippy; do
        ln -s rustup "$cache/cargo-home/bin/$proxy"
    done
    mkdir -p "$suite_home"
    for how in "unshare --mount --propagation private" \
        "unshare --user --map-root-user --mount --propagation private"; do
        # shellcheck disable=SC2086 # $how is the command's words
        if $how true 2>/dev/null; then
            exec $how env AGENTSITE_INSTALL_ISOLATED=1 \
                AGENTSITE_INSTALL_HOME="$cache/cargo-home" bash "$0" "$@"
        fi
    done
    echo "install: no mount namespace here; the install builds all of its" \
        "dependencies in $cache/target (about 27 minutes the first time)"
    home="$cache/cargo-home"
    install_target="$cache/target"
else
    mount --bind "$AGENTSITE_INSTALL_HOME" "$suite_home"
    # The release build an earlier version of this check kept (4 GB).
    rm -rf "$cache/target"
    home="$suite_home"
    install_target="$suite_target"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# As a new user's shell has it: none of the suite's settings but the build
# folder (and incremental builds off, as the suite builds), rustup's proxies
# on PATH, CARGO_HOME the empty one.
run_as_new_user() {
    env -u RUSTFLAGS -u CARGO_BUILD_JOBS \
        -u AGENTSITE_DATA_DIR -u AGENTSITE_CONFIG -u AGENTSITE_POLICY \
        CARGO_HOME="$home" CARGO_TARGET_DIR="$1" PATH="$home/bin:$PATH" "${@:2}"
}

echo "install: cargo install --locked --path host (CARGO_HOME empty)"
# With clippy's lints in the build, as the suite built the node: the same
# build of it, found built (scripts/lints.sh says why it must be named).
run_as_new_user "$install_target" "${linted_cargo_command[@]}" install --locked --path host --debug --quiet
installed="$home/bin/agentsite"
[ -x "$installed" ] || { echo "install: no agentsite in $home/bin" >&2; exit 1; }
[ "$(run_as_new_user "$install_target" sh -c 'command -v agentsite')" = "$installed" ] || {
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
