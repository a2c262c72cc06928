"""The server's record of its runs: ``<data_dir>/runs/<id>/run.json``, read and written here only.

A run directory holds the library's run store (``store.sqlite``), the inputs the job reads (``inputs/``), the
teacher's reviews (``reviews.sqlite``) and the server's description of the run (``run.json``, a
:class:`RunMeta`: name, status, backend without any key, counts). :class:`RunRepository` finds, reads, writes
(atomically) and lists them; it knows nothing of threads or progress.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from madrag.files.atomic import write_text_atomic
from madrag.pipeline.migrations import upgrade_run_description
from madrag.providers.backends import BackendTraits, traits_of
from madrag.providers.spec import ProviderSpec
from madrag.server.http.faults import NotFound
from madrag.server.http.refusals import RefusedFields
from madrag.server.http.schemas import BackendSettings, RunKind, RunStatus

log = logging.getLogger("madrag.server")
_RUN_ID = re.compile(r"^[a-z0-9]{6,40}$")
ACTIVE: tuple[RunStatus, ...] = ("queued", "running")
KeySource = Literal["none", "memory", "server-env"]


class RunBackend(BaseModel):
    """A run's backend as ``run.json`` records it: the settings of :class:`BackendSettings` without the key,
    where the key comes from (``key_source``) and, once the server was tested, what the test found
    (``tested``). ``logprobs`` None: not known yet (tested before the first call; a ``run.json`` written before
    the setting existed is read as its run ran, with them: :func:`read_meta`)."""

    model_config = ConfigDict(extra="ignore")

    kind: str = "llamacpp"  # as recorded: a run of a plugin's backend lists after the plugin is gone
    model: str | None = None
    base_url: str | None = None
    concurrency: int | None = None
    max_tokens: int | None = 400  # None: not given (the run's settings hold its token limits)
    fake_latency_s: float = 0.0
    logprobs: bool | None = None
    options: dict[str, Any] = Field(default_factory=dict)  # the kind's options the web form offers
    key_source: KeySource | None = None
    tested: str | None = Field(default=None, exclude_if=lambda v: v is None)

    @property
    def traits(self) -> BackendTraits | None:
        """What its backend is (remote, needs a key, gives valid grades...); None for a kind not registered."""
        return traits_of(self.kind)

    @property
    def tiny(self) -> bool:
        """Whether it is the tiny model shipped to try madrag out (its scores are not valid)."""
        return self.traits is not None and ProviderSpec(kind=self.kind).options.tiny_default()

    @classmethod
    def of(cls, backend: BackendSettings, key_source: KeySource) -> RunBackend:
        """The backend as a run describes it: its settings and where its key comes from, never the key."""
        return cls.model_validate({**backend.model_dump(exclude={"api_key"}), "key_source": key_source})


class RunMeta(RefusedFields):
    """What the server keeps about a run in ``run.json`` (no key, ever); the refused input rows summarised."""

    id: str
    kind: RunKind = "run"
    name: str = ""
    created_at: float = Field(default_factory=time.time)
    finished_at: float | None = None
    status: RunStatus = "queued"
    error: str | None = None
    rubric_name: str = ""
    protocols: list[str]
    # the protocol whose scores are the grades (the teacher's choice when the run has several; the others are
    # shown beside it for comparison); None: recorded before the choice existed (see :attr:`grading`)
    grading_protocol: str | None = None
    pool: str
    eval_fold: int | None
    backend: RunBackend
    key_env: str | None = None
    n_essays: int
    n_traits: int
    limit: int | None = None
    planned_essays: int | None = None
    price: tuple[float, float] | None = None
    estimate: dict[str, Any] | None = None
    elapsed_s: float | None = None
    # calls of the last session that got no answer after their retries (failed records; their essay-traits have
    # no score): a finished run with some can be resumed, which retries exactly those
    failed_calls: int = 0
    # the run's scoring settings (ScoringSettings as JSON; runs/scoring.py; a run.json written before the web app
    # took settings is read with those its run scored with: read_meta)
    settings: dict[str, Any]

    @property
    def grading(self) -> str:
        """The protocol whose scores are the run's grades: the one chosen when it was created; a run recorded
        before that choice existed (or with one protocol) grades by the first protocol of its request."""
        if self.grading_protocol is not None:
            return self.grading_protocol
        return self.protocols[0] if self.protocols else ""


def read_meta(path: Path) -> RunMeta:
    """The run description in ``path`` (a ``run.json``), one an earlier madrag wrote read in today's shape
    (:func:`madrag.pipeline.migrations.upgrade_run_description`); a ValueError when it is not one."""
    return RunMeta.model_validate(upgrade_run_description(json.loads(path.read_text(encoding="utf-8"))))


def recorded_grading(run_dir: Path) -> str | None:
    """The grading protocol a server run recorded in its ``run.json`` (None: the folder has none, a run made by
    ``madrag score``)."""
    path = run_dir / "run.json"
    if not path.is_file():
        return None
    return read_meta(path).grading


class RunRepository:
    """The run directories under ``root``: each run's ``run.json`` found, read, written and listed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex[:12]

    def folder(self, run_id: str) -> Path:
        """Where the run's directory is (or will be), unchecked."""
        return self.root / run_id

    def run_dir(self, run_id: str) -> Path:
        """The run's directory; :class:`NotFound` for an unknown or malformed id."""
        if not _RUN_ID.match(run_id) or not (self.root / run_id / "run.json").is_file():
            raise NotFound(f"no run {run_id!r}", "run_id")
        return self.root / run_id

    def get(self, run_id: str) -> RunMeta:
        return read_meta(self.run_dir(run_id) / "run.json")

    def save(self, meta: RunMeta) -> None:
        """Write ``run.json`` atomically (a reader never sees half of it)."""
        folder = self.root / meta.id
        folder.mkdir(parents=True, exist_ok=True)
        write_text_atomic(folder / "run.json", meta.model_dump_json(indent=2))

    def update(self, run_id: str, **fields: Any) -> RunMeta:
        """Change some fields of a run's description; the new description."""
        with self._lock:
            meta = self.get(run_id).model_copy(update=fields)
            self.save(meta)
        return meta

    def all(self) -> list[RunMeta]:
        """Every run, newest first (an unreadable description is logged and left out)."""
        metas = []
        for path in self.root.glob("*/run.json"):
            try:
                metas.append(read_meta(path))
            except ValueError:
                log.warning("unreadable run description %s", path)
        return sorted(metas, key=lambda m: m.created_at, reverse=True)
