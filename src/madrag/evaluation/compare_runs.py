"""``madrag compare RUN RUN...``: the agreement of several runs side by side and whether they differ.

Per trait, each run's QWK against the human reference (with its percentile bootstrap CI, the way
lm-evaluation-harness reports a standard error beside each metric; undefined when its essays cannot give one),
then each later run against the first on the essays both scored usably: the paired bootstrap of
QWK(run) - QWK(first run) (:func:`madrag.metrics.paired_bootstrap`, seeded: the same seed gives the same CI and
p-value). The shared essays are taken in the first run's essay order, which fixes the resampling.

Both runs' references are made with one tie rule (``ties``, else the first run's); an essay whose reference
differs between the two runs (different data files, raters) is left out of their pair and counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from madrag.errors import InputError
from madrag.evaluation.agreement import default_baseline, trait_label
from madrag.evaluation.run import RunData
from madrag.evaluation.tables import UNDEFINED, fmt, markdown_document, records, write_csvs
from madrag.files.atomic import write_text_atomic
from madrag.metrics import TieRule, bootstrap_ci, paired_bootstrap, qwk_metric
from madrag.rubric import Trait

AGREEMENT_COLUMNS = ["run", "protocol", "trait", "label", "n", "qwk", "ci_low", "ci_high"]
DIFFERENCE_COLUMNS = [
    "run",
    "baseline_run",
    "trait",
    "label",
    "n",
    "qwk",
    "qwk_baseline",
    "diff",
    "ci_low",
    "ci_high",
    "p_value",
    "n_reference_differs",
]


@dataclass
class RunComparison:
    """``agreement``: one row per run and trait; ``differences``: one row per later run and shared trait."""

    runs: list[str]
    protocols: list[str]
    agreement: pd.DataFrame
    differences: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def run_labels(runs: list[RunData]) -> list[str]:
    """Each run's folder name; the full paths when two runs share a name."""
    names = [run.run_dir.name for run in runs]
    return names if len(set(names)) == len(names) else [str(run.run_dir) for run in runs]


def run_protocol(run: RunData, protocol: str | None) -> str:
    """The protocol compared in ``run``: ``protocol`` when given (an InputError when the run lacks it), else
    MADRAG when the run has it, else the run's first protocol."""
    chosen = protocol or default_baseline(run.protocols)
    if chosen is None or chosen not in run.protocols:
        have = ", ".join(run.protocols) or "no scores"
        raise InputError(f"run {run.run_dir} has no protocol {chosen!r} (it has {have}); choose one with --protocol")
    return chosen


def usable_scores(run: RunData, protocol: str, trait: Trait, ties: TieRule) -> dict[str, tuple[int, int]]:
    """essay id -> (reference, score) for the run's essays with a reference and a usable score, in essay order."""
    scores = run.score_map()
    out: dict[str, tuple[int, int]] = {}
    for essay in run.essays:
        found = scores.get((protocol, essay.id, trait.name))
        reference = essay.reference(trait, ties)
        if reference is not None and found is not None and found.score is not None:
            out[essay.id] = (reference, found.score)
    return out


def _same_scale(base: Trait, other: RunData) -> Trait | None:
    """``other``'s trait of ``base``'s name; None when it has none; an InputError when its scale differs."""
    found = next((t for t in other.rubric.traits if t.name == base.name), None)
    if found is not None and (found.min, found.max) != (base.min, base.max):
        raise InputError(
            f"trait {base.name} is scored {base.min}-{base.max} in one run and {found.min}-{found.max} in "
            f"{other.run_dir}: QWK on different scales cannot be compared"
        )
    return found


def _agreement_row(
    label: str, protocol: str, trait: Trait, cells: dict[str, tuple[int, int]], n_boot: int, seed: int
) -> dict[str, Any]:
    refs = [ref for ref, _ in cells.values()]
    preds = [score for _, score in cells.values()]
    ci = bootstrap_ci(qwk_metric(trait.min, trait.max), refs, preds, n=n_boot, seed=seed)
    values = [len(refs), ci.estimate, ci.low, ci.high]
    return dict(zip(AGREEMENT_COLUMNS, [label, protocol, trait.name, trait_label(trait.name), *values], strict=True))


def _difference_row(
    labels: tuple[str, str],
    trait: Trait,
    later: dict[str, tuple[int, int]],
    first: dict[str, tuple[int, int]],
    n_boot: int,
    seed: int,
) -> dict[str, Any]:
    """Paired bootstrap of QWK(later) - QWK(first) on the essays both scored, in the first run's order."""
    shared = [essay for essay in first if essay in later]
    same = [essay for essay in shared if later[essay][0] == first[essay][0]]
    ref = [first[essay][0] for essay in same]
    test = paired_bootstrap(
        qwk_metric(trait.min, trait.max),
        ref,
        [later[essay][1] for essay in same],
        [first[essay][1] for essay in same],
        n=n_boot,
        seed=seed,
    )
    values = [test.n, test.metric_a, test.metric_b, test.diff, test.low, test.high, test.p_value]
    row = [*labels, trait.name, trait_label(trait.name), *values, len(shared) - len(same)]
    return dict(zip(DIFFERENCE_COLUMNS, row, strict=True))


def compare_runs(
    runs: list[RunData], protocol: str | None = None, bootstrap: int = 2000, seed: int = 0, ties: TieRule | None = None
) -> RunComparison:
    """Each run's QWK per trait and each later run's paired difference from the first (see the module)."""
    if len(runs) < 2:
        raise InputError("compare needs at least two runs")
    rule = ties or runs[0].reference_ties
    labels = run_labels(runs)
    protocols = [run_protocol(run, protocol) for run in runs]
    agreement: list[dict[str, Any]] = []
    differences: list[dict[str, Any]] = []
    notes: list[str] = []
    for base_trait in runs[0].rubric.traits:
        traits = [_same_scale(base_trait, run) for run in runs]
        cells = [
            usable_scores(run, proto, trait, rule) if trait is not None else None
            for run, proto, trait in zip(runs, protocols, traits, strict=True)
        ]
        for label, proto, trait, found in zip(labels, protocols, traits, cells, strict=True):
            if trait is not None and found is not None:
                agreement.append(_agreement_row(label, proto, trait, found, bootstrap, seed))
        first = cells[0]
        assert first is not None  # the first run has its own traits
        for label, found in zip(labels[1:], cells[1:], strict=True):
            if found is None:
                notes.append(f"{label} has no trait {base_trait.name}: no difference for it")
                continue
            differences.append(_difference_row((label, labels[0]), base_trait, found, first, bootstrap, seed))
    notes += _reference_notes(differences)
    meta = {"reference_ties": rule, "bootstrap": bootstrap, "seed": seed, "baseline_run": labels[0]}
    return RunComparison(
        labels,
        protocols,
        pd.DataFrame(agreement, columns=AGREEMENT_COLUMNS),
        pd.DataFrame(differences, columns=DIFFERENCE_COLUMNS),
        meta,
        notes,
    )


def _reference_notes(rows: list[dict[str, Any]]) -> list[str]:
    """A note per pair and trait where shared essays had different references in the two runs."""
    return [
        f"{r['run']} vs {r['baseline_run']}, {r['trait']}: {r['n_reference_differs']} shared essays have a different "
        "human reference in the two runs (different data?) and are left out of the difference"
        for r in rows
        if r["n_reference_differs"]
    ]


# -- for people -------------------------------------------------------------------------------------------------


def _qwk_text(row: dict[str, Any]) -> str:
    if row["n"] == 0:
        return "— (0 essays)"
    if pd.isna(row["qwk"]):
        return f"{UNDEFINED} ({row['n']})"
    return f"{fmt(row['qwk'], 3)} [{fmt(row['ci_low'], 3)}, {fmt(row['ci_high'], 3)}] ({row['n']})"


def _diff_text(row: dict[str, Any]) -> str:
    if row["n"] == 0:
        return "— (0 shared essays)"
    if pd.isna(row["diff"]):
        return f"{UNDEFINED} ({row['n']})"
    ci = f"[{fmt(row['ci_low'], 3)}, {fmt(row['ci_high'], 3)}]"
    return f"{fmt(row['diff'], 3)} {ci} p={fmt(row['p_value'], 3)} ({row['n']})"


def _pivot(rows: list[dict[str, Any]], index: str, text: Any) -> pd.DataFrame:
    if not rows:
        return pd.DataFrame()
    long = pd.DataFrame([{index: r[index], "label": r["label"], "cell": text(r)} for r in rows])
    wide = long.pivot(index=index, columns="label", values="cell")
    order = list(dict.fromkeys(long["label"]))
    return wide.reindex(index=list(dict.fromkeys(long[index])), columns=order).fillna("—")


def display_tables(comparison: RunComparison) -> dict[str, pd.DataFrame]:
    """The comparison as titled tables of display strings (rows: runs; columns: traits)."""
    agreement = _pivot(records(comparison.agreement), "run", _qwk_text)
    protocol = dict(zip(comparison.runs, comparison.protocols, strict=True))
    agreement.index = [f"{run} ({protocol[run]})" for run in agreement.index]
    first = comparison.meta["baseline_run"]
    return {
        "QWK vs human reference [95% bootstrap CI] (essays)": agreement,
        f"QWK difference vs {first} on shared essays (paired bootstrap): diff [95% CI] p (essays)": _pivot(
            records(comparison.differences), "run", _diff_text
        ),
    }


DEFINITIONS = [
    "QWK: quadratic weighted kappa of a run's usable scores against the human reference (the raters' mean "
    "rounded to a valid score); undefined when its essays cannot give one (one essay, a constant column).",
    "diff: QWK(run) - QWK(first run) on the essays both runs scored usably, with the percentile CI and two-sided "
    "p-value of a paired bootstrap (essays resampled with replacement, both QWKs on the same draw).",
]


def save(comparison: RunComparison, out_dir: Path) -> list[Path]:
    """agreement.csv, differences.csv and compare.md in ``out_dir``; the paths written."""
    paths = write_csvs({"agreement.csv": comparison.agreement, "differences.csv": comparison.differences}, out_dir)
    meta = comparison.meta
    notes = [f"bootstrap {meta['bootstrap']} resamples, seed {meta['seed']}, reference ties {meta['reference_ties']}"]
    text = markdown_document("Runs compared", display_tables(comparison), DEFINITIONS, notes + comparison.notes)
    write_text_atomic(out_dir / "compare.md", text)
    return [*paths, out_dir / "compare.md"]
