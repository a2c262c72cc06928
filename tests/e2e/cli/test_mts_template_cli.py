"""``MTS[template=FILE]`` from the command line on the fake backend: a run whose template leaves the essay prompt
empty and whose essays have none is refused in one line before any folder is written; a run of ASAP set-7
essays is evaluated on the MTS authors' own sample, every essay's QWK beside it, both labelled. The template is
a synthetic one of the authors' layout (tests/unit/protocols/test_mts_template.py)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from tests.unit.protocols.test_mts_template import synthetic_template

from madrag.data.shipped import asap_data_file
from madrag.protocols.mts_authors import authors_sample


def madrag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=180)


def _inputs(tmp_path: Path, prompt: bool) -> tuple[Path, Path, int, int]:
    """(data CSV, rubric, essays in it, of them in the authors' sample): 6 set-7 essays of the authors' sample and
    4 others, their holistic reference as the authors compute it (2 x Ideas + the other traits, both raters)."""
    with asap_data_file().open(encoding="utf-8", newline="") as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t") if r["essay_set"] == "7"]
    sample = authors_sample({7: [r["essay_id"] for r in rows]})[7]
    assert sample is not None
    chosen = [r for r in rows if r["essay_id"] in sample][:6] + [r for r in rows if r["essay_id"] not in sample][:4]
    data = tmp_path / "essays.csv"
    with data.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "text", "essay_set", "Holistic", *(["prompt"] if prompt else [])])
        for r in chosen:
            total = sum(
                2 * int(r[f"rater{k}_trait1"]) + sum(int(r[f"rater{k}_trait{t}"]) for t in (2, 3, 4)) for k in (1, 2)
            )
            writer.writerow([r["essay_id"], r["essay"], 7, total, *(["Write about patience."] if prompt else [])])
    rubric = tmp_path / "holistic.json"
    levels = {str(s): f"{s} points" for s in range(31)}
    rubric.write_text(
        json.dumps({"name": "holistic", "traits": [{"name": "Holistic", "min": 0, "max": 30, "levels": levels}]})
    )
    return data, rubric, len(chosen), 6


def _score(protocol: str, data: Path, rubric: Path, run: Path) -> subprocess.CompletedProcess[str]:
    """``madrag score`` of the class with ``protocol`` on the fake backend, every essay scored (``--fold all``)."""
    return madrag(
        "score",
        "--provider",
        "fake",
        "-p",
        protocol,
        "--data",
        str(data),
        "--rubric",
        str(rubric),
        "--fold",
        "all",
        "--run-dir",
        str(run),
    )


def test_an_empty_prompt_is_refused_before_the_run_folder_is_written(tmp_path: Path) -> None:
    data, rubric, _, _ = _inputs(tmp_path, prompt=False)
    protocol = f"MTS[template={synthetic_template(tmp_path / 'template.xlsx')}]"
    run = tmp_path / "run"
    done = _score(protocol, data, rubric, run)
    assert done.returncode != 0
    assert "the template's prompt cell of prompt 7 is empty" in done.stderr and "Traceback" not in done.stderr
    assert not run.exists()


def test_madrag_eval_gives_the_qwk_on_the_authors_sample_with_every_essay_beside_it(tmp_path: Path) -> None:
    data, rubric, n, in_sample = _inputs(tmp_path, prompt=True)
    protocol = f"MTS[template={synthetic_template(tmp_path / 'template.xlsx')}]"
    run = tmp_path / "run"
    done = _score(protocol, data, rubric, run)
    assert done.returncode == 0, done.stderr
    evaluated = madrag("eval", str(run), "--bootstrap", "0", "--out", str(tmp_path / "eval"))
    assert evaluated.returncode == 0, evaluated.stderr
    table = json.loads((tmp_path / "eval" / "evaluation.json").read_text())
    rows = {r["protocol"]: r for r in table["qwk"]}
    assert rows[protocol]["n"] + rows[protocol]["n_unusable"] == in_sample
    assert rows[f"{protocol} (all essays)"]["n"] + rows[f"{protocol} (all essays)"]["n_unusable"] == n
    assert any(f"{in_sample} of the run's {n} essays" in note for note in table["notes"])
    assert table["meta"]["populations"] == {protocol: "the MTS authors' sample"}
    assert "(all essays)" in evaluated.stdout and "(the MTS authors' sample)" in evaluated.stdout
