# Sourced by test.sh and install-check.sh: cargo with clippy's lints.
#
# Clippy's lints (-D warnings) run in the test build itself: clippy-driver
# compiles the workspace's own crates, as `cargo clippy` has it do (cargo's
# rustc-workspace-wrapper), and the dependencies are built once. A
# separate `cargo clippy` checked every dependency, then the test build
# compiled them all again: 13 minutes on a machine with empty caches.
# What `cargo clippy --all-targets` covers: the tests, examples and
# binaries here, the benchmarks, the fuzz targets in fuzz.sh.
# The wrapper is cargo configuration of these commands, not an
# environment variable: the cargo builds the tests run themselves (the
# example agents, scaffolds) must not inherit it. CLIPPY_ARGS is read by
# clippy-driver alone, and cargo tracks it as the builds' environment.
# The wrapper is not part of the hash that names a build of a crate, so a
# plain cargo build of the node in the same target folder overwrites the
# linted one (and the next linted build compiles it again): the install
# check builds with it too.
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
linted_cargo_command=(cargo --config 'build.rustc-workspace-wrapper="clippy-driver"')
linted_cargo() {
    "${linted_cargo_command[@]}" "$@"
}
