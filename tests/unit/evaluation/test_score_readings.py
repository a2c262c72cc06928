"""Every reading of a run's scores gives the same scores, its store's rows: the run reader keeping its Judge
records, the one without them (the server's pages, ``madrag eval``), and ``madrag runs export``, on a run with
failed calls and a Judge group no configured protocol claims."""

from __future__ import annotations

from pathlib import Path

from tests.synthetic_runs import rubric_of, synthesize_run

from madrag.api.scoring import run_job
from madrag.evaluation.run import load_run, score_rows
from madrag.pipeline.job import ScoreJob
from madrag.pipeline.migrations import derive_scores, upgrade_scores
from madrag.providers.base import Capabilities, ChatRequest
from madrag.providers.fake import FakeProvider, FakeReply
from madrag.records import AgentRecord
from madrag.rubric import load_rubric
from madrag.store import RunStore


def _key(row: dict[str, object]) -> tuple[object, ...]:
    return (row["essay_id"], row["protocol"], row["trait"], row["score"], row["rationale"])


def test_kept_streamed_and_exported_scores_are_the_same(tmp_path: Path) -> None:
    rubric = rubric_of(2)
    run_dir = tmp_path / synthesize_run(tmp_path, 40, rubric, failed_every=7)
    store = RunStore(run_dir / "store.sqlite")
    try:  # Judge records of a protocol the run's configuration does not name (a run scored by an older madrag)
        judges = [r for r in store.records(role="judge") if not r.failed][:5]
        store.put_many([AgentRecord(**{**r.model_dump(), "key": "old-" + r.key, "protocol": "OLD"}) for r in judges])
        upgrade_scores(store, rederive=True)  # as a run of that madrag is migrated
        stored = store.scores()  # what madrag runs export reads
        essays = store.essays()
    finally:
        store.close()
    kept, light = load_run(run_dir, judges=True), load_run(run_dir, judges=False)
    assert light.judges == [] and len(kept.judges) > 0
    assert all(not r.messages and r.tokens is None and not r.failed for r in kept.judges)
    rows = {name: sorted(map(_key, score_rows(essays, found, rubric))) for name, found in (
        ("stored", stored), ("kept", kept.scores), ("light", light.scores)
    )}  # fmt: skip
    assert rows["stored"] == rows["kept"] == rows["light"]
    assert {r[1] for r in rows["stored"]} == {"MADRAG", "OLD"}
    madrag = [r for r in rows["stored"] if r[1] == "MADRAG"]
    assert len(madrag) == 40 * 2 and 0 < sum(r[3] is None for r in madrag) < 40  # a failed call: missing, no score


def _readable(request: ChatRequest) -> FakeReply:
    if request.role == "compare":
        return FakeReply(f"Answer: {'A' if len(request.messages[-1].content) % 2 else 'B'}")
    return FakeReply(f"The reasons.\nFinal score: {1 + len(request.messages[-1].content) % 3}")


def test_a_job_keeps_the_scores_every_reader_reads(asap: Path, tmp_path: Path) -> None:
    """The rows a job keeps (what every reader reads) hold the scores it returned and the scores derived again from
    its records, for protocols scored essay by essay and over the run (CJ, MTS)."""
    rubric = load_rubric(asap / "rubric_set7.json").only(["Ideas", "Style"])
    job = ScoreJob(
        data=asap / "training_set_rel3_sets7_8.tsv",
        rubric=rubric,
        run_dir=tmp_path / "run",
        limit=4,
        protocols=["CJ", "MTS", "MA"],
        embedder="hashing",
        cache_dir=tmp_path / "cache",
        response_cache=False,
    )
    result = run_job(job, backend=FakeProvider(script=_readable, caps=Capabilities(seed=True)), progress=False)
    store = RunStore(job.run_dir / "store.sqlite", read_only=True)
    try:
        essays, read_back = store.essays(), store.scores()
        derived = derive_scores(store, rubric, job.protocols)
    finally:
        store.close()
    assert len(essays) == 4
    found = (read_back, result.trait_scores, derived, load_run(job.run_dir, judges=False).scores)
    rows = [sorted(map(_key, score_rows(essays, scores, rubric))) for scores in found]
    assert rows[0] == rows[1] == rows[2] == rows[3] and len(rows[0]) == 4 * 2 * 3
    read = {(r[1], r[3] is not None) for r in rows[0]}
    # read scores (MA's), and the missing ones of the protocols scored over the run, are the same from each reader
    assert ("MA", True) in read and {p for p, _ in read} == {"CJ", "MTS", "MA"}, read
