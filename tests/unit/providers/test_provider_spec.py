"""Provider specs and the backend registry; a backend's capacity; the role labels of a request (never hashed,
never recorded) and the fake provider answering by them."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from madrag.errors import ConfigError
from madrag.providers import backends as registry
from madrag.providers.backends import BackendOptions, BackendTraits, CallLimits, backend_kinds, register_backend
from madrag.providers.base import ChatRequest, Message
from madrag.providers.fake import FakeProvider, request_role
from madrag.providers.openai_compat import OpenAICompatProvider
from madrag.providers.spec import ProviderSpec, make_provider, managed, parse_role_provider, spec_identity

ADVOCATE_WORDING = [Message(role="system", content="You are an Advocate Agent."), Message(role="user", content="Go.")]


def test_builtin_kinds_and_an_unknown_kind() -> None:
    assert backend_kinds() == ("llamacpp", "openai", "fake", "anthropic")
    with pytest.raises(ValidationError, match="unknown provider 'vllm'; choose llamacpp, openai, fake or anthropic"):
        ProviderSpec(kind="vllm")
    with pytest.raises(ConfigError, match="unknown provider 'vllm'"):
        make_provider(ProviderSpec.model_construct(kind="vllm"))


def test_make_provider_builds_each_builtin_kind() -> None:
    fake = make_provider(ProviderSpec(kind="fake", fake_latency_s=0.25))
    assert isinstance(fake, FakeProvider) and fake.latency_s == 0.25
    with pytest.raises(ConfigError, match="needs --model"):
        make_provider(ProviderSpec(kind="openai"))
    openai = make_provider(ProviderSpec(kind="openai", model="m", base_url="http://h/v1", concurrency=3))
    assert isinstance(openai, OpenAICompatProvider) and (openai.model, openai.max_concurrency) == ("m", 3)
    default = make_provider(ProviderSpec(kind="openai", model="m"))
    assert default.max_concurrency == 8


def test_a_registered_backend_is_a_kind_a_spec_can_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_BACKENDS", dict(registry._BACKENDS))  # undone after the test

    def build(model: str | None, options: BackendOptions, limits: CallLimits, key: object) -> FakeProvider:
        return FakeProvider(model_name=model or "echo-default", concurrency=5)

    register_backend("echo", BackendOptions, build, BackendTraits(label="echo"))
    assert backend_kinds()[-1] == "echo"
    provider = make_provider(ProviderSpec(kind="echo", model="e1"))
    assert isinstance(provider, FakeProvider) and provider.model == "e1"
    role, routed = parse_role_provider("strict=echo:e2", ProviderSpec(kind="fake", retries=1))
    assert (role, routed.kind, routed.model, routed.retries) == ("strict", "echo", "e2", 1)
    with pytest.raises(ConfigError, match="backend must be llamacpp, openai, fake, anthropic or echo; got 'nope'"):
        parse_role_provider("strict=nope", ProviderSpec())


def test_spec_identity_leaves_out_operational_settings() -> None:
    a = ProviderSpec(kind="openai", model="m", concurrency=2, timeout_s=5.0, retries=0, slots=1)
    b = ProviderSpec(kind="openai", model="m")
    assert spec_identity(a) == spec_identity(b)
    assert spec_identity(a) != spec_identity(ProviderSpec(kind="openai", model="other"))


def test_capacity_is_the_backends_unless_the_policy_caps_it(tmp_path: Path) -> None:
    assert FakeProvider(concurrency=5).max_concurrency == 5
    assert managed(ProviderSpec(kind="fake"), None).max_concurrency == FakeProvider().max_concurrency
    assert managed(ProviderSpec(kind="fake", concurrency=3), tmp_path / "cache.sqlite").max_concurrency == 3


def test_role_labels_are_not_part_of_the_request_identity() -> None:
    plain = ChatRequest(messages=ADVOCATE_WORDING, seed=1)
    labelled = ChatRequest(messages=ADVOCATE_WORDING, seed=1, role="judge", trait="Ideas", round=2)
    assert (labelled.role, labelled.trait, labelled.round) == ("judge", "Ideas", 2)
    assert labelled.model_dump() == plain.model_dump()
    assert labelled.model_dump_json() == plain.model_dump_json()
    backend = {"provider": "fake", "model": "m"}
    assert labelled.cache_key(backend) == plain.cache_key(backend)
    openai = OpenAICompatProvider("m", base_url="http://h/v1")
    assert openai.request_kwargs(labelled) == openai.request_kwargs(plain)


async def test_the_fake_answers_by_role_not_by_wording() -> None:
    fake = FakeProvider()
    as_skeptic = await fake.complete(ChatRequest(messages=ADVOCATE_WORDING, role="skeptic"))
    as_advocate = await fake.complete(ChatRequest(messages=ADVOCATE_WORDING, role="advocate"))
    unlabelled = await fake.complete(ChatRequest(messages=ADVOCATE_WORDING))
    assert "thin" in as_skeptic.text and "on topic" in as_advocate.text
    assert unlabelled.text.endswith("Final score: 1")  # no label: a Judge-like answer, whatever the wording
    assert request_role(ChatRequest(messages=ADVOCATE_WORDING)) == "other"
    assert {request_role(ChatRequest(messages=ADVOCATE_WORDING, role=r)) for r in ("neutral_a", "neutral_b")} == {
        "neutral"
    }
