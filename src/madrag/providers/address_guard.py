"""Where madrag's HTTP client may connect: a guard its caller sets around the requests it makes (the web server:
only the addresses its operator allowed, :mod:`madrag.server.access`).

The guard is asked when the client resolves a model server's host name, with the addresses the name resolved to,
just before it connects; a reason returned refuses the connection (a connection failure saying it). So a name
that resolved to an allowed address when the request was checked, and to another one when the client connects
(DNS rebinding), is refused where it matters. An address given as such in the URL is never resolved: the caller
checked it. The guard is a context variable, set by :func:`guarding` for the requests made inside the block (in
its task and the tasks it starts); a client's connections are made with the guard of its first request. The
library and the CLI set none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

AddressGuard = Callable[[str, int, list[str]], str | None]
"""``(host, port, the addresses it resolved to) -> why they may not be reached``; None: they may."""

_GUARD: ContextVar[AddressGuard | None] = ContextVar("madrag_address_guard", default=None)


@contextmanager
def guarding(guard: AddressGuard) -> Iterator[None]:
    """Ask ``guard`` before every connection of the requests made inside the ``with`` block."""
    token = _GUARD.set(guard)
    try:
        yield
    finally:
        _GUARD.reset(token)


def current_guard() -> AddressGuard | None:
    """The guard of the requests made here, or None."""
    return _GUARD.get()
