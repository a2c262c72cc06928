"""The consensus paper on SummEval: the paired-annotations layout, a source text the prompts show, the six
protocols end to end."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from statistics import mean

import pytest

from madrag.agents.context import all_traits_values, essay_values
from madrag.agents.prompts import PROMPT_NAMES, SOURCE_PROMPT_NAMES, PromptLibrary
from madrag.data import Essay
from madrag.data.loaders import load_essays
from madrag.data.summeval import load_summeval
from madrag.errors import InputError
from madrag.pipeline.job import prompt_names
from madrag.protocols import get_protocol
from madrag.rubric import Rubric, load_rubric
from madrag.store import RunStore

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "tests" / "data" / "summeval_paired_sample.jsonl"
RUBRIC = REPO / "docs" / "rubrics" / "rubric_summeval.json"
SUMMEVAL_PROMPTS = REPO / "docs" / "prompts" / "summeval"
CONSENSUS_SIX = {"SingleJudge", "StrictJudge", "LenientJudge", "ConsensusMAD", "SymmetricMAD", "ScoreMaskedMAD"}


def _rows() -> list[dict[str, object]]:
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric(RUBRIC)


def test_the_shipped_rubric_has_seed_002s_four_dimensions(rubric: Rubric) -> None:
    assert rubric.trait_names == ["Coherence", "Consistency", "Fluency", "Relevance"]
    assert all((t.min, t.max) == (1, 5) for t in rubric.traits)
    assert rubric.source_label == "Source article"
    assert "consistent with the source document" in rubric.trait("consistency").description


def test_summeval_rows_become_summaries_with_their_article_and_averaged_experts(rubric: Rubric) -> None:
    essays = load_summeval(SAMPLE, rubric)
    rows = _rows()
    assert len(essays) == len(rows) == 6
    for essay, row in zip(essays, rows, strict=True):
        assert essay.id == f"{row['id']}_{row['model_id']}"
        assert essay.text == row["decoded"] and essay.source == row["text"]
        assert essay.metadata == {"article_id": row["id"], "model_id": row["model_id"]}
        experts = row["expert_annotations"]
        assert isinstance(experts, list)
        for trait in rubric.traits:
            assert essay.rater_scores[trait.name] == [float(a[trait.column]) for a in experts]
            reference = mean(essay.rater_scores[trait.name])  # the consensus paper: the experts' arithmetic mean
            assert reference == pytest.approx(mean(a[trait.column] for a in experts))
    assert [e.id for e in load_essays(SAMPLE, rubric)] == [e.id for e in essays]  # auto-detected
    assert [e.id for e in load_essays(SAMPLE, rubric, "summeval")] == [e.id for e in essays]


def test_the_mteb_layout_seed_002_sampled_gives_one_essay_per_machine_summary(rubric: Rubric, tmp_path: Path) -> None:
    """``mteb/summeval`` (HuggingFace, written as JSONL): one row per article, each criterion a list of the
    experts' averages, one per machine summary."""
    rows = _rows()
    article = {
        "id": rows[0]["id"],
        "text": rows[0]["text"],
        "machine_summaries": [rows[0]["decoded"], rows[1]["decoded"]],
        "human_summaries": ["A person's summary."],
        **{
            key: [mean(a[key] for a in row["expert_annotations"]) for row in rows[:2]]  # type: ignore[attr-defined]
            for key in ("relevance", "coherence", "fluency", "consistency")
        },
    }
    data = tmp_path / "summeval_mteb.jsonl"
    data.write_text(json.dumps(article) + "\n", encoding="utf-8")
    essays = load_essays(data, rubric)  # auto-detected
    paired = {e.text: e for e in load_summeval(SAMPLE, rubric)}
    assert [e.id for e in essays] == [f"{rows[0]['id']}_0", f"{rows[0]['id']}_1"]
    for essay in essays:
        assert essay.source == rows[0]["text"] and essay.metadata["article_id"] == rows[0]["id"]
        same = paired[essay.text]  # the same summary in the paired layout: the same human reference
        for trait in rubric.traits:
            assert essay.rater_scores[trait.name] == [pytest.approx(mean(same.rater_scores[trait.name]))]
    data.write_text(json.dumps({**article, "fluency": [4.0]}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="'fluency' must list one score per machine summary"):
        load_summeval(data, rubric)


def test_summeval_problems_are_one_line_input_errors(rubric: Rubric, tmp_path: Path) -> None:
    row = _rows()[0]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({k: v for k, v in row.items() if k != "text"}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"missing SummEval field\(s\) \['text'\]"):
        load_summeval(bad, rubric)
    experts = [{**a, "fluency": 7} for a in row["expert_annotations"]]  # type: ignore[attr-defined]
    bad.write_text(json.dumps({**row, "expert_annotations": experts}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"Fluency score 7 outside \[1, 5\]"):
        load_summeval(bad, rubric)
    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"id": "a", "text": "An essay.", "Coherence": 3}\n', encoding="utf-8")
    assert load_essays(plain, rubric)[0].source is None  # not SummEval: the generic table
    table = tmp_path / "summaries.csv"
    table.write_text('id,text,source,Coherence\ns1,A summary.,"The article, in full.",4\n', encoding="utf-8")
    (row_essay,) = load_essays(table, rubric)
    assert row_essay.source == "The article, in full." and row_essay.metadata == {}


def test_the_source_is_shown_under_the_rubrics_name_and_nothing_changes_without_one(rubric: Rubric) -> None:
    prompts = PromptLibrary()
    summary = load_summeval(SAMPLE, rubric)[0]
    assert summary.source is not None
    for values in (
        all_traits_values(prompts, summary, rubric, "none"),
        essay_values(prompts, summary, rubric.traits[0], "none", False, rubric.source_label),
    ):
        context = values["ESSAY_CONTEXT"]
        assert f"Source article:\n<<<\n{summary.source}\n>>>" in context
        assert context.index(rubric.prompt) < context.index("Source article:") < context.index(summary.text)
    essay = Essay(id="e1", text="My essay about patience.", prompt="Write about patience.")
    before = prompts.render("essay_context", PROMPT=essay.prompt, ESSAY=essay.text)
    assert all_traits_values(prompts, essay, rubric, "none")["ESSAY_CONTEXT"] == before
    assert essay_values(prompts, essay, rubric.traits[0], "none", False, "Source article")["ESSAY_CONTEXT"] == before


def test_a_rubric_without_a_source_label_dumps_as_before(rubric: Rubric) -> None:
    plain = Rubric(traits=rubric.traits)
    assert "source_label" not in plain.model_dump() and "source_label" not in plain.model_dump_json()
    assert rubric.model_dump()["source_label"] == "Source article"
    assert Rubric.model_validate_json(rubric.model_dump_json()) == rubric


def test_the_source_template_is_recorded_only_for_data_with_sources() -> None:
    protocols = [get_protocol("MADRAG")]
    assert prompt_names(protocols) == list(PROMPT_NAMES)
    assert prompt_names(protocols, with_source=True) == [*PROMPT_NAMES, *SOURCE_PROMPT_NAMES]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=300)


def test_the_six_seed_002_protocols_and_eval_consensus_run_on_summeval(rubric: Rubric, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = _cli(
        "ablate-consensus", "--data", str(SAMPLE), "--rubric", str(RUBRIC), "--format", "summeval", "--fold", "all",
        "--placeholders", "none", "--run-dir", str(run_dir), "--provider", "fake", "--no-cache",
        "--prompts-dir", str(SUMMEVAL_PROMPTS),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # per summary: SingleJudge 1 + shared round-0 strict/lenient 2 + 2 MADs x 4 rounds x 2 + SymmetricMAD 2 + 8
    assert "174 agent calls made" in proc.stdout.replace("\n", " ")
    store = RunStore(run_dir / "store.sqlite")
    try:  # the seed's SummEval wording, the summary and its article
        single = next(store.records(protocol="SingleJudge"))
        prompt = "\n".join(m.content for m in single.messages)
        article = next(e for e in store.essays() if e.id == single.essay_id).source
    finally:
        store.close()
    assert "You are a strict and consistent evaluator of English summarization quality" in prompt
    assert article is not None and f"Source article:\n<<<\n{article}\n>>>\n\nSummary to evaluate:" in prompt
    evaluated = _cli("paper", "eval-consensus", "--run-dir", str(run_dir), "--bootstrap", "50")
    assert evaluated.returncode == 0, evaluated.stderr
    rows = list(csv.DictReader((run_dir / "consensus" / "alignment.csv").open()))
    assert {r["protocol"] for r in rows} == CONSENSUS_SIX
    per_trait = [r for r in rows if r["trait"] in rubric.trait_names]
    assert len(per_trait) == 6 * 4 and all(r["n"] == "6" and r["rmse"] != "" for r in per_trait)
    coherence = [mean(a["coherence"] for a in row["expert_annotations"]) for row in _rows()]  # type: ignore[attr-defined]
    refs = [float(r["mean_ref"]) for r in per_trait if r["trait"] == "Coherence"]
    assert refs == pytest.approx([mean(coherence)] * 6)
    rounds = list(csv.DictReader((run_dir / "consensus" / "trajectories.csv").open()))
    assert {int(r["round"]) for r in rounds if r["protocol"] == "ConsensusMAD"} == {0, 1, 2, 3, 4}
    table = (run_dir / "consensus" / "consensus.md").read_text(encoding="utf-8")
    assert all(name in table for name in (*CONSENSUS_SIX, *rubric.trait_names))
