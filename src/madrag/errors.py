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
