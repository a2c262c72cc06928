"""Backend presets: where the common OpenAI-compatible servers listen and what they are called, so a teacher
connects a real model by choosing one and testing the connection (the test finds out about logprobs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from madrag.providers.backends import backends


@dataclass(frozen=True)
class Preset:
    label: str
    base_url: str
    model: str
    hint: str


PRESETS: dict[str, Preset] = {
    "openai": Preset(
        "OpenAI (API key)", "https://api.openai.com/v1", "gpt-4o-mini", "paste your API key below, then test"
    ),
    "ollama": Preset(
        "Ollama on this computer",
        "http://localhost:11434/v1",
        "llama3.1:8b",
        "start it with `ollama serve` and `ollama pull llama3.1:8b`; no key",
    ),
    "vllm": Preset(
        "vLLM server",
        "http://localhost:8000/v1",
        "Qwen/Qwen2.5-7B-Instruct",
        "`vllm serve Qwen/Qwen2.5-7B-Instruct`; the model name is the one it serves; no key",
    ),
    "llamacpp-server": Preset(
        "llama.cpp server",
        "http://localhost:8080/v1",
        "local",
        "`llama-server -m model.gguf --port 8080`; it answers to any model name; no key",
    ),
}


def apply(backend: dict[str, Any], name: str) -> dict[str, Any]:
    """The backend settings with a preset's server and model (the confidence left for the test to find)."""
    preset = PRESETS.get(name)
    if preset is None:
        return backend
    out = {k: v for k, v in backend.items() if k != "logprobs"}
    return {**out, "kind": PRESET_KIND, "base_url": preset.base_url, "model": preset.model}


def preset_urls() -> set[str]:
    """Every preset's server address."""
    return {p.base_url for p in PRESETS.values()}


PRESET_KIND = "openai"
"""The backend every preset is a server of (an OpenAI-compatible one)."""


def server_kinds() -> dict[str, str]:
    """The backends that are model servers (the teacher's choice), each with its words."""
    return {b.kind: b.traits.offer or b.traits.label for b in backends() if b.traits.remote}


def try_only() -> dict[str, str]:
    """Backends offered only to try the pipeline (their scores are not grades), each with its words: never
    chosen for the teacher, and their runs say they are not grades (:mod:`madrag.teacher.scored_by`)."""
    return {b.kind: b.traits.offer or b.traits.label for b in backends() if not b.traits.valid_grades}
