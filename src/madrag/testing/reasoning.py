"""What an OpenAI reasoning model (o-series, GPT-5 family) refuses, as the stub server emulates it.

Such a model answers HTTP 400 to ``max_tokens`` (it takes ``max_completion_tokens``), to a ``temperature`` or
``top_p`` other than the default 1, and to ``logprobs``; the answer is OpenAI's error JSON, one refused
parameter at a time. :func:`refusal` gives that answer for a request body, or None when the model accepts it.
"""

from __future__ import annotations

from typing import Any


def _error(message: str, param: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def refusal(body: dict[str, Any]) -> dict[str, Any] | None:
    """OpenAI's 400 error JSON for the first parameter of ``body`` a reasoning model refuses, else None."""
    if "max_tokens" in body:
        return _error(
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            "max_tokens",
            "unsupported_parameter",
        )
    for param in ("temperature", "top_p"):
        value = body.get(param)
        if value is not None and value != 1:
            return _error(
                f"Unsupported value: '{param}' does not support {value} with this model. "
                "Only the default (1) value is supported.",
                param,
                "unsupported_value",
            )
    if body.get("logprobs"):
        return _error(
            "Unsupported parameter: 'logprobs' is not supported with this model.", "logprobs", "unsupported_parameter"
        )
    return None
