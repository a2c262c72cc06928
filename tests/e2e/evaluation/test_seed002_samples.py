"""The consensus paper's samples: SummEval's 100 articles (B.2, seed 42), the NIKL Korean essay layout with its
raw/max x 5
normalisation and 100-per-prompt sample (B.1, seed 42), and the Korean prompt templates."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from madrag.agents.prompts import PromptLibrary
from madrag.data.loaders import DATA_FORMATS, load_essays
from madrag.data.nikl import load_nikl, sample_nikl
from madrag.errors import InputError
from madrag.rubric import Rubric, load_rubric
from madrag.store import RunStore

REPO = Path(__file__).resolve().parents[3]
NIKL_RUBRIC = REPO / "docs" / "rubrics" / "rubric_nikl.json"
SE_RUBRIC = REPO / "docs" / "rubrics" / "rubric_summeval.json"
KO_PROMPTS = REPO / "src" / "madrag" / "prompts" / "ko"


@pytest.fixture(scope="module")
def nikl_rubric() -> Rubric:
    return load_rubric(NIKL_RUBRIC)


def _nikl_doc(i: int, prompt: str) -> dict[str, object]:
    return {
        "id": f"{prompt}-{i:03d}",
        "prompt_id": prompt,
        "paragraphs": [f"{prompt} 첫 문단 {i}.", {"form": "둘째 문단."}, {"form": "  "}],
        "evaluators": [
            {"content": i % 26, "organization": 7, "expression": 10},
            {"content": 20, "organization": 8, "expression": None},
        ],
    }


def _nikl_folder(path: Path, per_prompt: int, prompts: tuple[str, ...] = ("Q5", "Q4")) -> Path:
    """A .jsonl of NIKL documents (the folder's documents joined), ``per_prompt`` essays per prompt."""
    docs = [_nikl_doc(i, prompt) for prompt in prompts for i in range(per_prompt)]
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    return path


def test_nikl_scores_are_raw_over_max_times_five_per_evaluator(nikl_rubric: Rubric, tmp_path: Path) -> None:
    folder = _nikl_folder(tmp_path / "nikl.jsonl", 3)
    essays = {e.id: e for e in load_nikl(folder, nikl_rubric)}
    two = essays["Q4-002"]
    assert two.rater_scores["content"] == pytest.approx([2 / 25 * 5, 20 / 25 * 5])
    assert two.rater_scores["organization"] == pytest.approx([3.5, 4.0])
    assert two.rater_scores["expression"] == [5.0]  # the second evaluator's missing score stays missing
    assert two.text == "Q4 첫 문단 2.\n\n둘째 문단."  # paragraphs joined by blank lines, empty ones dropped
    assert two.metadata["prompt_id"] == "Q4" and two.prompt == nikl_rubric.prompt
    assert len(essays) == 6
    with pytest.raises(InputError, match="a folder; give one file"):
        load_nikl(tmp_path, nikl_rubric)
    as_list = tmp_path / "all.json"
    as_list.write_text(json.dumps([_nikl_doc(1, "Q9")]), encoding="utf-8")
    assert load_essays(as_list, nikl_rubric, "nikl-all")[0].rater_scores["content"] == pytest.approx([0.2, 4.0])


def test_nikl_bad_documents_are_one_line_errors(nikl_rubric: Rubric, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    for change, message in (
        ({"evaluators": [{"content": 26, "organization": 1, "expression": 1}]}, r"raw score 26 outside \[0, 25\]"),
        ({"paragraphs": []}, "'paragraphs' must be a non-empty list"),
        ({"prompt_id": ""}, "has no 'prompt_id'"),
        ({"evaluators": [{"content": "many"}]}, "'many' is not a number"),
    ):
        bad.write_text(json.dumps({**_nikl_doc(1, "Q4"), **change}) + "\n", encoding="utf-8")
        with pytest.raises(InputError, match=message):
            load_nikl(bad, nikl_rubric)


def test_the_nikl_sample_is_100_per_prompt_drawn_by_random_sample_seed_42(nikl_rubric: Rubric, tmp_path: Path) -> None:
    folder = _nikl_folder(tmp_path / "nikl.jsonl", 130)
    assert {"nikl", "nikl-all"} <= set(DATA_FORMATS)
    sample = load_essays(folder, nikl_rubric, "nikl")
    assert len(sample) == 200 and len({e.id for e in sample}) == 200
    assert [e.metadata["prompt_id"] for e in sample] == ["Q4"] * 100 + ["Q5"] * 100
    rng = random.Random(42)  # the documented rule, drawn independently here
    expected = [e for p in ("Q4", "Q5") for e in rng.sample([f"{p}-{i:03d}" for i in range(130)], 100)]
    assert [e.id for e in sample] == expected
    assert [e.id for e in load_essays(folder, nikl_rubric, "nikl")] == expected  # deterministic
    assert "random.Random(42)" in str(sample[0].metadata["sample"])
    assert len(load_essays(folder, nikl_rubric, "nikl-all")) == 260
    assert [e.id for e in sample_nikl(load_nikl(folder, nikl_rubric), seed=7)] != expected
    small = _nikl_folder(tmp_path / "small.jsonl", 99, ("Q6",))
    with pytest.raises(InputError, match="'Q6' has 99 essays, fewer than the sample's 100"):
        load_essays(small, nikl_rubric, "nikl")


def _summeval_file(path: Path, articles: int, systems: tuple[str, ...]) -> Path:
    experts = [{"coherence": 3, "consistency": 4, "fluency": 5, "relevance": 2}] * 3
    rows = [
        {"id": f"art-{a:03d}", "model_id": m, "text": f"Article {a}.", "decoded": f"Summary {a} by {m}.",
         "expert_annotations": experts}
        for a in range(articles) for m in systems
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_summeval_sample_is_100_articles_by_hf_shuffle_seed_42(tmp_path: Path) -> None:
    rubric = load_rubric(SE_RUBRIC)
    data = _summeval_file(tmp_path / "se.jsonl", 130, ("M0", "M1", "M2"))
    sample = load_essays(data, rubric, "summeval-sample")
    assert len(sample) == 300
    drawn = list(dict.fromkeys(e.metadata["article_id"] for e in sample))
    order = np.random.default_rng(42).permutation(130)[:100]  # what datasets' shuffle(seed=42) draws
    assert drawn == [f"art-{i:03d}" for i in order]
    assert sample == load_essays(data, rubric, "summeval-sample")
    assert "default_rng(42)" in str(sample[0].metadata["sample"])
    two = load_essays(data, rubric, "summeval-sample:M2,M0")
    assert len(two) == 200 and [e.metadata["model_id"] for e in two[:2]] == ["M2", "M0"]
    with pytest.raises(InputError, match=r"has no summary of \['M9'\]"):
        load_essays(data, rubric, "summeval-sample:M9")
    with pytest.raises(InputError, match="50 articles, fewer than the 100"):
        load_essays(_summeval_file(tmp_path / "few.jsonl", 50, ("M0",)), rubric, "summeval-sample")
    assert len(load_essays(data, rubric, "summeval")) == 390  # the plain format keeps every summary


def test_the_korean_templates_override_the_consensus_prompts() -> None:
    ko, en = PromptLibrary(KO_PROMPTS), PromptLibrary()
    names = [p.stem for p in KO_PROMPTS.glob("*.txt")]
    assert len(names) == 9
    for name in names:
        assert ko.text(name) != en.text(name) and ko.source(name).startswith(str(KO_PROMPTS))
    assert "너는 한국어 에세이를 매우 엄격하고 보수적으로 직접 채점하는 평가자이다." in ko.text("cj_strict_system")
    assert ko.text("judge_system") == en.text("judge_system")  # the rest stay packaged


def _ablate(data: Path, fmt: str, run_dir: Path, *extra: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "madrag.cli", "ablate-consensus", "--data", str(data), "--rubric", str(NIKL_RUBRIC),
         "--format", fmt, "--fold", "all", "--placeholders", "none", "--run-dir", str(run_dir),
         "--provider", "fake", "--no-cache", *extra],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr


def test_a_consensus_run_on_nikl_shows_the_korean_prompt(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    _ablate(_nikl_folder(tmp_path / "nikl.jsonl", 1, ("Q4",)), "nikl-all", run_dir, "--prompts-dir", str(KO_PROMPTS))
    store = RunStore(run_dir / "store.sqlite")
    try:
        single = next(store.records(protocol="SingleJudge"))
        prompt = "\n".join(m.content for m in single.messages)
    finally:
        store.close()
    assert "너는 한국어 에세이를 일관되게 직접 채점하는 평가자이다." in prompt
    assert "essay_text:\n<<<\nQ4 첫 문단 0.\n\n둘째 문단.\n>>>" in prompt


def test_the_run_records_how_its_sample_was_drawn(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    _ablate(_nikl_folder(tmp_path / "nikl.jsonl", 100, ("Q4",)), "nikl", run_dir, "--limit", "1")
    store = RunStore(run_dir / "store.sqlite")
    try:
        (essay,) = list(store.essays())
    finally:
        store.close()
    assert essay.id == random.Random(42).sample([f"Q4-{i:03d}" for i in range(100)], 100)[0]
    assert "random.sample" in essay.metadata["sample"] and essay.metadata["prompt_id"] == "Q4"
