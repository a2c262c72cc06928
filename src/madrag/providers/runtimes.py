"""The runtimes of the embedded (``llamacpp``) model: what runs the GGUF model in-process."""

from __future__ import annotations

from typing import Literal

LlamaRuntime = Literal["openvino-genai", "xllamacpp", "llama-cpp-python"]
LLAMA_RUNTIMES: tuple[LlamaRuntime, ...] = ("openvino-genai", "xllamacpp", "llama-cpp-python")
"""What runs the embedded (llamacpp) model in-process: OpenVINO GenAI's continuous-batching pipeline on the model's
F16 copy (the default: madrag.providers.genai, which says what it records differently); xllamacpp, llama.cpp from a
prebuilt wheel (the default of every run made before 2026-12-07: every top alternative, exactly repeatable numbers,
half the memory); or llama-cpp-python, which compiles llama.cpp at install (every run before there was a choice
used it)."""

DEFAULT_RUNTIME: LlamaRuntime = "openvino-genai"
"""The embedded model's runtime when none is named (the CLI, the server, the Python API): the demo's job in 96 s
against xllamacpp's 208 s on a 2-core AVX2 machine (docs/results/genai-runtime.txt)."""
