"""Teacher-forced agreement of the engine with llama.cpp on one GGUF file
whose vocabulary llama.cpp cannot spell text in (the synthetic models of
`cargo run -p agentsite-llama --example synthetic`), over random tokens:

    LLAMA_CPP_LIB_PATH=BUILD/bin VENV/bin/python scripts/agreement.py \
        MODEL.gguf KLD_EXAMPLE [CONTEXT] [CHUNKS]

(`bash scripts/anchor.sh` makes BUILD and VENV; KLD_EXAMPLE is the built
`kld` example of agentsite-llama.) llama.cpp runs the tokens one at a
time and in one batch a chunk (llama-cpp-python, f32 key-value cache, no
flash attention); both write the files `llama-perplexity
--kl-divergence-base` writes, from which the engine's `kld` example reads
the tokens, runs them one at a time and writes its own. Each chunk's
second half is scored, as llama-perplexity scores it. Printed: how often
the engine and llama.cpp's batched run pick the token llama.cpp picks one
token at a time, by how clearly it picks it, and the KL divergence of each
from it; the engine twice: every token one at a time, and each chunk's
first half as a prompt (the node's way: a prompt many tokens a step, then
one token at a time).
"""

import pathlib
import subprocess
import sys
import tempfile

import llama_cpp
import numpy as np

# llama.cpp opened as the families' fixtures are made.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "llama/tests/fixtures"))
from make_reference import as_the_engine_runs  # noqa: E402
MARGINS = [0.0, 0.05, 0.1, 0.2, 0.3]


def record(logits: np.ndarray, nv: int) -> bytes:
    """One position as llama-perplexity writes it (and the `kld` example):
    the scale and the least log-probability, then each token's step above
    it."""
    logits = logits.astype(np.float32)
    top = float(logits.max())
    least = max(float(logits.min()), top - 16.0)
    log_sum = np.float32(np.log(np.exp((logits - top).astype(np.float64)).sum()))
    least_log_prob = np.float32(least - top - log_sum)
    scale = np.float32((top - least) / 65535.0)
    steps = np.zeros(nv - 4, dtype="<u2")
    if scale > 0:
        above = logits > least
        steps[: len(logits)][above] = np.floor((logits[above] - least) / scale + 0.5)
    head = np.array([scale, least_log_prob], dtype="<f4").tobytes()
    return head + steps.tobytes()


def llama_cpp_file(model, tokens, n_ctx, batch, path):
    """llama.cpp's log-probabilities of `tokens` (chunks of `n_ctx`), its
    batches `batch` tokens long, into `path`."""
    llm = as_the_engine_runs(model, n_ctx, batch)
    n_vocab = llm.n_vocab()
    nv = 2 * ((n_vocab + 1) // 2) + 4
    chunks = len(tokens) // n_ctx
    first = n_ctx // 2
    with open(path, "wb") as out:
        out.write(b"_logits_")
        out.write(np.array([n_ctx, n_vocab, chunks], dtype="<i4").tobytes())
        out.write(np.array(tokens, dtype="<i4").tobytes())
        for chunk in range(chunks):
            llm.reset()
            llm.eval(tokens[chunk * n_ctx : (chunk + 1) * n_ctx])
            scores = np.array(llm.scores[:n_ctx], dtype=np.float32)
            for position in range(first, n_ctx - 1):
                out.write(record(scores[position], nv))
    return n_vocab


def log_probs(path, n_ctx, n_vocab, chunks):
    """Each scored position's log-probabilities, from a file as above."""
    raw = pathlib.Path(path).read_bytes()
    nv = 2 * ((n_vocab + 1) // 2) + 4
    records = np.frombuffer(raw, dtype="<u2", offset=20 + 4 * n_ctx * chunks).reshape(-1, nv)
    heads = records[:, :4].copy().view("<f4")
    steps = records[:, 4 : 4 + n_vocab].astype(np.float32)
    return heads[:, :1] * steps + heads[:, 1:2]


def report(name, reference, other):
    top = reference.argmax(axis=1)
    ordered = np.sort(reference, axis=1)
    lead = ordered[:, -1] - ordered[:, -2]
    same = other.argmax(axis=1) == top
    p = np.exp(reference)
    kl = (p * (reference - other)).sum(axis=1)
    print(f"\n{name}: KL median {np.median(kl):.6f}, mean {kl.mean():.6f}, max {kl.max():.6f}")
    print("| llama.cpp's first choice leads its second by | positions | same top token |")
    print("|---|---:|---:|")
    for margin in MARGINS:
        at = lead > margin if margin else np.ones_like(same)
        label = f"more than {margin} nats" if margin else "any amount"
        count = int(at.sum())
        agree = int((same & at).sum())
        print(f"| {label} | {count} | {agree} ({100 * agree / max(count, 1):.2f}%) |")


def main():
    model, kld = pathlib.Path(sys.argv[1]), sys.argv[2]
    n_ctx = int(sys.argv[3]) if len(sys.argv) > 3 else 256
    chunks = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    with tempfile.TemporaryDirectory() as directory:
        names = ("ub1", "batched", "engine", "engine-prompt")
        files = {name: f"{directory}/{name}.kld" for name in names}
        n_vocab = llama_cpp.Llama(model_path=str(model), vocab_only=True, verbose=False).n_vocab()
        tokens = np.random.default_rng(0x5EED).integers(0, n_vocab, n_ctx * chunks).tolist()
        llama_cpp_file(model, tokens, n_ctx, 1, files["ub1"])
        llama_cpp_file(model, tokens, n_ctx, n_ctx, files["batched"])
        for name, flags in (("engine", []), ("engine-prompt", ["--prompt"])):
            subprocess.run(
                [kld, str(model), files["ub1"], files[name], *flags],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        scored = {name: log_probs(path, n_ctx, n_vocab, chunks) for name, path in files.items()}
    print(f"{model.name}: {len(scored['ub1'])} positions ({chunks} chunks of {n_ctx}, second halves)")
    report("engine (one token at a time) vs llama.cpp one token at a time", scored["ub1"], scored["engine"])
    report(
        "engine (first half as a prompt, in the node's chunks) vs llama.cpp one token at a time",
        scored["ub1"],
        scored["engine-prompt"],
    )
    report("llama.cpp batched vs llama.cpp one token at a time", scored["ub1"], scored["batched"])


if __name__ == "__main__":
    main()
