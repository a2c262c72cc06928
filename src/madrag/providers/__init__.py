"""LLM backends behind one interface, and the factory that builds one from CLI-style settings."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from madrag.errors import ConfigError
from madrag.providers.base import (
    Capabilities,
    ChatRequest,
    ChatResponse,
    Message,
    Provider,
    TokenLogprob,
    TopLogprob,
    Usage,
)
from madrag.providers.cache import ResponseCache
from madrag.providers.fake import FakeProvider, FakeReply
from madrag.providers.policy import ManagedProvider, RetryPolicy

ProviderKind = Literal["llamacpp", "openai", "fake"]


class ProviderSpec(BaseModel):
    """How to reach a backend; recorded with each run (never the API key itself)."""

    model_config = ConfigDict(frozen=True)

    kind: ProviderKind = "llamacpp"
    model: str | None = None  # openai: the model name; llamacpp: ignored (see model_path)
    model_path: str | None = None  # llamacpp: any GGUF; default: the embedded SmolLM2
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    logprobs: bool = True  # openai: whether the server returns logprobs
    concurrency: int | None = None
    timeout_s: float = 300.0
    retries: int = 4
    n_ctx: int = 8192
    # llamacpp: parallel model contexts (requests served at once; the CPU threads are split between them).
    # 2 measured 1.42x the calls/s of 1 on 2 cores (bench/embedded_slots.py)
    slots: int = Field(default=2, ge=1)
    fake_latency_s: float = 0.0  # fake: seconds per call (for tests of interrupted runs)


OPERATIONAL = {"concurrency", "timeout_s", "retries", "fake_latency_s", "slots"}


def spec_identity(spec: ProviderSpec) -> dict[str, object]:
    """The settings that change what a backend answers (a resumed run must match them)."""
    return spec.model_dump(mode="json", exclude=OPERATIONAL)


def make_provider(spec: ProviderSpec) -> Provider:
    if spec.kind == "llamacpp":
        from madrag.providers.llamacpp import LlamaCppProvider

        return LlamaCppProvider(model_path=spec.model_path, n_ctx=spec.n_ctx, slots=spec.slots)
    if spec.kind == "openai":
        from madrag.providers.openai_compat import OpenAICompatProvider

        if not spec.model:
            raise ConfigError("the openai provider needs --model (the model name the server serves)")
        return OpenAICompatProvider(
            model=spec.model,
            base_url=spec.base_url,
            api_key_env=spec.api_key_env,
            timeout_s=spec.timeout_s,
            max_concurrency=spec.concurrency or 8,
            supports_logprobs=spec.logprobs,
        )
    if spec.kind == "fake":
        return FakeProvider(latency_s=spec.fake_latency_s)
    raise ConfigError(f"unknown provider {spec.kind!r}; choose llamacpp, openai or fake")


ROUTABLE_ROLES = ("single", "strict", "lenient", "neutral_a", "neutral_b")
"""Roles whose calls can go to their own backend (``--role-provider``): the judges of seed 002."""


def parse_role_provider(text: str, base: ProviderSpec) -> tuple[str, ProviderSpec]:
    """``ROLE=KIND[:MODEL][@BASE_URL]`` -> (role, spec): e.g. ``lenient=openai:gemma-3-4b@http://host:8000/v1``,
    ``strict=llamacpp:/models/big.gguf``, ``lenient=llamacpp`` (the embedded model). Operational settings
    (timeout, retries, concurrency, slots) and the API key variable come from ``base``."""
    role, sep, rest = text.partition("=")
    role = role.strip()
    if not sep or not rest.strip():
        raise ConfigError(f"--role-provider takes ROLE=KIND[:MODEL][@BASE_URL]; got {text!r}")
    if role not in ROUTABLE_ROLES:
        raise ConfigError(f"--role-provider: role must be one of {', '.join(ROUTABLE_ROLES)}; got {role!r}")
    head, _, url = rest.strip().partition("@")
    kind, _, model = head.partition(":")
    if kind not in ("llamacpp", "openai", "fake"):
        raise ConfigError(f"--role-provider: backend must be llamacpp, openai or fake; got {kind!r}")
    if kind == "openai" and not model:
        raise ConfigError(f"--role-provider {role}: an openai backend needs a model name (openai:MODEL)")
    update: dict[str, object] = {"kind": kind, "model": None, "model_path": None, "base_url": None}
    if kind == "openai":
        update.update(model=model, base_url=url or base.base_url)
    elif kind == "llamacpp":
        update.update(model_path=model or None)
    return role, base.model_copy(update=update)


def managed(spec: ProviderSpec, cache_path: Path | None) -> ManagedProvider:
    """The provider with its concurrency limit, timeout, retries and (unless disabled) response cache."""
    return ManagedProvider(
        provider=make_provider(spec),
        policy=RetryPolicy(retries=spec.retries, timeout_s=spec.timeout_s),
        cache=ResponseCache(cache_path) if cache_path is not None else None,
        concurrency=spec.concurrency,
    )


__all__ = [
    "Capabilities",
    "ChatRequest",
    "ChatResponse",
    "FakeProvider",
    "FakeReply",
    "ManagedProvider",
    "Message",
    "Provider",
    "ProviderSpec",
    "ResponseCache",
    "RetryPolicy",
    "TokenLogprob",
    "TopLogprob",
    "Usage",
    "make_provider",
    "managed",
    "parse_role_provider",
    "spec_identity",
]
