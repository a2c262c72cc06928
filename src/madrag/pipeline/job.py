"""A scoring job from settings to stored records: data, split, bank, provider, store, protocols.

``ScoreJob`` is what ``madrag score`` builds from its options; :func:`execute` runs it. Re-running the same
job on the same run directory resumes it.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from madrag.agents.calls import CallContext, CallStats
from madrag.agents.prompts import CONSENSUS_PROMPT_NAMES, PROMPT_NAMES, PromptLibrary
from madrag.data.essay import Essay
from madrag.data.loaders import load_essays
from madrag.data.splits import split_by_fold
from madrag.distributed.options import RayOptions
from madrag.errors import InputError
from madrag.pipeline.runner import run_scoring
from madrag.protocols import get_protocol
from madrag.protocols.base import ScoringProtocol, TraitScore
from madrag.protocols.consensus import consensus_protocol
from madrag.providers.spec import ProviderSpec, managed, spec_identity
from madrag.records import AgentRecord
from madrag.rubric import Rubric, load_rubric
from madrag.settings import ScoringSettings
from madrag.store import RunStore


def default_cache_dir() -> Path:
    return Path(os.environ.get("MADRAG_CACHE", Path.home() / ".cache" / "madrag"))


class ScoreJob(BaseModel):
    model_config = ConfigDict(frozen=True)

    data: Path
    rubric: Path
    run_dir: Path
    data_format: str = "auto"
    eval_fold: int | None = 0
    limit: int | None = None
    ids: list[str] | None = None
    protocols: list[str] = Field(default_factory=lambda: ["MADRAG"])
    provider: ProviderSpec = Field(default_factory=ProviderSpec)
    # backends for particular roles (seed 002 cross-model pairs); other roles use ``provider``
    role_providers: dict[str, ProviderSpec] = Field(default_factory=dict)
    settings: ScoringSettings = Field(default_factory=ScoringSettings)
    essay_concurrency: int | None = Field(default=None, ge=1)  # None: derived from the backend's slots
    prompts_dir: Path | None = None
    cache_dir: Path = Field(default_factory=default_cache_dir)
    response_cache: bool = True
    # score on a Ray cluster (madrag.distributed) instead of this process; how a run executes is not part of
    # its identity, so a run started here can be resumed on Ray and the other way round
    ray: RayOptions | None = None


@dataclass
class JobResult:
    run_id: str
    resumed: bool
    essays: list[Essay]
    scores: list[TraitScore]
    stats: CallStats
    elapsed_s: float
    bank_info: dict[str, Any]


def select_essays(job: ScoreJob, rubric: Rubric) -> tuple[list[Essay], list[Essay]]:
    """(essays to score, retrieval pool) after the split, ``ids`` and ``limit``."""
    essays = load_essays(job.data, rubric, job.data_format)
    split = split_by_fold(essays, job.eval_fold)
    chosen = split.eval
    if job.ids:
        by_id = {e.id: e for e in essays}
        unknown = [i for i in job.ids if i not in by_id]
        if unknown:
            raise InputError(f"unknown essay id(s): {', '.join(unknown[:5])}")
        chosen = [by_id[i] for i in job.ids]
    if job.limit is not None:
        chosen = chosen[: job.limit]
    if not chosen:
        raise InputError("no essays selected to score")
    return chosen, split.pool


def _fingerprint_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def prompt_names(protocols: list[ScoringProtocol]) -> list[str]:
    """The templates a run's protocols use: seed 000's always (as runs made before seed 002 recorded them),
    plus the consensus judges' when a seed 002 protocol is among them."""
    if any(consensus_protocol(p.name) is not None for p in protocols):
        return [*PROMPT_NAMES, *CONSENSUS_PROMPT_NAMES]
    return list(PROMPT_NAMES)


def job_config(
    job: ScoreJob, rubric: Rubric, protocols: list[ScoringProtocol], prompts: PromptLibrary
) -> dict[str, Any]:
    """What a resumed run must match: everything but the choice of essays."""
    names = prompt_names(protocols)
    return {
        "data": str(job.data.resolve()),
        "data_sha256": _fingerprint_file(job.data),
        "rubric": rubric.model_dump(mode="json"),
        "eval_fold": job.eval_fold,
        "protocols": [p.describe() for p in protocols],
        "provider": spec_identity(job.provider),
        # only when set, so runs made before role backends existed still resume
        **(
            {"role_providers": {r: spec_identity(s) for r, s in job.role_providers.items()}}
            if job.role_providers
            else {}
        ),
        "settings": job.settings.model_dump(mode="json"),
        "prompts": prompts.names_used(names),
        "prompt_texts_sha256": hashlib.sha256("\x00".join(prompts.text(n) for n in names).encode()).hexdigest()[:16],
    }


def build_bank(job: ScoreJob, pool: list[Essay], rubric: Rubric) -> Any:
    from madrag.retrieval import ExemplarBank, MiniLMEmbedder

    return ExemplarBank.build_or_load(pool, rubric, MiniLMEmbedder(), job.cache_dir / "banks")


async def execute(
    job: ScoreJob,
    on_record: Callable[[AgentRecord], None] | None = None,
    on_essay_done: Callable[[Essay, list[TraitScore]], None] | None = None,
    on_stage: Callable[[str], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> JobResult:
    """Run the job; ``on_start`` gets the number of (essay, trait, protocol) scores to produce."""
    started = time.monotonic()
    stage = on_stage or (lambda _msg: None)
    rubric = load_rubric(job.rubric)
    protocols = [get_protocol(name) for name in job.protocols]
    prompts = PromptLibrary(job.prompts_dir)
    essays, pool = select_essays(job, rubric)
    store = RunStore(job.run_dir / "store.sqlite")
    try:
        resumed = store.bind_config(job_config(job, rubric, protocols, prompts))
        run_id = store.get_meta("run_id") or uuid.uuid4().hex[:12]
        store.set_meta("run_id", run_id)
        store.add_essays(essays)
        bank_info: dict[str, Any] = {}
        bank = None
        if any(p.uses_bank for p in protocols):
            stage(f"exemplar bank: {len(pool)} pool essays")
            bank = build_bank(job, pool, rubric)
            bank_info = {"fingerprint": bank.fingerprint, "size": bank.size, "built_now": bank.built_now}
            store.set_meta("bank", bank_info)
        cache = job.cache_dir / "responses.sqlite" if job.response_cache else None
        provider = managed(job.provider, cache)
        store.set_meta("provider", provider.provider.describe())
        role_providers = {role: managed(spec, cache) for role, spec in job.role_providers.items()}
        if role_providers:
            store.set_meta("role_providers", {r: p.provider.describe() for r, p in role_providers.items()})
        ctx = CallContext(
            run_id=run_id,
            provider=provider,
            store=store,
            prompts=prompts,
            settings=job.settings,
            bank=bank,
            on_record=on_record,
            role_providers=role_providers,
        )
        if on_start is not None:
            on_start(len(essays) * len(rubric.traits) * len(protocols))
        stage(f"scoring {len(essays)} essays x {len(rubric.traits)} traits with {', '.join(job.protocols)}")
        try:
            if job.ray is None:
                scores = await run_scoring(ctx, essays, rubric, protocols, job.essay_concurrency, on_essay_done)
            else:
                from madrag.distributed.driver import score_on_ray

                scores = await score_on_ray(job.ray, job, ctx, store, essays, rubric, protocols, on_essay_done, stage)
        finally:
            for backend in (provider, *role_providers.values()):
                await backend.aclose()
        return JobResult(
            run_id=run_id,
            resumed=resumed,
            essays=essays,
            scores=scores,
            stats=ctx.stats,
            elapsed_s=time.monotonic() - started,
            bank_info=bank_info,
        )
    finally:
        store.close()
