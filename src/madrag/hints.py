"""The options madrag's messages tell a person to add to the command they ran, in one registry, so that every
one runs as printed (tests/e2e/cli/test_hints.py runs each against the fake backend or the stub server).

A setting that does not change what a finished record means (:data:`RESUMABLE_SETTINGS`: the token limits) may
change when a run resumes: its hint works on the same run folder. A setting that does change it (how a score is
read, which backend parameters are sent) cannot: once the run has started, its hint names a new ``--run-dir``.
"""

from __future__ import annotations

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
