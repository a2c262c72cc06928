"""User-facing errors: each carries a one-line message the CLI prints before exiting non-zero; :func:`clip` keeps
what an error repeats of a value short."""

from __future__ import annotations


class MadragError(Exception):
    """Base class for every error madrag reports to a user as a single line."""


class InputError(MadragError):
    """Bad input data: a missing file, a wrong column, a duplicate id, an out-of-range score."""


class RubricError(MadragError):
    """A rubric file that cannot be used as it is."""


class ProviderError(MadragError):
    """An LLM backend that cannot be reached or answers garbage (after retries)."""


class TransientProviderError(ProviderError):
    """A failure worth retrying: 429, 5xx, timeouts, dropped connections."""


class ConfigError(MadragError):
    """Settings that do not fit together (e.g. resuming a run with a different configuration)."""


class RetriesExhausted(ProviderError):
    """A request whose every attempt failed transiently (``attempts`` of them, each failure's reason kept)."""

    def __init__(self, message: str, attempts: int, reasons: list[str]) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.reasons = reasons


class ContextOverflow(ProviderError):
    """A request whose prompt (and answer) does not fit the server's context, said by the server (an HTTP 400
    naming its context): no retry can help, so the call is recorded as failed at once and the run goes on
    without its essay-trait (it does not count against ``--max-failures``)."""


class CallFailed(ProviderError):
    """An agent call that got no answer after its retries, recorded as a failed record (``key``); the run goes on
    without it and a resume makes it again."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


class RunStopping(MadragError):
    """A call not started because the run is stopping (its ``--max-failures`` budget is spent)."""


class TooManyFailures(ProviderError):
    """A run stopped after ``--max-failures`` calls failed after their retries; what finished is kept."""


class StorageError(MadragError):
    """The disk refused a write or a read: full, read-only, no permission, or a path that is a file where a
    folder belongs. What was committed before stays; the message says how to continue."""


class WriterBusy(MadragError):
    """A run directory (or a server's data directory) that another process is writing: one writer at a time."""


MAX_ECHO = 300
"""The most characters of a user's value an error message repeats (a bad value may be megabytes long)."""


def clip(text: str, limit: int = MAX_ECHO) -> str:
    """``text`` on one line and at most ``limit`` characters (what was cut is counted), for an error message.

    >>> clip("a" * 400, 10)
    'aaaaaaaaaa... (390 more characters)'
    """
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    return f"{flat[:limit]}... ({len(flat) - limit:,} more characters)"
