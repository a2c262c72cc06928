"""The one reader of a run: its store (``open_store``), its stored configuration (``run_config``,
``stored_config``), its essays, Judge records and final trait scores (``load_run``; the scores are the rows the
store keeps of each protocol's final scores, :meth:`madrag.store.RunStore.scores`), and flat score rows for
export."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from madrag.data.essay import Essay
from madrag.errors import InputError
from madrag.metrics import PAPER_TIES, TIE_RULES, TieRule
from madrag.pipeline import migrations
from madrag.pipeline.unusable import Unusable, stored_accounts
from madrag.protocols.base import TraitScore
from madrag.records import AgentRecord
from madrag.rubric import Rubric
from madrag.store import RunStore

PAPER_ORDER = ["SA", "SARAG", "MA", "MAD", "MARAG", "MADRAG"]
"""The MADRAG paper's ablation order: how a run's protocols are listed when its configuration does not order them."""


@dataclass
class RunData:
    """What a finished (or partial) run holds, read once from its store."""

    run_dir: Path
    rubric: Rubric
    essays: list[Essay]
    scores: list[TraitScore]
    protocols: list[str]
    data_path: Path | None
    config: dict[str, Any] = field(default_factory=dict)
    judges: list[AgentRecord] = field(default_factory=list)  # every Judge record (rationales, exemplars, debate)
    # how this reading's reference labels round a tie: half up (the paper's), unless an evaluation chose a rule
    # (evaluate_run, the report and the error export set the run's own, or the one asked for)
    label_ties: TieRule = PAPER_TIES
    # per protocol, the scores its last finished job could not read (None: no job of the run finished)
    unusable: dict[str, Unusable] | None = None

    @property
    def reference_ties(self) -> TieRule:
        """The tie rule of the run's reference labels (:func:`recorded_ties`)."""
        return recorded_ties(self.config)

    def score_map(self) -> dict[tuple[str, str, str], TraitScore]:
        """(protocol, essay id, trait) -> the protocol's final score."""
        return {(s.protocol, s.essay_id, s.trait): s for s in self.scores}


def open_store(run_dir: Path) -> RunStore:
    """The run's store, opened read-only: reading leaves the run's files exactly as they were (an older run is
    read in memory through :mod:`madrag.pipeline.migrations`, a run on a read-only filesystem can be read); an
    InputError (not a new empty store) when ``run_dir`` holds no run."""
    return migrations.open_store(require_run(run_dir) / "store.sqlite", read_only=True)


def require_run(run_dir: Path) -> Path:
    """``run_dir`` when it holds a run (a ``store.sqlite``), else an InputError: checked before a command
    writes anything in the run folder."""
    if not (Path(run_dir) / "store.sqlite").is_file():
        raise InputError(f"no run at {run_dir} (missing store.sqlite)")
    return Path(run_dir)


def _ordered_protocols(found: set[str], configured: list[str]) -> list[str]:
    """The run's configured order, else the paper's ablation order, then any others alphabetically."""
    ordered = [p for p in configured if p in found]
    ordered += [p for p in PAPER_ORDER if p in found and p not in ordered]
    return ordered + sorted(found - set(ordered))


def run_config(store: RunStore) -> tuple[dict[str, Any], list[str]]:
    """The configuration a run stored when it started (``{}`` when it stored none) and the names of its
    configured protocols, in order: the one place a run's stored configuration is read."""
    config = store.get_meta("config")
    if not isinstance(config, dict):
        return {}, []
    names = [str(p["name"]) for p in config.get("protocols", []) if isinstance(p, dict) and "name" in p]
    return config, names


def recorded_ties(config: dict[str, Any]) -> TieRule:
    """The tie rule a run's reference labels (its exemplars' scores) used: ``settings.reference_ties``, half up
    (the default, not stored) when the run's settings do not name one."""
    settings = config.get("settings")
    value = settings.get("reference_ties", PAPER_TIES) if isinstance(settings, dict) else PAPER_TIES
    for rule in TIE_RULES:
        if rule == value:
            return rule
    raise InputError(f"the run's reference_ties setting {value!r} is not one of {', '.join(TIE_RULES)}")


def stored_config(store: RunStore, run_dir: Path) -> tuple[dict[str, Any], Rubric, list[str]]:
    """(configuration, rubric, configured protocol names) a run stored when it started; InputError when it has
    none (what evaluating a run needs)."""
    config, names = run_config(store)
    if "rubric" not in config:
        raise InputError(f"run at {run_dir} has no stored configuration (was it started by madrag score?)")
    return config, Rubric.model_validate(config["rubric"]), names


def answer_only(record: AgentRecord) -> AgentRecord:
    """A Judge record without its prompt and its tokens' log probabilities (most of a record's size), which no
    reader of a finished run's scores, rationales, exemplars or debate needs: the run's records are held this way,
    so a large run's reading does not hold every prompt at once."""
    return record.model_copy(update={"messages": [], "tokens": None})


def load_run(run_dir: Path, data_path: Path | None = None, judges: bool = True) -> RunData:
    """Read rubric, essays, Judge records (without their prompts and tokens: ``answers_only``) and final trait scores of
    a run; ``data_path`` overrides the stored data file. ``judges=False``: the Judge records are not read
    (``RunData.judges`` empty: what evaluating the scores needs, in less memory)."""
    store = open_store(run_dir)
    try:
        config, rubric, configured = stored_config(store, run_dir)
        essays = store.essays()
        # the consensus protocols' agent records (the consensus paper) are read from the store by their namespaces
        found = [r for r in store.records(role="judge", answers_only=True) if not r.failed] if judges else []
        scores = store.scores()
        accounts = stored_accounts(store)
    finally:
        store.close()
    stored = config.get("data")
    path = data_path or (Path(stored) if stored else None)
    protocols = _ordered_protocols({s.protocol for s in scores}, configured)
    return RunData(Path(run_dir), rubric, essays, scores, protocols, path, config, found, unusable=accounts)


def score_rows(essays: list[Essay], scores: list[TraitScore], rubric: Rubric) -> list[dict[str, Any]]:
    """Flat rows (essay x trait x protocol) for CSV/JSONL export and tables."""
    by_id = {e.id: e for e in essays}
    return [score_row(s, by_id.get(s.essay_id), rubric) for s in scores]


def score_row(s: TraitScore, essay: Essay | None, rubric: Rubric) -> dict[str, Any]:
    """One flat row of :func:`score_rows` (``essay``: None when the run does not keep the score's essay)."""
    trait = rubric.trait(s.trait)
    result = s.result
    return {
        "essay_id": s.essay_id,
        "protocol": s.protocol,
        "trait": s.trait,
        "score": s.score,
        "reference": essay.reference(trait) if essay else None,
        "rater1": essay.rater(trait.name, 0) if essay else None,
        "rater2": essay.rater(trait.name, 1) if essay else None,
        "score_mode": result.mode if result else "failed",
        "expected": None if result is None or result.expected is None else round(result.expected, 4),
        "distribution": None if result is None else result.distribution,
        "n_judges": s.n_judges,
        "n_usable": s.n_usable,
        "truncated": s.truncated,
        "rationale": s.rationale,
    }


def each_score_row(store: RunStore, rubric: Rubric) -> Iterator[dict[str, Any]]:
    """:func:`score_rows` of a stored run, streamed: its scores and its essays read side by side in the essays'
    order (:meth:`RunStore.each_score`, :meth:`RunStore.each_essay`), one of each held at a time, and the essays'
    ids (what tells a score whose essay the run does not keep: those come first)."""
    kept = {essay.id for essay in store.each_essay()}
    essays = store.each_essay()
    essay: Essay | None = None
    for s in store.each_score():
        if s.essay_id not in kept:
            yield score_row(s, None, rubric)
            continue
        while essay is None or essay.id != s.essay_id:
            essay = next(essays)
        yield score_row(s, essay, rubric)


def distinct_runs(folders: list[Path]) -> list[Path]:
    """``folders``, each a run (:func:`require_run`) given once; an InputError naming a run given twice (the same
    folder under two spellings or through a link), which would count one run's scores twice."""
    for i, folder in enumerate(folders):
        store = require_run(folder) / "store.sqlite"
        for earlier in folders[:i]:
            if os.path.samefile(earlier / "store.sqlite", store):
                raise InputError(f"{earlier} and {folder} are the same run: give each run once")
    return list(folders)
