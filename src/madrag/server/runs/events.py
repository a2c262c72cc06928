"""What a run does, as it does it: each run's :class:`~madrag.server.runs.progress.Progress` (counts, stage, recent
events for subscribers), the library's callbacks that feed it from the scoring thread, and the scores of the
essays a run in this process has finished (its live results)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from madrag.data.essay import Essay
from madrag.pipeline.hooks import RunHooks
from madrag.protocols.base import TraitScore
from madrag.records import AgentRecord
from madrag.server.http.schemas import RunStatus
from madrag.server.runs.progress import Progress

LiveKey = tuple[str, str, str]
"""(protocol, essay id, trait) of a trait score."""


class RunEvents:
    """Every run's progress and live scores; ``status_of`` reads a run's recorded status (for a run that has
    not started in this process), ``essays_of`` its number of essays (what the time left counts down)."""

    def __init__(
        self, status_of: Callable[[str], RunStatus], essays_of: Callable[[str], int | None] | None = None
    ) -> None:
        self._status_of = status_of
        self._essays_of = essays_of
        self.progress: dict[str, Progress] = {}
        self._live: dict[str, dict[LiveKey, TraitScore]] = {}
        self.scoring_from: dict[str, float] = {}  # when each run's one-time set-up (index, model) was done
        self._lock = threading.Lock()

    def of(self, run_id: str) -> Progress:
        """The run's progress (made from its recorded status the first time it is asked for)."""
        if run_id not in self.progress:
            self.progress[run_id] = Progress(run_id, status=self._status_of(run_id))
        return self.progress[run_id]

    def snapshot(self, run_id: str) -> dict[str, object] | None:
        """The run's progress counts, None when it has not run in this process."""
        found = self.progress.get(run_id)
        return None if found is None else found.snapshot()

    def begin(self, run_id: str) -> Progress:
        """A fresh progress for a run about to be (re)started."""
        self.scoring_from.pop(run_id, None)
        self.progress[run_id] = Progress(run_id, status="queued")
        return self.progress[run_id]

    def status(self, run_id: str, status: RunStatus, error: str | None) -> None:
        """Tell the run's subscribers it has a new status."""
        prog = self.of(run_id)
        prog.set(status=status)
        prog.emit({"type": "status", "status": status, "error": error})

    # -- live scores -------------------------------------------------------------------------------------------
    def start_live(self, run_id: str) -> None:
        with self._lock:
            self._live[run_id] = {}

    def live(self, run_id: str) -> list[TraitScore] | None:
        """The trait scores of the run's finished essays, when it scores in this process; else None."""
        with self._lock:
            found = self._live.get(run_id)
            return None if found is None else list(found.values())

    def hooks(self, run_id: str) -> RunHooks:
        """The callbacks that feed the run's progress (called on the scoring thread)."""
        return _Feed(self, run_id)

    def n_essays(self, run_id: str) -> int | None:
        if self._essays_of is None:
            return None
        try:
            return self._essays_of(run_id)
        except Exception:  # no recorded run (a test's bare events): the time left waits for a count
            return None


class _Feed(RunHooks):
    """The library's callbacks of one run, feeding its progress and live scores (nothing is printed)."""

    def __init__(self, events: RunEvents, run_id: str) -> None:
        self.events, self.run_id, self.prog = events, run_id, events.of(run_id)

    def on_start(self, total: int) -> None:
        since = self.events.scoring_from[self.run_id] = time.monotonic()
        essays = self.events.n_essays(self.run_id)
        self.prog.change({"type": "start", "total": total}, total=total, scoring_since=since, essays=essays)

    def on_essay_done(self, essay: Essay, scores: list[TraitScore]) -> None:
        with self.events._lock:
            self.events._live.setdefault(self.run_id, {}).update({(s.protocol, s.essay_id, s.trait): s for s in scores})
        cells = {f"{s.protocol}|{s.trait}": s.score for s in scores}
        self.prog.essay_done(essay.id)
        self.prog.emit(
            {"type": "essay", "essay_id": essay.id, "scores": cells},
            [(s.protocol, s.essay_id, s.trait) for s in scores],
        )

    def on_stage(self, message: str) -> None:
        self.prog.change({"type": "stage", "message": message}, stage=message)

    def on_bank_progress(self, done: int, total: int) -> None:
        message = f"building the exemplar index: {done:,} of {total:,} pool essays embedded"
        self.prog.change({"type": "bank", "done": done, "total": total, "message": message}, stage=message)

    def on_record(self, record: AgentRecord) -> None:
        """One stored agent call: counted, and the trait scores a Judge's record completes marked done."""
        self.prog.count_record(record.essay_id)
        done: list[LiveKey] = []
        if record.role == "judge":
            traits = list(record.trait_scores or {}) if record.trait == "*" else [record.trait]
            done = [(record.protocol, record.essay_id, t) for t in traits]
        event = {
            "type": "record",
            "essay_id": record.essay_id,
            "trait": record.trait,
            "role": record.role,
            "protocol": record.protocol,
            "score": None if record.score is None else record.score.reported,
            "key": record.key,
            "stored_at": record.created_at,
        }
        self.prog.emit(event, done)

    def on_failed(self, record: AgentRecord) -> None:
        self.prog.count_failed()
        event = {"type": "failed", "essay_id": record.essay_id, "trait": record.trait, "role": record.role}
        self.prog.emit({**event, "error": record.error})
