"""What a scoring job is: :class:`ScoreJob` (everything that defines one run), what it returns
(:class:`JobResult`), and how its essays may be scored elsewhere (an :class:`Executor`, handed a
:class:`ScoringRun`). :mod:`madrag.pipeline.job` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from madrag.agents.calls import CallContext, CallStats
from madrag.data.essay import Essay
from madrag.data.row_limit import MAX_ROWS
from madrag.data.splits import EvalFold
from madrag.pipeline.hooks import RunHooks
from madrag.pipeline.unusable import Unusable
from madrag.protocols.base import ScoringProtocol, TraitScore
from madrag.providers.cache import default_cache_dir
from madrag.providers.spec import ProviderSpec
from madrag.retrieval.embedder import EmbedderName
from madrag.retrieval.openai_embedder import EmbeddingEndpoint
from madrag.rubric import Rubric
from madrag.settings import ScoringSettings
from madrag.store import RunStore


@runtime_checkable
class Executor(Protocol):
    """How a job's essays are scored once the run is open (``ScoreJob.executor``; None: here, by
    :func:`madrag.pipeline.runner.run_scoring`). Ray's is :class:`madrag.distributed.driver.RayExecutor`."""

    async def __call__(self, run: ScoringRun) -> list[TraitScore]: ...


class ScoreJob(BaseModel):
    """Everything that defines one scoring run (recorded in its store, checked when it is resumed).

    Exactly one of ``data`` (a data file) and ``essays`` (in-memory essays) is given; the ``rubric`` is a file or
    a :class:`Rubric` (in memory: the run directory keeps it in ``inputs/rubric.json``). With ``pool`` the
    retrieval pool is those essays and every selected essay is scored (no fold split); without it,
    ``eval_fold`` is scored and the other folds are the pool (``None``: every essay is scored, every essay is
    in the pool, the essay being scored never retrieved; ``"each"``: every essay is scored, each fold with the
    other folds as its pool).
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    data: Path | None = None
    essays: list[Essay] | None = Field(default=None, repr=False)
    pool: list[Essay] | None = Field(default=None, repr=False)
    rubric: Path | Rubric
    run_dir: Path
    data_format: str = "auto"
    # the most rows ``data`` may hold, counted before it is read (``--max-rows``; None: no limit, as when a run's
    # own inputs are read again). Not part of the run's identity
    max_rows: int | None = Field(default=MAX_ROWS, ge=1)
    eval_fold: EvalFold = 0  # a fold, "each" (cross-fold: every fold, the others as its pool) or None (all)
    limit: int | None = Field(default=None, ge=1)
    ids: list[str] | None = None
    protocols: list[str] = Field(default_factory=lambda: ["MADRAG"])
    # the named list the protocols came from (``madrag score --protocols paper-ablation``); recorded in the run's
    # configuration, not part of its identity (the protocols are)
    protocol_preset: str | None = None
    provider: ProviderSpec = Field(default_factory=ProviderSpec)
    # backends for particular roles (the consensus paper cross-model pairs); other roles use ``provider``
    role_providers: dict[str, ProviderSpec] = Field(default_factory=dict)
    settings: ScoringSettings = Field(default_factory=ScoringSettings)
    essay_concurrency: int | None = Field(default=None, ge=1)  # None: derived from the backend's slots
    prompts_dir: Path | None = None
    cache_dir: Path = Field(default_factory=default_cache_dir)
    response_cache: bool = True
    # the pool's embedder: the MADRAG paper's MiniLM (truncated at 256 word pieces), MiniLM over windows (the
    # option, the
    # default of runs made before: a resumed one keeps it, see resumed_job) or the hashing embedder for quick checks
    embedder: EmbedderName = "minilm"
    # where ``--embedder server`` sends the texts (what it leaves unsaid: the backend's; embedding_endpoint)
    embedding: EmbeddingEndpoint = Field(default_factory=EmbeddingEndpoint)
    # where the essays are scored (None: in this process; e.g. a Ray cluster, madrag.distributed); how a run
    # executes is not part of its identity, so a run started here can be resumed on Ray and the other way round
    executor: Executor | None = Field(default=None, exclude=True, repr=False)
    # calls that may fail after their retries before the run stops (None: no limit; each failed call is recorded
    # as failed, its essay-trait left unscored, and retried on resume). Not part of the run's identity
    max_failures: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _one_source(self) -> ScoreJob:
        if (self.data is None) == (self.essays is None):
            raise ValueError("give exactly one of data (a data file) and essays (in-memory essays)")
        return self

    def embedding_endpoint(self) -> EmbeddingEndpoint | None:
        """The server ``--embedder server`` embeds with: :attr:`embedding`, its URL, model and key's variable
        where unsaid from the backend's own (an OpenAI-compatible one's ``--base-url``, ``--model``); None for the
        other embedders."""
        if self.embedder != "server":
            return None
        options = self.provider.options
        base_url, key_env = getattr(options, "base_url", None), getattr(options, "api_key_env", "OPENAI_API_KEY")
        return self.embedding.over(base_url, self.provider.model, key_env)


@dataclass
class JobResult:
    """What :func:`~madrag.pipeline.job.execute` returns: the scores of the selected essays and how the run went."""

    run_id: str
    resumed: bool
    essays: list[Essay]
    scores: list[TraitScore]
    stats: CallStats
    elapsed_s: float
    bank_info: dict[str, Any]
    # per protocol, its unusable and missing scores of the selected essays (kept in the store: pipeline.unusable)
    unusable: dict[str, Unusable] = field(default_factory=dict)


@dataclass(frozen=True)
class ScoringRun:
    """What an :class:`Executor` scores: the job, its open run's store and call context (backends, bank), the
    selected essays, rubric and protocols, the caller's hooks;
    ``ready_backend``: the caller handed a provider object."""

    job: ScoreJob
    store: RunStore
    ctx: CallContext
    essays: list[Essay]
    rubric: Rubric
    protocols: list[ScoringProtocol]
    hooks: RunHooks
    ready_backend: bool = False
