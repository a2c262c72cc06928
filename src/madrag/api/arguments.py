"""Checks of the Python API's arguments that are not essays or rubrics (:mod:`madrag.api.inputs`): ``settings``
as a dict (every key known, every value valid) and an explicit exemplar ``pool`` (no essay is its own
exemplar). Each problem is one :mod:`madrag.errors` line naming the argument, never a pydantic report."""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from madrag.data.essay import Essay
from madrag.errors import MAX_ECHO, ConfigError, InputError, clip
from madrag.settings import ScoringSettings


def to_settings(settings: ScoringSettings | Mapping[str, Any] | None) -> ScoringSettings:
    """:class:`ScoringSettings` from ``settings`` (None: the defaults). A ConfigError names an unknown key (with
    the nearest known one) or the first invalid value, e.g. ``settings.report: must be one of parsed, argmax,
    expected (got 'x')``.

    >>> to_settings({"reprot": "argmax"})
    Traceback (most recent call last):
    madrag.errors.ConfigError: settings: unknown key 'reprot' (did you mean 'report'?)
    """
    if settings is None:
        return ScoringSettings()
    if isinstance(settings, ScoringSettings):
        return settings
    if not isinstance(settings, Mapping):
        raise ConfigError(f"settings: expected a ScoringSettings or a dict, got {type(settings).__name__}")
    known = list(ScoringSettings.model_fields)
    for key in settings:
        if key not in known:
            near = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else f"; known keys: {', '.join(known)}"
            raise ConfigError(f"settings: unknown key {key!r}{hint}")
    try:
        return ScoringSettings.model_validate(dict(settings))
    except ValidationError as exc:
        raise ConfigError(_one_line(exc.errors()[0])) from None


def _one_line(error: ErrorDetails) -> str:
    """One pydantic error of ScoringSettings as ``settings.<key>: <what is wrong> (got <value>)``."""
    where = ".".join(["settings", *(str(part) for part in error["loc"])])
    if error["type"] == "literal_error" and error["loc"]:
        field = ScoringSettings.model_fields[str(error["loc"][0])]
        values = typing.get_args(field.annotation)
        ctx = error.get("ctx") or {}
        choices = ", ".join(values) if all(isinstance(v, str) for v in values) else str(ctx.get("expected", ""))
        return f"{where}: must be one of {choices} (got {error['input']!r})"
    message = error["msg"].removeprefix("Value error, ").removeprefix("Input ")
    if not error["loc"]:  # a check across keys: its message names them
        return f"{where}: {message}"
    return f"{where}: {message} (got {error['input']!r})"


def check_pool(essays: list[Essay], pool: list[Essay]) -> None:
    """An InputError when an essay to score is also in the exemplar pool (same id): it could be retrieved as
    its own exemplar."""
    scored = {e.id for e in essays}
    shared = [e.id for e in pool if e.id in scored]
    if shared:
        listed = ", ".join(repr(i) for i in shared[:5]) + (f" and {len(shared) - 5} more" if len(shared) > 5 else "")
        raise InputError(
            f"pool: essay id(s) {listed} are also essays to score (an essay would be its own exemplar); give the "
            "pool other essays, or leave pool out and split the essays by fold"
        )


def validation_line(exc: ValidationError, prefix: str = "") -> str:
    """A pydantic error as one line: its first problem's field and message (the value repeated, if at all,
    clipped), e.g. ``invalid value for essay_concurrency: Input should be greater than or equal to 1``."""
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": str(exc)}
    where = ".".join(str(x) for x in first.get("loc", ()))
    return clip(f"{prefix}invalid value for {where or 'an argument'}: {first.get('msg', 'invalid')}", 2 * MAX_ECHO)
