"""The paper's evaluation tables from a run store (the MADRAG paper, Tables 1, 2 and 9).

* QWK per protocol and trait (rows = protocols, columns = the paper's short trait labels) with bootstrap CIs,
  the number of essays per cell and the valid-score rate. Unusable scores are excluded and counted, never
  imputed; essays without a human reference for the trait are counted too (``n_no_reference``). Two
  Human-Human rows: rater 1 vs rater 2 on the FULL data file of the run's essay set (this is the paper's row)
  and on the evaluated essays only (the ceiling for exactly the essays the protocols scored). With one rater
  per essay there is no Human-Human row, and a note says so. A protocol whose paper computes its agreement on
  part of the essays (``ProtocolNeeds.population``: MTS[template=FILE] on its authors' sample) is shown on
  them, with a row ``<protocol> (all essays)`` beside it and a note saying what the population is.
* The extreme-score subset (Table 2): Agree@1 and MAE from the extreme reference, per protocol and trait.
* Paired bootstrap comparisons of each protocol against a baseline protocol (default MADRAG) on QWK.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from madrag.data.essay import Essay, no_scores_line, traits_without_scores
from madrag.data.loaders import load_essays
from madrag.errors import InputError
from madrag.evaluation.evidence import evidence_table
from madrag.evaluation.run import RunData, load_run
from madrag.metrics import (
    TieRule,
    bootstrap_ci,
    checked_ties,
    extreme_subset,
    paired_bootstrap,
    qwk_metric,
    rater_pairs,
    small_n_warning,
)
from madrag.protocols import find_protocol
from madrag.protocols.base import Population, TraitScore
from madrag.rubric import Rubric, Trait

SHORT_LABELS = {
    "ideas": "Idea",
    "ideas and content": "Idea",
    "organization": "Org.",
    "voice": "Voc.",
    "word choice": "Word",
    "sentence fluency": "Sent",
    "style": "Sty.",
    "conventions": "Cnv.",
}
HH_FULL = "Human-Human (full data file)"
HH_EVAL = "Human-Human (evaluated essays)"
EXTREME_COLUMNS = ["protocol", "trait", "label", "n", "n_scored", "n_unusable", "n_conflict", "agree_at_1", "mae"]
COMPARISON_VALUES = ["n", "qwk", "qwk_baseline", "diff", "ci_low", "ci_high", "p_value"]
QWK_COLUMNS = [
    "protocol", "trait", "label", "qwk", "ci_low", "ci_high", "n", "n_unusable", "n_missing", "n_no_reference",
    "n_truncated", "valid_rate",
]  # fmt: skip
POPULATION_NOTE = (
    "{protocol}: QWK on the essays its paper evaluates it on, {label}; the row {all} is every essay of the run"
)
ONE_RATER = (
    "Human-Human is left out ({where}): no essay has scores from two raters for any trait (one rater per "
    "essay), so there is no human agreement to compare with"
)


def trait_label(name: str) -> str:
    """The paper's short column label (Idea, Org., Voc., Word, Sent, Sty., Cnv.); other traits keep their name."""
    return SHORT_LABELS.get(name.strip().casefold(), name)


# -- QWK table ------------------------------------------------------------------------------------------


def _qwk_row(
    protocol: str, trait: Trait, a: list[float], b: list[float], bootstrap: int, seed: int, **counts: Any
) -> dict[str, Any]:
    ci = bootstrap_ci(qwk_metric(trait.min, trait.max), a, b, n=bootstrap, seed=seed)
    row = {"protocol": protocol, "trait": trait.name, "label": trait_label(trait.name), "qwk": ci.estimate}
    row.update(ci_low=ci.low, ci_high=ci.high, n=len(a), n_unusable=0, n_missing=0, n_no_reference=0)
    return row | {"n_truncated": 0, "valid_rate": float("nan")} | counts


def human_rows(essays: list[Essay], rubric: Rubric, name: str, bootstrap: int, seed: int) -> list[dict[str, Any]]:
    """Rater 1 vs rater 2 QWK per trait, on the essays where both raters scored the trait."""
    return [_qwk_row(name, trait, *rater_pairs(essays, trait.name), bootstrap, seed) for trait in rubric.traits]


def protocol_cell(
    run: RunData,
    protocol: str,
    trait: Trait,
    scores: dict[tuple[str, str, str], TraitScore],
    only: frozenset[str] | None = None,
) -> tuple[list[float], list[float], dict[str, Any]]:
    """(reference, prediction) pairs of one cell and its counts: unusable, missing, usable scores of essays without
    a human reference (``n_no_reference``), truncated (a Judge answer cut by the token limit, usable or not) and
    the valid-score rate; over the run's essays, or those of ``only``."""
    refs: list[float] = []
    preds: list[float] = []
    produced = unusable = missing = no_reference = truncated = 0
    for essay in run.essays if only is None else [e for e in run.essays if e.id in only]:
        found = scores.get((protocol, essay.id, trait.name))
        if found is None:
            missing += 1
            continue
        produced += 1
        truncated += found.truncated
        if found.score is None:
            unusable += 1
            continue
        ref = essay.reference(trait, run.label_ties)
        if ref is None:
            no_reference += 1
            continue
        refs.append(ref)
        preds.append(found.score)
    rate = (produced - unusable) / produced if produced else float("nan")
    counts = {"n_unusable": unusable, "n_missing": missing, "n_no_reference": no_reference, "n_truncated": truncated}
    return refs, preds, {**counts, "valid_rate": rate}


def qwk_long(
    run: RunData, full_essays: list[Essay] | None, bootstrap: int, seed: int, notes: list[str] | None = None
) -> pd.DataFrame:
    """One row per (row label, trait): the protocols, then the Human-Human rows. A Human-Human row without any
    essay scored by two raters is left out, with a line in ``notes`` saying why."""
    rows: list[dict[str, Any]] = []
    scores = run.score_map()
    for protocol in run.protocols:
        population = evaluated_on(run, protocol)
        if population is not None and notes is not None:
            notes.append(POPULATION_NOTE.format(protocol=protocol, label=population.label, all=all_essays(protocol)))
        shown: list[tuple[str, frozenset[str] | None]] = [(protocol, None if population is None else population.ids)]
        shown += [(all_essays(protocol), None)] if population is not None else []
        for label, only in shown:
            for trait in run.rubric.traits:
                refs, preds, counts = protocol_cell(run, protocol, trait, scores, only)
                rows.append(_qwk_row(label, trait, refs, preds, bootstrap, seed, **counts))
    groups = [(HH_FULL, full_essays), (HH_EVAL, run.essays)] if full_essays is not None else [(HH_EVAL, run.essays)]
    left_out = []
    for name, essays in groups:
        human = human_rows(essays, run.rubric, name, bootstrap, seed)
        if any(r["n"] for r in human):
            rows += human
        else:
            left_out.append("full data file" if name == HH_FULL else "evaluated essays")
    if left_out and notes is not None:
        notes.append(ONE_RATER.format(where=" and ".join(left_out)))
    return pd.DataFrame(rows, columns=QWK_COLUMNS)


def evaluated_on(run: RunData, protocol: str) -> Population | None:
    """The essays the protocol's paper computes its agreement on, when not every essay of the run
    (:attr:`~madrag.protocols.base.ProtocolNeeds.population`: MTS[template=FILE]'s authors' sample)."""
    found = find_protocol(protocol)
    population = None if found is None else found.needs.population
    return None if population is None else population(run.essays, run.rubric)


def all_essays(protocol: str) -> str:
    """The row of a protocol's QWK over every essay, beside its paper's population."""
    return f"{protocol} (all essays)"


def wide(long: pd.DataFrame, value: str = "qwk") -> pd.DataFrame:
    """Table 1 / Table 9 layout: rows = protocols (in order), columns = short trait labels (the full trait
    names if two traits of a custom rubric would share a label)."""
    traits = list(dict.fromkeys(long["trait"]))
    labels = [trait_label(t) for t in traits]
    table = long.pivot(index="protocol", columns="trait", values=value)
    table = table.reindex(index=list(dict.fromkeys(long["protocol"])), columns=traits)
    table.columns = pd.Index(labels if len(set(labels)) == len(labels) else traits)
    return table


# -- extreme subset and comparisons ---------------------------------------------------------------------


def _extreme_instances(
    run: RunData, protocol: str, trait: Trait, scores: dict[tuple[str, str, str], TraitScore]
) -> tuple[list[list[float]], list[float | None]]:
    """All raters' scores and the protocol's prediction (None = unusable) for the essays it scored."""
    raters: list[list[float]] = []
    preds: list[float | None] = []
    for essay in run.essays:
        found = scores.get((protocol, essay.id, trait.name))
        if found is not None:
            raters.append(essay.rater_scores.get(trait.name, []))
            preds.append(None if found.score is None else float(found.score))
    return raters, preds


def extreme_table(run: RunData) -> pd.DataFrame:
    """Table 2 per protocol: over all traits ("all") and per trait, among essays the protocol scored."""
    scores = run.score_map()
    rows: list[dict[str, Any]] = []
    for protocol in run.protocols:
        per_trait = []
        for trait in run.rubric.traits:
            summary = extreme_subset(*_extreme_instances(run, protocol, trait, scores), trait.min, trait.max)
            counts = {k: v for k, v in asdict(summary).items() if k != "selected"}
            per_trait.append({"protocol": protocol, "trait": trait.name, "label": trait_label(trait.name), **counts})
        rows += [_pool_extreme(protocol, per_trait), *per_trait]
    return pd.DataFrame(rows, columns=EXTREME_COLUMNS)


def _pool_extreme(protocol: str, per_trait: list[dict[str, Any]]) -> dict[str, Any]:
    """All traits together: counts summed, Agree@1 and MAE weighted by scored instances."""
    scored = sum(r["n_scored"] for r in per_trait)
    row: dict[str, Any] = {"protocol": protocol, "trait": "all", "label": "all"}
    for key in ("n", "n_scored", "n_unusable", "n_conflict"):
        row[key] = sum(r[key] for r in per_trait)
    for key in ("agree_at_1", "mae"):
        row[key] = sum(r[key] * r["n_scored"] for r in per_trait if r["n_scored"]) / scored if scored else float("nan")
    return row


def paired_scores(
    run: RunData, trait: Trait, a: str, b: str, scores: dict[tuple[str, str, str], TraitScore]
) -> tuple[list[float], list[float], list[float]]:
    """(reference, scores of a, scores of b) on the essays where both protocols gave a usable score."""
    ref: list[float] = []
    out_a: list[float] = []
    out_b: list[float] = []
    for essay in run.essays:
        sa, sb = scores.get((a, essay.id, trait.name)), scores.get((b, essay.id, trait.name))
        value = essay.reference(trait, run.label_ties)
        if value is not None and sa and sb and sa.score is not None and sb.score is not None:
            ref.append(value)
            out_a.append(sa.score)
            out_b.append(sb.score)
    return ref, out_a, out_b


def default_baseline(protocols: list[str]) -> str | None:
    """MADRAG when the run has it, else the run's first protocol."""
    return "MADRAG" if "MADRAG" in protocols else (protocols[0] if protocols else None)


def comparisons(run: RunData, baseline: str | None, bootstrap: int, seed: int) -> pd.DataFrame:
    """Paired bootstrap of QWK(protocol) - QWK(baseline) per trait, on essays both scored usably."""
    base = baseline or default_baseline(run.protocols)
    if base is None or base not in run.protocols:
        raise InputError(f"baseline protocol {base!r} is not in this run ({', '.join(run.protocols)})")
    scores = run.score_map()
    rows = []
    for protocol in [p for p in run.protocols if p != base]:
        for trait in run.rubric.traits:
            ref, a, b = paired_scores(run, trait, protocol, base, scores)
            test = paired_bootstrap(qwk_metric(trait.min, trait.max), ref, a, b, n=bootstrap, seed=seed)
            values = [test.n, test.metric_a, test.metric_b, test.diff, test.low, test.high, test.p_value]
            row = {"protocol": protocol, "baseline": base, "trait": trait.name, "label": trait_label(trait.name)}
            rows.append({**row, **dict(zip(COMPARISON_VALUES, values, strict=True))})
    return pd.DataFrame(rows)


# -- the whole evaluation -------------------------------------------------------------------------------


@dataclass
class Evaluation:
    """Every table of one run; DataFrames in long form (see :func:`wide` for the paper's layout)."""

    rubric: Rubric
    protocols: list[str]
    qwk: pd.DataFrame
    extreme: pd.DataFrame
    comparisons: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)
    evidence: pd.DataFrame = field(default_factory=pd.DataFrame)  # per protocol and role (evaluation.evidence)
    notes: list[str] = field(default_factory=list)


def load_full_data(path: Path | None, rubric: Rubric) -> tuple[list[Essay] | None, str | None]:
    """The run's whole data file (for the paper's Human-Human row), or None with a note saying why."""
    if path is None:
        return None, "no data file recorded for the run: Human-Human on the full file is left out"
    if not path.is_file():
        return None, f"data file {path} not found: Human-Human on the full file is left out (pass --data)"
    return load_essays(path, rubric, max_rows=None), None  # the run's own data, held to the limit when it ran


def evaluate_run(
    run: RunData, bootstrap: int = 2000, seed: int = 0, baseline: str | None = None, ties: TieRule | None = None
) -> Evaluation:
    """All tables for a loaded run. ``bootstrap`` resamples per CI / comparison (0 = no intervals); ``ties``
    the tie rule of the reference labels (default: the run's own, :attr:`RunData.reference_ties`)."""
    rule = checked_ties(ties or run.reference_ties)
    run = replace(run, label_ties=rule)
    full, note = load_full_data(run.data_path, run.rubric)
    notes = [n for n in (note, ties_note(rule, run.reference_ties)) if n]
    notes += [no_scores_line(t) for t in traits_without_scores(full or run.essays, run.rubric)]
    qwk = qwk_long(run, full, bootstrap, seed, notes)
    if bootstrap > 0 and not qwk.empty:
        scored = qwk[qwk["protocol"].isin(run.protocols) & qwk["ci_low"].notna()]
        notes += [w for w in [small_n_warning(scored["n"].astype(float), "the QWK confidence intervals")] if w]
    meta = {
        "run_dir": str(run.run_dir),
        "essay_set": run.rubric.essay_set,
        "n_essays": len(run.essays),
        "n_essays_full_data": None if full is None else len(full),
        "data": None if run.data_path is None else str(run.data_path),
        "bootstrap": bootstrap,
        "seed": seed,
        "reference": reference_line(rule),
        "reference_ties": rule,
        "model": run_model(run.config),
        "populations": {p: found.tag for p in run.protocols if (found := evaluated_on(run, p)) is not None},
    }
    return Evaluation(
        rubric=run.rubric,
        protocols=run.protocols,
        qwk=qwk,
        extreme=extreme_table(run),
        comparisons=comparisons(run, baseline, bootstrap, seed) if len(run.protocols) > 1 else pd.DataFrame(),
        meta=meta,
        notes=notes,
        evidence=evidence_table(run.run_dir, run.protocols),
    )


def reference_line(rule: TieRule) -> str:
    """How the reference label is made, for the evaluation's metadata and printed summaries."""
    tie = {"half_up": "halves up", "half_even": "halves to the even score", "half_down": "halves down"}[rule]
    return (
        f"mean of the available raters rounded to a valid score, {tie} (reference_ties {rule}; the MADRAG paper, B.5)"
    )


def ties_note(rule: TieRule, recorded: TieRule) -> str | None:
    """A note when the evaluation's tie rule is not the one the run's exemplar labels used."""
    if rule == recorded:
        return None
    return (
        f"reference labels round ties {rule}, but this run's exemplar labels were made with {recorded} "
        "(its reference_ties setting)"
    )


def run_model(config: dict[str, Any]) -> str | None:
    """The model a run's configuration names for its backend (None when it names none)."""
    provider = config.get("provider")
    model = provider.get("model") if isinstance(provider, dict) else None
    return str(model) if model else None


def evaluate(
    run_dir: Path,
    bootstrap: int = 2000,
    seed: int = 0,
    baseline: str | None = None,
    data: Path | None = None,
    ties: TieRule | None = None,
) -> Evaluation:
    """Load a run and build every table (see the module docstring)."""
    return evaluate_run(load_run(run_dir, data, judges=False), bootstrap, seed, baseline, ties)


def human_human_table(
    data_path: Path, rubric: Rubric, bootstrap: int = 2000, seed: int = 0, data_format: str = "auto"
) -> pd.DataFrame:
    """Human-Human QWK (rater 1 vs rater 2) per trait of a data file, without any run (long form)."""
    essays = load_essays(data_path, rubric, data_format)
    rows = human_rows(essays, rubric, HH_FULL, bootstrap, seed)
    if all(r["n"] == 0 for r in rows):
        raise InputError(f"{data_path}: no essay has scores from two raters for any trait of the rubric")
    return pd.DataFrame(rows, columns=QWK_COLUMNS)
