#!/usr/bin/env bash
# Runs the integration tests a filter picks (one test, or a part of the
# suite such as `many_nodes::`) many times in a row, to show they pass on
# every run and not most:
#   scripts/repeat.sh [-n TIMES] [-l] FILTER
#   scripts/repeat.sh -n 10 many_nodes::
#   scripts/repeat.sh -n 10 -l many_nodes::   # with a build running beside it
# -l keeps a second build going meanwhile (a release build of the host in a
# scratch target folder), as a busy machine would. Builds the test once,
# then runs it TIMES times (10 by default) whatever each run does, printing
# what each passed run measured, and ends with one line: "N passed, M
# failed". Logs of failed runs are kept.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

times=10
load=false
while getopts "n:l" flag; do
    case $flag in
        n) times=$OPTARG ;;
        l) load=true ;;
        *) echo "usage: $0 [-n TIMES] [-l] FILTER" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
filter=${1:?usage: $0 [-n TIMES] [-l] FILTER}

build_examples
binary=$(cargo test --test suite --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' suite | tail -1)
[ -x "$binary" ] || { echo "cannot build the test suite" >&2; exit 1; }

logs=$(mktemp -d)
loader=""
scratch=""
if $load; then
    scratch=$(mktemp -d)
    # Its own process group, so that stopping it stops the cargo it runs.
    setsid bash -c 'while true; do
        CARGO_TARGET_DIR="$0" nice cargo build --release -p agentsite --quiet >/dev/null 2>&1
        rm -rf "$0"/release
    done' "$scratch" &
    loader=$!
fi
stop_loader() {
    if [ -n "$loader" ]; then
        kill -- -"$loader" 2>/dev/null || true
        wait "$loader" 2>/dev/null || true
        rm -rf "$scratch"
    fi
}
trap stop_loader EXIT

passed=0
failed=0
for run in $(seq 1 "$times"); do
    started=$(date +%s)
    if (cd host && "$binary" "$filter" --nocapture) >"$logs/run-$run.log" 2>&1; then
        passed=$((passed + 1))
        echo "run $run: passed in $(( $(date +%s) - started ))s"
        # What the run measured (joins, lookups' success and times).
        grep -E '^(testnet: [0-9]+ nodes joined|round [0-9]+ after|recovered|after [0-9]+ of|over QUIC|routing tables)' \
            "$logs/run-$run.log" | sed 's/^/    /' || true
        rm "$logs/run-$run.log"
    else
        failed=$((failed + 1))
        echo "run $run: FAILED in $(( $(date +%s) - started ))s (log: $logs/run-$run.log)"
    fi
done
echo "$filter: $passed passed, $failed failed"
[ "$failed" = 0 ]
