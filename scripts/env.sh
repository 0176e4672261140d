# Sourced by demo.sh and test.sh: the build environment both need.

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_install() {
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

# Reuse one build of wasmtime across checkouts and CI runs.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/agentsite-target}"
# CI builds each crate once: incremental caches would only take disk (26 GB
# had piled up here, and a full disk kills the linker with a bus error).
if [ "${CI:-}" = true ]; then
    export CARGO_INCREMENTAL=0
fi

if ! rustup target list --installed | grep -qx wasm32-wasip2; then
    rustup target add wasm32-wasip2
fi

# Builds examples/ so each agent lands at examples/target/wasm32-wasip2/release/<name>.wasm.
build_examples() {
    (cd examples && env -u CARGO_TARGET_DIR cargo build --release --target wasm32-wasip2 --quiet)
}
