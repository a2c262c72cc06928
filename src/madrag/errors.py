"""User-facing errors: each carries a one-line message the CLI prints before exiting non-zero."""

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
