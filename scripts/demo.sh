#!/usr/bin/env bash
# The agentsite demo: builds the example agents and the host, adds the
# agents to a fresh node, calls their tools, and shows hostile agents being
# contained. Uses a throwaway data directory; nothing to configure.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

echo "==> building the example agents and agentsite (first build takes a few minutes)"
build_examples
cargo build --release --quiet -p agentsite

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
agentsite() { "$CARGO_TARGET_DIR/release/agentsite" --data-dir "$data" "$@"; }
wasm=examples/target/wasm32-wasip2/release
step() { printf '\n\033[1m$ agentsite %s\033[0m\n' "$*"; }
run() { step "$@"; agentsite "$@" || true; }

run add "$wasm/calculator.wasm" "$wasm/text.wasm" "$wasm/notes.wasm"
run ls
run tools calculator
run call calculator add '{"a": 2, "b": 3}'
run call calculator divide '{"a": 1, "b": 0}'
run call calculator add '{"a": "two", "b": 3}'
run call text word_count '{"text": "agents as components, served by a node"}'
run call text sha256 '{"text": "hello"}'
run call notes put '{"title": "demo", "text": "this survives between calls"}'
run call notes get '{"title": "demo"}'
run inspect notes

printf '\n\033[1m--- hostile agents: each is contained, the node keeps working ---\033[0m\n'
agentsite add "$wasm"/hostile_*.wasm >/dev/null 2>&1
run call hostile-loop spin '{}' --deadline 1s
run call hostile-bomb explode '{}'
run call hostile-recurse dive '{}'
run call hostile-flood huge '{"mib": 8}'
run call hostile-trap crash '{"value": 10}'
run call hostile-snoop read_file '{"path": "/etc/passwd"}'
run call hostile-snoop env '{"name": "HOME"}'
run call calculator multiply '{"a": 6, "b": 7}'
printf '\ndone: every call above ran in a fresh WebAssembly instance.\n'
