#!/usr/bin/env bash
# The agentsite demo: builds the example agents and the host, adds the
# agents to a fresh node, calls their tools, and shows hostile agents being
# contained. Uses a throwaway data directory; nothing to configure.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
. scripts/model.sh
install_default_model

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
# Deny by default: notes has no key-value store until the operator grants one.
run call notes put '{"title": "demo", "text": "this survives between calls"}'
run grant notes kv=1MiB
run call notes put '{"title": "demo", "text": "this survives between calls"}'
run call notes get '{"title": "demo"}'
run inspect notes
run policy show

printf '\n\033[1m--- hostile agents: each is contained, the node keeps working ---\033[0m\n'
for hostile in loop bomb recurse flood trap snoop; do
    agentsite add "$wasm/hostile_$hostile.wasm" >/dev/null 2>&1
done
# One whose card is 24 MB of description is refused before it is installed.
run add "$wasm/hostile_bloat.wasm"
run call hostile-loop spin '{}' --deadline 1s
run call hostile-bomb explode '{}'
run call hostile-recurse dive '{}'
run call hostile-flood huge '{"mib": 8}'
run call hostile-trap crash '{"value": 10}'
run call hostile-snoop read_file '{"path": "/etc/passwd"}'
run call hostile-snoop env '{"name": "HOME"}'
run call calculator multiply '{"a": 6, "b": 7}'

printf '\n\033[1m--- the node'"'"'s own language model, embedded: no server, nothing downloaded ---\033[0m\n'
run models
run models test

printf '\n\033[1m--- the same agents over MCP (streamable HTTP, as any MCP client sees them) ---\033[0m\n'
log=$(mktemp)
# The binary itself, not the shell function, so that $! is the server's pid.
# It also joins the agent network, on loopback only.
"$CARGO_TARGET_DIR/release/agentsite" --data-dir "$data" serve --listen 127.0.0.1:0 \
    --p2p-listen /ip4/127.0.0.1/tcp/0 2>"$log" &
server=$!
trap 'kill $server 2>/dev/null || true; rm -rf "$data" "$log"' EXIT
for _ in $(seq 100); do grep -q 'at http://' "$log" && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*/mcp' "$log" | head -1)
printf '%s\n' "$(grep 'serving' "$log")"
# One stateless MCP request (protocol 2026-07-28): no session needed.
mcp() {
    local method=$1 params=$2 name=${3:-}
    printf '\n\033[1m$ MCP %s %s\033[0m\n' "$method" "$name"
    curl -s "$url" -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \
        -H 'mcp-protocol-version: 2026-07-28' -H "mcp-method: $method" -H "mcp-name: $name" \
        -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$method\",\"params\":$params}"
    echo
}
meta='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"demo","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}'
mcp tools/call "{\"name\":\"calculator.add\",\"arguments\":{\"a\":2,\"b\":3},$meta}" calculator.add
mcp tools/call "{\"name\":\"calculator.divide\",\"arguments\":{\"a\":1,\"b\":0},$meta}" calculator.divide
mcp resources/read "{\"uri\":\"note://demo\",$meta}" note://demo
# The same agent over A2A v1.0: its Agent Card, then a message naming the call.
base=${url%/mcp}
printf '\n\033[1m$ A2A card of calculator, then SendMessage\033[0m\n'
curl -s "$base/agents/calculator/.well-known/agent-card.json" | head -c 300
echo '…'
curl -s "$base/agents/calculator/a2a" -H 'content-type: application/json' -H 'A2A-Version: 1.0' \
    -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"data":{"tool":"multiply","arguments":{"a":6,"b":7}}}]}}}'
echo

printf '\n\033[1m--- a second node joins through the first: it finds, fetches and calls agents by hash ---\033[0m\n'
peer=$(grep -o 'listening on /ip4/[^ ]*' "$log" | head -1 | cut -d' ' -f3)
echo "first node: $peer"
data2=$(mktemp -d)
log2=$(mktemp)
"$CARGO_TARGET_DIR/release/agentsite" --data-dir "$data2" serve --listen 127.0.0.1:0 \
    --p2p-listen /ip4/127.0.0.1/tcp/0 --bootstrap "$peer" 2>"$log2" &
server2=$!
trap 'kill $server $server2 2>/dev/null || true; rm -rf "$data" "$data2" "$log" "$log2"' EXIT
for _ in $(seq 100); do grep -q 'at http://' "$log2" && break; sleep 0.1; done
second() { step "$@"; "$CARGO_TARGET_DIR/release/agentsite" --data-dir "$data2" "$@" || true; }
# The first node publishes once the second is connected to it.
for _ in $(seq 100); do
    "$CARGO_TARGET_DIR/release/agentsite" --data-dir "$data2" peers --json 2>/dev/null | grep -q peer_id && break
    sleep 0.1
done
second peers
run publish calculator
run publish text
second search arithmetic
# Adding again changes nothing and prints the content id.
id=$(agentsite add "$wasm/calculator.wasm" 2>/dev/null)
second fetch "$id"
second call calculator multiply '{"a": 6, "b": 7}'
second call text upper '{"text": "called where it lives"}' --remote

printf '\n\033[1m--- a goal across two nodes: the second node forms a team (its calculator, the first node'"'"'s text agent) ---\033[0m\n'
second goal "Add 1200 and 345, then count the words in 'the quick brown fox'."
second goals

printf '\n\033[1m--- a chat on the second node'"'"'s web page: its model answers with the calculator'"'"'s tools ---\033[0m\n'
site=$(grep -o 'http://[0-9.:]*/mcp' "$log2" | head -1)
site=${site%/mcp}
# What the page itself sends: the node's origin and the page's anti-forgery value.
csrf=$(curl -s "$site/" | grep -o '<meta name="csrf" content="[^"]*"' | cut -d'"' -f4)
page_post() {
    curl -s "$site$1" -H 'content-type: application/json' -H "origin: $site" -H "x-agentsite-csrf: $csrf" -d "$2"
}
chat=$(page_post /chat '{"agent": "calculator"}' | grep -o '"id":"[^"]*"' | cut -d'"' -f4)
# An @mention asks the model to use that agent's tools.
page_post "/chat/$chat/messages" '{"text": "@calculator multiply 6 by 7"}' >/dev/null
echo "you: @calculator multiply 6 by 7"
# The conversation's events until the model's reply (the keep-alive after
# it ends the stream); the embedded model takes some seconds on a CPU.
reply=$(curl -sN --max-time 300 "$site/chat/$chat/events" | grep -m1 '"kind":"reply"' || true)
printf 'model: %b\n' "$(printf '%s' "$reply" | grep -o '"text":"[^"]*"' | head -1 | cut -d'"' -f4)"

printf '\ndone: every call above ran in a fresh WebAssembly instance.\n'
printf 'serve them to Claude Code with: claude mcp add agentsite -- agentsite mcp\n'
# The pages are worth opening only while the nodes serve them: at a
# terminal until Ctrl-C, or for AGENTSITE_DEMO_SERVE seconds when a script
# runs the demo; otherwise the demo ends here with its nodes.
serve_for=${AGENTSITE_DEMO_SERVE:-0}
if [ -t 0 ] || [ "$serve_for" != 0 ]; then
    printf '\n\033[1mopen %s/ in a browser:\033[0m the hub with its agents and the network'"'"'s, the chat above,\n' "$site"
    if [ -t 0 ]; then
        printf 'and the finished goal under Chat. The two nodes keep serving until Ctrl-C.\n'
        wait $server2
    else
        printf 'and the finished goal under Chat. The two nodes serve for %s s more.\n' "$serve_for"
        sleep "$serve_for"
    fi
fi
