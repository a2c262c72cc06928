"""A user's own essays and rubric: score columns mapped by the rubric's ``column``, nothing dropped without a
word (unused columns, traits without scores, one rater), a stated maximum essay size, one stderr line per
input error, and the hashing test embedder for quick checks."""

from __future__ import annotations

import csv
import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from tests.helpers import BagOfWordsEmbedder

from madrag.data import load_essays, load_table, traits_without_scores
from madrag.data.loaders import MAX_FIELD_CHARS
from madrag.errors import InputError
from madrag.evaluation.agreement import evaluate
from madrag.evaluation.tables import display_tables
from madrag.paper.coding.errors_export import export_errors
from madrag.pipeline.job import ScoreJob, job_config
from madrag.retrieval import ExemplarBank, HashingEmbedder, MiniLMEmbedder, make_embedder
from madrag.rubric import Rubric, load_rubric

TRAITS = [("Ideas", "ideas"), ("Word Choice", "word_choice"), ("Conventions", "conventions")]


def _rubric_file(tmp_path: Path, traits: list[tuple[str, str]] = TRAITS) -> Path:
    """A persuasive-letter rubric on 1-6 whose traits name their score columns (YAML)."""
    rubric = {
        "name": "letters",
        "prompt": "Write a letter to your town council about a park.",
        "traits": [
            {
                "name": name,
                "column": column,
                "min": 1,
                "max": 6,
                "levels": {s: f"{name} level {s}" for s in range(1, 7)},
            }
            for name, column in traits
        ],
    }
    path = tmp_path / "rubric.yaml"
    path.write_text(yaml.safe_dump(rubric), encoding="utf-8")
    return path


def _essay_text(i: int) -> str:
    return f"Dear council, essay {i} argues for a park near school {i % 3} with trees and benches."


def _write_csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _single_rater_csv(tmp_path: Path, n: int = 12, unscored: int = 2) -> Path:
    """One score per trait in columns named by the rubric's ``column``; the last ``unscored`` essays have none;
    a ``grade`` column that is nobody's."""
    header = ["id", "text", "fold", "ideas", "word_choice", "conventions", "grade"]
    rows: list[list[object]] = []
    for i in range(n):
        scores = ["", "", ""] if i >= n - unscored else [1 + i % 6, 6 - i % 6, 1 + (i * 5) % 6]
        rows.append([f"e{i}", _essay_text(i), i % 2, *scores, 7])
    return _write_csv(tmp_path / "letters.csv", header, rows)


def madrag(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=timeout)


def _stderr_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.strip()]


# -- the rubric's column field --------------------------------------------------------------------------


def test_csv_score_columns_are_mapped_by_the_rubric_column_field(tmp_path: Path) -> None:
    rubric = load_rubric(_rubric_file(tmp_path))
    header = ["id", "text", "rater1_ideas", "rater2_ideas", "word_choice", "Conventions"]
    path = _write_csv(tmp_path / "e.csv", header, [["a", "An essay.", 4, 5, 3, 6]])
    [essay] = load_table(path, rubric)
    assert essay.rater_scores == {"Ideas": [4.0, 5.0], "Word Choice": [3.0], "Conventions": [6.0]}
    assert essay.rater_ids["Ideas"] == [0, 1]
    assert essay.reference(rubric.trait("Word Choice")) == 3
    assert essay.metadata == {}
    jsonl = tmp_path / "e.jsonl"
    jsonl.write_text(json.dumps({"id": "b", "text": "Another.", "word_choice": 2, "ideas": 1, "fold": 2.0}) + "\n")
    [other] = load_essays(jsonl, rubric)
    assert other.rater_scores == {"Word Choice": [2.0], "Ideas": [1.0]} and other.fold == 2
    jsonl.write_text(json.dumps({"id": "b", "text": "Another.", "fold": "first"}) + "\n")
    with pytest.raises(InputError, match="fold 'first' is not an integer"):
        load_essays(jsonl, rubric)


def test_unused_columns_are_reported_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rubric = load_rubric(_rubric_file(tmp_path))
    path = _single_rater_csv(tmp_path)
    with caplog.at_level(logging.WARNING, logger="madrag.data"):
        first = load_table(path, rubric)
        load_table(path, rubric)
    warnings = [r.getMessage() for r in caplog.records if r.name == "madrag.data"]
    assert len(warnings) == 1 and "grade" in warnings[0] and "match no rubric trait" in warnings[0]
    assert first[0].metadata == {"grade": "7"}


def test_a_trait_without_scores_is_named(tmp_path: Path) -> None:
    rubric = load_rubric(_rubric_file(tmp_path, [*TRAITS, ("Voice", "voice")]))
    essays = load_table(_single_rater_csv(tmp_path), rubric)
    assert [t.name for t in traits_without_scores(essays, rubric)] == ["Voice"]


# -- limits and one-line errors -------------------------------------------------------------------------


def test_essay_size_limit_is_stated_and_long_essays_below_it_load(tmp_path: Path) -> None:
    rubric = load_rubric(_rubric_file(tmp_path))
    long_text = "word " * 40_000  # 200 KB: over csv's default 128 KB field limit, under madrag's maximum
    path = _write_csv(tmp_path / "long.csv", ["id", "text", "ideas"], [["a", long_text, 3]])
    [essay] = load_table(path, rubric)
    assert len(essay.text) == len(long_text.strip())
    _write_csv(tmp_path / "huge.csv", ["id", "text"], [["a", "ok"], ["b", "x" * (MAX_FIELD_CHARS + 1)]])
    with pytest.raises(InputError, match=r"huge\.csv:3: a field is longer than 1,000,000 characters"):
        load_table(tmp_path / "huge.csv", rubric)
    (tmp_path / "huge.jsonl").write_text(json.dumps({"id": "b", "text": "x" * MAX_FIELD_CHARS}) + "\n")
    with pytest.raises(InputError, match="the maximum essay size"):
        load_table(tmp_path / "huge.jsonl", rubric)


def test_input_errors_are_one_stderr_line_without_a_progress_bar(tmp_path: Path) -> None:
    rubric = _rubric_file(tmp_path)
    _write_csv(tmp_path / "huge.csv", ["id", "text", "fold"], [["a", "x" * (MAX_FIELD_CHARS + 1), 0]])
    _write_csv(tmp_path / "dup.csv", ["id", "text", "fold"], [["a", "one", 0], ["a", "two", 1]])
    for data, needle in [("huge.csv", "maximum essay size"), ("dup.csv", "duplicate essay id 'a'")]:
        proc = madrag(
            "score", "--data", str(tmp_path / data), "--rubric", str(rubric), "--run-dir", str(tmp_path / "run"),
            "--cache-dir", str(tmp_path / "cache"), "--provider", "fake", "--protocol", "MAD",
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        lines = _stderr_lines(proc)
        assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], proc.stderr


def test_protocols_needing_exemplars_refuse_a_trait_without_scores(tmp_path: Path) -> None:
    rubric = _rubric_file(tmp_path, [*TRAITS, ("Voice", "voice")])
    base = [
        "score", "--data", str(_single_rater_csv(tmp_path)), "--rubric", str(rubric), "--provider", "fake",
        "--cache-dir", str(tmp_path / "cache"), "--embedder", "hashing", "--limit", "1",
    ]  # fmt: skip
    refused = madrag(*base, "--run-dir", str(tmp_path / "rag"), "--protocol", "MADRAG")
    assert refused.returncode == 2, refused.stderr
    # the unused 'grade' column's warning, then the error: one line each
    warning, error = _stderr_lines(refused)
    assert warning.startswith("warning:") and "grade" in warning
    assert error.startswith("error: MADRAG needs scored exemplars") and "'Voice'" in error
    ran = madrag(*base, "--run-dir", str(tmp_path / "mad"), "--protocol", "MAD")
    assert ran.returncode == 0, ran.stderr
    assert "trait 'Voice' has no human score in the data" in ran.stderr


# -- one rater ------------------------------------------------------------------------------------------


def test_single_rater_run_eval_and_errors(tmp_path: Path) -> None:
    data = _single_rater_csv(tmp_path, n=12, unscored=2)
    run = tmp_path / "run"
    proc = madrag(
        "score", "--data", str(data), "--rubric", str(_rubric_file(tmp_path)), "--run-dir", str(run),
        "--cache-dir", str(tmp_path / "cache"), "--provider", "fake", "--protocol", "MAD", "--fold", "all",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    evaluation = evaluate(run, bootstrap=0)
    assert set(evaluation.qwk["protocol"]) == {"MAD"}  # no Human-Human rows of dashes
    assert any("Human-Human is left out" in n and "one rater" in n for n in evaluation.notes)
    word = evaluation.qwk.set_index("trait").loc["Word Choice"]
    assert word["n"] == 10 and word["n_no_reference"] == 2
    counts = next(frame for title, frame in display_tables(evaluation).items() if title.startswith("essays per cell"))
    assert counts.loc["MAD", "Word"] == "10 / 100% +2 no ref"
    export = export_errors(run)
    assert export.n_rows > 0 and export.n_one_rater == export.n_rows
    rows = list(csv.DictReader(export.path.open(encoding="utf-8")))
    for row in rows:  # the fake judge answers 4 (the middle of 1-6): rows are the essay-traits scored 1 or 6
        assert row["rater2"] == "" and abs(float(row["MAD_score"]) - float(row["rater1"])) > 1
    cli = madrag("errors", "--run-dir", str(run))
    assert cli.returncode == 0 and f"wrote {export.n_rows} rows" in cli.stdout and "one rater" in cli.stdout
    assert export.focus == "MAD" and "MADRAG is not in this run" in " ".join(cli.stdout.split())


# -- the hashing test embedder --------------------------------------------------------------------------


def test_hashing_embedder_is_fast_deterministic_and_fingerprinted_apart(tmp_path: Path) -> None:
    emb = make_embedder("hashing")
    assert isinstance(emb, HashingEmbedder) and emb.name != MiniLMEmbedder().name
    vectors = emb.embed(["the park", "the park", "a school bus"])
    assert vectors.shape == (3, emb.dim) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert np.array_equal(vectors[0], vectors[1]) and not np.array_equal(vectors[0], vectors[2])
    with pytest.raises(Exception, match="unknown embedder"):
        make_embedder("word2vec")


def test_bank_building_reports_progress(tmp_path: Path) -> None:
    rubric: Rubric = load_rubric(_rubric_file(tmp_path))
    essays = load_table(_single_rater_csv(tmp_path), rubric)
    seen: list[tuple[int, int]] = []
    ExemplarBank.build_or_load(
        essays,
        rubric,
        BagOfWordsEmbedder(),
        tmp_path / "banks",
        batch_size=5,
        on_progress=lambda d, t: seen.append((d, t)),
    )
    assert seen == [(5, 12), (10, 12), (12, 12)]


def test_the_embedder_is_part_of_the_run_configuration(tmp_path: Path) -> None:
    from madrag.agents.prompts import PromptLibrary
    from madrag.protocols import get_protocol

    data, rubric_path = _single_rater_csv(tmp_path), _rubric_file(tmp_path)
    rubric, protocols = load_rubric(rubric_path), [get_protocol("MADRAG")]
    job = ScoreJob(data=data, rubric=rubric_path, run_dir=tmp_path / "run")
    default = job_config(job, rubric, protocols, PromptLibrary())
    hashing = job_config(job.model_copy(update={"embedder": "hashing"}), rubric, protocols, PromptLibrary())
    windows = job_config(job.model_copy(update={"embedder": "minilm-windows"}), rubric, protocols, PromptLibrary())
    assert default["embedder"] == "minilm" and hashing["embedder"] == "hashing"
    assert windows["embedder"] == "minilm-windows"  # recorded since run configurations carry a version
    # a version-1 configuration left the windows embedder out (it was the default): it reads as windows
    from madrag.pipeline.migrations import identity
    from madrag.store.run_config import VERSION_KEY

    version_1 = {k: v for k, v in windows.items() if k not in ("embedder", VERSION_KEY)}
    assert identity(version_1)["embedder"] == "minilm-windows"
