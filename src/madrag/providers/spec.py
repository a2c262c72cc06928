"""Provider specs: how a run names its backend, the registry of backend kinds, and the factories that build a
provider from a spec (bare with :func:`make_provider`, or with its call policy with :func:`managed`).

A backend kind is a name in a small registry (:func:`register_backend`): its factory builds the provider from a
:class:`ProviderSpec`, and its role parser reads the ``KIND[:MODEL][@BASE_URL]`` of ``--role-provider``. The
built-in kinds are ``llamacpp`` (the embedded default), ``openai`` (any OpenAI-compatible endpoint) and ``fake``
(scripted, for tests); the backend modules are imported only when a provider of their kind is built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from madrag.errors import ConfigError
from madrag.providers.adapt import ClientKind, SamplingParams, TokenParam
from madrag.providers.base import Provider
from madrag.providers.cache import ResponseCache
from madrag.providers.policy import ManagedProvider, RetryPolicy
from madrag.providers.runtimes import LlamaRuntime


class ProviderSpec(BaseModel):
    """How to reach a backend; recorded with each run (never the API key itself)."""

    model_config = ConfigDict(frozen=True)

    kind: str = "llamacpp"  # a registered backend kind (see register_backend)
    model: str | None = None  # openai: the model name; llamacpp: ignored (see model_path)
    model_path: str | None = None  # llamacpp: any GGUF; default: the embedded SmolLM2
    base_url: str | None = None
    # openai: more endpoints serving the same model (--base-url given again); calls are balanced over base_url
    # and these, each endpoint with ``concurrency`` slots (madrag.providers.pool)
    extra_base_urls: list[str] = Field(default_factory=list)
    api_key_env: str = "OPENAI_API_KEY"
    logprobs: bool = True  # openai: whether the server returns logprobs
    # openai: how the token limit is sent, and whether temperature / top_p are (auto: adapt once to a refusal)
    token_param: TokenParam = "auto"
    sampling_params: SamplingParams = "auto"
    # openai: the HTTP client (aiohttp: lean, the default; httpx: the same on httpx, about twice the client CPU per
    # call; openai: the openai package, if installed); same requests and answers
    client: ClientKind = "aiohttp"
    concurrency: int | None = Field(default=None, ge=1)  # None: the backend's own
    timeout_s: float = Field(default=300.0, gt=0)
    retries: int = Field(default=4, ge=0)
    n_ctx: int = 8192
    # llamacpp: parallel model contexts (requests served at once; the CPU threads are split between them).
    # 2 measured 1.42x the calls/s of 1 on 2 cores (bench/embedded_slots.py)
    slots: int = Field(default=2, ge=1)
    # llamacpp: the runtime (same engine; same greedy tokens, logprobs within ~1e-3; sampled texts differ)
    runtime: LlamaRuntime = "xllamacpp"
    fake_latency_s: float = 0.0  # fake: seconds per call (for tests of interrupted runs)

    @field_validator("kind")
    @classmethod
    def _registered(cls, kind: str) -> str:
        if kind not in _BACKENDS:
            raise ValueError(f"unknown provider {kind!r}; choose {backend_choices()}")
        return kind


OPERATIONAL = frozenset({"concurrency", "timeout_s", "retries", "fake_latency_s", "slots", "extra_base_urls", "client"})
"""Spec fields that change how calls are made, not what a backend answers (a resumed run may change them)."""


ADDED_LATER: dict[str, Any] = {"token_param": "auto", "sampling_params": "auto", "runtime": "llama-cpp-python"}
"""Spec fields added after runs were recorded, with the value every run recorded before them had (the
runtime: llama-cpp-python, the only one then; no longer the default): part of a run's identity only when set
otherwise, so that a run recorded before them still resumes with that value, and only with it."""

KIND_FIELDS = {"runtime": "llamacpp"}
"""Spec fields that only one backend kind reads: part of the identity of that kind's specs only."""


def spec_identity(spec: ProviderSpec) -> dict[str, object]:
    """The settings that change what a backend answers (a resumed run must match them)."""
    identity = spec.model_dump(mode="json", exclude=set(OPERATIONAL))
    for name, kind in KIND_FIELDS.items():
        if spec.kind != kind:
            del identity[name]
    for name, default in ADDED_LATER.items():
        if identity.get(name) == default:
            del identity[name]
    return identity


def spec_from_identity(stored: Mapping[str, Any]) -> ProviderSpec:
    """The spec a recorded identity describes (:func:`spec_identity`): a field it leaves out that was added
    later takes the value of the runs recorded before it (a run of the embedded model recorded without a
    runtime was answered by llama-cpp-python), the others their defaults."""
    return ProviderSpec.model_validate({**ADDED_LATER, **stored})


ProviderFactory = Callable[[ProviderSpec], Provider]
"""Builds a provider from a spec; raises :class:`ConfigError` for a spec its backend cannot serve."""

RoleFields = Callable[[str, str, str, ProviderSpec], dict[str, object]]
"""``(role, model, base_url, base) -> spec fields`` for ``--role-provider ROLE=KIND[:MODEL][@BASE_URL]`` (model and
base_url are "" when not given); raises :class:`ConfigError` for text its backend cannot use."""


@dataclass(frozen=True)
class Backend:
    """A registered backend kind: how to build its provider and how to read its ``--role-provider`` text."""

    build: ProviderFactory
    role_fields: RoleFields


_BACKENDS: dict[str, Backend] = {}


def register_backend(kind: str, build: ProviderFactory, role_fields: RoleFields | None = None) -> None:
    """Make ``kind`` a backend a :class:`ProviderSpec` can name. ``role_fields`` defaults to taking nothing from
    the role text (beyond the kind). Registering a kind again replaces it."""
    _BACKENDS[kind] = Backend(build=build, role_fields=role_fields or _no_role_fields)


def backend_kinds() -> tuple[str, ...]:
    """The registered backend kinds, in registration order."""
    return tuple(_BACKENDS)


def backend_choices() -> str:
    """The registered kinds as prose: ``llamacpp, openai or fake``."""
    kinds = backend_kinds()
    return kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} or {kinds[-1]}"


def make_provider(spec: ProviderSpec, api_key: SecretStr | None = None) -> Provider:
    """The bare provider ``spec`` describes (no retries, concurrency limit or cache: see :func:`managed`).
    ``api_key``: an openai backend's key given in memory (the web server's), instead of ``spec.api_key_env``."""
    backend = _BACKENDS.get(spec.kind)
    if backend is None:  # only for a spec built without validation (model_construct)
        raise ConfigError(f"unknown provider {spec.kind!r}; choose {backend_choices()}")
    if api_key is not None:
        if spec.kind != "openai":
            raise ConfigError(f"only an openai backend takes an API key, not {spec.kind!r}")
        return _openai(spec, api_key)
    return backend.build(spec)


def managed(spec: ProviderSpec, cache_path: Path | None) -> ManagedProvider:
    """The provider with its concurrency limit, timeout, retries and (unless disabled) response cache."""
    return ManagedProvider(
        provider=make_provider(spec),
        policy=RetryPolicy(retries=spec.retries, timeout_s=spec.timeout_s),
        cache=ResponseCache(cache_path) if cache_path is not None else None,
        concurrency=None if spec.extra_base_urls else spec.concurrency,  # a pool's is per endpoint
    )


ROUTABLE_ROLES = ("single", "strict", "lenient", "neutral_a", "neutral_b")
"""Roles whose calls can go to their own backend (``--role-provider``): the judges of the consensus paper."""


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
    backend = _BACKENDS.get(kind)
    if backend is None:
        raise ConfigError(f"--role-provider: backend must be {backend_choices()}; got {kind!r}")
    update: dict[str, object] = {"kind": kind, "model": None, "model_path": None, "base_url": None}
    update.update(backend.role_fields(role, model, url, base))
    return role, base.model_copy(update=update)


# -- the built-in backends --------------------------------------------------------------------------------------


def _no_role_fields(role: str, model: str, base_url: str, base: ProviderSpec) -> dict[str, object]:
    return {}


def _llamacpp(spec: ProviderSpec) -> Provider:
    from madrag.providers.llamacpp import LlamaCppProvider

    return LlamaCppProvider(model_path=spec.model_path, n_ctx=spec.n_ctx, slots=spec.slots, runtime=spec.runtime)


def _llamacpp_role_fields(role: str, model: str, base_url: str, base: ProviderSpec) -> dict[str, object]:
    return {"model_path": model or None}


def _openai(spec: ProviderSpec, api_key: SecretStr | None = None) -> Provider:
    from madrag.providers.openai_compat import OpenAICompatProvider, RequestShape

    if not spec.model:
        raise ConfigError("the openai provider needs --model (the model name the server serves)")
    model = spec.model
    endpoints = [
        OpenAICompatProvider(
            model=model,
            base_url=url,
            api_key_env=spec.api_key_env,
            timeout_s=spec.timeout_s,
            max_concurrency=spec.concurrency or 8,
            supports_logprobs=spec.logprobs,
            shape=RequestShape(token_param=spec.token_param, sampling_params=spec.sampling_params, client=spec.client),
            api_key=api_key,
        )
        for url in [spec.base_url, *spec.extra_base_urls]
    ]
    if len(endpoints) == 1:
        return endpoints[0]
    from madrag.providers.pool import EndpointPool

    return EndpointPool(endpoints)


def _openai_role_fields(role: str, model: str, base_url: str, base: ProviderSpec) -> dict[str, object]:
    if not model:
        raise ConfigError(f"--role-provider {role}: an openai backend needs a model name (openai:MODEL)")
    return {"model": model, "base_url": base_url or base.base_url}


def _fake(spec: ProviderSpec) -> Provider:
    from madrag.providers.fake import FakeProvider

    return FakeProvider(latency_s=spec.fake_latency_s)


register_backend("llamacpp", _llamacpp, _llamacpp_role_fields)
register_backend("openai", _openai, _openai_role_fields)
register_backend("fake", _fake)
