"""Test helpers: a stub exemplar bank and a ready call context over the fake provider."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from madrag.agents.calls import AgentCall, CallContext, new_record
from madrag.agents.prompts import PromptLibrary
from madrag.data.essay import Essay
from madrag.providers.base import Provider
from madrag.providers.policy import ManagedProvider, RetryPolicy
from madrag.records import AgentRecord, ScoreResult
from madrag.retrieval.bank import Exemplar, LevelExemplar
from madrag.retrieval.embedder import FloatArray, HashingEmbedder
from madrag.rubric import Rubric, Trait
from madrag.settings import ScoringSettings
from madrag.store import RunStore


class StubBank:
    """An exemplar bank over an in-memory pool. per_level: the first pool essay with each reference score (never
    the query); similar: the first ``k`` pool essays."""

    def __init__(self, pool: list[Essay]) -> None:
        self.pool = pool
        self.queries: list[tuple[str, str]] = []

    def per_level(self, essay: Essay, trait: Trait) -> list[LevelExemplar]:
        """Per score of ``trait``: the first pool essay with that reference (never ``essay``), or None."""
        self.queries.append((essay.id, trait.name))
        out = []
        for s in trait.scores:
            match = next((e for e in self.pool if e.id != essay.id and e.reference(trait) == s), None)
            ex = None
            if match is not None:
                ex = Exemplar(essay_id=match.id, text=match.text, scores={}, distance=0.1, similarity=0.9)
            out.append(LevelExemplar(trait=trait.name, score=s, exemplar=ex))
        return out

    def similar(self, essay: Essay, k: int) -> list[Exemplar]:
        """The first ``k`` pool essays, each with an Ideas score of 1."""
        return [
            Exemplar(essay_id=e.id, text=e.text, scores={"Ideas": 1}, distance=0.2, similarity=0.8)
            for e in self.pool[:k]
        ]


def make_ctx(
    tmp_path: Path,
    provider: Provider,
    bank: StubBank | None = None,
    settings: ScoringSettings | None = None,
    retries: int = 0,
) -> CallContext:
    """A call context over ``provider`` (no backoff between retries) with a store in tmp_path."""
    return CallContext(
        run_id="test",
        provider=ManagedProvider(provider, RetryPolicy(retries=retries, base_delay_s=0.0, max_delay_s=0.0)),
        store=RunStore(tmp_path / "store.sqlite"),
        prompts=PromptLibrary(),
        settings=settings or ScoringSettings(),
        bank=bank,
    )


class BagOfWordsEmbedder(HashingEmbedder):
    """The package's hashing embedder (64 buckets by default) counting every call and every text it embeds."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim)
        self.calls = 0
        self.texts_embedded = 0

    def embed(self, texts: list[str]) -> FloatArray:
        """Normalised word-bucket counts, one row per text."""
        self.calls += 1
        self.texts_embedded += len(texts)
        return super().embed(texts)


def stored_records(run_dir: Path) -> list[AgentRecord]:
    """Every record of a run's store, in the store's order."""
    store = RunStore(run_dir / "store.sqlite", read_only=True)
    try:
        return list(store.records())
    finally:
        store.close()


def keep_derived_scores(store: RunStore, rubric: Rubric, protocols: list[str]) -> None:
    """Keep in ``store`` the final scores its records give (:func:`madrag.pipeline.migrations.derive_scores`): the
    rows a run holding just these records (one stopped part-way, its records copied here) has."""
    from madrag.pipeline.final_scores import rows
    from madrag.pipeline.migrations import derive_scores

    store.put_scores(rows(derive_scores(store, rubric, protocols)))


def earlier_derived_record(
    ctx: CallContext,
    protocol: str,
    essay_id: str,
    trait: str,
    score: ScoreResult | None,
    rationale: str,
    context: dict[str, Any],
    sources: list[AgentRecord],
) -> AgentRecord:
    """The *derived* Judge record an earlier madrag stored for a score computed from other calls (G-Eval's
    expectation, the screening Judge's score an adaptive debate kept, the earlier CJ's and MTS's scores), made here
    as that code made it: role ``judge`` under the protocol, no request (no prompt, ``answers=0``), the computed
    score, ``context["derived"]`` and ``context["from"]`` (the keys of ``sources``)."""
    call = AgentCall(protocol, essay_id, trait, "judge", [], 0.0, 0)
    call.context = {**context, "derived": True, "from": [r.key for r in sources]}
    problem = None if score is None or score.reported is not None else f"unusable score: {score.invalid_raw}"
    truncated = any(r.truncated for r in sources)
    return new_record(
        ctx, call, text=rationale, rationale=rationale, score=score, answers=0, attempts=0, evidence=None,
        truncated=truncated, error=problem,
    )  # fmt: skip


def needs_ray() -> ModuleType:
    """The ``ray`` module; without it (madrag's ``ray`` extra not installed, or an install that does not import)
    the calling test is skipped, saying so. In CI (``CI=true``) Ray is installed: a missing ``ray`` there fails the
    test instead of skipping it."""
    if os.environ.get("CI") == "true":
        import ray

        return ray
    reason = "Ray is not installed (pip install 'madrag[ray]'); CI runs this test"
    module: ModuleType = pytest.importorskip("ray", reason=reason, exc_type=ImportError)
    return module


def plugin_env(test_file: str, module: str) -> dict[str, str]:
    """The environment of a madrag process that loads the test module ``module`` (the file ``test_file``) as its
    ``$MADRAG_PLUGINS`` plugin: that file's folder and the repository on the path."""
    folder = Path(test_file).resolve().parent
    repo = Path(__file__).resolve().parent.parent
    path = os.pathsep.join([str(folder), str(repo), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "MADRAG_PLUGINS": module, "PYTHONPATH": path, "RAY_USAGE_STATS_ENABLED": "0"}


def madrag_with_plugin(
    test_file: str, module: str, *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``madrag ARGS`` in its own process, with the test module ``module`` as a plugin (:func:`plugin_env`)."""
    command = [sys.executable, "-m", "madrag.cli", *args]
    env = plugin_env(test_file, module)
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
