"""A new run accepted by its request and started by a worker: what ``POST /api/runs`` does, and what it leaves.

The request checks its inputs (every 4xx answer comes from there), writes the run's description (``run.json``,
status ``queued``) and its inputs as they came, in one file (``inputs/queued.json``: the rubric, the essays, the
exemplar pool's mode and fold), and answers. Everything else a start needs, the inputs written in the layout the
job reads (:func:`madrag.server.library.write_inputs`: the rubric, the essays, the shipped pool), the job built
and handed to the scoring thread, is done by :class:`RunStarter`: one worker thread taking the accepted runs in
the order they came, so twenty teachers starting runs at once wait for two small files each, not for each
other's inputs, pools and jobs (``bench/post_runs.py``).

A run whose inputs were accepted but not yet written when the server stopped keeps ``inputs/queued.json``: the
next start writes its inputs from it (:func:`expand`) before the run is listed as interrupted and resumable.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from madrag.data.essay import Essay
from madrag.data.refusals import Refusals
from madrag.files.atomic import write_text_atomic
from madrag.rubric import Rubric
from madrag.server import library
from madrag.server.http.schemas import BackendSettings, RunKind
from madrag.settings import ScoringSettings

log = logging.getLogger("madrag.server")
QUEUED_FILE = "queued.json"
"""A run's inputs as its request gave them, in ``inputs/``, until the worker has written them out."""


class NewRun(BaseModel):
    """A run to create, on checked inputs: what it scores (``essays`` on ``rubric``, the ``refused`` rows
    summarised), how (``protocols``, the exemplar ``pool`` with ``pool_essays`` for the shipped one, the
    ``backend``), how much (``limit``; a dry run's ``planned`` essays and ``price``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    kind: RunKind = "run"
    name: str = ""
    rubric: Rubric
    essays: list[Essay]
    refused: Refusals
    protocols: list[str]
    grading_protocol: str | None = None  # the protocol whose scores are the grades (one of ``protocols``)
    pool: library.PoolMode
    pool_essays: list[Essay] | None = None
    eval_fold: int = 0
    backend: BackendSettings
    limit: int | None = None
    planned: int | None = None
    price: tuple[float, float] | None = None
    settings: ScoringSettings = Field(default_factory=ScoringSettings)


class QueuedInputs(BaseModel):
    """A run's inputs as accepted: what :func:`library.write_inputs` writes out (the shipped pool is named by
    ``pool="asap"`` and found again from the rubric, not copied)."""

    rubric: Rubric
    essays: list[Essay]
    pool: library.PoolMode
    eval_fold: int


def queued_file(run_dir: Path) -> Path:
    return run_dir / "inputs" / QUEUED_FILE


def accept(run_dir: Path, inputs: QueuedInputs) -> None:
    """Keep a run's accepted inputs in one file, written complete or not at all."""
    path = queued_file(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, inputs.model_dump_json(exclude_none=True))


def expand(
    run_dir: Path, asap_dir: Path | None, inputs: QueuedInputs | None = None, pool: list[Essay] | None = None
) -> None:
    """Write a run's accepted inputs in the layout its job reads, then drop ``inputs/queued.json``; ``inputs``
    and ``pool``: those already in memory (else read from the file, the shipped pool found from the rubric)."""
    path = queued_file(run_dir)
    if inputs is None:
        inputs = QueuedInputs.model_validate_json(path.read_text(encoding="utf-8"))
    if inputs.pool == "asap" and pool is None:
        pool = library.shipped_pool(asap_dir, inputs.rubric)
    library.write_inputs(run_dir, inputs.rubric, inputs.essays, inputs.pool, pool, inputs.eval_fold)
    path.unlink(missing_ok=True)


def pending_in(root: Path) -> list[Path]:
    """The run directories under ``root`` whose accepted inputs were never written out (a stopped server)."""
    return sorted(p.parent.parent for p in root.glob(f"*/inputs/{QUEUED_FILE}"))


class RunStarter:
    """One worker thread starting accepted runs in order. A run stopped before the worker reached it is never
    started (:meth:`withdraw`); :meth:`pending` is the future of a run's start, done once it was started (or
    withdrawn, or failed to start)."""

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="madrag-starter")
        self._lock = threading.Lock()
        self._waiting: dict[str, concurrent.futures.Future[None]] = {}
        self._withdrawn: set[str] = set()

    def submit(self, run_id: str, start: Callable[[], None], failed: Callable[[Exception], None]) -> None:
        """Run ``start()`` on the worker unless the run is withdrawn first; ``failed(exc)`` when it raises."""

        def work() -> None:
            try:
                start()
            except Exception as exc:  # reported on the run; the worker goes on with the next one
                log.exception("run %s did not start", run_id)
                failed(exc)
            finally:
                with self._lock:
                    self._waiting.pop(run_id, None)
                    self._withdrawn.discard(run_id)

        with self._lock:
            self._waiting[run_id] = self._pool.submit(work)

    def pending(self, run_id: str) -> concurrent.futures.Future[None] | None:
        """The future of a run's start while the worker has not finished starting it; None otherwise."""
        with self._lock:
            return self._waiting.get(run_id)

    def withdraw(self, run_id: str, started: Callable[[], bool]) -> bool:
        """Keep a waiting run from starting: True when it was waiting and ``started()`` is False (asked under the
        same lock as :meth:`claim`, so a run is either withdrawn or started, never both)."""
        with self._lock:
            if run_id not in self._waiting or started():
                return False
            self._withdrawn.add(run_id)
            return True

    def claim(self, run_id: str, start: Callable[[], None]) -> bool:
        """``start()`` unless the run was withdrawn; whether it was started."""
        with self._lock:
            if run_id in self._withdrawn:
                return False
            start()
            return True

    def close(self) -> list[str]:
        """Start nothing more (a start under way is withdrawn too); the runs that were waiting, to be recorded as
        interrupted (their inputs are written out at the next start: :func:`pending_in`)."""
        with self._lock:
            self._withdrawn.update(self._waiting)
            waiting = list(self._waiting)
        self._pool.shutdown(wait=False, cancel_futures=True)
        return waiting
