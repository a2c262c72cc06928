"""A run's final scores are the rows its store keeps, and those rows are exactly the scores derived again from its
records by the derivation readers used before the rows existed (:func:`madrag.pipeline.migrations.derive_scores`),
for every protocol family: MADRAG and its ablations, the consensus paper's protocols, CJ, MTS and G-Eval, with
readable and unreadable answers, on the fake backend. A run made before the rows gets them once: in memory when
it is read, on disk (its store kept beside it first) when it is opened for writing."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from madrag.api.scoring import run_job
from madrag.evaluation.run import load_run, open_store
from madrag.pipeline import migrations
from madrag.pipeline.job import ScoreJob
from madrag.pipeline.migrations import derive_scores, scores_pending
from madrag.protocols import ABLATION, CONSENSUS_ABLATION
from madrag.providers.base import Capabilities, ChatRequest
from madrag.providers.fake import FakeProvider, FakeReply, default_script, request_role
from madrag.records import TraitScore
from madrag.rubric import Rubric, load_rubric

FAMILIES = {
    "ablations": list(ABLATION),
    "consensus": list(CONSENSUS_ABLATION),
    "CJ, MTS, G-Eval": ["CJ", "MTS", "GEval"],
}
OLD_RUN = Path(__file__).parents[2] / "data" / "previous_release" / "run"


def _some_unreadable(request: ChatRequest) -> FakeReply:
    """The fake backend's answers, but every answer that gives a score (not a debater's) whose first message after
    the system prompt (kept by a follow-up) is of odd length says no score (so rows with a missing score and its
    cause are compared too)."""
    reply = default_script(request)
    scoring = request_role(request) not in ("advocate", "skeptic")  # the consensus paper's agents score too
    if scoring and len(request.messages[min(1, len(request.messages) - 1)].content) % 2:
        return FakeReply(text="I cannot decide.")
    return reply


def _comparable(scores: list[TraitScore]) -> list[tuple[Any, ...]]:
    """Everything a reader reads of a score, in one sortable tuple."""
    out = []
    for s in scores:
        result = s.result.model_dump(mode="json") if s.result is not None else None
        out.append((s.protocol, s.essay_id, s.trait, s.score, json.dumps(result, sort_keys=True), s.rationale,
                    s.record_key, s.n_judges, s.n_usable, s.mean_score, s.truncated))  # fmt: skip
    return sorted(out, key=repr)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("unreadable", [False, True])
def test_rows_are_the_scores_derived_again_from_the_records(
    asap: Path, tmp_path: Path, family: str, unreadable: bool
) -> None:
    rubric = load_rubric(asap / "rubric_set7.json").only(["Ideas", "Style"])
    job = ScoreJob(
        data=asap / "training_set_rel3_sets7_8.tsv",
        rubric=rubric,
        run_dir=tmp_path / "run",
        limit=3,
        protocols=FAMILIES[family],
        embedder="hashing",
        cache_dir=tmp_path / "cache",
        response_cache=False,
    )
    # unreadable: a backend without logprobs or constrained choices (Judges answer in text, G-Eval has no
    # distribution), some of whose answers give no score
    backend = FakeProvider(script=_some_unreadable, caps=Capabilities(seed=True)) if unreadable else FakeProvider()
    result = run_job(job, backend=backend, progress=False)
    store = open_store(job.run_dir)
    try:
        rows = store.scores()
        derived = derive_scores(store, rubric, job.protocols)
        causes = store._conn.execute("SELECT score IS NULL, cause FROM scores").fetchall()
    finally:
        store.close()
    assert len(rows) == 3 * 2 * len(job.protocols)
    assert _comparable(rows) == _comparable(derived) == _comparable(result.trait_scores)
    assert all((cause is None) != missing for missing, cause in causes)  # a missing score has its cause, alone
    if unreadable:
        assert any(missing for missing, _ in causes), "some score should be missing"
    assert _comparable(load_run(job.run_dir, judges=False).scores) == _comparable(rows)


def test_a_run_made_before_the_rows_is_read_with_them_in_memory_and_given_them_when_resumed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(OLD_RUN, run)
    before = (run / "store.sqlite").read_bytes()
    store = open_store(run)  # read-only: derived in memory
    try:
        config = store.get_meta("config")
        read = store.scores()
        derived = derive_scores(
            store, Rubric.model_validate(config["rubric"]), [p["name"] for p in config["protocols"]]
        )
    finally:
        store.close()
    assert read and _comparable(read) == _comparable(derived)
    assert (run / "store.sqlite").read_bytes() == before and not (run / "store.v1.sqlite").exists()
    writer = migrations.open_store(run / "store.sqlite")  # for writing: migrated on disk, the old store kept
    try:
        assert not scores_pending(writer)
        assert _comparable(writer.scores()) == _comparable(read)
    finally:
        writer.close()
    kept = sqlite3.connect(run / "store.v1.sqlite")
    try:
        assert kept.execute("PRAGMA user_version").fetchone()[0] == 1
        assert "scores" not in {n for (n,) in kept.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        kept.close()
