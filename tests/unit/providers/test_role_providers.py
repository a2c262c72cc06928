"""``--role-provider``: one judge role of the consensus protocols on its own backend (the consensus paper
cross-model pairs)."""

from __future__ import annotations

import pytest

from madrag.errors import ConfigError
from madrag.providers.spec import ProviderSpec, parse_role_provider, spec_identity


def test_parse_role_provider_keeps_operational_settings_of_the_base() -> None:
    base = ProviderSpec(kind="openai", model="big", base_url="http://a/v1", timeout_s=30.0, retries=1, concurrency=8)
    role, spec = parse_role_provider("lenient=openai:small@http://b/v1", base)
    assert role == "lenient" and (spec.kind, spec.model, spec.base_url) == ("openai", "small", "http://b/v1")
    assert (spec.timeout_s, spec.retries, spec.concurrency) == (30.0, 1, 8)
    _, same_server = parse_role_provider("strict=openai:other", base)
    assert same_server.base_url == "http://a/v1" and same_server.model == "other"
    _, local = parse_role_provider("strict=llamacpp:/models/x.gguf", base)
    assert (local.kind, local.model_path, local.model) == ("llamacpp", "/models/x.gguf", None)
    assert "base_url" not in local.flat()  # the embedded model reads no server address
    _, embedded = parse_role_provider("neutral_b=llamacpp", base)
    assert embedded.model_path is None and spec_identity(embedded) != spec_identity(base)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("lenient", "ROLE=KIND"),
        ("advocate=fake", "role must be one of"),
        ("lenient=vllm:x", "backend must be"),
        ("lenient=openai", "needs a model name"),
    ],
)
def test_parse_role_provider_rejects_bad_input(text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        parse_role_provider(text, ProviderSpec())
