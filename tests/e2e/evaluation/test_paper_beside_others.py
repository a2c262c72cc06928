"""The consensus and the confidence papers' reported figures beside a run's (``madrag eval-consensus --paper``,
``madrag confidence analyze --paper``): on fake-backend runs, each paper figure stands beside the figure the run
measured, with the difference, and a figure the run cannot measure is shown as missing, never 0."""

from __future__ import annotations

import asyncio
import csv
from pathlib import Path

import pytest

from consensus_helpers import agent_frame, ref_frame
from madrag.cli.confidence import analyze_command
from madrag.cli.consensus import eval_consensus_command
from madrag.paper.beside_consensus import beside_consensus, consensus_task, model_key
from madrag.paper.beside_paper import beside_markdown
from madrag.paper.confidence.job import MetaJob, execute_meta
from madrag.paper.consensus.metrics import evaluate_consensus
from madrag.paper.consensus.multi import average_evaluations
from madrag.paper.reported import reported
from madrag.pipeline.job import ScoreJob, execute
from madrag.providers import ProviderSpec

REPO = Path(__file__).resolve().parents[3]
SUMMEVAL = REPO / "tests" / "data" / "summeval_paired_sample.jsonl"
SUMMEVAL_RUBRIC = REPO / "docs" / "rubrics" / "rubric_summeval.json"


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open(encoding="utf-8")))


def _run(job: ScoreJob) -> Path:
    asyncio.run(execute(job))
    return job.run_dir


def test_the_paper_task_and_model_of_a_run() -> None:
    assert consensus_task(["Coherence", "Consistency", "Fluency", "Relevance", "all"]) == "SummEval"
    assert consensus_task(["content", "organization", "expression"]) == "Korean Essay"
    assert consensus_task(["Ideas", "Organization", "Style", "Conventions"]) is None
    assert model_key("google/gemma-3-12b-it") == model_key("gemma-3-12b-it") == model_key("Gemma3-12B")
    assert model_key("openai/gpt-4o-mini") == model_key("gpt-4o-mini") != model_key("gpt-4o")


def test_eval_consensus_paper_on_a_fake_summeval_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(
        ScoreJob(
            data=SUMMEVAL, rubric=SUMMEVAL_RUBRIC, run_dir=tmp_path / "run", limit=3, eval_fold=None,
            protocols=["SingleJudge", "StrictJudge", "ConsensusMAD"], provider=ProviderSpec(kind="fake"),
            cache_dir=tmp_path / "cache", response_cache=False,
        )
    )  # fmt: skip
    eval_consensus_command([run], bootstrap=0, paper=True)
    printed = capsys.readouterr().out
    folder = run / "consensus"
    pooled = {r["protocol"]: r for r in _rows(folder / "alignment.csv") if r["trait"] == "all"}
    got = {(r["protocol"], r["metric"]): r for r in _rows(folder / "paper.csv")}
    # the consensus paper, SummEval: Single Judge RMSE 0.682 and Spearman 0.458 (4.2, G.1), Strict Role Judge
    # mean 3.672 (4.2), Consensus-based MAD RMSE 0.813 (4.1), the human reference's mean 4.285 (4.2)
    expected = {
        ("SingleJudge", "rmse"): 0.682, ("SingleJudge", "spearman"): 0.458, ("StrictJudge", "mean_pred"): 3.672,
        ("ConsensusMAD", "rmse"): 0.813, ("StrictJudge", "shift_ref"): -0.613,
    }  # fmt: skip
    for (protocol, metric), paper in expected.items():
        row = got[protocol, metric]
        assert float(row["reported"]) == paper and row["where"].startswith("the consensus paper, Table")
        measured = pooled[protocol][metric]
        if measured:
            assert float(row["measured"]) == pytest.approx(float(measured))
            assert float(row["diff"]) == pytest.approx(float(measured) - paper)
        else:  # undefined in the run (a constant prediction has no Spearman): missing, and so is the difference
            assert row["measured"] == "" and row["diff"] == ""
    human = got["Human", "mean_pred"]
    assert float(human["reported"]) == 4.285 and float(human["measured"]) == pytest.approx(
        float(pooled["SingleJudge"]["mean_ref"])
    )
    # protocols the paper reports that this run did not score: shown as missing, never 0
    for key in [("LenientJudge", "rmse"), ("SymmetricMAD", "mean_pred"), ("LenientJudge", "shift_ref")]:
        assert got[key]["measured"] == "" and got[key]["diff"] == "" and got[key]["reported"] != ""
    missing = sum(r["measured"] == "" for r in got.values())
    assert f"{missing} of the {len(got)} figures of the consensus paper" in printed.replace("\n", " ")
    assert "| — / 0.498 (—) |" in (folder / "paper.md").read_text(encoding="utf-8")  # G.1's Lenient RMSE: not run
    assert "one judge model (fake)" in printed.replace("\n", " ")
    markdown = (folder / "paper.md").read_text(encoding="utf-8")
    assert "Table 8" in markdown and "Figure 3" not in markdown  # E.1's round figures are Korean Essay's: left out
    assert len(got) == len([f for f in reported("consensus") if f.set == "SummEval"])


def test_a_run_of_a_paper_model_is_matched_with_its_round_figures() -> None:
    agents, refs = agent_frame(seed=3), ref_frame(seed=4)  # the Korean essay task's three criteria
    evaluation = evaluate_consensus(agents, refs, bootstrap=0)
    result = beside_consensus(evaluation.alignment, evaluation.trajectories, "openai/gpt-4o-mini")
    rows = {(r["protocol"], r["trait"], r["metric"]): r for r in result.beside.to_dict(orient="records")}
    traj = evaluation.trajectories
    for round_, paper in ((0, 3.08), (4, 2.45)):  # E.1: "GPT-4o-mini drops from 3.08 to 2.45 across rounds"
        row = rows["ConsensusMAD (gpt-4o-mini)", f"round {round_}", "mean_pred"]
        measured = traj[(traj["protocol"] == "ConsensusMAD") & (traj["round"] == round_) & (traj["trait"] == "all")]
        assert row["reported"] == paper and row["measured"] == pytest.approx(measured.iloc[0]["mean_pred"])
    # the other models' round figures are listed as reported only; Korean Essay's Table 1 beside the run's
    assert "qwen3.5-27b" in set(result.reported_only["model"]) and "gpt-4o-mini" not in set(
        result.reported_only["model"]
    )
    assert rows["ConsensusMAD", "all", "rmse"]["reported"] == 0.935
    # SymmetricMAD[rounds=2] is compared with the paper's Symmetric MAD, and said so
    assert rows["SymmetricMAD[rounds=2]", "all", "rmse"]["reported"] == 0.733
    assert any("SymmetricMAD[rounds=2] is compared with the paper's SymmetricMAD" in n for n in result.notes)
    assert "Figure 4" in beside_markdown(result)


def test_runs_averaged_over_judge_models_are_compared_with_the_papers_averages() -> None:
    evaluations = {f"m{i}": evaluate_consensus(agent_frame(seed=i), ref_frame(seed=9), bootstrap=0) for i in (1, 2)}
    alignment, trajectories, _ = average_evaluations(evaluations, {"m1": "gpt-4o-mini", "m2": "qwen3.5-27b"})
    result = beside_consensus(alignment, trajectories, None, n_models=2)
    rows = {(r["protocol"], r["metric"]): r for r in result.beside.to_dict(orient="records")}
    averaged = alignment[(alignment["protocol"] == "SingleJudge") & (alignment["trait"] == "all")].iloc[0]
    assert rows["SingleJudge", "rmse"]["reported"] == 0.644  # Korean Essay, Table 1 (4.2)
    assert rows["SingleJudge", "rmse"]["measured"] == pytest.approx(averaged["rmse"])
    assert rows["Human", "mean_pred"]["measured"] == pytest.approx(averaged["mean_ref"])
    assert any("the mean over 2 judge models" in n for n in result.notes)
    assert {"gpt-4o-mini", "qwen3.5-27b"} <= set(result.reported_only["model"])  # per-model rounds: not averaged


def test_a_run_of_other_traits_lists_the_consensus_paper_as_reported_only(asap: Path, tmp_path: Path) -> None:
    run = _run(
        ScoreJob(
            data=asap / "training_set_rel3_sets7_8.tsv", rubric=asap / "rubric_set7.json", run_dir=tmp_path / "run",
            limit=2, protocols=["SingleJudge"], provider=ProviderSpec(kind="fake"), cache_dir=tmp_path / "cache",
            response_cache=False,
        )
    )  # fmt: skip
    eval_consensus_command([run], bootstrap=0, paper=True)
    assert _rows(run / "consensus" / "paper.csv") == []
    markdown = (run / "consensus" / "paper.md").read_text(encoding="utf-8")
    assert "are neither's" in markdown and "0.935" in markdown  # nothing compared, everything listed


def _debate_run(asap: Path, tmp_path: Path, judged: bool) -> Path:
    run = _run(
        ScoreJob(
            data=asap / "training_set_rel3_sets7_8.tsv", rubric=asap / "rubric_set7.json", run_dir=tmp_path / "run",
            limit=3, protocols=["MAD"], provider=ProviderSpec(kind="fake"), cache_dir=tmp_path / "cache",
            response_cache=False,
        )
    )  # fmt: skip
    if judged:
        asyncio.run(execute_meta(MetaJob(run_dir=run, provider=ProviderSpec(kind="fake"), method="json")))
    return run


def test_confidence_analyze_paper_on_a_fake_debate_run(
    asap: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _debate_run(asap, tmp_path, judged=True)
    analyze_command(run_dir=run, paper=True)
    printed = capsys.readouterr().out.replace("\n", " ")
    folder = run / "confidence"
    got = {(r["protocol"], r["trait"], r["metric"]): r for r in _rows(folder / "paper.csv")}
    corr = {(r["group"], r["target"], r["label"]): r for r in _rows(folder / "correlations.csv")}
    # Table 1 (4.2): on Set 7 the Advocate's critical failures are best detected by "max of first 3 tokens",
    # AUROC 0.849; the run's AUROC of the same feature (undefined when no response was flagged: missing)
    row = got["Advocate: max of first 3 tokens", "critical_flag", "auroc"]
    measured = corr["advocate", "critical_flag", "max of first 3 tokens"]["auroc"]
    assert float(row["reported"]) == 0.849 and "Table 1 (4.2)" in row["where"]
    assert row["measured"] == measured and (row["diff"] == "" if not measured else True)
    # Figure 3 (4.4): shares at the maximum score, over every judged response of the run
    rates = {(r["role"], r["dimension"]): r for r in _rows(folder / "pass_rates.csv") if r["set"] == "all"}
    for dim, paper in (("instruction_following", 0.765), ("evidence_grounding", 0.931)):
        share = got["share at the maximum score (3)", dim, "share_at_max"]
        assert float(share["reported"]) == paper
        assert float(share["measured"]) == pytest.approx(float(rates["all", dim]["at_max_rate"]))
        assert float(share["diff"]) == pytest.approx(float(rates["all", dim]["at_max_rate"]) - paper)
    skeptic = got["Skeptic", "instruction_following", "pass_rate"]
    assert float(skeptic["reported"]) == 0.842
    assert float(skeptic["measured"]) == pytest.approx(float(rates["skeptic", "instruction_following"]["pass_rate"]))
    # the set's size beside the MADRAG paper's Table 6 (the confidence paper's Table 2 is an image)
    essays = got["ASAP set 7", "all", "essays"]
    assert float(essays["reported"]) == 1569 and float(essays["measured"]) == 1569 and float(essays["diff"]) == 0
    assert {"Advocate: range of first 3 tokens"} & {p for p, _, _ in got} == set()  # Set 8's figures: left out
    assert "the confidence paper" in printed and "Table 2 (the ASAP subsets) is printed as an image" in printed


def test_confidence_analyze_paper_without_a_meta_evaluation_shows_missing_figures(
    asap: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _debate_run(asap, tmp_path, judged=False)
    analyze_command(run_dir=run, no_meta=True, paper=True)
    printed = capsys.readouterr().out
    rows = _rows(run / "confidence" / "paper.csv")
    judged = [r for r in rows if r["metric"] != "essays"]
    assert judged and all(r["measured"] == "" and r["diff"] == "" and r["reported"] != "" for r in judged)
    markdown = (run / "confidence" / "paper.md").read_text(encoding="utf-8")
    assert "| — / 0.849 (—) |" in markdown and "| — / 1 (—) |" in markdown  # AUROC and the top feature's rank
    assert "no meta-evaluation: every judged figure is missing" in printed.replace("\n", " ")
    assert f"{len(judged)} of the {len(rows)} figures of the confidence paper" in printed.replace("\n", " ")
