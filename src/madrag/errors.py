"""User-facing errors: each carries a one-line message the CLI prints before exiting non-zero; :func:`clip` keeps
what an error repeats of a value short; :data:`HINTS`, the options a message tells a person to add.

The options madrag's messages tell a person to add to the command they ran are in one registry, so that every
one runs as printed (tests/e2e/cli/test_hints.py runs each against the fake backend or the stub server). A setting
that does not change what a finished record means (:data:`RESUMABLE_SETTINGS`: the token limits) may change when
a run resumes: its hint works on the same run folder. A setting that does change it (how a score is read, which
backend parameters are sent) cannot: once the run has started, its hint names a new ``--run-dir``.
"""

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


RESUMABLE_SETTINGS = ("debater_max_tokens", "judge_max_tokens")
"""Settings a resumed run may change: each record keeps the limit it was made with (its ``settings``), a new
call uses the session's, and run.log says what changed in the session."""

NEW_RUN_DIR = "with a new --run-dir"


def option_hint(options: str, started: bool) -> str:
    """``options`` (e.g. ``--score-method text``) as a hint: for a run that has started (its folder holds records
    made with other settings), with a new ``--run-dir``."""
    return f"{options} {NEW_RUN_DIR}" if started else options


def token_limit(option: str, value: int) -> str:
    """A token limit to score with (``--debater-max-tokens 212``): the same run folder takes it on resume."""
    return f"{option} {value}"


HINTS: dict[str, str] = {
    "score-method-text": "use --score-method text",
    "larger-judge-limit": "Try --judge-max-tokens {larger} {new_run_dir} (this run keeps the answers it has), or "
    "--score-method constrained {new_run_dir} where the server takes a schema.",
    "token-param": "use --token-param auto or max_completion_tokens",
    "sampling-params": "use --sampling-params auto or omit",
    "no-logprobs": "this model gives no logprobs: use --no-logprobs, and debaters state their confidence",
    "context-limits": "or score with {options} (token limits may change on resume)",
    "fold-all": "use --fold all",
}
"""Every hint that names options of ``madrag score`` / ``madrag resume``, by name: where each is printed uses it
(``{...}``: the values filled in there)."""


def hint(name: str, **values: object) -> str:
    """Hint ``name`` of :data:`HINTS` with its values filled in."""
    return HINTS[name].format(new_run_dir=NEW_RUN_DIR, **values)
