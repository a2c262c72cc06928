"""A web run's scoring settings (:class:`~madrag.settings.ScoringSettings`): what the request gave, else the
library's defaults, the same as ``madrag score``'s; recorded in the run's ``run.json`` and rebuilt from it for
every start and resume, so a resumed run scores as it began.

The backend's one token limit (``backend.max_tokens``, what the backend page and older clients send) sets both
token limits; given with a different token limit in the settings, the request is refused rather than one of them
silently dropped. (A run recorded before the web app took settings is read with the settings it ran with, its
backend's ``max_tokens`` as both limits: :func:`madrag.pipeline.migrations.upgrade_run_description`.)"""

from __future__ import annotations

from typing import Any

from madrag.server.http.faults import InvalidRequest
from madrag.server.runs.repo import RunMeta
from madrag.settings import ScoringSettings, stored_settings

TOKEN_LIMITS = ("debater_max_tokens", "judge_max_tokens")


def for_request(settings: ScoringSettings | None, max_tokens: int | None) -> ScoringSettings:
    """The settings of a new run: ``settings`` (the library's defaults for what it leaves out, or all of them
    when None), with the backend's ``max_tokens`` as both token limits when it is given."""
    given: dict[str, Any] = {} if settings is None else settings.model_dump(exclude_unset=True)
    if max_tokens is not None:
        clash = [name for name in TOKEN_LIMITS if name in given and given[name] != max_tokens]
        if clash:
            raise InvalidRequest(
                f"backend.max_tokens ({max_tokens}) and settings.{clash[0]} ({given[clash[0]]}) differ: "
                "give the token limits once, in settings",
                "settings",
            )
        given.update(dict.fromkeys(TOKEN_LIMITS, max_tokens))
    return ScoringSettings.model_validate(given)


def recorded(settings: ScoringSettings) -> dict[str, Any]:
    """The settings as ``run.json`` keeps them (every field, as JSON)."""
    return settings.model_dump(mode="json")


def of_run(meta: RunMeta) -> ScoringSettings:
    """The settings a recorded run scores with: those it recorded (a setting added since then takes the value
    that reproduces what the run did)."""
    return ScoringSettings.model_validate(stored_settings(meta.settings))
