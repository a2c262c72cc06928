"""madrag's own backends: ``llamacpp`` (the embedded model, the default), ``openai`` (any OpenAI-compatible
server) and ``fake`` (canned answers, for tests), each an options model, traits and a factory registered with
:func:`~madrag.providers.backends.register_backend`; the backend modules are imported only when a provider of
their kind is built."""

from __future__ import annotations

from pydantic import SecretStr

from madrag.errors import ConfigError
from madrag.providers.adapt import SamplingParams, TokenParam
from madrag.providers.backends import BackendOptions, BackendTraits, CallLimits, option, register_backend
from madrag.providers.base import Provider
from madrag.providers.openai_http import DEFAULT_BASE_URL as OPENAI_URL
from madrag.providers.runtimes import DEFAULT_RUNTIME, LlamaRuntime


class LlamaCppOptions(BackendOptions):
    """The embedded model: a GGUF file run in-process."""

    model_path: str | None = option(None, "A GGUF file for llamacpp.", path=True)
    runtime: LlamaRuntime = option(
        DEFAULT_RUNTIME,
        "llamacpp: what runs the model in-process: openvino-genai (OpenVINO GenAI on the model's F16 copy: top "
        "alternatives at the first token and at numbers only), xllamacpp (llama.cpp from a prebuilt wheel: every "
        "run's default before 2026-12-07) or llama-cpp-python (pip install 'madrag[llama-cpp-python]'; what "
        "answered every run made before this option, which resumes only with it). A run resumes only on its own.",
    )
    # 2 measured 1.42x the calls/s of 1 on 2 cores (bench/embedded_slots.py)
    slots: int = option(2, "llamacpp: parallel model contexts (CPU threads are shared).", operational=True, ge=1)
    n_ctx: int = option(8192, "llamacpp: the context length.", cli=False)

    def tiny_default(self) -> bool:
        return self.model_path is None

    def own_capacity(self) -> bool:
        return True


def _llamacpp(model: str | None, o: LlamaCppOptions, limits: CallLimits, api_key: SecretStr | None) -> Provider:
    from madrag.providers.llamacpp import LlamaCppProvider

    return LlamaCppProvider(model_path=o.model_path, n_ctx=o.n_ctx, slots=o.slots, runtime=o.runtime)


def _llamacpp_role_fields(role: str, model: str, url: str) -> dict[str, object]:
    return {"model_path": model or None}


class OpenAIOptions(BackendOptions):
    """An OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp's server, ...)."""

    base_url: str | None = option(
        None,
        "OpenAI-compatible server URL (OpenAI's when none is given: https://api.openai.com/v1); again for more "
        "servers of the same model (calls balanced).",
        repeat_into="extra_base_urls",
    )
    # more endpoints serving the same model; calls are balanced over base_url and these (madrag.providers.pool)
    extra_base_urls: list[str] = option(None, "", operational=True, cli=False, default_factory=list)
    api_key_env: str = option("OPENAI_API_KEY", "Environment variable holding the API key.")
    logprobs: bool = option(True, "Whether the openai server returns logprobs.")
    token_param: TokenParam = option(
        "auto",
        "openai: send the token limit as max_tokens or max_completion_tokens (reasoning models); auto: "
        "max_tokens until the server refuses it, then max_completion_tokens for the rest of the run.",
    )
    sampling_params: SamplingParams = option(
        "auto",
        "openai: send temperature and top_p (send), never (omit), or until the server refuses one, as "
        "reasoning models do (auto: then left out for the rest of the run; every call records what was sent).",
    )

    def endpoints(self) -> int:
        return 1 + len(self.extra_base_urls)


def _openai(model: str | None, o: OpenAIOptions, limits: CallLimits, api_key: SecretStr | None) -> Provider:
    from madrag.providers.openai_compat import OpenAICompatProvider, RequestShape

    if not model:
        raise ConfigError("the openai provider needs --model (the model name the server serves)")
    shape = RequestShape(token_param=o.token_param, sampling_params=o.sampling_params)
    endpoints = [
        OpenAICompatProvider(
            model=model,
            base_url=url,
            api_key_env=o.api_key_env,
            timeout_s=limits.timeout_s,
            max_concurrency=limits.concurrency or 8,
            supports_logprobs=o.logprobs,
            shape=shape,
            api_key=api_key,
        )
        for url in [o.base_url, *o.extra_base_urls]
    ]
    if len(endpoints) == 1:
        return endpoints[0]
    from madrag.providers.pool import EndpointPool

    return EndpointPool(endpoints)


def _openai_role_fields(role: str, model: str, url: str) -> dict[str, object]:
    if not model:
        raise ConfigError(f"--role-provider {role}: an openai backend needs a model name (openai:MODEL)")
    return {"model": model, **({"base_url": url, "extra_base_urls": []} if url else {})}


class FakeOptions(BackendOptions):
    """Canned answers (for tests and trying madrag out)."""

    fake_latency_s: float = option(
        0.0, "fake provider: seconds per call.", flag="--fake-latency", cli="hidden", operational=True
    )


def _fake(model: str | None, o: FakeOptions, limits: CallLimits, api_key: SecretStr | None) -> Provider:
    from madrag.providers.fake import FakeProvider

    return FakeProvider(latency_s=o.fake_latency_s)


def _no_role_fields(role: str, model: str, url: str) -> dict[str, object]:
    return {}


register_backend(
    "llamacpp",
    LlamaCppOptions,
    _llamacpp,
    BackendTraits(
        label="embedded, offline",
        offer="The tiny embedded model (offline, no key): it shows the pipeline working, its scores are not grades",
        named="embedded model",
        valid_grades=False,
        not_grades="is a small offline model for trying madrag out",
    ),
    _llamacpp_role_fields,
)
register_backend(
    "openai",
    OpenAIOptions,
    _openai,
    BackendTraits(
        label="OpenAI-compatible: OpenAI, Ollama, vLLM, llama.cpp",
        remote=True,
        connection_test=True,
        needs_key=True,
        needs_model=True,
        default_url=OPENAI_URL,
    ),
    _openai_role_fields,
)
register_backend(
    "fake",
    FakeOptions,
    _fake,
    BackendTraits(
        label="canned answers, for tests",
        offer="The fake backend (canned answers, to try the app): its scores are not grades",
        named="fake backend (canned answers)",
        valid_grades=False,
        not_grades="is for trying the app out",
    ),
    _no_role_fields,
)
