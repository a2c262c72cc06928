"""Request parameters an OpenAI-compatible server refuses, and how a run adapts to them once.

OpenAI's reasoning models (the o-series, the GPT-5 family) answer HTTP 400 to ``max_tokens`` ("Unsupported
parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.") and to a
``temperature`` or ``top_p`` other than the default ("Unsupported value: 'temperature' does not support 0.7 with
this model. Only the default (1) value is supported."). A :class:`RequestAdapter` turns a request's parameters
into the body actually sent: with ``token_param="auto"`` and ``sampling_params="auto"`` it sends them as asked
until the server refuses one, then (once per run: the adapter lives as long as the provider) sends
``max_completion_tokens`` instead of ``max_tokens`` or leaves the refused sampling parameter out, says so on
stderr, and every later request of the run is sent the adapted way. What each request was sent is recorded
with its call (:meth:`RequestAdapter.sent`).
"""

from __future__ import annotations

import logging
import re
from typing import Any, Literal

from madrag.errors import hint

log = logging.getLogger(__name__)

TokenParam = Literal["auto", "max_tokens", "max_completion_tokens"]
"""Which parameter carries a request's token limit; ``auto``: ``max_tokens`` until the server refuses it."""

SamplingParams = Literal["auto", "send", "omit"]
"""Whether ``temperature`` and ``top_p`` are sent; ``auto``: sent until the server refuses one, then left out."""

SAMPLING = ("temperature", "top_p")
"""The sampling parameters a reasoning model accepts only at their default (so they can be left out)."""

MAX_ADAPTATIONS = 4
"""How many times one request is sent at most while adapting (a refusal names one parameter at a time)."""

_REFUSED = re.compile(r"unsupported (?:parameter|value)\W+([a-z_]+)", re.IGNORECASE)
"""The parameter an OpenAI 400 answer names (``Unsupported parameter: 'max_tokens' ...``)."""


def refused_parameter(message: str) -> str | None:
    """The request parameter a server's error message says it does not accept, or None."""
    found = _REFUSED.search(message)
    return found.group(1).lower() if found else None


class RequestAdapter:
    """The body a request is sent with, adapted to what the server refused earlier in the run."""

    def __init__(self, token_param: TokenParam = "auto", sampling_params: SamplingParams = "auto") -> None:
        self.token_param: TokenParam = token_param
        self.sampling_params: SamplingParams = sampling_params
        self._completion_tokens = token_param == "max_completion_tokens"
        self._omit: set[str] = set(SAMPLING) if sampling_params == "omit" else set()
        self.adaptations: list[str] = []
        """What the run changed after a refusal, in order (each said once on stderr)."""

    def body(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` as sent now: the token limit under the chosen name, refused sampling parameters left out."""
        body = {k: v for k, v in kwargs.items() if k not in self._omit}
        if self._completion_tokens and "max_tokens" in body:
            body["max_completion_tokens"] = body.pop("max_tokens")
        return body

    @staticmethod
    def sent(body: dict[str, Any]) -> dict[str, Any]:
        """What a call records of the body it was sent: every parameter but the messages, the response format
        and the model (recorded on their own), plus ``omitted``: the sampling parameters left out."""
        kept = {k: v for k, v in body.items() if k not in ("messages", "response_format", "model")}
        omitted = [p for p in SAMPLING if p not in body]
        return {**kept, "omitted": omitted} if omitted else kept

    def adapt(self, message: str, body: dict[str, Any]) -> bool:
        """After the server refused ``body`` with ``message``: whether the request should be sent again (the
        refused parameter is one this adapter may change, and the next body no longer carries it)."""
        param = refused_parameter(message)
        if param is None or param not in body:
            return False
        if param == "max_tokens" and self.token_param == "auto":
            if not self._completion_tokens:
                self._completion_tokens = True
                self._say("the server refused 'max_tokens': sending 'max_completion_tokens' from now on")
            return True
        if param in SAMPLING and self.sampling_params == "auto":
            if param not in self._omit:
                self._omit.add(param)
                self._say(
                    f"the server refused {param}={body[param]!r}: leaving {param!r} out from now on "
                    "(the model's default is used)"
                )
            return True
        return False

    def hint(self, message: str) -> str:
        """A suggestion to add to a refusal this adapter did not adapt to ("" when it has none)."""
        param = refused_parameter(message)
        if param == "max_tokens" and self.token_param == "max_tokens":
            return f" ({hint('token-param')})"
        if param in SAMPLING and self.sampling_params == "send":
            return f" ({hint('sampling-params')})"
        if "logprobs" in message.lower():
            return f" ({hint('no-logprobs')})"
        return ""

    def _say(self, what: str) -> None:
        self.adaptations.append(what)
        log.warning("%s", what)
