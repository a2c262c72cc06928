"""The one Provider interface every LLM backend implements.

A call takes a :class:`ChatRequest` (messages and decoding settings) and returns a :class:`ChatResponse`
(text, generated tokens with their logprobs and top alternatives, usage, latency, raw response).

Two optional request features let the pipeline make the Judge's score position reliable:

* ``prefill``: text the assistant turn starts with; the model continues it. Only providers whose
  ``capabilities.prefill`` is True accept it.
* ``choices``: the first generated token must be one of these strings; the response's ``choice_logprobs``
  holds the model's log-probability of each choice at that position (before the restriction). Only providers
  whose ``capabilities.choices`` is True accept it.

A provider that cannot do what a request asks raises :class:`ProviderError`: never a silent fallback. The
pipeline checks ``capabilities`` first and records which mode it actually used.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant"]
"""Who speaks a chat message."""


class Message(BaseModel):
    """One chat message."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str


class ChatRequest(BaseModel):
    """Everything that determines a completion; its :meth:`cache_key` identifies it fully.

    ``role``, ``trait`` and ``round`` say which agent call the request belongs to (e.g. ``judge``, ``Ideas``,
    1), so a scripted provider can answer by role rather than by prompt wording. They are labels, not part of
    the completion: left out of every dump (so of :meth:`cache_key` and of what a run records) and never sent
    to a backend.
    """

    model_config = ConfigDict(frozen=True)

    messages: list[Message] = Field(min_length=1)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=512, ge=1)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int = Field(default=0, ge=0, le=20)
    stop: list[str] = Field(default_factory=list)
    json_schema: dict[str, Any] | None = None
    grammar: str | None = None  # a GBNF grammar, for llama.cpp backends
    prefill: str | None = None
    choices: list[str] | None = None
    role: str | None = Field(default=None, exclude=True)
    trait: str | None = Field(default=None, exclude=True)
    round: int | None = Field(default=None, exclude=True)

    def cache_key(self, backend: Mapping[str, Any]) -> str:
        """SHA-256 of the full request plus the backend's identity (what answers it: see
        :meth:`Provider.cache_identity` and :meth:`Provider.server_identity`)."""
        payload = {"backend": dict(backend), "request": self.model_dump(mode="json"), "key_version": 2}
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")
        return hashlib.sha256(blob).hexdigest()


class TopLogprob(BaseModel):
    """An alternative token at a generated position, with its log-probability."""

    token: str
    logprob: float


class TokenLogprob(BaseModel):
    """One generated token with its log-probability and the top alternatives at its position.

    ``top`` is also read from ``top_logprobs`` (the OpenAI wire name), so an OpenAI-compatible answer's
    ``logprobs.content`` validates into these models in one call, without a dict built per token."""

    token: str
    logprob: float
    top: list[TopLogprob] = Field(default_factory=list, validation_alias=AliasChoices("top_logprobs", "top"))


def _plus(a: int | None, b: int | None) -> int | None:
    """The sum of two token counts; unknown (None) when either is."""
    return None if a is None or b is None else a + b


class Usage(BaseModel):
    """Token counts of one or more requests as the server reported them; ``None`` where it reported none
    (unknown, never 0). A sum with an unknown count is unknown."""

    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0
    # of the prompt tokens, those the server says it served from its prefix cache (OpenAI-compatible servers:
    # ``usage.prompt_tokens_details.cached_tokens``); None when it did not say (unknown, never 0)
    cached_prompt_tokens: int | None = None

    @classmethod
    def zero(cls) -> Usage:
        """The counts of no request (every count 0, the cached ones too): where a sum over requests starts, so
        that the sum's cached count is known when every request's is (``Usage()`` leaves it unknown)."""
        return cls(prompt_tokens=0, completion_tokens=0, cached_prompt_tokens=0)

    @property
    def known(self) -> bool:
        """Whether both counts were reported."""
        return self.prompt_tokens is not None and self.completion_tokens is not None

    def __add__(self, other: Usage) -> Usage:
        """The counts of both."""
        return Usage(**{f: _plus(getattr(self, f), getattr(other, f)) for f in Usage.model_fields})


class ChatResponse(BaseModel):
    """A completion: its text, generated tokens with logprobs (when asked for), usage, latency, raw answer."""

    text: str
    tokens: list[TokenLogprob] | None = None  # None when the backend gave no logprobs
    choice_logprobs: dict[str, float] | None = None  # set when the request had ``choices``
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    model: str = ""
    cached: bool = False
    raw: dict[str, Any] = Field(default_factory=dict)
    # the request parameters the backend actually sent, when it adapts them to what the server accepts (an
    # OpenAI reasoning model gets ``max_completion_tokens`` and no ``temperature``); None: sent as requested
    sent: dict[str, Any] | None = None
    # why each failed attempt before this answer was retried (set by the retry policy; empty from the cache)
    retries: list[str] = Field(default_factory=list)


class Capabilities(BaseModel):
    """What a backend can do (see the module docstring); the pipeline checks these before asking."""

    model_config = ConfigDict(frozen=True)

    logprobs: bool = False
    max_top_logprobs: int = 0
    prefill: bool = False
    choices: bool = False
    grammar: bool = False
    json_schema: bool = False
    seed: bool = False


class Provider(ABC):
    """Async interface to one LLM. Subclasses set ``name``/``model``/``capabilities``, implement
    :meth:`_complete` and, when they serve more than one request at a time, :attr:`max_concurrency`."""

    name: str = "provider"
    model: str = ""
    capabilities: Capabilities = Capabilities()
    # computed in this process (the embedded model): a call cut off by a timeout would throw away its work
    # and start again from nothing, so the call policy gives it none (a remote call keeps its timeout)
    in_process: bool = False
    # hands its slots to waiting requests itself (the embedded model: a slot to the request that continues the
    # prompt it evaluated last), so the call policy lets every request through to it instead of queueing them
    queues_requests: bool = False

    @property
    def max_concurrency(self) -> int:
        """Requests this backend serves at once (its slots): how many the pipeline keeps in flight. One unless
        a backend says otherwise."""
        return 1

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """The completion of ``request``; :class:`ProviderError` when this backend cannot honour it."""
        self.check(request)
        return await self._complete(request)

    @abstractmethod
    async def _complete(self, request: ChatRequest) -> ChatResponse:
        """The backend's own call, for a request :meth:`check` has accepted."""

    def check(self, request: ChatRequest) -> None:
        """Refuse, loudly, a request this backend cannot honour."""
        from madrag.errors import ProviderError

        caps = self.capabilities
        if request.prefill is not None and not caps.prefill:
            raise ProviderError(f"{self.name} cannot continue an assistant prefill")
        if request.choices is not None and not caps.choices:
            raise ProviderError(f"{self.name} cannot constrain a token to choices")
        if request.grammar is not None and not caps.grammar:
            raise ProviderError(f"{self.name} does not support grammars")
        if request.logprobs and not caps.logprobs:
            raise ProviderError(f"{self.name} ({self.model}) gives no logprobs")

    def describe(self) -> dict[str, Any]:
        """What the run store records about this backend (never a secret)."""
        return {"provider": self.name, "model": self.model, "capabilities": self.capabilities.model_dump()}

    def cache_identity(self) -> dict[str, Any]:
        """What makes this backend's answers its own, for the response cache's key: its kind and model, and
        whatever else tells it apart from another backend under the same names (a server's URL, a model file).
        Never a secret."""
        return {"provider": self.name, "model": self.model}

    async def server_identity(self) -> Any:
        """What the server behind this backend reports of itself (e.g. the models it lists), asked once per run
        for the response cache's key; None when it has nothing to report. A
        :class:`~madrag.errors.TransientProviderError` when it could not be asked."""
        return None

    async def check_reachable(self) -> None:  # noqa: B027 - optional hook
        """A one-line :class:`~madrag.errors.ProviderError` when the backend cannot be reached at all (a run's
        check before its first call); nothing to check for a backend in this process."""

    async def check_logprobs(self) -> None:  # noqa: B027 - optional hook
        """A one-line :class:`~madrag.errors.ProviderError` when the backend says it gives logprobs but answers
        a short request without them (a run's check before its first call, made only when
        ``capabilities.logprobs``); nothing to check for a backend that computes them itself."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections or model memory."""
