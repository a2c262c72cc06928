"""The consensus paper over several judge models: the averages of Tables 1, 2, 8 and 9, Table 3's cross-model grid
and the
runs behind them.

The paper's Tables 1, 2, 8 and 9 are "averaged over six judge models": every metric is computed per run (one
judge model performing every role, as :func:`madrag.paper.consensus.metrics.evaluate_consensus` does) and the
metric is then the plain mean over the runs. Table 3 assigns the Strict and Lenient roles to different models
(runs made with ``--role-provider strict=...`` / ``lenient=...``): :func:`cross_model_grid` lays a metric of
those runs out as strict model x lenient model.

* :func:`role_models`: which model each judge role of a run used, from its stored configuration.
* :func:`common_essays`: the essays every run scored; the averages are computed on those only, so that every
  model is measured on the same essay-traits (the runs must share one rubric and agree on the references).
* :func:`average_evaluations`: per protocol and trait the mean over the single-model runs of each metric
  (NaN when it is NaN in any of those runs: never a partial average), with the models it averaged.
* :func:`evaluate_runs`: all of it from loaded runs (display and files:
  :mod:`madrag.paper.consensus.multi_tables`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from madrag.errors import InputError
from madrag.paper.consensus.frames import resolve_protocol
from madrag.paper.consensus.metrics import AGENT_ORDER, ALL, ConsensusEvaluation, evaluate_consensus

ALIGNMENT_VALUES = ["rmse", "spearman", "mean_pred", "mean_ref", "shift", "shift_ref"]
"""The alignment metrics averaged over runs (Tables 1, 2 and 8)."""
DOMINANCE_VALUES = ["shift_consensus", "shift_strict", "shift_lenient", "midpoint", "beyond_midpoint"]
GRID_METRICS = ("rmse", "spearman", "mean_pred", "shift_ref", "shift")
"""The alignment metrics ``--grid-metric`` accepts (Table 3 shows RMSE)."""
GRID_COLUMNS = ["strict_model", "lenient_model", "value", "n_runs", "runs"]
SINGLE_COLUMNS = ["model", "value", "n_runs", "runs"]


@dataclass
class LoadedRun:
    """One run's consensus frames (:func:`madrag.paper.consensus.frames.load_consensus_run`) and its role models."""

    name: str
    path: Path
    agent_scores: pd.DataFrame
    refs: pd.DataFrame
    config: dict[str, Any]
    models: dict[str, str] = field(default_factory=dict)  # role -> model label, for the roles the run used

    @property
    def model(self) -> str | None:
        """The one model of every role (a run of the paper's Tables 1, 2, 8, 9), else None (cross-model)."""
        labels = set(self.models.values())
        return next(iter(labels)) if len(labels) == 1 else None


def model_label(identity: Any) -> str:
    """A provider's stored identity as a model name: the model, else the model file's name, else the kind
    (``fake``, ``llamacpp`` for the embedded model); ``?`` when the run recorded none."""
    if not isinstance(identity, dict):
        return "?"
    if isinstance(identity.get("instance"), dict):  # an in-memory backend (the Python API): its description
        described = identity["instance"]
        return str(described.get("model") or described.get("provider") or "?")
    if identity.get("model"):
        return str(identity["model"])
    if identity.get("model_path"):
        return Path(str(identity["model_path"])).name
    return str(identity.get("kind") or "?")


def role_models(config: dict[str, Any], roles: Sequence[str]) -> dict[str, str]:
    """Each role's model: its ``--role-provider`` backend when it had one, else the run's provider."""
    routed = config.get("role_providers")
    routed = routed if isinstance(routed, dict) else {}
    return {role: model_label(routed.get(role, config.get("provider"))) for role in roles}


def check_rubrics(runs: Sequence[LoadedRun]) -> None:
    """An InputError when the runs' rubrics differ in their traits or score ranges (averages need one rubric)."""

    def key(run: LoadedRun) -> list[tuple[Any, ...]]:
        traits = run.config.get("rubric", {}).get("traits", [])
        return [(t.get("name"), t.get("min"), t.get("max")) for t in traits]

    first = key(runs[0])
    for run in runs[1:]:
        if key(run) != first:
            raise InputError(
                f"runs {runs[0].name} and {run.name} have different rubrics (traits {first} vs {key(run)}); "
                "only runs of one rubric can be averaged"
            )


def common_essays(runs: Sequence[LoadedRun]) -> tuple[list[str], list[str]]:
    """(the essay ids every run scored, in the first run's order; notes naming the essays each run loses).

    An InputError when no essay is common, or when two runs give a common essay-trait different human
    references (they were made on different data)."""
    scored = [list(dict.fromkeys(r.agent_scores["essay_id"].tolist())) for r in runs]
    common_set = set(scored[0]).intersection(*scored[1:])
    common = [e for e in scored[0] if e in common_set]
    if not common:
        raise InputError("the runs have no scored essay in common; averages need the same essays")
    base = runs[0].refs.set_index(["essay_id", "trait"])["reference"]
    notes = []
    for run, ids in zip(runs, scored, strict=True):
        ref = run.refs.set_index(["essay_id", "trait"])["reference"]
        shared = ref.index.intersection(base.index)
        shared = shared[shared.get_level_values("essay_id").isin(common_set)]
        differ = ~np.isclose(ref.loc[shared], base.loc[shared], equal_nan=True)
        if differ.any():
            essay, trait = shared[differ][0]
            raise InputError(
                f"runs {runs[0].name} and {run.name} give essay {essay} ({trait}) different human references; "
                "were they made on the same data?"
            )
        if len(ids) > len(common):
            notes.append(f"{run.name}: {len(ids) - len(common)} essay(s) not scored by every run left out")
    return common, notes


def _restricted(run: LoadedRun, essays: set[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    scores = run.agent_scores[run.agent_scores["essay_id"].isin(essays)]
    return scores, run.refs[run.refs["essay_id"].isin(essays)]


def _mean_over_runs(long: pd.DataFrame, keys: list[str], values: list[str], models: dict[str, str]) -> pd.DataFrame:
    """Per ``keys``: the mean over the runs of each value (NaN when any run's is NaN), ``n_runs`` and the runs'
    ``models`` in the runs' order."""
    if long.empty:
        return pd.DataFrame(columns=[*keys, "n_runs", "models", *values])
    grouped = long.groupby(keys, sort=False)
    means = grouped[values].mean()
    means = means.mask(long[values].isna().groupby([long[k] for k in keys], sort=False).any())
    runs = grouped["run"].agg(list)
    out = means.reset_index()
    out.insert(len(keys), "n_runs", [len(r) for r in runs])
    out.insert(len(keys) + 1, "models", [", ".join(models[x] for x in r) for r in runs])
    return out


def _long(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    parts = [f.assign(run=name) for name, f in frames.items() if not f.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["run"])


@dataclass
class MultiConsensus:
    """Several runs' consensus evaluation: per-run long tables (column ``run``), their averages over the
    single-model runs, Table 3's grid and its single-judge baselines, and notes."""

    runs: pd.DataFrame
    per_run_alignment: pd.DataFrame
    per_run_trajectories: pd.DataFrame
    alignment: pd.DataFrame
    trajectories: pd.DataFrame
    dominance: pd.DataFrame
    grid: pd.DataFrame
    single_baselines: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


def runs_table(runs: Sequence[LoadedRun], n_essays: int) -> pd.DataFrame:
    """One row per run: its name, folder, the model of each role, and whether it enters the averages."""
    found = {role for r in runs for role in r.models}
    roles = [a for a in AGENT_ORDER if a in found] + sorted(found - set(AGENT_ORDER))
    rows = []
    for run in runs:
        row: dict[str, Any] = {"run": run.name, "path": str(run.path), "model": run.model}
        row.update({f"model_{role}": run.models.get(role) for role in roles})
        row.update(averaged=run.model is not None, n_essays_used=n_essays)
        rows.append(row)
    return pd.DataFrame(rows)


def _pooled_metric(alignment: pd.DataFrame, protocol: str, metric: str) -> float | None:
    """The run's ``metric`` of ``protocol`` (or the one protocol of that base name), all traits pooled; None
    when the run has no such protocol."""
    name = resolve_protocol(protocol, alignment["protocol"].unique().tolist())
    rows = alignment[(alignment["protocol"] == name) & (alignment["trait"] == ALL)]
    return None if name is None or rows.empty else float(rows[metric].iloc[0])


def _grouped(rows: list[dict[str, Any]], keys: list[str], columns: list[str]) -> pd.DataFrame:
    """Rows (``keys``, ``value``, ``run``) grouped by ``keys``: mean value (NaN if any is NaN), runs, count."""
    frame = pd.DataFrame(rows, columns=[*keys, "value", "run"])
    out = _mean_over_runs(frame, keys, ["value"], {str(r["run"]): str(r["run"]) for r in rows})
    return out.rename(columns={"models": "runs"})[columns]


def cross_model_grid(
    runs: Sequence[LoadedRun], alignments: dict[str, pd.DataFrame], protocol: str = "ConsensusMAD", metric: str = "rmse"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 3: (grid, single-judge baselines), all traits pooled.

    The grid's rows are (strict model, lenient model) with ``metric`` of ``protocol`` in the runs with that pair
    (the mean when several runs have it); the same-model runs are its diagonal. The baselines: per model, the
    Single Judge's ``metric`` in the runs whose single role used it."""
    pairs, singles = [], []
    for run in runs:
        alignment = alignments[run.name]
        value = _pooled_metric(alignment, protocol, metric)
        if value is not None and {"strict", "lenient"} <= set(run.models):
            pairs.append(
                {"strict_model": run.models["strict"], "lenient_model": run.models["lenient"], "value": value}
                | {"run": run.name}
            )
        single = _pooled_metric(alignment, "SingleJudge", metric)
        if single is not None and "single" in run.models:
            singles.append({"model": run.models["single"], "value": single, "run": run.name})
    return (
        _grouped(pairs, ["strict_model", "lenient_model"], GRID_COLUMNS),
        _grouped(singles, ["model"], SINGLE_COLUMNS),
    )


def _protocol_notes(per_run: pd.DataFrame, averaged: list[str]) -> list[str]:
    """A note for each protocol some averaged runs lack (its averages are over the runs that have it)."""
    notes = []
    for protocol, rows in per_run[per_run["run"].isin(averaged)].groupby("protocol", sort=False):
        missing = [r for r in averaged if r not in set(rows["run"])]
        if missing:
            notes.append(f"{protocol}: not in run(s) {', '.join(missing)}; averaged over the other runs")
    return notes


def average_evaluations(
    evaluations: dict[str, ConsensusEvaluation], models: dict[str, str]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(alignment, trajectories, dominance) averaged over the runs of ``evaluations`` (run name -> evaluation
    of one judge model, ``models``: run name -> model): per protocol, trait (and round, or consensus protocol)
    the mean over the runs of each metric; NaN when it is NaN in any run; ``n_runs`` and ``models`` say over
    which runs. The mean of a run's ``beyond_midpoint`` is that of the averaged shifts (it is linear in them)."""
    align = _long({k: e.alignment for k, e in evaluations.items()})
    traj = _long({k: e.trajectories for k, e in evaluations.items()})
    dom = _long({k: e.dominance for k, e in evaluations.items()})
    traj_values = [c for c in traj.columns if c.startswith("mean_") or c in ("rmse", "spearman")]
    return (
        _mean_over_runs(align, ["protocol", "trait"], ALIGNMENT_VALUES, models),
        _mean_over_runs(traj, ["protocol", "round", "trait"], traj_values, models),
        _mean_over_runs(dom, ["consensus", "trait"], DOMINANCE_VALUES, models),
    )


def evaluate_runs(
    runs: Sequence[LoadedRun],
    baseline: str = "SingleJudge",
    grid_protocol: str = "ConsensusMAD",
    grid_metric: str = "rmse",
) -> MultiConsensus:
    """Every run evaluated on the essays all of them scored (:func:`common_essays`), the averages over the
    single-model runs (a run whose roles used different models enters only the grid) and Table 3's grid."""
    if len({r.name for r in runs}) != len(runs):
        raise InputError("give each run once (two runs share a name)")
    check_rubrics(runs)
    essays, notes = common_essays(runs)
    keep = set(essays)
    evaluations = {r.name: evaluate_consensus(*_restricted(r, keep), bootstrap=0, baseline=baseline) for r in runs}
    single = {r.name: r.model for r in runs if r.model is not None}
    for run in runs:
        if run.model is None:
            notes.append(f"{run.name}: its roles used different models ({_roles_text(run)}); in the grid only")
    labels = list(single.values())
    for label in dict.fromkeys(labels):
        if labels.count(label) > 1:
            notes.append(f"model {label} judged {labels.count(label)} of the averaged runs; each counts once")
    alignment, trajectories, dominance = average_evaluations(
        {k: v for k, v in evaluations.items() if k in single}, {k: str(v) for k, v in single.items()}
    )
    per_run_alignment = _long({k: e.alignment for k, e in evaluations.items()})
    notes += _protocol_notes(per_run_alignment, list(single))
    grid, singles = cross_model_grid(runs, {k: e.alignment for k, e in evaluations.items()}, grid_protocol, grid_metric)
    meta = {
        "runs": [r.name for r in runs],
        "averaged_runs": list(single),
        "models": labels,
        "n_essays": len(essays),
        "n_essay_traits": int(runs[0].refs[runs[0].refs["essay_id"].isin(keep)]["reference"].notna().sum()),
        "grid_protocol": grid_protocol,
        "grid_metric": grid_metric,
        "average": "per-run metric on the common essays, then the plain mean over the single-model runs",
    }
    return MultiConsensus(
        runs=runs_table(runs, len(essays)),
        per_run_alignment=per_run_alignment,
        per_run_trajectories=_long({k: e.trajectories for k, e in evaluations.items()}),
        alignment=alignment,
        trajectories=trajectories,
        dominance=dominance,
        grid=grid,
        single_baselines=singles,
        notes=notes,
        meta=meta,
    )


def _roles_text(run: LoadedRun) -> str:
    return ", ".join(f"{role} {model}" for role, model in run.models.items())


def load_runs(run_dirs: Sequence[Path], reference: str = "mean") -> list[LoadedRun]:
    """Each run's consensus frames and role models; a run is named by its folder (its path when two folders
    share a name); a run given twice is refused (:func:`~madrag.evaluation.run.distinct_runs`)."""
    from madrag.evaluation.run import distinct_runs
    from madrag.paper.consensus.frames import load_consensus_run

    distinct_runs([Path(d) for d in run_dirs])
    names = [Path(d).name for d in run_dirs]
    out = []
    for run_dir, name in zip(run_dirs, names, strict=True):
        frame, refs, config = load_consensus_run(Path(run_dir), "rounded" if reference == "rounded" else "mean")
        roles = list(dict.fromkeys(frame["agent"].tolist()))
        label = name if names.count(name) == 1 else str(run_dir)
        out.append(LoadedRun(label, Path(run_dir), frame, refs, config, role_models(config, roles)))
    return out
