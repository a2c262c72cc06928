"""A stub of Anthropic's Messages API as its documentation defines it (https://docs.anthropic.com/en/api/messages:
``POST /v1/messages`` with the ``x-api-key`` and ``anthropic-version`` headers; ``system`` apart from ``messages``;
the answer's ``content`` blocks, ``stop_reason`` and ``usage.input_tokens`` / ``output_tokens``; errors as
``{"type": "error", "error": {"type", "message"}}``, 529 when overloaded), served on 127.0.0.1 in a thread of its
own (:class:`tests.script_server.ScriptServer`), so sync and async tests alike reach it: the anthropic backend's
tests (tests/unit/providers) and the web app's (tests/e2e/server)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web
from tests.script_server import ScriptServer

KEY = "sk-ant-stub"
"""The one key the stub accepts (any other is a 401)."""


class Stub:
    """The Messages API: every request kept (headers, body); answers ``reply``, or the error ``status`` when set."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.status = 200
        self.reply = "On topic and clear.\nFinal score: 2"

    async def messages(self, request: web.Request) -> web.Response:
        if request.method != "POST" or request.path != "/v1/messages":
            return _error(404, "not_found_error", f"no {request.method} {request.path}")
        body = await request.json()
        self.requests.append((dict(request.headers), body))
        if request.headers.get("x-api-key") != KEY:
            return _error(401, "authentication_error", "invalid x-api-key")
        if self.status != 200:
            return _error(self.status, "overloaded_error" if self.status == 529 else "invalid_request_error", "no")
        answer = {
            "id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
            "content": [{"type": "text", "text": self.reply}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 12, "output_tokens": 7},
        }  # fmt: skip
        return web.json_response(answer)

    def keys_seen(self) -> set[str | None]:
        """The ``x-api-key`` of every request (None where a request had none)."""
        return {headers.get("x-api-key", headers.get("X-Api-Key")) for headers, _ in self.requests}


def _error(status: int, kind: str, message: str) -> web.Response:
    return web.json_response({"type": "error", "error": {"type": kind, "message": message}}, status=status)


@contextmanager
def messages_api(stub: Stub) -> Iterator[str]:
    """Serve ``stub`` until the ``with`` ends; its base URL (``http://127.0.0.1:PORT``, as ``base_url`` takes it)."""
    with ScriptServer(stub.messages) as server:
        yield f"http://127.0.0.1:{server.port}"
