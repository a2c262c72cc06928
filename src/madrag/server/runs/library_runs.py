"""The server's reader of runs, through the library: a run's final trait scores (the rows its store keeps), one
essay's records, the flat export rows,
``madrag eval``'s tables and ``madrag report``.

With :mod:`madrag.server.library` (inputs and jobs) this is the only place the server calls the library."""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from madrag.data.essay import Essay
from madrag.evaluation.run import load_run, open_store, score_rows, stored_config
from madrag.protocols.base import TraitScore
from madrag.records import AgentRecord
from madrag.rubric import Rubric


@dataclass
class RunView:
    """A run as the pages show it: rubric, essays and every protocol's final trait scores."""

    rubric: Rubric
    essays: list[Essay]
    scores: list[TraitScore]
    protocols: list[str]
    has_human: bool


def read_run(run_dir: Path) -> RunView:
    """Rubric, essays and final trait scores of a run, by the library's run reader."""
    run = load_run(run_dir, judges=False)  # the scores' rows: no record is read
    has_human = any(e.rater_scores for e in run.essays)
    return RunView(run.rubric, run.essays, run.scores, run.protocols, has_human)


def stored_version(run_dir: Path) -> tuple[int, int, float]:
    """What changes when a run's store does: its record count, and its score rows' count and latest time (a
    run-wide protocol's fit rewrites its rows at a job's end without a new record)."""
    with closing(open_store(run_dir)) as store:
        return (store.count(), *store.score_stamp())


def view_of(run_dir: Path, scores: list[TraitScore]) -> RunView:
    """A run's view from scores already computed by the library (a finished job's, or a running job's so far)."""
    with closing(open_store(run_dir)) as store:
        _config, rubric, configured = stored_config(store, run_dir)
        essays = store.essays()
    found = {s.protocol for s in scores}
    protocols = [p for p in configured if p in found] + sorted(found - set(configured))
    return RunView(rubric, essays, scores, protocols, any(e.rater_scores for e in essays))


def export_rows(view: RunView) -> list[dict[str, Any]]:
    """The library's flat score rows (essay x trait x protocol)."""
    return score_rows(view.essays, view.scores, view.rubric)


def essay_records(run_dir: Path, judge_keys: list[str]) -> dict[str, AgentRecord]:
    """The Judge records with these keys and every debate record they read, by key (missing ones left out)."""
    if not (run_dir / "store.sqlite").is_file():
        return {}
    with closing(open_store(run_dir)) as store:  # reading a run never changes it
        found = {k: r for k in judge_keys if (r := store.get(k)) is not None}
        debate = [str(k) for judge in list(found.values()) for k in judge.context.get("debate", []) or []]
        found.update({k: r for k in debate if k not in found and (r := store.get(k)) is not None})
        return found


def score_signals(run_dir: Path, protocol: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The review queue's signals kept with ``protocol``'s final scores, by essay and trait
    (:meth:`~madrag.store.RunStore.score_signals`): read from the run's score rows alone, none of its records."""
    if not (run_dir / "store.sqlite").is_file():
        return {}
    with closing(open_store(run_dir)) as store:  # reading a run never changes it
        return store.score_signals(protocol)


def evaluation_tables(run_dir: Path, plots: bool = False) -> tuple[dict[str, list[list[str]]], list[str]]:
    """``madrag eval``'s display tables of a run (title -> rows, the first row the header) and, with ``plots``,
    the HTML report's QWK and score-distribution plots (``<img>`` elements the report module builds)."""
    from madrag.evaluation.agreement import evaluate_run
    from madrag.evaluation.report import distribution_plot, qwk_plot
    from madrag.evaluation.tables import display_tables, fmt

    run = load_run(run_dir, judges=False)
    evaluation = evaluate_run(run, bootstrap=200, seed=0)
    out: dict[str, list[list[str]]] = {}
    for title, frame in display_tables(evaluation).items():
        rows = [["", *[str(c) for c in frame.columns]]]
        rows += [[fmt(index), *[fmt(v) for v in row.tolist()]] for index, row in frame.iterrows()]
        out[title] = rows
    return out, [qwk_plot(evaluation), distribution_plot(run)] if plots else []


def write_report(run_dir: Path) -> Path:
    """``madrag report``: the run's self-contained HTML report, written into the run directory."""
    from madrag.audit.report import audit_html
    from madrag.evaluation.report import write_report as library_report

    return library_report(run_dir, bootstrap=200, extra=audit_html(run_dir))
