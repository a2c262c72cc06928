"""A run and its progress as the JSON API returns them (the API's other answers are in
:mod:`madrag.server.http.responses`): a run is its ``run.json`` description, so its model lives beside the run
repository."""

from __future__ import annotations

from pydantic import BaseModel

from madrag.server.http.schemas import RunStatus
from madrag.server.runs.repo import RunMeta


class ProgressOut(BaseModel):
    """A run's progress in this server process: trait scores ``done`` of ``total``, agent calls stored
    (``records``) and failed after their retries, the current stage, and the last event's number (``seq``).
    The pace of this session (a resume starts its own): seconds of scoring (``elapsed_s``), seconds per call
    (``per_call_s``), the calls still to make (``calls_left``: the session's calls per finished essay times the
    essays left, less the calls the unfinished ones made) and the time left (``eta_s``: that work laid out on the
    essays scored at once, over a smoothed rate of calls, never rising more than 10 % between readings:
    :mod:`madrag.server.runs.time_left`); each None until it can be measured."""

    status: RunStatus
    total: int | None = None
    done: int = 0
    records: int = 0
    failed_calls: int = 0
    stage: str = ""
    seq: int = 0
    elapsed_s: float | None = None
    per_call_s: float | None = None
    calls_left: int | None = None
    eta_s: float | None = None


class RunOut(RunMeta):
    """A run: its description (as ``run.json`` keeps it: never a key) and, when it has run in this server
    process, its live ``progress``."""

    progress: ProgressOut | None = None
