"""Progress of a Python API run: a rich progress bar over the trait scores (terminal or notebook), or nothing.

The bar counts (essay, trait, protocol) scores as ``madrag score``'s does: a score when its first Judge record
arrives (a Judge record of every trait, e.g. SA's: each trait it scored), any other score (a protocol without
Judge records, e.g. the consensus paper's consensus judges) when its essay is done. A call that failed after its retries
leaves its essay-traits without a score: they count as done when their essay finishes (so the bar reaches its
total), and the bar shows how many calls failed.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from madrag.data.essay import Essay
from madrag.pipeline.hooks import RunHooks
from madrag.protocols.base import TraitScore
from madrag.protocols.scores import ALL_TRAITS
from madrag.records import AgentRecord


class ScoreProgress(RunHooks):
    """:class:`~madrag.pipeline.hooks.RunHooks` for :func:`madrag.pipeline.job.execute` that drive a progress
    bar; all no-ops when disabled.

    >>> with ScoreProgress(enabled=False) as progress:
    ...     progress.on_start(8)
    """

    def __init__(self, enabled: bool = True, console: Console | None = None, essay_lines: bool = False) -> None:
        self.enabled = enabled
        self.console = console or Console(stderr=True)
        self.essay_lines = essay_lines  # print each finished essay's scores above the bar (as madrag score does)
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._bank_task: TaskID | None = None
        self.essays_done = 0  # essays finished in this call
        self.per_essay: int | None = None  # (trait, protocol) scores of one essay, when the caller knows
        # the run's protocols, when the caller knows: a Judge record of another (an adaptive debate's debate-free
        # Judge, MARAG's for MADRAG) is no score of the run
        self.protocols: set[str] | None = None
        # the run's protocols scored over the run (CJ, MTS: an essay's score depends on the others): an essay's
        # line says their scores come after the run instead of showing a provisional "?"
        self.over_run: set[str] = set()
        self.failed = 0  # calls failed after their retries in this call
        self._failed_by_essay: dict[str, int] = {}
        self._counted: dict[str, set[tuple[str, str]]] = {}  # essay -> (protocol, trait) the bar counted

    def __enter__(self) -> ScoreProgress:
        if self.enabled:
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[failed]}"),
                TimeElapsedColumn(),
                console=self.console,
            )
            self._bank_task = self._progress.add_task(
                "embedding the exemplar pool", total=None, visible=False, failed=""
            )
            self._task = self._progress.add_task("trait scores", total=None, visible=False, failed="")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def note(self, message: str) -> None:
        """A line above the bar (or on its own when the bar is not running)."""
        if self.enabled:
            (self._progress.console if self._progress else self.console).print(message, markup=False, highlight=False)

    def on_bank_progress(self, done: int, total: int) -> None:
        """Pool essays embedded so far while the exemplar bank is built (the bar shows from the first call)."""
        if self._progress is not None and self._bank_task is not None:
            self._progress.update(self._bank_task, completed=done, total=total, visible=True)
            self._progress.start()

    def on_start(self, total: int) -> None:
        """The number of (essay, trait, protocol) scores the run produces. The bar shows from here: the input
        is loaded and checked, so an input error before this is one line, not an empty bar and the line."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, total=total, visible=True)
            self._progress.start()

    on_stage = note  # a stage of the run (building the exemplar bank, scoring): a line above the bar

    def on_record(self, record: AgentRecord) -> None:
        """One agent call finished: the first Judge record of a trait advances the bar."""
        if self._progress is None or self._task is None:
            return
        if (
            record.role == "judge"
            and record.index == 0
            and (self.protocols is None or record.protocol in self.protocols)
        ):
            traits = list(record.trait_scores or {}) if record.trait == ALL_TRAITS else [record.trait]
            self._count(record.essay_id, {(record.protocol, t) for t in traits})
        self._progress.update(self._task, description=f"{record.role:>8} {record.essay_id} {record.trait:<14.14}")

    def on_failed(self, record: AgentRecord) -> None:
        """A call failed after its retries (recorded as failed): counted, and shown next to the bar."""
        self.failed += 1
        self._failed_by_essay[record.essay_id] = self._failed_by_essay.get(record.essay_id, 0) + 1
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, failed=f"{self.failed} failed")

    def _count(self, essay_id: str, units: set[tuple[str, str]]) -> None:
        """Advance the bar by the (protocol, trait) scores of ``essay_id`` not counted yet."""
        seen = self._counted.setdefault(essay_id, set())
        new = len(units - seen)
        seen |= units
        if new and self._progress is not None and self._task is not None:
            self._progress.advance(self._task, new)

    def on_essay_done(self, essay: Essay, scores: list[TraitScore]) -> None:
        """One essay finished: its scores not counted yet count now, and so do, when a call of it failed, the
        scores it is left without; with ``essay_lines`` its scores are printed."""
        self.essays_done += 1
        self._count(essay.id, {(s.protocol, s.trait) for s in scores})
        failed = self._failed_by_essay.get(essay.id, 0)
        counted = len(self._counted.pop(essay.id, set()))
        if failed and self.per_essay is not None and self._progress is not None and self._task is not None:
            self._progress.advance(self._task, max(0, self.per_essay - counted))
        if self.essay_lines:
            self.note(f"essay {essay.id}: {essay_line(scores, failed, self.over_run)}")


def essay_line(scores: list[TraitScore], failed: int = 0, over_run: set[str] | frozenset[str] = frozenset()) -> str:
    """An essay's scores on one line: ``Ideas=2, Style=?`` (``?``: unusable), grouped by protocol when several;
    ``failed``: its calls that failed after their retries (their traits are left out, and said so); the protocols
    ``over_run`` are scored over the whole run (CJ, MTS), so their traits are named as scored after the run
    (``CJ: Ideas after the run``), where the final table shows their scores.

    >>> from madrag.protocols.base import TraitScore
    >>> essay_line([TraitScore(essay_id="1", trait="Ideas", protocol="MAD", score=2)])
    'Ideas=2'
    >>> essay_line([], failed=4)
    'every trait failed (4 calls)'
    >>> two = [TraitScore(essay_id="1", trait=t, protocol="CJ", score=None) for t in ("Ideas", "Style")]
    >>> essay_line(two, over_run={"CJ"})
    'CJ: Ideas, Style after the run'
    """
    calls = f"{failed} call{'s' if failed != 1 else ''}"
    if not scores:
        return f"every trait failed ({calls})" if failed else "no trait scored (the run is stopping)"
    line = _by_protocol(scores, over_run)
    return f"{line} ({calls} failed)" if failed else line


def _by_protocol(scores: list[TraitScore], over_run: set[str] | frozenset[str]) -> str:
    by_protocol: dict[str, list[str]] = {}
    for s in scores:
        shown = s.trait if s.protocol in over_run else f"{s.trait}={s.score if s.score is not None else '?'}"
        by_protocol.setdefault(s.protocol, []).append(shown)
    groups = {p: ", ".join(v) + (" after the run" if p in over_run else "") for p, v in by_protocol.items()}
    if len(groups) == 1 and not set(groups) & over_run:
        return next(iter(groups.values()))
    return "; ".join(f"{p}: {v}" for p, v in groups.items())
