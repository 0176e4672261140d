"""llama.cpp (through llama-cpp-python) on a GGUF file: the anchor of the
embedded-model benchmark (benches/models.rs), which runs this script with
the same prompt text and reads one JSON line per run from its stdout.

    python llama_cpp_anchor.py MODEL.gguf PROMPT_FILE MAX_TOKENS RUNS

Greedy decoding, 2 threads (the machine's cores), the prompt already in the
model's chat template. For each run: prompt tokens, generated tokens, time
to first token (prefill and the first sampled token) and decode time.
"""

import json
import sys
import time

import llama_cpp


def main(model, prompt_file, max_tokens, runs):
    prompt = open(prompt_file, encoding="utf-8").read()
    llm = llama_cpp.Llama(
        model_path=model, n_ctx=2048, n_threads=2, n_batch=512, verbose=False
    )
    tokens = llm.tokenize(prompt.encode(), add_bos=False, special=True)
    for _ in range(runs):
        # Forget the last run: generate() would otherwise reuse the cached
        # prompt and skip its prefill.
        llm.reset()
        started = time.perf_counter()
        first = None
        generated = 0
        for token in llm.generate(tokens, temp=0.0, reset=False):
            if first is None:
                first = time.perf_counter()
            if token == llm.token_eos():
                break
            generated += 1
            if generated >= max_tokens:
                break
        ended = time.perf_counter()
        print(
            json.dumps(
                {
                    "prompt_tokens": len(tokens),
                    "generated": generated,
                    "ttft": first - started,
                    "decode": ended - first,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
