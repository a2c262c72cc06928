"""A run's scores as the pages and the API read them, kept until they change.

A run scoring in this process shows the scores of its finished essays (the library's, as each essay
completes); any other run is read through its score index, built once by the library's run reader when
missing or stale."""

from __future__ import annotations

import threading

from madrag.server.http.faults import WrongState
from madrag.server.runs import library_runs
from madrag.server.runs.events import RunEvents
from madrag.server.runs.repo import ACTIVE, RunRepository


class RunViews:
    """Each run's :class:`~madrag.server.runs.library_runs.RunView`, cached by what it was built from."""

    def __init__(self, repo: RunRepository, events: RunEvents) -> None:
        self.repo = repo
        self.events = events
        self._views: dict[str, tuple[object, library_runs.RunView]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def view(self, run_id: str) -> library_runs.RunView:
        """The run's scores (:class:`WrongState` when it has stored nothing yet)."""
        run_dir = self.repo.run_dir(run_id)
        if not (run_dir / "store.sqlite").is_file():
            raise WrongState(f"run {run_id} has not stored anything yet")
        snap = self.events.snapshot(run_id)
        status = snap["status"] if snap is not None else self.repo.get(run_id).status
        cached = self._views.get(run_id)
        live = self.events.live(run_id)
        if status in ACTIVE and live is not None:
            version: object = ("live", len(live))
            if cached is None or cached[0] != version:
                cached = (version, library_runs.view_of(run_dir, live))
                self._views[run_id] = cached
            return cached[1]
        count = library_runs.stored_version(run_dir)
        if cached is not None and cached[0] == count:
            return cached[1]
        # one reader per run: the start-up preparation and a page's request reading the same run build one view,
        # which every memo of the pages is then kept against (two views of one count would rebuild them all)
        with self._building(run_id):
            cached = self._views.get(run_id)
            if cached is not None and cached[0] == count:
                return cached[1]
            view = library_runs.read_run(run_dir)
            self._views[run_id] = (count, view)
            return view

    def _building(self, run_id: str) -> threading.Lock:
        """The lock held while run ``run_id``'s view is read."""
        with self._locks_lock:
            return self._locks.setdefault(run_id, threading.Lock())
