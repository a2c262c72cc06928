"""Reading an OpenAI-compatible chat completion: its JSON parsed (``orjson``) and checked, then built into a
:class:`~madrag.providers.base.ChatResponse` (the answer half of
:class:`~madrag.providers.openai_compat.OpenAICompatProvider`).

Every field madrag uses is checked (tokens must be strings, logprobs finite numbers) and anything else is
"server answered garbage". The generated tokens are validated straight from the parsed ``logprobs.content`` into
:class:`TokenLogprob` models in one pydantic-core call (no object built per token or alternative that is then
dropped). The response's ``raw`` is the parsed JSON exactly as the server sent it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pydantic_core
from pydantic import TypeAdapter, ValidationError

from madrag.errors import ProviderError
from madrag.providers.base import ChatRequest, ChatResponse, TokenLogprob, Usage

NO_LOGPROBS = (
    "returned no logprobs although they were requested (model {model!r}), as several backends do: rerun with "
    "--no-logprobs (Python API: ProviderSpec(kind='openai', ..., logprobs=False)); the debaters' confidence is "
    "then self-reported (confidence_source: self_reported) instead of their first token's probability, and "
    "the Judge's score distribution is not read"
)
"""What a server that ignores the logprobs request is told (after where it is): the CLI flag and the Python API
argument that turn logprobs off, and what that changes."""

_TOKENS: TypeAdapter[list[TokenLogprob]] = TypeAdapter(list[TokenLogprob])
"""Builds a response's tokens (with their alternatives) from plain dicts in one pydantic-core call: from the
wire's ``logprobs.content`` as parsed (``top_logprobs`` is read into ``top``), or from checked dicts."""


@dataclass(frozen=True)
class AnswerReader:
    """Reads the answers of one server: ``model``, the model asked for (an answer that names none is its);
    ``where``, the server as an error names it; ``scrub``, what an error's detail is passed through (no key)."""

    model: str
    where: str
    scrub: Callable[[str], str]

    def garbage(self, detail: str) -> str:
        """The "server answered garbage" message."""
        return f"server answered garbage ({self.where}): {self.scrub(detail)}"

    def response(self, request: ChatRequest, body: bytes, latency: float) -> ChatResponse:
        """A :class:`ChatResponse` from the body of a chat completion; ``raw`` is the parsed JSON as sent."""
        try:
            data, finite = parse_json(body)
        except ValueError:  # not JSON (or not UTF-8)
            raise ProviderError(self.garbage(f"not JSON: {body[:80]!r}")) from None
        if not isinstance(data, dict):
            raise ProviderError(self.garbage(f"not a chat completion: {str(data)[:80]!r}"))
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            error = data.get("error")
            if error is not None:
                raise ProviderError(self.garbage(f"an error instead of a completion: {str(error)[:120]}"))
            raise ProviderError(self.garbage("no choices in the response"))
        choice = choices[0]
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise ProviderError(self.garbage("the first choice has no message"))
        text = message.get("content")
        if text is None:
            text = ""
        elif not isinstance(text, str):
            raise ProviderError(self.garbage("message content is not text"))
        finish_reason = choice.get("finish_reason")
        if finish_reason is not None and not isinstance(finish_reason, str):
            raise ProviderError(self.garbage(f"finish_reason is not text: {finish_reason!r}"))
        model = data.get("model")
        usage = data.get("usage")
        if usage is not None and not isinstance(usage, dict):
            raise ProviderError(self.garbage(f"usage is not an object: {usage!r}"))
        usage = usage or {}
        return ChatResponse(
            text=text,
            tokens=self.tokens(request, choice, text, finite) if request.logprobs else None,
            finish_reason=finish_reason,
            usage=Usage(
                prompt_tokens=self.count(usage.get("prompt_tokens")),
                completion_tokens=self.count(usage.get("completion_tokens")),
                cached_prompt_tokens=self.count(cached_tokens(usage)),
            ),
            latency_s=latency,
            model=model if isinstance(model, str) and model else self.model,
            raw=data,
        )

    def count(self, value: Any) -> int | None:
        """A reported token count; None (unknown) when the server reported none."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ProviderError(self.garbage(f"a token count is not a count: {value!r}"))
        return value

    def tokens(self, request: ChatRequest, choice: dict[str, Any], text: str, finite: bool) -> list[TokenLogprob]:
        """The generated tokens with their logprobs and (up to ``top_logprobs``) alternatives.

        ``finite``: the JSON was parsed by orjson, so every number in it is finite. Then the parsed
        ``logprobs.content`` is validated into the models as it is, in one pydantic-core call in strict mode
        (tokens must be strings, logprobs numbers); otherwise, or when that fails, by :meth:`checked_tokens`.
        """
        logprobs = choice.get("logprobs")
        if logprobs is not None and not isinstance(logprobs, dict):
            raise ProviderError(self.garbage(f"logprobs is not an object: {str(logprobs)[:80]!r}"))
        content = None if logprobs is None else logprobs.get("content")
        if content is None:
            if text == "":
                return []
            raise ProviderError(f"{self.where} {NO_LOGPROBS.format(model=self.model)}")
        if not isinstance(content, list):
            raise ProviderError(self.garbage(f"logprobs.content is not a list: {str(content)[:80]!r}"))
        top_n = request.top_logprobs
        if finite:
            try:
                tokens = _TOKENS.validate_python(content, strict=True)
            except ValidationError:
                return self.checked_tokens(content, top_n)
            for token in tokens:
                if len(token.top) > top_n:  # more alternatives than asked for: the first top_n
                    token.top = token.top[:top_n]
            return tokens
        return self.checked_tokens(content, top_n)

    def checked_tokens(self, content: list[Any], top_n: int) -> list[TokenLogprob]:
        """The tokens of ``logprobs.content`` checked entry by entry (finite logprobs, ``top_logprobs`` null or
        absent taken as none), built from checked dicts; "server answered garbage" naming the first bad entry."""
        finite = math.isfinite
        items: list[dict[str, Any]] = []
        append = items.append
        try:
            for item in content:
                logprob = item["logprob"]
                if not finite(logprob):
                    raise ValueError
                top = []
                for alt in (item.get("top_logprobs") or ())[:top_n]:
                    alt_logprob = alt["logprob"]
                    if not finite(alt_logprob):
                        raise ValueError
                    top.append({"token": alt["token"], "logprob": alt_logprob})
                append({"token": item["token"], "logprob": logprob, "top": top})
            return _TOKENS.validate_python(items, strict=True)
        except (LookupError, TypeError, ValueError, AttributeError, OverflowError):
            raise ProviderError(self.garbage(bad_token(content, top_n))) from None


def bad_token(content: list[Any], top_n: int) -> str:
    """What is wrong with the first bad entry of ``logprobs.content`` (only run on garbage)."""

    def problem(entry: Any) -> str | None:
        if not isinstance(entry, dict):
            return f"not an object: {str(entry)[:60]!r}"
        token, logprob = entry.get("token"), entry.get("logprob")
        if not isinstance(token, str):
            return f"a token is not text: {token!r}"[:100]
        if isinstance(logprob, bool) or not isinstance(logprob, int | float) or not math.isfinite(logprob):
            return f"a logprob is not a finite number: {logprob!r}"[:100]
        return None

    for i, item in enumerate(content):
        if (found := problem(item)) is not None:
            return f"logprobs of token {i}: {found}"
        alts = item.get("top_logprobs") or []
        if not isinstance(alts, list):
            return f"top_logprobs of token {i} is not a list"
        for alt in alts[:top_n]:
            if (found := problem(alt)) is not None:
                return f"an alternative to token {i}: {found}"
    return "malformed logprobs"


def parse_json(body: bytes) -> tuple[Any, bool]:
    """(the JSON of ``body``, whether every number in it is finite): by orjson, which refuses NaN and Infinity
    (True), else by pydantic-core, which reads those too, so that a check can name the bad value (False);
    ValueError when neither can."""
    try:
        return orjson.loads(body), True
    except orjson.JSONDecodeError:
        return pydantic_core.from_json(body), False


def cached_tokens(usage: dict[str, Any]) -> Any:
    """``usage.prompt_tokens_details.cached_tokens``: the prompt tokens served from the server's prefix cache
    (None when the server does not say, as llama-cpp-python's does not)."""
    details = usage.get("prompt_tokens_details")
    return details.get("cached_tokens") if isinstance(details, dict) else None
