"""The confidence study of a debate run (the confidence paper, Sections 3.3-4.3): window features of every Advocate
/ Skeptic
token log-probability trajectory, joined with the meta-evaluator's judgments, correlated, ranked and plotted.

Outputs (``save_study``): ``features.csv`` (one row per debater response), ``judgments.csv``, ``correlations.csv``
(every feature x target x role), ``top_features.csv`` (the paper's Tables 1, 3, 4: top-k per role and target),
``judgment_summary.csv``, ``trajectory_bands.csv`` and ``trajectories.png`` (Figure 2), ``figure3.png``,
``figure3_distribution.csv`` and ``pass_rates.csv`` (Figure 3, Section 4.4), and ``confidence.md``.
"""

from __future__ import annotations

import json
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from madrag.errors import InputError
from madrag.evaluation.run import open_store
from madrag.evaluation.tables import markdown_table
from madrag.files.atomic import write_text_atomic
from madrag.files.csv_safe import write_frame
from madrag.paper.confidence.analysis import (
    BINARY_TARGETS,
    ORDINAL_TARGETS,
    PAPER_RANK_BY,
    TARGET_LABELS,
    RankBy,
    correlations,
    top_features,
)
from madrag.paper.confidence.features import feature_columns, features_frame, record_logprobs
from madrag.paper.confidence.figure3 import PASS_MIN, save_figure3
from madrag.paper.confidence.job import debater_records, meta_records
from madrag.paper.confidence.judgment import SCORE_FIELDS
from madrag.paper.confidence.meta_eval import judgments_frame
from madrag.paper.confidence.trajectory import normalised_trajectory, plot_trajectories, trajectory_bands
from madrag.records import AgentRecord


@dataclass
class ConfidenceStudy:
    """Everything the study computed from one run (and its meta-evaluation, when there is one)."""

    features: pd.DataFrame
    bands: dict[str, pd.DataFrame]
    judgments: pd.DataFrame | None = None
    summary: pd.DataFrame | None = None
    correlations: pd.DataFrame | None = None
    top: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


def judgment_summary(merged: pd.DataFrame) -> pd.DataFrame:
    """Per role: responses, judged (usable judgments), unusable, mean of each dimension, critical rate, mean Q."""
    rows = []
    for role, group in merged.groupby("role", sort=True):
        judged = group[group["ok"].fillna(False).astype(bool)]
        unusable = int((group["ok"] == False).sum())  # noqa: E712 (NaN = not evaluated)
        means = {**{d: d for d in SCORE_FIELDS}, "critical_rate": "critical_flag", "q": "q"}  # column: of what
        row = {"role": role, "responses": len(group), "judged": len(judged), "unusable": unusable}
        rows.append(row | {k: float(judged[c].mean()) if len(judged) else np.nan for k, c in means.items()})
    return pd.DataFrame(rows)


def _judged_values(merged: pd.DataFrame) -> dict[tuple[str, str], pd.Series]:
    """(role, target) -> the target's values over that role's usable judgments."""
    judged = merged[merged["ok"].fillna(False).astype(bool)]
    return {
        (str(role), target): group[target]
        for role, group in judged.groupby("role", sort=True)
        for target in (*ORDINAL_TARGETS, *BINARY_TARGETS)
        if len(group)
    }


def meta_description(meta_dir: Path, judgments: pd.DataFrame) -> str:
    """Who judged: the evaluator backend and model (from the meta store) and the method the judgments used."""
    with closing(open_store(meta_dir)) as store:
        provider = store.get_meta("provider") or {}
    methods = ", ".join(sorted(str(m) for m in judgments["method"].dropna().unique())) or "?"
    return f"{provider.get('provider', '?')} / {provider.get('model', '?')}, method {methods}, temperature 0"


def run_study(
    run_dir: Path,
    meta_dir: Path | None = None,
    roles: list[str] | None = None,
    rank_by: RankBy = PAPER_RANK_BY,
    top_k: int = 3,
) -> ConfidenceStudy:
    """Features and trajectories of ``run_dir``'s debaters; with ``meta_dir`` (a meta-evaluation of the same
    run), the correlations of every feature with every judged target and the top ``top_k`` per role."""
    records = debater_records(run_dir, roles or ["advocate", "skeptic"])
    features, no_logprobs = features_frame(records)
    notes = []
    if no_logprobs:
        notes.append(
            f"{no_logprobs} debater responses have no token log-probabilities (the backend gave none) and are "
            "left out of every feature, correlation and trajectory"
        )
    if features.empty:
        raise InputError(f"no debater response in {run_dir} has token log-probabilities: nothing to analyse")
    bands = _role_bands(records)
    study = ConfidenceStudy(features=features, bands=bands, notes=notes)
    study.meta = {
        "run_dir": str(run_dir),
        "responses": len(records),
        "with_logprobs": len(features),
        "roles": sorted(bands),
        "rank_by": rank_by,
        "top_k": top_k,
    }
    if meta_dir is not None:
        _add_judgments(study, meta_dir, rank_by, top_k)
    return study


def _role_bands(records: list[AgentRecord]) -> dict[str, pd.DataFrame]:
    """Per role (alphabetically): the percentile bands of its responses' normalised trajectories."""
    by_role: dict[str, list[list[float]]] = {}
    for record in records:
        logprobs = record_logprobs(record)
        if logprobs:
            by_role.setdefault(record.role, []).append(list(normalised_trajectory(logprobs)))
    return {role: trajectory_bands(trajs) for role, trajs in sorted(by_role.items())}


def _add_judgments(study: ConfidenceStudy, meta_dir: Path, rank_by: RankBy, top_k: int) -> None:
    """Join the meta-evaluation in ``meta_dir`` to the study's features: its summary, correlations, top features
    and the notes on what is missing or constant."""
    judgments = judgments_frame(meta_records(meta_dir))
    if judgments.empty:
        raise InputError(f"the meta-evaluation in {meta_dir} holds no judgments")
    merged = study.features.merge(
        judgments.drop(columns=["essay_id", "trait", "protocol"], errors="ignore"),
        how="left",
        left_on="key",
        right_on="evaluated_key",
    )
    study.judgments = judgments
    study.summary = judgment_summary(merged)
    notes = study.notes
    missing = int(merged["evaluated_key"].isna().sum())
    if missing:
        notes.append(f"{missing} responses with logprobs have no judgment yet (run meta-eval again to finish)")
    unusable = int((judgments["ok"] == False).sum())  # noqa: E712
    if unusable:
        notes.append(f"{unusable} judgments were unusable (unparseable or out of range) and are left out, not imputed")
        cut = int(judgments["error"].fillna("").str.contains("cut off at the token limit", regex=False).sum())
        if cut:
            notes.append(f"{cut} of them were cut off at the token limit: meta-eval again with a larger --max-tokens")
    for (role, target), values in _judged_values(merged).items():
        if values.nunique() == 1:
            notes.append(
                f"{TARGET_LABELS.get(target, target)} is {values.iloc[0]:g} for every judged {role} response: "
                "no correlation is defined for it (it is absent from the top features)"
            )
    study.correlations = correlations(merged, feature_columns(study.features), (*ORDINAL_TARGETS, *BINARY_TARGETS))
    study.top = top_features(study.correlations, k=top_k, rank_by=rank_by)
    study.meta["meta_dir"] = str(meta_dir)
    study.meta["evaluator"] = meta_description(meta_dir, judgments)
    study.meta["judged"] = int(judgments["ok"].sum())


def top_display(top: pd.DataFrame) -> pd.DataFrame:
    """The top-k table as the paper prints it: role, target, rank, feature, Spearman / Kendall or AUROC / PB."""
    rows = []
    for r in top.to_dict(orient="records"):
        binary = r["target"] in BINARY_TARGETS
        rows.append(
            {
                "role": r["group"],
                "target": TARGET_LABELS.get(str(r["target"]), str(r["target"])),
                "rank": r["rank"],
                "feature": r["label"],
                "n": r["n"],
                "Spearman / AUROC": r["auroc"] if binary else r["spearman"],
                "Kendall / PB": r["point_biserial"] if binary else r["kendall"],
            }
        )
    return pd.DataFrame(rows)


def render_markdown(study: ConfidenceStudy) -> str:
    """The study as markdown (``confidence.md``): coverage, the meta-evaluation summary, the top features, notes."""
    meta = study.meta
    parts = [
        f"# Confidence vs reasoning quality: {meta.get('run_dir')}",
        "",
        f"{meta.get('with_logprobs')} of {meta.get('responses')} debater responses have token log-probabilities.",
        "",
    ]
    judged = study.judgments is not None and bool(study.judgments["ok"].any())
    if study.judgments is not None and not judged:
        parts += [
            "## Meta-evaluation",
            "",
            f"No usable judgment: all {len(study.judgments)} judgments of {meta.get('meta_dir')} were unusable "
            "(`judgments.csv` says why), so no meta-evaluation table, top features, Figure 3 or pass rates.",
            "",
        ]
    if judged and study.summary is not None:
        parts += [
            "## Meta-evaluation (means over usable judgments)",
            "",
            f"Evaluator: {meta.get('evaluator')} ({meta.get('meta_dir')}).",
            "",
            markdown_table(study.summary, index=False, digits=3),
            "",
        ]
    if judged and study.top is not None:
        how = "|Spearman rho|" if meta.get("rank_by") == "abs" else "Spearman rho"
        parts += [
            f"## Top {meta.get('top_k')} confidence features per role and target",
            "",
            f"Ordinal targets ranked by {how} (Kendall tau alongside); the critical flag by AUROC "
            f"({'distance from 0.5' if meta.get('rank_by') == 'abs' else 'value'}; point-biserial alongside).",
            "",
            markdown_table(top_display(study.top), index=False, digits=3),
            "",
        ]
    elif study.judgments is None:
        parts += ["No meta-evaluation given: features and trajectories only (madrag paper confidence meta-eval).", ""]
    if study.bands:
        parts += ["Trajectories: `trajectories.png` (mean, 25-75 and 10-90 percentile bands).", ""]
    if judged:
        parts += [
            "Figure 3: `figure3.png` (the meta-evaluator's score shares per dimension), its numbers in "
            f"`figure3_distribution.csv`; pass rates per role in `pass_rates.csv` (a pass: a score of {PASS_MIN} "
            "or more, madrag's reading of the confidence paper's Section 4.4).",
            "",
        ]
    parts += [f"- Note: {n}" for n in study.notes]
    return "\n".join(parts) + "\n"


def save_study(study: ConfidenceStudy, out_dir: Path) -> list[Path]:
    """Write the study's tables, plot and markdown into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    tables: dict[str, pd.DataFrame | None] = {
        "features.csv": study.features,
        "judgments.csv": study.judgments,
        "judgment_summary.csv": study.summary,
        "correlations.csv": study.correlations,
        "top_features.csv": study.top,
    }
    bands = [frame.assign(role=role) for role, frame in study.bands.items()]
    tables["trajectory_bands.csv"] = pd.concat(bands, ignore_index=True) if bands else None
    for name, frame in tables.items():
        if frame is not None:
            write_frame(frame, out_dir / name, index=False)
            written.append(out_dir / name)
    if study.judgments is not None:
        written += save_figure3(study.judgments, out_dir)
    if study.bands:
        written.append(plot_trajectories(study.bands, out_dir / "trajectories.png", title=study.meta.get("run_dir")))
    write_text_atomic(out_dir / "confidence.md", render_markdown(study))
    write_text_atomic(out_dir / "study.json", json.dumps({"meta": study.meta, "notes": study.notes}, indent=2))
    return [*written, out_dir / "confidence.md", out_dir / "study.json"]
