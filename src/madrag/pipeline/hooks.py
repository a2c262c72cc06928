"""What a running job tells its caller: one :class:`RunHooks` object whose methods do nothing by default.

A caller overrides the events it wants (the rich progress bar of :mod:`madrag.api.progress`, the web app's
live progress, a test's recorder) and hands the object to :func:`madrag.pipeline.job.execute`; a Ray run
reports the same events from the driver. Every method is called on the thread running the job, in this
order: stages and bank progress while the run is prepared, ``on_start`` once scoring begins, then
``on_record`` / ``on_failed`` per call and ``on_essay_done`` per essay as they complete.
"""

from __future__ import annotations

from madrag.data.essay import Essay
from madrag.protocols.base import TraitScore
from madrag.records import AgentRecord


class RunHooks:
    """Callbacks of a running job; each does nothing unless a subclass overrides it."""

    def on_stage(self, message: str) -> None:
        """A stage of the run in words (building the exemplar bank, scoring, nothing left to do)."""

    def on_bank_progress(self, done: int, total: int) -> None:
        """Pool essays embedded so far while the exemplar bank is built."""

    def on_start(self, total: int) -> None:
        """Scoring starts: the number of (essay, trait, protocol) scores the run produces."""

    def on_record(self, record: AgentRecord) -> None:
        """One agent call's record was stored (or found stored by a resumed run)."""

    def on_failed(self, record: AgentRecord) -> None:
        """A call failed after its retries (recorded as failed; a resume retries it)."""

    def on_essay_done(self, essay: Essay, scores: list[TraitScore]) -> None:
        """One essay finished, with its final scores (a trait whose call failed is left out)."""


NO_HOOKS = RunHooks()
"""Hooks that do nothing."""
