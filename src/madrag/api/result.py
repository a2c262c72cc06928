"""The result of :func:`madrag.score`: trait scores as a DataFrame, every agent call, the evaluation tables.

Everything is read from (or derived from) the run directory, which holds the run exactly as ``madrag score``
leaves it: ``madrag eval``, ``madrag report`` and ``madrag runs export`` work on it too.
"""

from __future__ import annotations

import functools
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from madrag.agents.calls import CallStats
from madrag.data.essay import Essay
from madrag.evaluation.agreement import Evaluation, evaluate
from madrag.evaluation.run import open_store, score_rows
from madrag.evaluation.tables import save
from madrag.pipeline.unusable import Unusable
from madrag.protocols.base import TraitScore
from madrag.records import FAILED_MARK, AgentRecord
from madrag.rubric import Rubric

SCORE_COLUMNS = ["essay", "trait", "protocol", "score", "reference", "mode", "rationale"]


class FailedCall(NamedTuple):
    """A call of the run that got no answer after its retries (its essay-trait has no score)."""

    essay: str
    trait: str
    role: str
    protocol: str
    error: str


def still_failed(records: list[AgentRecord], essay_ids: set[str]) -> list[FailedCall]:
    """The calls of ``essay_ids`` whose last attempt failed and that have no answer since (one per call, in the
    order they failed)."""
    answered = {r.key for r in records if not r.failed}
    latest: dict[str, AgentRecord] = {}
    for r in sorted((r for r in records if r.failed and r.essay_id in essay_ids), key=lambda r: r.created_at):
        call = r.key.split(FAILED_MARK, 1)[0]
        if call not in answered:
            latest.pop(call, None)
            latest[call] = r
    return [FailedCall(r.essay_id, r.trait, r.role, r.protocol, r.error or "") for r in latest.values()]


@dataclass
class ScoringResult:
    """One scoring run's outcome.

    ``scores`` has one row per (essay, trait, protocol) with columns ``essay, trait, protocol, score,
    reference, mode, rationale`` (``score`` is missing when the Judge's answer was unusable, ``reference`` when
    the essay has no human score). ``records`` is every agent call stored in the run, ``evaluate()`` builds
    ``madrag eval``'s tables. ``run_dir`` is the run directory; ``temporary`` says it was made for this call
    (under the system's temporary folder) because no ``run_dir`` was given.

    ``failed_calls`` counts the calls of this scoring that got no answer after their retries (each is a failed
    record; its essay-trait has no row in ``scores``); ``failures`` lists the run's calls still failed, as
    (essay, trait, role, protocol, error). Scoring again with the same ``run_dir`` retries exactly those.
    """

    run_dir: Path
    temporary: bool
    run_id: str
    resumed: bool
    rubric: Rubric
    protocols: list[str]
    essays: list[Essay]
    trait_scores: list[TraitScore]
    stats: CallStats
    elapsed_s: float
    # per protocol, its unusable judge answers and missing essay-trait scores, by cause (madrag.pipeline.unusable)
    unusable: dict[str, Unusable] = field(default_factory=dict)

    @functools.cached_property
    def scores(self) -> pd.DataFrame:
        """The trait scores of the essays scored, in essay order, then protocol, then trait (as the run made them)."""
        rows = score_rows(self.essays, self.trait_scores, self.rubric)
        frame = pd.DataFrame(rows).rename(columns={"essay_id": "essay", "score_mode": "mode"})
        if frame.empty:
            return pd.DataFrame(columns=SCORE_COLUMNS)
        return frame[SCORE_COLUMNS].astype({"score": "Int64", "reference": "Int64"})

    @property
    def failed_calls(self) -> int:
        """Calls of this scoring that failed after their retries (0 when every call was answered)."""
        return self.stats.failed_calls

    @property
    def failures(self) -> list[FailedCall]:
        """The run's calls still without an answer after their retries, read from its store (see the class)."""
        return still_failed(self.records, {e.id for e in self.essays})

    @property
    def records(self) -> list[AgentRecord]:
        """Every agent call stored in the run directory (read from its store each time)."""
        with closing(open_store(self.run_dir)) as store:
            return list(store.records())

    def evaluate(
        self,
        bootstrap: int = 2000,
        seed: int = 0,
        baseline: str | None = None,
        data: str | Path | None = None,
        save_to: str | Path | None = None,
    ) -> Evaluation:
        """``madrag eval``'s tables of the run as DataFrames: ``.qwk`` (QWK per protocol and trait with
        bootstrap CIs, and the Human-Human rows), ``.extreme`` (the extreme-score subset), ``.comparisons``
        (paired bootstrap against ``baseline``, default MADRAG); ``.notes`` says what was left out.
        :func:`madrag.evaluation.agreement.wide` gives the paper's layout.

        ``data`` is the full data file for the Human-Human row of the whole file (in-memory essays have none).
        The tables are also written, as ``madrag eval`` writes them, to ``save_to`` (default
        ``<run_dir>/eval``).
        """
        evaluation = evaluate(
            self.run_dir, bootstrap=bootstrap, seed=seed, baseline=baseline, data=Path(data) if data else None
        )
        save(evaluation, Path(save_to) if save_to is not None else self.run_dir / "eval")
        return evaluation

    def __repr__(self) -> str:
        where = f"{self.run_dir} (temporary)" if self.temporary else str(self.run_dir)
        return (
            f"ScoringResult({len(self.essays)} essays x {len(self.rubric.traits)} traits x "
            f"{', '.join(self.protocols)}; {self.stats.made} calls made, {self.stats.reused} reused"
            f"{', resumed' if self.resumed else ''}{self._failed_note()}; run_dir={where})"
        )

    def _failed_note(self) -> str:
        n = self.failed_calls
        if not n:
            return ""
        return (
            f"; {n} call{'s' if n != 1 else ''} failed after retries; score again with the same run_dir to retry them"
        )
