"""The fast path of resuming a finished run: are all of a job's scores already in its store?

Resuming a run that has nothing left to do used to load the embedder, open (or build) the exemplar bank and
start the backend before the runner found every call in the store (about 28 s for a MiniLM run). Here the
job's protocols are run once against the store alone: every call is answered from the store, a stand-in bank
returns no exemplars (a stored call's key does not depend on its prompt) and a stand-in backend stops the
pass at the first call that is not stored. When the pass completes, its scores are the run's scores and
no bank, embedder or backend is ever built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from madrag.agents.calls import CallContext, CallStats
from madrag.agents.prompts import PromptLibrary
from madrag.data.essay import Essay
from madrag.pipeline.runner import run_scoring
from madrag.protocols.base import ScoringProtocol, TraitScore
from madrag.providers.base import Capabilities, ChatRequest, ChatResponse
from madrag.providers.policy import ManagedProvider
from madrag.rubric import Rubric, Trait
from madrag.settings import ScoringSettings
from madrag.store import RunStore

if TYPE_CHECKING:
    from madrag.retrieval.bank import Exemplar, LevelExemplar


CHECK_CONCURRENCY = 8
"""Essays checked at once (no backend to keep busy: only store reads)."""


class WorkLeft(Exception):
    """Raised by the stand-in backend: a call of the job is not in the store yet."""


class _StoreOnlyBackend:
    """Stands in for the job's backend while checking: every capability (so no setting is refused), and any
    request means a call is missing from the store."""

    capabilities = Capabilities(logprobs=True, prefill=True, choices=True, grammar=True, json_schema=True, seed=True)

    @property
    def provider(self) -> ManagedProvider:
        """Asked for by a record about to be made (a derived one, e.g. CJ's or GEval's final record, sends no
        request): it is not in the store, so the job has work left."""
        raise WorkLeft("a record not stored yet")

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Never answers: the call asking is not stored, so the job has work left."""
        raise WorkLeft(request.messages[-1].content[:40] if request.messages else "")


class _NoExemplars:
    """Stands in for the exemplar bank while checking: no exemplars (stored calls are found by key alone)."""

    def per_level(self, essay: Essay, trait: Trait) -> list[LevelExemplar]:
        """No exemplar at any level."""
        return []

    def anchors(self, essay: Essay, trait: Trait) -> list[LevelExemplar]:
        """No anchor at any level."""
        return []

    def similar(self, essay: Essay, k: int) -> list[Exemplar]:
        """No similar essay."""
        return []


async def stored_scores(
    *,
    run_id: str,
    store: RunStore,
    prompts: PromptLibrary,
    settings: ScoringSettings,
    essays: list[Essay],
    rubric: Rubric,
    protocols: list[ScoringProtocol],
    roles: list[str],
) -> tuple[list[TraitScore], CallStats] | None:
    """Every score of the job (and the statistics of reading them) when all its calls are stored; None when
    any call is missing, i.e. the job has work left. ``roles`` are the roles with a backend of their own."""
    backend = cast(ManagedProvider, _StoreOnlyBackend())
    ctx = CallContext(
        run_id=run_id,
        provider=backend,
        store=store,
        prompts=prompts,
        settings=settings,
        bank=_NoExemplars() if any(p.uses_bank for p in protocols) else None,
        role_providers=dict.fromkeys(roles, backend),
    )
    try:
        scores = await run_scoring(ctx, essays, rubric, protocols, essay_concurrency=CHECK_CONCURRENCY)
    except WorkLeft:
        return None
    return scores, ctx.stats
