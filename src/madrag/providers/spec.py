"""Provider specs: how a run names its backend (``kind`` + ``model`` + the kind's ``options`` + the call
settings every backend has), its identity as a run records it, and the factories that build a provider from a
spec (bare with :func:`make_provider`, or with its call policy with :func:`managed`).

The kinds and their options models are registered in :mod:`madrag.providers.backends` (madrag's own in
:mod:`madrag.providers.builtin`). A spec is also accepted flat, as every release before the options model wrote
it (``ProviderSpec(kind="openai", model="m", base_url=...)``, or a recorded identity): the fields of the kind's
options go into ``options``, those of another kind are left out (that kind's backend never read them).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, SerializeAsAny, model_validator

from madrag.errors import ConfigError
from madrag.providers.backends import (
    BackendOptions,
    BackendTraits,
    CallLimits,
    backend_choices,
    find_backend,
    option,
    option_meta,
    own_options,
)
from madrag.providers.base import Provider
from madrag.providers.cache import ResponseCache
from madrag.providers.policy import ManagedProvider, RetryPolicy


class ProviderSpec(BaseModel):
    """How to reach a backend; recorded with each run (never the API key itself)."""

    model_config = ConfigDict(frozen=True)

    kind: str = option("llamacpp", "The backend (see register_backend).", flag="--provider")
    model: str | None = option(None, "Model name (openai provider).")
    options: SerializeAsAny[BackendOptions] = Field(default_factory=BackendOptions)
    concurrency: int | None = option(None, "Parallel requests to the backend.", operational=True, ge=1)
    timeout_s: float = option(
        300.0, "Seconds per request before it is retried.", flag="--timeout", operational=True, gt=0
    )
    retries: int = option(4, "Retries on transient failures.", operational=True, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _nested(cls, data: Any) -> Any:
        """The kind's options model from ``options`` and from the flat fields of older specs and records."""
        if not isinstance(data, Mapping):
            return data
        kind = data.get("kind", "llamacpp")
        try:
            backend = find_backend(kind) if isinstance(kind, str) else None
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        if backend is None:
            return data
        given = data.get("options")
        values = given.model_dump() if isinstance(given, BaseModel) else dict(given or {})
        flat = {k: v for k, v in data.items() if k not in cls.model_fields}
        values.update(own_options(kind, flat))
        common = {k: v for k, v in data.items() if k in cls.model_fields and k != "options"}
        return {**common, "options": backend.options.model_validate(values)}

    if not TYPE_CHECKING:  # for readers of older specs: an option read as a field (madrag's own read .options)

        def __getattr__(self, name: str) -> Any:
            try:
                return super().__getattr__(name)
            except AttributeError:
                options = self.__dict__.get("options")
                if options is not None and name in type(options).model_fields:
                    return getattr(options, name)
                raise

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> ProviderSpec:
        """A copy; an ``update`` of an option or of the kind is validated (:meth:`with_fields`)."""
        if update and (set(update) - set(ProviderSpec.model_fields) or "kind" in update):
            return self.with_fields(**update)
        return super().model_copy(update=update, deep=deep)

    @property
    def traits(self) -> BackendTraits:
        """What its backend is (remote, needs a key, gives valid grades...)."""
        return find_backend(self.kind).traits

    def flat(self, mode: str = "python") -> dict[str, Any]:
        """The spec as one level of fields (the common ones and its options'), as older specs were written."""
        return {**self.model_dump(mode=mode, exclude={"options"}), **self.options.model_dump(mode=mode)}

    def with_fields(self, **fields: Any) -> ProviderSpec:
        """The spec with ``fields`` changed (common or options fields; a new ``kind`` keeps only what it reads)."""
        return ProviderSpec.model_validate({**self.flat(), **fields})

    def limits(self) -> CallLimits:
        return CallLimits(concurrency=self.concurrency, timeout_s=self.timeout_s)


def operational_fields(spec: ProviderSpec) -> frozenset[str]:
    """The fields of ``spec`` that change how calls are made, not what its backend answers."""
    fields = {**ProviderSpec.model_fields, **type(spec.options).model_fields}
    return frozenset(n for n, f in fields.items() if option_meta(f)["operational"])


def spec_identity(spec: ProviderSpec) -> dict[str, object]:
    """The settings that change what a backend answers (a resumed run must match them): the kind, the model and
    its kind's options, flat."""
    return {k: v for k, v in spec_fields(spec).items() if k not in operational_fields(spec)}


def spec_fields(spec: ProviderSpec) -> dict[str, object]:
    """Every setting of ``spec``, flat, as JSON values (what :func:`spec_identity` chooses from)."""
    return spec.flat(mode="json")


def make_provider(spec: ProviderSpec, api_key: SecretStr | None = None) -> Provider:
    """The bare provider ``spec`` describes (no retries, concurrency limit or cache: see :func:`managed`).
    ``api_key``: the key of a backend that takes one, given in memory (the web server's), instead of its
    environment variable."""
    backend = find_backend(spec.kind)
    if api_key is not None and not backend.traits.needs_key:
        raise ConfigError(f"the {spec.kind} backend takes no API key")
    if not isinstance(spec.options, backend.options):  # only for a spec built without validation
        raise ConfigError(f"the {spec.kind} backend's options are not {type(spec.options).__name__}")
    return backend.build(spec.model, spec.options, spec.limits(), api_key)


def managed(spec: ProviderSpec, cache_path: Path | None) -> ManagedProvider:
    """The provider with its concurrency limit, timeout, retries and (unless disabled) response cache."""
    return ManagedProvider(
        provider=make_provider(spec),
        policy=RetryPolicy(retries=spec.retries, timeout_s=spec.timeout_s),
        cache=ResponseCache(cache_path) if cache_path is not None else None,
        concurrency=None if spec.options.endpoints() > 1 else spec.concurrency,  # a pool's is per endpoint
    )


ROUTABLE_ROLES = ("single", "strict", "lenient", "neutral_a", "neutral_b")
"""Roles whose calls can go to their own backend (``--role-provider``): the judges of the consensus paper."""


def parse_role_provider(
    text: str, base: ProviderSpec, given: Mapping[str, Any] | None = None
) -> tuple[str, ProviderSpec]:
    """``ROLE=KIND[:MODEL][@BASE_URL]`` -> (role, spec): e.g. ``lenient=openai:gemma-3-4b@http://host:8000/v1``,
    ``strict=llamacpp:/models/big.gguf``, ``lenient=llamacpp`` (the embedded model). The call settings (timeout,
    retries, concurrency) come from ``base``, the kind's other options from ``given`` (the options a command was
    given, flat), else ``base``'s, else their defaults."""
    role, sep, rest = text.partition("=")
    role = role.strip()
    if not sep or not rest.strip():
        raise ConfigError(f"--role-provider takes ROLE=KIND[:MODEL][@BASE_URL]; got {text!r}")
    if role not in ROUTABLE_ROLES:
        raise ConfigError(f"--role-provider: role must be one of {', '.join(ROUTABLE_ROLES)}; got {role!r}")
    head, _, url = rest.strip().partition("@")
    kind, _, model = head.partition(":")
    try:
        backend = find_backend(kind)
    except ConfigError:
        raise ConfigError(f"--role-provider: backend must be {backend_choices()}; got {kind!r}") from None
    fields = {**base.flat(), **(given or {}), "kind": kind, "model": None}
    fields.update(backend.role_fields(role, model, url))
    return role, ProviderSpec.model_validate(fields)
