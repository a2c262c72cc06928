"""A prompt the server refuses as over its context (HTTP 400, llama.cpp's words) while the run is under way fails
that essay-trait, never the run: every other essay is scored, the failed call is recorded, counted and named
with its essay, trait and role, and ``madrag resume`` finishes again. The stub server plays a server that does
not say its context (no ``/props``), so the start-up check cannot see it coming."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from madrag.evaluation.run import open_store
from madrag.testing.stub_server import StubServer


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=300)


def _data(asap: Path, tmp_path: Path) -> tuple[Path, Path, str, int]:
    """Three essays of set 7 and a fourth made long (a TSV of ASAP's columns), a one-trait rubric, the long
    essay's id and a word limit between its Judge prompt and the others'."""
    rubric = json.loads((asap / "rubric_set7.json").read_text(encoding="utf-8"))
    rubric["traits"] = [t for t in rubric["traits"] if t["name"] == "Ideas"]
    (tmp_path / "rubric.json").write_text(json.dumps(rubric), encoding="utf-8")
    header, *rows = (asap / "training_set_rel3_sets7_8.tsv").read_text(encoding="utf-8").splitlines()[:5]
    cells = [row.split("\t") for row in rows]
    column = header.split("\t").index("essay")
    longest_short = max(len(c[column].split()) for c in cells[:3])
    cells[3][column] = " ".join([cells[3][column]] * 12)
    path = tmp_path / "essays.tsv"
    path.write_text("\n".join([header, *("\t".join(c) for c in cells)]) + "\n", encoding="utf-8")
    return path, tmp_path / "rubric.json", cells[3][0], longest_short + 900  # the templates: a few hundred words


def test_one_essay_over_the_context_fails_alone_and_is_named(asap: Path, tmp_path: Path) -> None:
    data, rubric, long_id, limit = _data(asap, tmp_path)
    run = tmp_path / "run"
    with StubServer(capacity=1, latency_s=0.0, context_limit=limit) as server:
        args = ("--data", str(data), "--rubric", str(rubric), "--protocol", "MA", "--provider", "openai",
                "--model", "stub-model", "--base-url", server.base_url, "--api-key-env", "MADRAG_NO_KEY",
                "--max-failures", "1", "--fold", "all", "--cache-dir", str(tmp_path / "c"), "--no-cache")  # fmt: skip
        made = cli("score", *args, "--run-dir", str(run))
        resumed = cli("resume", str(run), "--cache-dir", str(tmp_path / "c"))
        stats = server.stats()
    assert made.returncode == 3, made.stderr  # calls failed, the run finished (not the --max-failures stop: 2)
    said = " ".join(made.stderr.split())
    assert (
        f"failed: essay {long_id}, trait Ideas, role judge (MA): the prompt does not fit the server's context" in said
    ), made.stderr
    assert "exceeds the available context size" in said
    store = open_store(run)
    try:
        judged = {r.essay_id for r in store.records(role="judge") if not r.failed}
        failed = [r for r in store.records(role="judge") if r.failed]
    finally:
        store.close()
    assert len(judged) == 3 and long_id not in judged  # every other essay scored
    assert [r.essay_id for r in failed] == [long_id, long_id]  # once by the run, once by the resume
    assert resumed.returncode == 3 and f"failed: essay {long_id}" in resumed.stderr, resumed.stderr
    assert stats.refused == 2  # one request each time: no retry of a prompt that cannot fit
    log = (run / "run.log").read_text(encoding="utf-8")
    assert log.count("end: complete") == 2
