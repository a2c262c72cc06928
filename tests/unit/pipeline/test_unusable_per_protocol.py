"""One accounting of unusable and missing results for every protocol (issue 43): the run summary names, per
protocol, the judge answers (or comparisons) that could not be read and why each essay-trait score is missing:
G-Eval without a score distribution, CJ's unreadable comparisons, MTS's min-max without a range. On the scripted
fake provider, through the pipeline as ``madrag score`` runs it."""

from __future__ import annotations

import asyncio
import html
import io
from pathlib import Path
from unittest.mock import patch

from rich.console import Console
from tests.helpers import stored_records

from madrag.cli import runs
from madrag.evaluation.report import write_report
from madrag.pipeline.job import ScoreJob, execute
from madrag.pipeline.unusable import NO_ANSWER, summary_lines, unusable_by_protocol
from madrag.protocols.scores import TraitScore
from madrag.providers.base import Capabilities, ChatRequest
from madrag.providers.fake import FakeProvider, FakeReply
from madrag.rubric import load_rubric

TEXT_ONLY = Capabilities(seed=True)
"""A server without logprobs, prefill or choices: scores are read from the text."""


def _script(request: ChatRequest) -> FakeReply:
    if request.role == "compare":  # a CJ comparison without its "Answer: A|B" line
        return FakeReply("Both essays have merits; hard to say.")
    return FakeReply("The quotes and the reasons.\nFinal score: 2")  # every essay the same score


def test_each_protocol_names_why_its_scores_are_missing(asap: Path, tmp_path: Path) -> None:
    rubric = load_rubric(asap / "rubric_set7.json").only(["Ideas"])
    job = ScoreJob(
        data=asap / "training_set_rel3_sets7_8.tsv",
        rubric=rubric,
        run_dir=tmp_path / "run",
        limit=3,
        protocols=["GEval", "CJ", "MTS", "MA"],
        embedder="hashing",
        cache_dir=tmp_path / "cache",
        response_cache=False,
    )
    result = asyncio.run(execute(job, backend=FakeProvider(script=_script, caps=TEXT_ONLY)))
    ids = [e.id for e in result.essays]
    accounts = unusable_by_protocol(stored_records(job.run_dir), result.scores, ids, ["Ideas"], job.protocols)

    geval, cj, mts, ma = (accounts[p] for p in job.protocols)
    assert (geval.unusable, geval.missing) == (0, 3)  # the Judge's score was read; the expectation was not
    assert geval.missing_causes == {"no score distribution (backend without logprobs)": 3}
    compares = [r for r in stored_records(job.run_dir) if r.protocol == "CJ" and r.role == "compare"]
    assert cj.answers == "comparisons" and cj.given == cj.unusable == len(compares) > 0  # was "0 of 0 unusable"
    assert cj.causes == {"no 'Answer: A' or 'Answer: B' line": len(compares)}
    # each essay's comparisons all unreadable: its score is missing for their cause (one vocabulary, issue 48)
    assert cj.missing == 3 and cj.missing_causes == {"no 'Answer: A' or 'Answer: B' line": 3}
    assert mts.missing == 3 and mts.missing_causes == {"min-max over 3 essays has no range": 3}
    assert ma.line() == ""  # every MA score was read

    lines = summary_lines(accounts)
    assert [line.split(":", 1)[0] for line in lines] == ["GEval", "CJ", "MTS"]
    assert lines[0] == ("GEval: 3 of 3 essay-trait scores missing: 3 no score distribution (backend without logprobs).")
    assert lines[1].startswith(f"CJ: {len(compares)} of {len(compares)} comparisons unusable: ")
    assert lines[2] == "MTS: 3 of 3 essay-trait scores missing: 3 min-max over 3 essays has no range."

    # one count on every surface: the job's result, the summary, runs list and the report read what the job's
    # end stored, and say what was counted here
    assert {p: a.as_dict() for p, a in result.unusable.items()} == {p: a.as_dict() for p, a in accounts.items()}
    assert summary_lines(result.unusable) == lines
    listed = _runs_list_row(tmp_path)
    assert f"CJ: {len(compares)} of {len(compares)} comparisons unusable, 3 of 3 missing" in listed
    assert "GEval: 3 of 3 missing; " in listed and "MTS: 3 of 3 missing" in listed and "MA:" not in listed
    report = write_report(job.run_dir, bootstrap=10).read_text(encoding="utf-8")
    assert "<h2>Scores not read</h2>" in report
    assert all(html.escape(line, quote=True) in report for line in lines)


def _runs_list_row(root: Path, protocol: str = "CJ") -> str:
    """``madrag runs list ROOT``'s row of its one run, on one line."""
    buffer = io.StringIO()
    wide = Console(file=buffer, width=2000)
    with patch.object(runs, "console", wide):
        runs.runs_list(root)
    return next(line for line in buffer.getvalue().splitlines() if "run" in line and protocol in line)


def test_a_score_without_any_row_is_a_call_that_failed() -> None:
    scores = [TraitScore(essay_id="e1", trait="Ideas", protocol="MAD", score=1)]
    accounts = unusable_by_protocol([], scores, ["e1", "e2"], ["Ideas"], ["MAD"])
    assert accounts["MAD"].missing_causes == {NO_ANSWER: 1}
    assert summary_lines(accounts) == [f"MAD: 1 of 2 essay-trait scores missing: 1 {NO_ANSWER}."]


CUT = "cut off at the token limit (--judge-max-tokens 64)"


def _cut_and_unread(request: ChatRequest) -> FakeReply:
    """Every consensus judge's answer cut off at the token limit; MA's and MTS's score answers on the essay
    whose text holds "tree" cut off, those on "boat" without a score line, the rest read."""
    text = "\n".join(m.content for m in request.messages)
    if request.role in ("advocate", "skeptic") or (request.role == "mts" and request.round == 1):
        return FakeReply("Quotes and reasons.")
    if request.role not in ("judge", "mts"):  # a consensus judge
        return FakeReply("The essay develops its ideas and", finish_reason="length")
    if "tree" in text:
        return FakeReply("The essay develops its ideas and", finish_reason="length")
    if "boat" in text:
        return FakeReply("A fair essay with some detail.")
    return FakeReply("Reasons.\nFinal score: 2" if request.role == "judge" else "Reasons.\nScore: 7")


def test_unusable_and_missing_share_one_cause_vocabulary(tmp_path: Path) -> None:
    """Issue 48: a Judge answer cut off at the token limit is "cut off" in both counts (was "no 'Final score'" in
    the missing count); a consensus judge's answers all cut off leave its scores missing as cut off (was "no score
    read"); MTS's score turns are judge answers, counted; and runs list shows "[rounds=1]" as written, with the
    model the answers named."""
    from madrag import Rubric, Trait
    from madrag.data.essay import Essay

    rubric = Rubric(traits=[Trait(name="Ideas", min=0, max=3, levels={0: "a", 1: "b", 2: "c", 3: "d"})])
    texts = ["A tree stood on the hill.", "A boat crossed the bay.", "The garden grew slowly.", "Rain fell all day."]
    job = ScoreJob(
        essays=[Essay(id=f"e{i}", text=t) for i, t in enumerate(texts)],
        rubric=rubric,
        run_dir=tmp_path / "run",
        eval_fold=None,
        protocols=["MA", "ConsensusMAD[rounds=1]", "MTS"],
        cache_dir=tmp_path / "cache",
        response_cache=False,
        settings={"judge_max_tokens": 64},
    )
    result = asyncio.run(execute(job, backend=FakeProvider(script=_cut_and_unread, caps=TEXT_ONLY)))
    ma, consensus, mts = (result.unusable[p] for p in job.protocols)
    assert ma.causes == ma.missing_causes == {CUT: 1, "no 'Final score: N' line": 1}
    assert ma.line() == (
        f"2 of 4 judge scores unusable: 1 {CUT}, 1 no 'Final score: N' line. 2 of 4 essay-trait scores missing: "
        f"1 {CUT}, 1 no 'Final score: N' line. Try --judge-max-tokens 128 with a new --run-dir (this run keeps the "
        "answers it has), or --score-method constrained with a new --run-dir where the server takes a schema."
    )
    assert set(consensus.causes) == {CUT} and consensus.missing_causes == {CUT: 4}
    assert mts.given == 4 and mts.causes == {CUT: 1, "no 0-10 score in the answer": 1}
    assert mts.missing_causes[CUT] == 1 and "no score read" not in mts.missing_causes
    listed = _runs_list_row(tmp_path, "ConsensusMAD")
    assert "ConsensusMAD[rounds=1]" in listed and "fake-model" in listed
