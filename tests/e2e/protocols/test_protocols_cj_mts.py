"""GEval, CJ and MTS: each score rule on scripted answers, their records (no Judge record of theirs, resume), and
one ablation beside MADRAG read by ``madrag eval`` as rows of one table."""

from __future__ import annotations

import asyncio
import csv
import math
import re
import subprocess
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import keep_derived_scores, make_ctx

from madrag.data.essay import Essay
from madrag.pipeline.migrations import derive_scores
from madrag.protocols import get_protocol
from madrag.protocols.base import TraitScore
from madrag.protocols.geval import GEvalProtocol, expected_result
from madrag.protocols.mts_v1 import MTSv1Protocol, questions, scaled_score
from madrag.providers.base import Capabilities
from madrag.providers.fake import FakeProvider, FakeReply
from madrag.records import AgentRecord, ScoreResult
from madrag.rubric import Rubric, Trait
from madrag.store import RunStore

IDEAS = Trait(
    name="Ideas",
    min=0,
    max=3,
    levels={
        0: "Ideas are not focused.",
        1: "Ideas are minimal.",
        2: "Ideas are somewhat developed.",
        3: "Ideas are clearly focused on the topic. They are thoroughly developed with specific details. "
        "The story has a clear purpose throughout.",
    },
)
RUBRIC = Rubric(traits=[IDEAS])
ESSAY = Essay(id="q", text="The query essay about waiting for a bus.", prompt="Write about patience.")
POOL = [Essay(id=f"p{s}", text=f"Anchor essay of level {s}.", rater_scores={"Ideas": [float(s)]}) for s in range(4)]
TEXT_ONLY = Capabilities(logprobs=False, prefill=False, choices=False, seed=True)


def _run(coro: Coroutine[Any, Any, list[TraitScore]]) -> list[TraitScore]:
    return asyncio.run(coro)


# -- MTS[variant=madrag-v1] (madrag's earlier reading; the paper's MTS: tests/unit/protocols/test_cj_mts_papers.py) --


def test_mts_questions_come_from_the_top_level_description() -> None:
    assert questions(IDEAS) == [
        "Ideas are clearly focused on the topic.",
        "They are thoroughly developed with specific details.",
        "The story has a clear purpose throughout.",
    ]


def test_mts_scaled_mean() -> None:
    assert scaled_score([7, 10, 4], IDEAS) == 2  # mean 7 on 1..10 -> 0 + 6/9 * 3 = 2.0
    assert scaled_score([10, 10, 9], IDEAS) == 3  # 9.67 -> 2.89 -> 3
    assert scaled_score([1, 2, 2], IDEAS) == 0  # 1.67 -> 0.22 -> 0
    assert scaled_score([8, None, 8], IDEAS) is None
    assert scaled_score([], IDEAS) is None


def test_mts_asks_its_questions_in_one_conversation_and_averages_them(tmp_path: Path) -> None:
    answers = iter(["Quote: 'bus'.\nFinal score: 7", "Final score: 10", "Final score: 4"])
    provider = FakeProvider(script=lambda r: next(answers), caps=TEXT_ONLY)
    ctx = make_ctx(tmp_path, provider)
    (score,) = _run(MTSv1Protocol().score_essay(ctx, ESSAY, RUBRIC))
    assert score.score == 2 and score.n_usable == 3
    third = provider.calls[2]
    assert third.role == "mts" and [m.role for m in third.messages] == [
        "system", "user", "assistant", "user", "assistant", "user",
    ]  # fmt: skip
    assert "Final score: 10" in third.messages[4].content and "clear purpose" in third.messages[5].content
    (read,) = derive_scores(ctx.store, RUBRIC, ["MTS[variant=madrag-v1]"])  # type: ignore[arg-type]
    assert read.score == 2


def test_mts_an_unreadable_answer_leaves_the_score_missing(tmp_path: Path) -> None:
    answers = iter(["Final score: 7", "I cannot say.", "Final score: 4"])
    provider = FakeProvider(script=lambda r: next(answers), caps=TEXT_ONLY)
    ctx = make_ctx(tmp_path, provider)
    ctx.settings = ctx.settings.model_copy(update={"score_followup": False})
    (score,) = _run(MTSv1Protocol().score_essay(ctx, ESSAY, RUBRIC))
    assert score.score is None and score.n_usable == 2 and ctx.stats.failed_scores == 1


# -- GEval -----------------------------------------------------------------------------------------------------


def _record(score: ScoreResult) -> AgentRecord:
    return AgentRecord(run_id="r", key="k", essay_id="q", trait="Ideas", protocol="GEval", role="rater", score=score)


def test_geval_reports_the_expectation_and_never_passes_the_parsed_score_off_as_one() -> None:
    dist = {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.4}  # expectation 2.0
    found = expected_result(_record(ScoreResult(parsed=3, distribution=dist, expected=2.0, reported=3)), IDEAS)
    assert found.reported == 2 and found.reported_from == "expected"
    half = expected_result(_record(ScoreResult(parsed=1, expected=1.5, reported=1)), IDEAS)
    assert half.reported == 2  # rounded half up
    no_dist = ScoreResult(parsed=3, reported=3, mode="parsed_text")
    assert expected_result(_record(no_dist), IDEAS).reported is None
    fallback = expected_result(_record(no_dist), IDEAS, "parsed")
    assert fallback.reported == 3 and fallback.reported_from == "parsed"
    assert expected_result(_record(ScoreResult()), IDEAS, "parsed").reported is None


def test_geval_on_the_constrained_fake_reads_the_choice_distribution(tmp_path: Path) -> None:
    lps = {"0": math.log(0.1), "1": math.log(0.2), "2": math.log(0.3), "3": math.log(0.4)}
    provider = FakeProvider(script=lambda r: FakeReply(text="3", choice_logprobs=lps) if r.choices else "Fine.")
    ctx = make_ctx(tmp_path, provider)
    (score,) = _run(GEvalProtocol().score_essay(ctx, ESSAY, RUBRIC))
    assert score.score == 2 and score.result is not None and score.result.expected == pytest.approx(2.0)
    assert {r.role for r in provider.calls} == {"rater"}


def test_geval_without_logprobs_is_missing_and_counted(tmp_path: Path) -> None:
    provider = FakeProvider(script=["Solid.\nFinal score: 3"], caps=TEXT_ONLY)
    ctx = make_ctx(tmp_path, provider)
    (score,) = _run(GEvalProtocol().score_essay(ctx, ESSAY, RUBRIC))
    assert score.score is None and ctx.stats.failed_scores == 1
    assert score.result is not None and "no score distribution" in (score.result.invalid_raw or "")
    (read,) = derive_scores(ctx.store, RUBRIC, ["GEval"])  # type: ignore[arg-type]
    assert read.score is None


# -- end to end ------------------------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=300)


def test_ablate_with_madrag_cj_mts_geval_then_eval_one_table(asap: Path, rubric7: Rubric, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    common = [
        "--data", str(asap / "training_set_rel3_sets7_8.tsv"), "--rubric", str(asap / "rubric_set7.json"),
        "--run-dir", str(run_dir), "--cache-dir", str(tmp_path / "cache"), "--provider", "fake",
        "--embedder", "hashing", "--limit", "2",
    ]  # fmt: skip
    protocols = ["-p", "MADRAG", "-p", "CJ", "-p", "MTS", "-p", "GEval"]
    proc = _cli("ablate", *protocols, *common)
    assert proc.returncode == 0, proc.stderr
    # per essay x 4 traits: MADRAG 3 (debate 2 + judge), CJ 4 anchors x 2 orders, MTS 2 turns, GEval 1
    assert "112 agent calls made" in proc.stdout.replace("\n", " ")
    costs = _cli("costs", "--run-dir", str(run_dir))
    assert costs.returncode == 0, costs.stderr
    # CJ's compared marks are no calls: its 64 comparisons (2 essays x 4 traits x 4 anchors x 2 orders) only
    assert re.search(r"^\s*compare\s+calls\s+64\s+answers\s+64\b", costs.stdout, re.MULTILINE)
    assert re.search(r"^\s*judge\s+calls\s+8\s+answers\s+16\b", costs.stdout, re.MULTILINE)  # MADRAG's
    again = _cli("ablate", *protocols, *common)
    assert again.returncode == 0 and "0 agent calls made" in again.stdout.replace("\n", " ")
    evaluated = _cli("eval", "--run-dir", str(run_dir), "--bootstrap", "0")
    assert evaluated.returncode == 0, evaluated.stderr
    rows = list(csv.DictReader((run_dir / "eval" / "qwk.csv").open()))
    assert {r["protocol"] for r in rows if not r["protocol"].startswith("Human-Human")} == {
        "MADRAG", "CJ", "MTS", "GEval",
    }  # fmt: skip
    assert all(int(r["n"]) == 2 for r in rows if r["protocol"] in ("CJ", "MTS", "GEval"))
    store = RunStore(run_dir / "store.sqlite", read_only=True)
    try:
        read = store.scores()
        raw = {  # the 0-10 score read the authors' way (decimals kept)
            (r.essay_id, r.trait): r.context["score_0_10"]
            for r in store.records(protocol="MTS", role="mts")
            if r.round == 2
        }
    finally:
        store.close()
    for name in ("CJ", "GEval"):
        assert sorted(s.score is not None for s in read if s.protocol == name) == [True] * 8
    for trait in rubric7.traits:  # MTS over two essays: the lower raw score gets the minimum, the higher the maximum
        mts = {s.essay_id: s.score for s in read if s.protocol == "MTS" and s.trait == trait.name}
        assert all(raw[(e, trait.name)] is not None for e in mts)  # the fake's <score> answers are read
        low, high = sorted(mts, key=lambda e: raw[(e, trait.name)] or 0)
        if raw[(low, trait.name)] == raw[(high, trait.name)]:
            assert mts == {low: None, high: None}  # no range: missing
        else:
            assert (mts[low], mts[high]) == (trait.min, trait.max)


# -- Ray (in-process workers) ------------------------------------------------------------------------------------


async def test_geval_and_mts_resumed_on_workers_make_the_records_of_a_local_run(tmp_path: Path) -> None:
    """A run of GEval and MTS stopped part-way (one essay with the calls of one trait of three stored) and
    finished by in-process Ray workers ends with exactly the records of an uninterrupted local run."""
    from tests.unit.distributed.test_ray_unit import ESSAYS as RAY_ESSAYS
    from tests.unit.distributed.test_ray_unit import RUBRIC as RAY_RUBRIC
    from tests.unit.distributed.test_ray_unit import LocalActor, dispatcher

    from madrag.distributed.shard import make_shards
    from madrag.pipeline.runner import run_scoring

    protocols = ["GEval", "MTS"]
    local = make_ctx(tmp_path / "local", FakeProvider())
    await run_scoring(local, RAY_ESSAYS, RAY_RUBRIC, [get_protocol(p) for p in protocols])
    local_store = local.store
    assert isinstance(local_store, RunStore)
    want = {r.key: (r.prompt_hash, r.text, r.score) for r in local_store.records()}
    ctx = make_ctx(tmp_path / "ray", FakeProvider())
    store = ctx.store
    assert isinstance(store, RunStore)
    for record in local_store.records():
        if record.essay_id in ("e0", "e1") or (record.essay_id == "e2" and record.trait == "Ideas"):
            store.put(record)
    keep_derived_scores(store, RAY_RUBRIC, protocols)  # the rows of what it holds, as the stopped run kept them
    before = store.count()
    job = dispatcher(ctx, [LocalActor(protocols=protocols), LocalActor(protocols=protocols)], [], protocols)
    assert set(job.plan.todo) == {"e2", "e3", "e4", "e5"} and job.plan.partial == {"e2"}
    await job.run(make_shards(RAY_ESSAYS, job.plan, 2))
    got = {r.key: (r.prompt_hash, r.text, r.score) for r in store.records()}
    assert got == want
    assert ctx.stats.made == len(want) - before  # each record the workers sent is new
    local_store.close()
    store.close()


def test_cj_and_mts_templates_are_part_of_the_runs_identity() -> None:
    """Editing a CJ or MTS template must stop a resume, as editing any other template a run used does."""
    from madrag.agents.prompts import TRAINING_FREE_PROMPT_NAMES
    from madrag.pipeline.job import prompt_names
    from madrag.protocols import get_protocol

    assert set(TRAINING_FREE_PROMPT_NAMES) <= set(prompt_names([get_protocol("CJ[anchors=medoid]")]))
    assert set(TRAINING_FREE_PROMPT_NAMES) <= set(prompt_names([get_protocol("MTS")]))
    assert not set(TRAINING_FREE_PROMPT_NAMES) & set(prompt_names([get_protocol("MADRAG")]))
