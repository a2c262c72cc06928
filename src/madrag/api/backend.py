"""The provider argument of the Python API: a string, a :class:`ProviderSpec` or a ready :class:`Provider`.

Strings use the CLI's ``--role-provider`` syntax without the role (one parser for both): ``"llamacpp"`` (the
embedded model), ``"llamacpp:/models/big.gguf"``, ``"openai:MODEL"``, ``"openai:MODEL@http://host:8000/v1"``,
``"fake"`` (canned answers, for tests and trying the API out), and ``"KIND[:MODEL]"`` of any backend registered
with :func:`~madrag.providers.backends.register_backend` (a plugin's too: its ``role_fields`` reads the text).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

from madrag.errors import ConfigError
from madrag.providers import ProviderSpec, parse_role_provider
from madrag.providers.base import Provider

ProviderLike: TypeAlias = str | ProviderSpec | Provider
"""A backend: ``"llamacpp"``, ``"llamacpp:PATH.gguf"``, ``"openai:MODEL[@URL]"``, ``"fake"``, a
:class:`ProviderSpec` or a :class:`Provider` instance."""

SYNTAX = "llamacpp[:MODEL.gguf], openai:MODEL[@BASE_URL] or fake"


def parse_provider(text: str, base: ProviderSpec | None = None) -> ProviderSpec:
    """A provider string as a spec; operational settings (timeout, retries, concurrency) come from ``base``.

    >>> spec = parse_provider("openai:gpt-4o-mini@http://localhost:8000/v1")
    >>> (spec.kind, spec.model, spec.base_url)
    ('openai', 'gpt-4o-mini', 'http://localhost:8000/v1')
    """
    try:
        return parse_role_provider(f"single={text.strip()}", base or ProviderSpec())[1]
    except ConfigError as exc:
        raise ConfigError(f"provider {text!r}: expected {SYNTAX}") from exc


def resolve_provider(provider: ProviderLike) -> tuple[ProviderSpec, Provider | None]:
    """(spec, instance): a string or spec gives the spec the job builds its backend from; an instance is
    used as it is (the spec then only carries the default retry and timeout settings)."""
    if isinstance(provider, Provider):
        return ProviderSpec(), provider
    if isinstance(provider, ProviderSpec):
        return provider, None
    if isinstance(provider, str):
        return parse_provider(provider), None
    raise ConfigError(f"provider: expected a string ({SYNTAX}), a ProviderSpec or a Provider; got {provider!r}")


def resolve_role_providers(
    roles: Mapping[str, str | ProviderSpec] | None, base: ProviderSpec
) -> dict[str, ProviderSpec]:
    """Backends for single judge roles of the consensus protocols (the consensus paper), as ``--role-provider`` takes
    them: ``{"lenient": "openai:gemma-3-4b@http://host/v1"}``."""
    out: dict[str, ProviderSpec] = {}
    for role, value in (roles or {}).items():
        if isinstance(value, ProviderSpec):
            parse_role_provider(f"{role}=fake", base)  # the role name is checked by the CLI's parser
            out[role] = value
        else:
            out[role] = parse_role_provider(f"{role}={value.strip()}", base)[1]
    return out
