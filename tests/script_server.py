"""A scripted HTTP server on 127.0.0.1, in a thread with its own event loop (usable from sync and async tests):
each request is answered by an async handler, so a client with a real transport (aiohttp) can be tested against
the same scripted answers as the httpx clients' ``MockTransport``."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def drop(request: web.Request) -> web.StreamResponse:
    """Close the connection without an answer (a server that died mid-request)."""
    assert request.transport is not None
    request.transport.close()
    await asyncio.sleep(0.05)
    return web.Response(status=500)  # never reaches the client


class ScriptServer:
    """Serves every path and method with ``handler`` (swap it with :attr:`handler`) until the ``with`` ends."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        return await self.handler(request)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._ready.set()
        self._loop.run_forever()
        assert self._runner is not None
        self._loop.run_until_complete(self._runner.cleanup())
        self._loop.close()

    def __enter__(self) -> ScriptServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("scripted server did not start")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
