"""The runtimes of the embedded (``llamacpp``) model: what runs the GGUF model in-process."""

from __future__ import annotations

from typing import Literal

LlamaRuntime = Literal["xllamacpp", "llama-cpp-python", "openvino-genai"]
LLAMA_RUNTIMES: tuple[LlamaRuntime, ...] = ("xllamacpp", "llama-cpp-python", "openvino-genai")
"""What runs the embedded (llamacpp) model in-process: xllamacpp, a prebuilt wheel (the default);
llama-cpp-python, which compiles llama.cpp at install (every run before there was a choice used it); or OpenVINO
GenAI's continuous-batching pipeline on the model's F16 copy (madrag.providers.genai: what it records differs)."""
