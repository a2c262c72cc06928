"""Running an audit: the run's essays sampled, each condition (a repeat with other settings, or a perturbation's
variants) scored by the ordinary job machinery (:func:`madrag.pipeline.job.execute`) in an audit sub-run of its
own, ``<run>/audit/<condition>/`` (``.../fold-<k>/`` per fold of a ``--fold each`` run): a run store like any
other, so the audit's calls are records (resumed when the audit is run again, counted by ``madrag costs
<run>/audit/<condition>``) and never mix with the run's own scores, which stay in ``<run>/store.sqlite``.

Each sub-run scores the sampled essays (same ids, folds and human scores; for a perturbation, the variant texts)
against the run's own exemplar pool (the same bank), with the run's protocols, settings and prompts (a repeat
changes its seed or debater temperature), on the run's backend unless another is given (the sampled essays are
then scored once more unchanged, ``rescore``, and the shifts and repeats are measured against that).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from madrag.audit.perturbations import Perturbation, get_perturbations, perturb
from madrag.audit.stats import Scores
from madrag.data.essay import Essay
from madrag.data.loaders import load_essays
from madrag.data.splits import EACH, split_essays
from madrag.errors import InputError
from madrag.evaluation.run import RunData, load_run
from madrag.files.atomic import write_text_atomic
from madrag.pipeline.job import ScoreJob, default_cache_dir, execute, fingerprint_file
from madrag.pipeline.migrations import recorded_spec, upgrade_identity
from madrag.providers.base import Provider
from madrag.providers.spec import ProviderSpec, make_provider, spec_identity
from madrag.retrieval.embedder import Embedder
from madrag.settings import ScoringSettings

AUDIT_DIR = "audit"
"""The folder of a run that holds its audit: one sub-run per condition and ``audit.json``."""
RESCORE = "rescore"


@dataclass(frozen=True)
class Condition:
    """One audit condition: its name, kind (``repeat``, ``perturbation`` or ``rescore``), settings and essays."""

    name: str
    kind: str
    settings: ScoringSettings
    essays: list[Essay]
    perturbation: Perturbation | None = None


def _jsonl(path: Path) -> list[Essay]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [Essay.model_validate_json(line) for line in lines if line.strip()]


def run_sources(run: RunData) -> tuple[list[Essay], list[Essay] | None]:
    """(every essay of the run's source, its explicit pool or None), as the run read them."""
    inputs = run.run_dir / "inputs"
    pool = _jsonl(inputs / "pool.jsonl") if (inputs / "pool.jsonl").is_file() else None
    if (inputs / "essays.jsonl").is_file():
        return _jsonl(inputs / "essays.jsonl"), pool
    if run.data_path is None or not run.data_path.is_file():
        raise InputError(f"the run's data file {run.data_path} is not there: the audit needs its exemplar pool")
    if fingerprint_file(run.data_path) != run.config.get("data_sha256"):
        raise InputError(f"the run's data file {run.data_path} changed since the run was made")
    return load_essays(run.data_path, run.rubric, "auto", max_rows=None), pool  # the run's own data


def pool_groups(
    run: RunData, sample: list[Essay], every: list[Essay], pool: list[Essay] | None
) -> list[tuple[str | None, list[str], list[Essay]]]:
    """(sub-folder, sampled essay ids, exemplar pool) per group of sampled essays sharing the run's pool."""
    ids = [e.id for e in sample]
    fold = run.config.get("eval_fold")
    if pool is not None:
        return [(None, ids, pool)]
    if fold == EACH:
        folds = sorted({e.fold for e in sample if e.fold is not None})
        return [(f"fold-{k}", [e.id for e in sample if e.fold == k], [e for e in every if e.fold != k]) for k in folds]
    if fold is None:
        return [(None, ids, every)]
    return [(None, ids, split_essays(every, int(fold))[1])]


def draw_sample(run: RunData, n: int, seed: int) -> list[Essay]:
    """``n`` of the run's scored essays (all when it has fewer), drawn with ``seed``, in the run's order."""
    scored = {s.essay_id for s in run.scores if s.score is not None}
    candidates = [e for e in run.essays if e.id in scored]
    if not candidates:
        raise InputError(f"run at {run.run_dir} has no scored essay to audit")
    chosen = set(random.Random(seed).sample([e.id for e in candidates], min(n, len(candidates))))
    return [e for e in candidates if e.id in chosen]


def _normal(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def stored_backend(run: RunData) -> ProviderSpec:
    """The backend the run was made with; an InputError when it was a ready instance (give one then)."""
    stored = run.config.get("provider")
    if not isinstance(stored, dict) or "instance" in stored:
        raise InputError("the run was scored with a provider instance: give the audit a provider (--provider)")
    return recorded_spec(stored)


def same_backend(run: RunData, spec: ProviderSpec | None, instance: Provider | None) -> bool:
    """Whether the audit's backend is the run's own (else the sampled essays are scored again unchanged)."""
    stored = run.config.get("provider")
    if instance is not None:
        return bool(_normal(stored) == _normal({"instance": instance.describe()}))
    recorded = upgrade_identity(stored) if isinstance(stored, dict) else stored
    return spec is None or _normal(recorded) == _normal(spec_identity(spec))


def conditions(
    run: RunData,
    sample: list[Essay],
    perturbations: list[str] | None,
    repeats: int,
    temperature: float | None,
    rescore: bool,
    seed: int,
) -> list[Condition]:
    """The audit's conditions: a rescore (another backend), the repeats, then the perturbations; a
    perturbation's variants only for the essays whose text it changes (none changed: left out)."""
    settings = ScoringSettings.model_validate(run.config.get("settings", {}))
    out = [Condition(RESCORE, RESCORE, settings, sample)] if rescore else []
    first = (settings.seed if settings.seed is not None else 0) + 1
    out += [
        Condition(f"seed-{s}", "repeat", settings.model_copy(update={"seed": s}), sample)
        for s in range(first, first + repeats)
    ]
    debates = any(r.context.get("debate") for r in run.judges)
    if temperature is not None and debates and temperature != settings.debater_temperature:
        changed = settings.model_copy(update={"debater_temperature": temperature})
        out.append(Condition(f"debater-temperature-{temperature:g}", "repeat", changed, sample))
    for p in get_perturbations(perturbations):
        variants = [v for v, e in zip(perturb(sample, p, run.rubric, seed), sample, strict=True) if v.text != e.text]
        if variants:
            out.append(Condition(p.name, "perturbation", settings, variants, p))
    return out


@dataclass
class Backend:
    """The audit's backend: a spec the jobs are recorded with and the one instance they share."""

    spec: ProviderSpec
    instance: Provider
    owned: bool


async def score_condition(
    run: RunData,
    condition: Condition,
    groups: list[tuple[str | None, list[str], list[Essay]]],
    backend: Backend,
    protocols: list[str],
    embedder: Embedder | None,
    stage: Callable[[str], None],
) -> tuple[list[Path], Scores]:
    """Score one condition (resuming what its sub-runs hold); its sub-run folders and scores."""
    root = run.run_dir / AUDIT_DIR / condition.name
    rubric_file = run.run_dir / AUDIT_DIR / "rubric.json"
    by_id = {e.id: e for e in condition.essays}
    dirs: list[Path] = []
    scores: dict[tuple[str, str, str], Any] = {}
    for folder, ids, pool in groups:
        essays = [by_id[i] for i in ids if i in by_id]
        if not essays:
            continue
        run_dir = root / folder if folder else root
        job = ScoreJob(
            essays=essays,
            pool=pool,
            rubric=rubric_file,
            run_dir=run_dir,
            eval_fold=None,
            protocols=protocols,
            provider=backend.spec,
            settings=condition.settings,
            cache_dir=default_cache_dir(),
            embedder=run.config.get("embedder", "minilm-windows"),
        )
        stage(f"audit {condition.name}: {len(essays)} essays")
        await execute(job, backend=backend.instance, embedder=embedder)
        dirs.append(run_dir)
        scores.update(load_run(run_dir).score_map())
    return dirs, scores


def open_backend(run: RunData, provider: ProviderSpec | None, instance: Provider | None) -> Backend:
    """The audit's backend: the instance given, else one built from the spec given or the run's own."""
    spec = provider or (ProviderSpec() if instance is not None else stored_backend(run))
    if instance is not None:
        return Backend(spec, instance, owned=False)
    return Backend(spec, make_provider(spec), owned=True)


def write_rubric(run: RunData) -> None:
    """The run's rubric as the audit's sub-runs read it (``<run>/audit/rubric.json``)."""
    target = run.run_dir / AUDIT_DIR / "rubric.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    text = run.rubric.model_dump_json(indent=2) + "\n"
    if not target.is_file() or target.read_text(encoding="utf-8") != text:
        write_text_atomic(target, text)


def protocols_of(run: RunData, chosen: list[str] | None) -> list[str]:
    """The run's configured protocols to audit (all of them by default; LLM-free baselines added later by
    ``madrag baseline`` are not re-scored); an InputError for one the run was not made with."""
    configured = [str(p["name"]) for p in run.config.get("protocols", []) if isinstance(p, dict) and "name" in p]
    if not configured:
        raise InputError(f"run at {run.run_dir} names no protocol in its configuration")
    if not chosen:
        return configured
    unknown = [p for p in chosen if p not in configured]
    if unknown:
        raise InputError(f"the run has no protocol {', '.join(unknown)}; it has {', '.join(configured)}")
    return list(dict.fromkeys(chosen))
