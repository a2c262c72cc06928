"""The server's domain errors: what went wrong, in the server's own words, with no HTTP in them.

Run, rubric and request code raises these (or the library's :mod:`madrag.errors` kinds); the web edge
(:mod:`madrag.server.http.errors`) maps each kind to a status code in one exception handler. Each carries a one-line
message and, where it concerns one input field, that field's name.
"""

from __future__ import annotations

from madrag.errors import MadragError


class ServerError(MadragError):
    """An error of a server operation: a one-line ``message`` and the input ``field`` it concerns (if one)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class NotFound(ServerError):
    """No such run, rubric, essay or draft."""


class WrongState(ServerError):
    """The run (or draft) is in the wrong state for this: not running, already running, nothing to resume."""


class InvalidRequest(ServerError):
    """Request fields that do not fit together (give exactly one of two, an unknown protocol)."""


class BadInput(ServerError):
    """Input that cannot be used: no usable essays, a pool that does not fit, a key that must be given again."""


class NotAllowed(ServerError):
    """What the server's operator did not allow: a model server at an address not allowed (the sentence names
    the option that allows it)."""


class Unavailable(ServerError):
    """Scoring did not finish: the time limit passed or the backend failed."""


class OverLimit(ServerError):
    """More than the server takes at once: too many essays in one request."""
