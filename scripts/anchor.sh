#!/usr/bin/env bash
# llama.cpp, the embedded engine's anchor, built from the source that
# llama-cpp-python's source package carries (pinned by its sha256):
#
#   - llama-bench and llama-perplexity (for scripts/decode-vs-llama-bench.sh
#     and the KL divergence figures in BENCHMARKS.md), with libllama beside;
#   - llama-cpp-python itself, on that same libllama, in a virtualenv with
#     numpy and gguf (for llama/tests/fixtures/make_reference.py).
#
#   bash scripts/anchor.sh      # prints the folder of the tools and the python
#
# Into ~/.cache/agentsite-anchor (AGENTSITE_ANCHOR to move it); a second run
# rebuilds nothing. Not part of the test command: the suite reads fixtures
# made once with it. About 15 minutes on two cores.
set -euo pipefail
version=0.3.36
sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
url=https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/llama_cpp_python-$version.tar.gz
cache=${AGENTSITE_ANCHOR:-$HOME/.cache/agentsite-anchor}
source_dir=$cache/llama_cpp_python-$version
venv=$cache/venv
build=$cache/build-$version
mkdir -p "$cache"

if [ ! -f "$source_dir/vendor/llama.cpp/CMakeLists.txt" ]; then
  archive=$cache/llama_cpp_python-$version.tar.gz
  if ! echo "$sha256  $archive" | sha256sum --check --status 2>/dev/null; then
    echo "==> downloading llama-cpp-python $version's source" >&2
    curl -fsSL -o "$archive.part" "$url"
    if ! echo "$sha256  $archive.part" | sha256sum --check --status; then
      echo "error: $url is not the pinned source (sha256 differs)" >&2
      rm -f "$archive.part"
      exit 1
    fi
    mv "$archive.part" "$archive"
  fi
  tar -xzf "$archive" -C "$cache"
fi

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet cmake ninja numpy gguf scikit-build-core

# The CPU's own instructions (-march=native), except on a CPU that lists
# AMX: there llama.cpp's AMX matrix kernels died on their first tile
# instruction (SIGILL at `tilezero`, in a Firecracker VM that lists AMX and
# grants its state), so the build names every other x86 extension the CPU
# lists, one by one, and leaves AMX out. The engine has no AMX kernels either.
cpu_flags() {
  grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -qx "$1"
}
instruction_sets=(-DGGML_NATIVE=ON)
if cpu_flags amx_tile; then
  instruction_sets=(-DGGML_NATIVE=OFF)
  for pair in sse4_2:SSE42 avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx_vnni:AVX_VNNI \
    avx512f:AVX512 avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
    if cpu_flags "${pair%%:*}"; then
      instruction_sets+=("-DGGML_${pair##*:}=ON")
    else
      instruction_sets+=("-DGGML_${pair##*:}=OFF")
    fi
  done
fi

if [ ! -x "$build/bin/llama-bench" ] || [ ! -x "$build/bin/llama-perplexity" ]; then
  echo "==> building llama.cpp's llama-bench and llama-perplexity (about 15 minutes)" >&2
  "$venv/bin/cmake" -S "$source_dir/vendor/llama.cpp" -B "$build" -G Ninja \
    -DCMAKE_MAKE_PROGRAM="$venv/bin/ninja" -DCMAKE_BUILD_TYPE=Release \
    "${instruction_sets[@]}" -DBUILD_SHARED_LIBS=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
  "$venv/bin/cmake" --build "$build" --target llama-bench llama-perplexity -j "${JOBS:-2}" >/dev/null
fi

if ! "$venv/bin/python" -c 'import llama_cpp' 2>/dev/null; then
  echo "==> installing llama-cpp-python on that libllama" >&2
  # LLAMA_BUILD=OFF: the package's Python only; it loads the libllama built
  # above (LLAMA_CPP_LIB_PATH), so the binding and the tools are one build.
  CMAKE_ARGS="-DLLAMA_BUILD=OFF" "$venv/bin/pip" install --quiet --no-build-isolation "$source_dir"
fi

echo "tools:  $build/bin (llama-bench, llama-perplexity)"
echo "python: LLAMA_CPP_LIB_PATH=$build/bin $venv/bin/python"
