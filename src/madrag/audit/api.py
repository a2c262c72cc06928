"""``audit`` and ``aaudit``: audit a run from Python, what ``madrag audit`` runs."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from madrag.api.backend import ProviderLike, resolve_provider
from madrag.audit.compression import compression_table
from madrag.audit.report import AUDIT_FILE, AuditReport, ConditionCost, PerturbationInfo, condition_cost
from madrag.audit.runner import (
    AUDIT_DIR,
    RESCORE,
    Condition,
    conditions,
    draw_sample,
    open_backend,
    pool_groups,
    protocols_of,
    run_sources,
    same_backend,
    score_condition,
    write_rubric,
)
from madrag.audit.shifts import shift_row
from madrag.audit.stability import stability_tables
from madrag.audit.stats import Scores
from madrag.data.essay import Essay
from madrag.errors import ConfigError, InputError
from madrag.evaluation.evidence import evidence_frame
from madrag.evaluation.run import RunData, load_run, open_store
from madrag.files.atomic import write_text_atomic
from madrag.pipeline.migrations import recorded_spec
from madrag.providers.base import Provider
from madrag.providers.spec import ProviderSpec
from madrag.records import AgentRecord
from madrag.retrieval.embedder import Embedder

TINY_NOTE = "the embedded SmolLM2-135M model: a pipeline check, its figures are not findings"


def _records(run: RunData) -> list[AgentRecord]:
    with closing(open_store(run.run_dir)) as store:
        return list(store.records())


def _evidence(run: RunData) -> list[dict[str, Any]]:
    rows = evidence_frame(_records(run), run.protocols).to_dict("records")
    return [{str(k): (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in rows]


def _plan(run: RunData, plan: list[Condition]) -> list[PerturbationInfo]:
    return [
        PerturbationInfo(
            name=c.perturbation.name,
            description=c.perturbation.description,
            essays_changed=len(c.essays),
            expected={t.name: c.perturbation.expect.of(t) for t in run.rubric.traits},
        )
        for c in plan
        if c.perturbation is not None
    ]


def _run_calls_per_essay(run: RunData) -> float | None:
    return sum(not r.failed for r in _records(run)) / len(run.essays) if run.essays else None


@dataclass(frozen=True)
class AuditPlan:
    """What an audit would score, with no call made (``madrag audit --dry-run``): the sampled essays, each
    condition's essays, and the calls expected at the run's own rate (its calls per scored essay)."""

    sample: list[str]
    conditions: list[tuple[str, str, int]]  # (name, kind, essays scored)
    run_calls_per_essay: float | None
    protocols: list[str]

    @property
    def essays_scored(self) -> int:
        """Essays scored over every condition."""
        return sum(n for _, _, n in self.conditions)

    def text(self) -> str:
        """The plan in lines."""
        lines = [f"audit plan (dry run, no call made): {len(self.sample)} sampled essays: {', '.join(self.sample)}"]
        lines += [f"  {name} ({kind}): {n} essays" for name, kind, n in self.conditions]
        rate = self.run_calls_per_essay
        calls = "unknown" if rate is None else f"about {round(rate * self.essays_scored)}"
        lines.append(
            f"{len(self.conditions)} conditions, {self.essays_scored} essays scored with {', '.join(self.protocols)}: "
            f"{calls} agent calls at the run's rate"
            + ("" if rate is None else f" ({rate:.1f} calls per essay, every protocol of the run)")
            + "; calls already in <run>/audit are not made again"
        )
        return "\n".join(lines)


def plan_audit(
    run_dir: str | Path,
    *,
    sample: int = 8,
    seed: int = 0,
    perturbations: Sequence[str] | None = None,
    repeats: int = 2,
    debater_temperature: float | None = 1.0,
    protocols: Sequence[str] | None = None,
    provider: ProviderLike | None = None,
) -> AuditPlan:
    """The :class:`AuditPlan` of :func:`audit` with the same options: nothing is scored, no backend is opened."""
    if sample < 1 or repeats < 0:
        raise InputError("sample must be >= 1 and repeats >= 0")
    planned = _planned(Path(run_dir), sample, seed, perturbations, repeats, debater_temperature, protocols, provider)
    rows = [(c.name, c.kind, len(c.essays)) for c in planned.plan]
    return AuditPlan([e.id for e in planned.essays], rows, _run_calls_per_essay(planned.run), planned.chosen)


class _Planned(NamedTuple):
    """What :func:`plan_audit` and :func:`aaudit` both decide before anything is scored."""

    run: RunData
    chosen: list[str]
    essays: list[Essay]
    spec: ProviderSpec | None
    instance: Provider | None
    rescore: bool
    plan: list[Condition]


def _planned(
    run_dir: Path,
    sample: int,
    seed: int,
    perturbations: Sequence[str] | None,
    repeats: int,
    debater_temperature: float | None,
    protocols: Sequence[str] | None,
    provider: ProviderLike | None,
) -> _Planned:
    """The run, its protocols, the sample drawn and the conditions to score it under."""
    run = load_run(run_dir)
    chosen = protocols_of(run, list(protocols) if protocols else None)
    essays = draw_sample(run, sample, seed)
    spec, instance = resolve_provider(provider) if provider is not None else (None, None)
    rescore = not same_backend(run, spec, instance)
    names = list(perturbations) if perturbations else None
    plan = conditions(run, essays, names, repeats, debater_temperature, rescore, seed)
    return _Planned(run, chosen, essays, spec, instance, rescore, plan)


def _figures(
    run: RunData, protocols: list[str], base: Scores, scored: dict[str, tuple[Condition, Scores]], n_boot: int
) -> dict[str, Any]:
    """The stability, perturbation and compression tables."""
    ids = sorted({i for c, _ in scored.values() for i in (e.id for e in c.essays)})
    repeats = {name: s for name, (c, s) in scored.items() if c.kind == "repeat"}
    repeat_rows, summary = stability_tables(run.rubric, protocols, base, repeats, ids, n_boot)
    shifts = [
        shift_row(c.perturbation, p, t, base, s, [e.id for e in c.essays], n_boot)
        for c, s in scored.values()
        if c.perturbation is not None
        for p in protocols
        for t in run.rubric.traits
    ]
    scores = run.score_map()
    compression = compression_table(run.rubric, protocols, run.essays, scores, n_boot, run.reference_ties)
    return {"repeats": repeat_rows, "stability": summary, "perturbations": shifts, "compression": compression}


async def aaudit(
    run_dir: str | Path,
    *,
    sample: int = 8,
    seed: int = 0,
    perturbations: Sequence[str] | None = None,
    repeats: int = 2,
    debater_temperature: float | None = 1.0,
    protocols: Sequence[str] | None = None,
    provider: ProviderLike | None = None,
    embedder: Embedder | None = None,
    bootstrap: int = 1000,
    on_stage: Callable[[str], None] | None = None,
) -> AuditReport:
    """Audit the run in ``run_dir`` (the async twin of :func:`audit`, which documents the arguments)."""
    if sample < 1 or repeats < 0 or bootstrap < 0:
        raise InputError("sample must be >= 1, repeats and bootstrap >= 0")
    stage = on_stage or (lambda _m: None)
    run, chosen, essays, spec, instance, rescore, plan = _planned(
        Path(run_dir), sample, seed, perturbations, repeats, debater_temperature, protocols, provider
    )
    every, pool = run_sources(run)
    groups = pool_groups(run, essays, every, pool)
    write_rubric(run)
    backend = open_backend(run, spec, instance)
    scored: dict[str, tuple[Condition, Scores]] = {}
    costs: list[ConditionCost] = []
    try:
        for condition in plan:
            dirs, scores = await score_condition(run, condition, groups, backend, chosen, embedder, stage)
            scored[condition.name] = (condition, scores)
            costs.append(condition_cost(condition.name, condition.kind, len(condition.essays), dirs))
    finally:
        if backend.owned:
            await backend.instance.aclose()
    base = scored.pop(RESCORE)[1] if rescore else run.score_map()
    figures = _figures(run, chosen, base, scored, bootstrap)
    calls = sum(c.calls + c.failed_calls for c in costs)
    notes = [TINY_NOTE] if _tiny_default(run.config.get("provider")) and not rescore else []
    report = AuditReport(
        run_dir=str(run.run_dir),
        protocols=chosen,
        sample=[e.id for e in essays],
        baseline=RESCORE if rescore else "run",
        bootstrap=bootstrap,
        perturbation_plan=_plan(run, plan),
        evidence=_evidence(run),
        costs=costs,
        calls_per_sampled_essay=calls / len(essays),
        run_calls_per_essay=_run_calls_per_essay(run),
        notes=notes,
        **figures,
    )
    target = run.run_dir / AUDIT_DIR / AUDIT_FILE
    write_text_atomic(target, report.model_dump_json(indent=2) + "\n")
    return report


def audit(run_dir: str | Path, **options: Any) -> AuditReport:
    """Audit the run in ``run_dir``: re-score ``sample`` of its essays (drawn with ``seed``) under controlled
    changes and measure stability, perturbation shifts, compression and evidence (:mod:`madrag.audit`); the
    result is also written to ``<run_dir>/audit/audit.json``.

    Options (keywords): ``sample`` (essays, default 8), ``seed``, ``perturbations`` (names, default every one:
    :data:`madrag.audit.perturbations.PERTURBATIONS`), ``repeats`` (other seeds, default 2),
    ``debater_temperature`` (a repeat with it when the run debates; None: none), ``protocols`` (default the
    run's), ``provider`` (default the run's backend; a string, spec or ready provider as for
    :func:`madrag.score`), ``embedder``, ``bootstrap`` (resamples, default 1000), ``on_stage``.
    Running it again resumes: calls already made are not made again."""
    return asyncio.run(aaudit(run_dir, **options))


def _tiny_default(stored: object) -> bool:
    """Whether a run's recorded backend is the tiny model shipped to try madrag out."""
    if not isinstance(stored, dict) or "kind" not in stored:
        return False
    try:
        return recorded_spec(stored).options.tiny_default()
    except (ValidationError, ConfigError):
        return False
