"""The runtimes of the embedded (``llamacpp``) model: what runs the GGUF model in-process."""

from __future__ import annotations

from typing import Literal

LlamaRuntime = Literal["xllamacpp", "llama-cpp-python"]
LLAMA_RUNTIMES: tuple[LlamaRuntime, ...] = ("xllamacpp", "llama-cpp-python")
"""What runs the embedded (llamacpp) model in-process: xllamacpp, a prebuilt wheel (the default), or
llama-cpp-python, which compiles llama.cpp at install (every run before there was a choice used it)."""
