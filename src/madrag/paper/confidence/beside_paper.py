"""A confidence study's measured figures beside the confidence paper's: ``madrag paper confidence analyze --paper``.

The paper prints its Tables 1-4 as images; the figures its text states (:mod:`madrag.paper.reported`) are
matched with the study of the run's ASAP set (its stored rubric's ``essay_set``):

* a named feature's AUROC or Spearman rho (Table 1, 4.2): the same feature's in the run, per role and target;
* "best feature" (the Skeptic's AUROC ≈ 0.63, the Advocate's rho 0.373): the run's top feature's, with its name;
* a feature the text calls the top one (``rank`` 1): that feature's rank in the run under the paper's ranking
  (rho, AUROC, highest first);
* Figure 3 (4.4, both sets pooled): the share of judgments at the maximum per dimension, the pass rates per
  role (a pass: :data:`madrag.paper.confidence.figure3.PASS_MIN` or more, madrag's reading) and the size of the
  Advocate-Skeptic pass-rate gap.

None of the paper's Table 2 (the ASAP subsets) is in its text; the run's set size stands beside the MADRAG paper's
Table 6, which counts the same set. Without a meta-evaluation every judged figure is missing, never 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from madrag.paper.beside_paper import BESIDE_COLUMNS, BesidePaper, beside_row, reported_only_frame
from madrag.paper.confidence.analysis import is_binary_target
from madrag.paper.confidence.figure3 import ALL_ROLES, PASS_MIN, pass_rates
from madrag.paper.confidence.study import ConfidenceStudy
from madrag.paper.confidence.subsets import subset_row
from madrag.paper.reported import Reported, figures, reported

BEST = "best feature"
"""A row's feature where the paper's text names none: compared with the run's top feature."""
UNSTATED_SET = "7 or 8"


def _feature_figure(study: ConfidenceStudy, fig: Reported) -> tuple[str, Any, Any]:
    """(the row's name, the measured value, n) of an AUROC / rho / rank figure of Table 1."""
    role, feature = fig.row.split(": ", 1)
    corr = study.correlations
    if corr is None:
        return fig.row, None, None
    rows = corr[(corr["group"] == role.lower()) & (corr["target"] == fig.trait)]
    column = "auroc" if is_binary_target(fig.trait) else "spearman"
    if rows.empty:
        return fig.row, None, None
    if feature == BEST:
        top = rows.dropna(subset=[column]).sort_values(column, ascending=False, kind="stable")
        if top.empty:
            return fig.row, None, None
        return f"{role}: best feature (here: {top.iloc[0]['label']})", top.iloc[0][column], top.iloc[0]["n"]
    match = rows[rows["label"] == feature]
    if match.empty or pd.isna(match.iloc[0][column]):
        return fig.row, None, None
    value = match.iloc[0][column]
    if fig.metric == "rank":  # the paper's ranking: highest first, NaN never ranked
        value = 1 + int((rows[column].dropna() > value).sum())
    return fig.row, value, match.iloc[0]["n"]


def _judged_figure(study: ConfidenceStudy, fig: Reported) -> tuple[Any, Any]:
    """(measured, n) of a Figure 3 figure: share at the maximum, a role's pass rate or the pass-rate gap."""
    if study.judgments is None or not study.judgments["ok"].fillna(False).astype(bool).any():
        return None, None
    rates = pass_rates(study.judgments)
    rates = rates[(rates["set"] == ALL_ROLES) & (rates["dimension"] == fig.trait)].set_index("role")
    if fig.metric == "share_at_max" and ALL_ROLES in rates.index:
        return rates.loc[ALL_ROLES, "at_max_rate"], rates.loc[ALL_ROLES, "judged"]
    if fig.metric == "pass_rate" and fig.protocol.lower() in rates.index:
        return rates.loc[fig.protocol.lower(), "pass_rate"], rates.loc[fig.protocol.lower(), "judged"]
    if fig.metric == "pass_rate_gap" and {"advocate", "skeptic"} <= set(rates.index):
        two = rates.loc[["advocate", "skeptic"]]
        gap = abs(float(two["pass_rate"].iloc[0]) - float(two["pass_rate"].iloc[1]))
        return (None if np.isnan(gap) else gap), int(two["judged"].sum())
    return None, None


def _set_rows(run_dir: Path, essay_set: str) -> list[dict[str, Any]]:
    """The run's set size beside the MADRAG paper's Table 6 (the confidence paper's Table 2 is not in its text)."""
    row = subset_row(f"set {essay_set}", run_dir)
    return [
        beside_row(f"ASAP set {essay_set}", "all", "essays", row.get("essays"), fig, row.get("essays_in_run"))
        for fig in figures("madrag", table="Table 6", set_=essay_set)
        if fig.metric == "essays"
    ]


def beside_confidence(study: ConfidenceStudy, run_dir: Path) -> BesidePaper:
    """The study's figures beside the confidence paper's (see the module docstring)."""
    essay_set = subset_row("run", run_dir).get("essay_set")
    key = str(essay_set) if essay_set in (7, 8) else None
    if key is None:
        line = (
            "the confidence paper reports ASAP sets 7 and 8 only, and this run records no such set "
            f"({essay_set!r}): its figures are listed as reported only"
        )
        empty = pd.DataFrame(columns=BESIDE_COLUMNS)
        return BesidePaper(None, "", empty, reported_only_frame(list(reported("confidence"))), [line],
                           paper="confidence", layout="table")  # fmt: skip
    rows, only = [], []
    for fig in reported("confidence"):
        if fig.set not in (key, "7+8", UNSTATED_SET):
            only.append(fig)
            continue
        if fig.table == "Table 1":
            name, value, n = _feature_figure(study, fig)
        else:
            value, n = _judged_figure(study, fig)
            name = fig.row if fig.protocol == "meta-evaluator" else fig.protocol
        rows.append(beside_row(name, fig.trait, fig.metric, value, fig, n))
    rows += _set_rows(run_dir, key)
    notes = [
        "the paper's Advocate and Skeptic are GPT-4o-mini and its meta-evaluator GPT-5-mini; Figure 3 pools both "
        "sets, this run is one",
        f"a pass is a score of {PASS_MIN} or more (madrag's reading: the paper does not define it); a rank is the "
        "feature's place among the run's features, ranked as the paper ranks them (Appendix B)",
        "the confidence paper's Table 2 (the ASAP subsets) is printed as an image: none of its figures is in its "
        "text; the set's size stands beside the MADRAG paper's Table 6 (madrag paper confidence sets computes Table 2)",
    ]
    if any(f.set == UNSTATED_SET for f in reported("confidence")):
        notes.append("rho 0.373 (4.4) is compared on either set: the paper does not say which set it is from")
    if study.judgments is None:
        notes.append("no meta-evaluation: every judged figure is missing (madrag paper confidence meta-eval)")
    beside = pd.DataFrame(rows, columns=BESIDE_COLUMNS)
    return BesidePaper(key, "", beside, reported_only_frame(only), notes, paper="confidence", layout="table")
