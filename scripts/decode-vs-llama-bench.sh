#!/usr/bin/env bash
# Decode and prefill speed of the engine against llama.cpp's own llama-bench,
# same GGUF, same two threads, same context depth, run in turns so that both
# meet the same load of this shared machine; prints each round and the
# median ratio.
#
#   scripts/decode-vs-llama-bench.sh LLAMA_BENCH [GGUF] [ROUNDS]
#
# LLAMA_BENCH is a llama.cpp build's llama-bench (its libraries beside it).
# The engine's figure is the median of the forward example's three runs of
# 128 decode steps after `depth` positions (1 for depth 0: the first token);
# llama-bench's is its mean of three `-n 128 -d depth` runs. Prefill: the
# engine's median of three 256-token prompts (in the node's chunks, PROMPT_CHUNK)
# against llama-bench's `-p 256` (one batch). PARTS=prefill (or decode)
# runs one part alone.
set -euo pipefail
parts=${PARTS:-decode prefill}
bench=${1:?usage: decode-vs-llama-bench.sh LLAMA_BENCH [GGUF] [ROUNDS]}
model=${2:-$HOME/.cache/agentsite/models/SmolLM2-135M-Instruct.Q4_1.gguf}
rounds=${3:-5}
cd "$(dirname "$0")/.."
cargo build --quiet --release -p agentsite-llama --example forward
target=${CARGO_TARGET_DIR:-target}
forward="$target/release/examples/forward"
median() {
  printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}
export LD_LIBRARY_PATH="$(dirname "$bench")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
depths=$([[ $parts == *decode* ]] && echo 0 194 || true)
for depth in $depths; do
  ratios=()
  for round in $(seq "$rounds"); do
    prompt=$((depth == 0 ? 1 : depth))
    engine=$("$forward" "$model" "$prompt" 128 | sed -n 's/.*decode 128: .* (\([0-9.]*\) tok\/s)$/\1/p' | sort -n | sed -n 2p)
    llama=$("$bench" -m "$model" -t 2 -p 0 -n 128 -d "$depth" -r 3 | awk -F'|' '/tg128/ {split($(NF-1), f, " "); print f[1]}')
    ratio=$(awk -v e="$engine" -v l="$llama" 'BEGIN {printf "%.2f", e / l}')
    ratios+=("$ratio")
    echo "depth $depth round $round: engine $engine tok/s, llama-bench $llama tok/s, ratio $ratio"
  done
  median=$(median "${ratios[@]}")
  echo "depth $depth: median ratio ${median}x over $rounds rounds"
done
[[ $parts == *prefill* ]] || exit 0
ratios=()
for round in $(seq "$rounds"); do
  engine=$("$forward" "$model" 256 1 | sed -n 's/^prefill 256 tokens: .* (\([0-9.]*\) tok\/s);.*/\1/p' | sort -n | sed -n 2p)
  llama=$("$bench" -m "$model" -t 2 -p 256 -n 0 -r 3 | awk -F'|' '/pp256/ {split($(NF-1), f, " "); print f[1]}')
  ratio=$(awk -v e="$engine" -v l="$llama" 'BEGIN {printf "%.2f", e / l}')
  ratios+=("$ratio")
  echo "prefill round $round: engine $engine tok/s, llama-bench $llama tok/s, ratio $ratio"
done
echo "prefill: median ratio $(median "${ratios[@]}")x over $rounds rounds"
