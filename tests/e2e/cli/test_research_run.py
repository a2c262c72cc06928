"""A researcher's run, the parts after the scores (issue 32, items 3, 5 and 6): hand-coded error exports are never
written over, a meta-evaluation cut by its token limit says so and what to do, ``confidence.md`` without a usable
judgment names no table or figure it did not write, an unreachable server stops the run before its first call,
``madrag audit --dry-run`` calls nothing, the run's summary tells the response cache's answers apart and counts
missing scores per essay-trait, tables warn when their intervals rest on too few essays, and a run given twice
to ``confidence sets`` or ``eval-consensus`` is refused."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.e2e.confidence.test_confidence_study import fake_backend, make_debate_run  # noqa: F401 - a fixture, used by name
from tests.helpers import make_ctx
from tests.servers import free_port
from tests.unit.evaluation.test_evaluation import run_dir  # noqa: F401 - a fixture, used by name
from tests.unit.paper.confidence.test_meta_eval import WITH_SCHEMA, answer, debater_record
from typer import Typer
from typer.testing import CliRunner

from madrag.errors import InputError
from madrag.evaluation.agreement import evaluate
from madrag.paper.coding.errors_export import CODING_COLUMNS, export_errors
from madrag.paper.confidence.job import MetaJob, execute_meta
from madrag.paper.confidence.meta_eval import meta_evaluate, run_meta_evaluation
from madrag.paper.confidence.study import run_study, save_study
from madrag.providers.fake import FakeProvider, FakeReply

C_CODE = "code_C_mechanism (C1-C6)"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _write(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _said(output: str) -> str:
    return " ".join(output.split())


# -- item 3: hand work is never lost ----------------------------------------------------------------------------


def test_errors_again_keeps_the_hand_codes_and_a_copy(run_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    from madrag.cli.evaluate import errors_command

    target = tmp_path / "errors.csv"
    export_errors(run_dir, target)
    rows = _rows(target)
    rows[0][C_CODE], rows[0]["memo"] = "C2", "framing captured the judge"
    for row in rows:
        row["coder"] = "KW"  # a column the coder added
    _write(target, rows)
    app = Typer()
    app.command("errors")(errors_command)
    app.command("x")(lambda: None)
    done = CliRunner().invoke(app, ["errors", str(run_dir), "--out", str(target)])
    assert done.exit_code == 0, done.output
    assert "kept the hand codes of 2 coded rows of the previous errors.csv" in _said(done.output)
    again = _rows(target)
    assert [(r["essay_id"], r["trait"]) for r in again] == [(r["essay_id"], r["trait"]) for r in rows]
    assert again[0][C_CODE] == "C2" and again[0]["memo"] == "framing captured the judge"
    assert all(r["coder"] == "KW" for r in again)
    assert _rows(tmp_path / "errors.previous.csv") == rows


def test_errors_refuses_to_drop_a_coded_row(run_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    target = tmp_path / "errors.csv"
    export_errors(run_dir, target, focus="all")  # 3 rows; MADRAG's errors are 2 of them
    rows = _rows(target)
    only_other = next(r for r in rows if "MADRAG" not in r["off_by_more_than_1"].split())
    only_other[C_CODE] = "C4"
    _write(target, rows)
    before = target.read_bytes()
    with pytest.raises(InputError, match=r"1 coded rows the new export would not hold.*not overwritten"):
        export_errors(run_dir, target)  # MADRAG's rows only
    assert target.read_bytes() == before


def test_an_uncoded_export_is_simply_written_again(run_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    target = tmp_path / "errors.csv"
    export_errors(run_dir, target, focus="all")
    result = export_errors(run_dir, target)
    assert result.kept.rows == 0 and not (tmp_path / "errors.previous.csv").exists()
    assert all(r[c] == "" for r in _rows(target) for c in CODING_COLUMNS) and result.n_rows == 2


# -- item 5: a meta-evaluation cut by its token limit ----------------------------------------------------------


async def test_a_cut_judgment_is_marked_truncated_and_the_advice_is_a_larger_limit(tmp_path: Path) -> None:
    cut = FakeReply('{"instruction_following": 3, "justification_quality": 2, "reas', finish_reason="length")
    fake = FakeProvider(script=[cut, cut], caps=WITH_SCHEMA)
    ctx = make_ctx(tmp_path, fake)
    summary = await run_meta_evaluation(ctx, [debater_record()], method="json", max_tokens=40)
    (record,) = ctx.store.records()
    assert record.truncated and record.error is not None and "cut off at the token limit" in record.error
    assert summary.truncated == 1 and "larger --max-tokens (now 40)" in summary.advice()
    ok = FakeProvider(script=[answer()], caps=WITH_SCHEMA)
    fine = await meta_evaluate(make_ctx(tmp_path / "ok", ok), debater_record(), method="json")
    assert not fine.truncated and fine.error is None


async def test_confidence_md_without_a_usable_judgment_names_nothing_unwritten(
    tmp_path: Path,
    fake_backend: FakeProvider,  # noqa: F811
) -> None:
    run = tmp_path / "run"
    make_debate_run(run)
    fake_backend.script = lambda _request: FakeReply("I cannot judge this.")
    await execute_meta(MetaJob(run_dir=run, method="json"))
    study = run_study(run, run / "meta")
    written = {p.name for p in save_study(study, tmp_path / "out")}
    report = (tmp_path / "out" / "confidence.md").read_text(encoding="utf-8")
    assert "No usable judgment" in report
    assert "figure3.png" not in report and "pass_rates.csv" not in report and "figure3.png" not in written
    assert "| role |" not in report and "## Top" not in report  # no empty table


# -- item 6 -------------------------------------------------------------------------------------------------


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "madrag.cli", *args]
    env = {**os.environ, "COLUMNS": "300"}  # the summary lines unwrapped
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def test_an_unreachable_server_stops_the_run_at_once_in_one_line(asap: Path, tmp_path: Path) -> None:
    proc = _cli(
        "score", "--data", str(asap / "training_set_rel3_sets7_8.tsv"), "--rubric", str(asap / "rubric_set7.json"),
        "--limit", "2", "--provider", "openai", "--model", "m", "--base-url", f"http://127.0.0.1:{free_port()}/v1",
        "--embedder", "hashing", "--run-dir", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot reach the openai-compatible server" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr and "failed after retries" not in proc.stderr + proc.stdout
    assert not (tmp_path / "run").exists()  # no call made, nothing written: the same --run-dir works once it is up


def test_the_summary_tells_cache_hits_apart(asap: Path, tmp_path: Path) -> None:
    common = [
        "score",
        "--data",
        str(asap / "training_set_rel3_sets7_8.tsv"),
        "--rubric",
        str(asap / "rubric_set7.json"),
    ]
    common += ["--limit", "1", "--provider", "fake", "--protocol", "MA", "--cache-dir", str(tmp_path / "cache")]
    first = _cli(*common, "--run-dir", str(tmp_path / "a"))
    assert first.returncode == 0, first.stderr
    assert "4 agent calls made, 0 reused from the run store; of those made, 4 answered by the backend;" in _said(
        first.stdout
    )
    second = _cli(*common, "--run-dir", str(tmp_path / "b"))  # a new run, the same requests
    assert second.returncode == 0, second.stderr
    said = _said(second.stdout)
    assert "0 answered by the backend, 4 from the response cache (no request sent)" in said


def test_missing_scores_are_counted_per_essay_trait() -> None:
    from madrag.pipeline.unusable import unusable_by_protocol
    from madrag.protocols.scores import TraitScore

    scores = [
        TraitScore(essay_id="e1", trait=t, protocol="SA", score=None if t in ("Ideas", "Style") else 2)
        for t in ("Ideas", "Organization", "Style", "Conventions")
    ]
    traits = ["Ideas", "Organization", "Style", "Conventions"]
    found = unusable_by_protocol([], scores, ["e1"], traits, ["SA", "MA"])  # MA left no row at all
    assert found["SA"].missing == 2 and "2 of 4 essay-trait scores missing" in found["SA"].line()
    assert found["MA"].missing == 4 and "4 of 4 essay-trait scores missing" in found["MA"].line()


def test_audit_dry_run_calls_nothing(run_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    from madrag.audit.api import plan_audit

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    plan = plan_audit(copy, sample=2, repeats=1, perturbations=["padding-repeat"])
    assert len(plan.sample) == 2 and plan.conditions[0][:2] == ("seed-1235", "repeat")
    assert plan.essays_scored == sum(n for _, _, n in plan.conditions) >= 2
    assert "no call made" in plan.text() and "agent calls at the run's rate" in plan.text()
    assert not (copy / "audit").exists()


def test_the_audit_command_has_a_dry_run(run_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    from madrag.cli.audit import audit_command

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    app = Typer()
    app.command("audit")(audit_command)
    app.command("x")(lambda: None)
    done = CliRunner().invoke(app, ["audit", str(copy), "--dry-run", "--sample", "2", "--repeats", "1"])
    assert done.exit_code == 0, done.output
    assert "audit plan (dry run, no call made)" in _said(done.output)
    assert not (copy / "audit").exists()


def test_eval_warns_when_its_intervals_rest_on_few_essays(run_dir: Path) -> None:  # noqa: F811
    from madrag.metrics import MIN_CI_N

    notes = evaluate(run_dir, bootstrap=50, seed=0).notes
    assert any(f"fewer than {MIN_CI_N}" in n and "bootstrap intervals" in n for n in notes), notes
    assert not any(f"fewer than {MIN_CI_N}" in n for n in evaluate(run_dir, bootstrap=0).notes)


def test_a_run_given_twice_is_refused(run_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    from madrag.evaluation.run import distinct_runs

    with pytest.raises(InputError, match="are the same run: give each run once"):
        distinct_runs([run_dir, Path(os.path.relpath(run_dir))])
    (tmp_path / "link").symlink_to(run_dir)
    with pytest.raises(InputError, match="are the same run"):
        distinct_runs([tmp_path / "link", run_dir])
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    assert distinct_runs([run_dir, copy]) == [run_dir, copy]  # a copy is another run


def test_confidence_sets_and_eval_consensus_refuse_the_same_run_twice(run_dir: Path) -> None:  # noqa: F811
    from madrag.paper.confidence.sets import run_sets
    from madrag.paper.consensus.multi import load_runs

    with pytest.raises(InputError, match="give each run once"):
        run_sets([run_dir, Path(os.path.relpath(run_dir))])
    with pytest.raises(InputError, match="give each run once"):
        load_runs([run_dir, Path(os.path.relpath(run_dir))])


async def test_consensus_judges_ask_no_follow_up_by_default_as_the_paper(tmp_path: Path, asap: Path) -> None:
    """The consensus paper describes no follow-up request (C.1 only turns on JSON output where a model supports it): an
    unreadable consensus score is missing after one request, and the consensus page says so."""
    from madrag.data.essay import Essay
    from madrag.protocols import get_protocol
    from madrag.providers.base import Capabilities
    from madrag.rubric import load_rubric

    fake = FakeProvider(script=lambda _r: FakeReply("A fine essay overall."), caps=Capabilities(seed=True))
    ctx = make_ctx(tmp_path, fake)
    rubric = load_rubric(asap / "rubric_set7.json")
    scores = await get_protocol("SingleJudge").score_essay(ctx, Essay(id="e1", text="I waited."), rubric)
    assert len(fake.calls) == 1 and all(s.score is None for s in scores)
    page = " ".join((Path(__file__).parents[3] / "docs" / "consensus.md").read_text(encoding="utf-8").split())
    section = page[page.index("# Consensus multi-agent judging") :]
    assert "one follow-up on chat APIs" not in section and "with no follow-up request" in section
