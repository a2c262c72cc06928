"""The runtimes of the embedded (``llamacpp``) model: what runs the GGUF model in-process."""

from __future__ import annotations

from typing import Literal

LlamaRuntime = Literal["xllamacpp", "llama-cpp-python", "openvino"]
LLAMA_RUNTIMES: tuple[LlamaRuntime, ...] = ("xllamacpp", "llama-cpp-python", "openvino")
"""What runs the embedded (llamacpp) model in-process: xllamacpp, a prebuilt wheel (the default);
llama-cpp-python, which compiles llama.cpp at install (every run before there was a choice used it); or
OpenVINO (prebuilt wheels), on an F16 copy of the GGUF converted once (madrag.providers.ov_model)."""
