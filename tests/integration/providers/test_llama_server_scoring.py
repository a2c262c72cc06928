"""A researcher's short MADRAG run on llama.cpp's own OpenAI-compatible server (``python -m
madrag.testing.llama_server``, SmolLM2-135M), through ``madrag score`` as a user runs it (issue 32, item 1).

With small token limits the model's answers are cut before any ``Final score: N``: read from the text (the
default, the MADRAG paper's A.5), those scores are missing, and the run's closing lines say why; with ``--score-method
constrained`` the server restricts the score step under a JSON schema, so every Judge call of the same run gives
a readable score, recorded as ``constrained_schema``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from madrag.evaluation.run import open_store
from madrag.pipeline.unusable import unusable_by_protocol
from madrag.records import AgentRecord

try:
    from tests.servers import SERVED_MODEL, llama_server_fixture
except ImportError:  # tests/ itself on sys.path (pytest's rootdir-less import mode)
    from servers import SERVED_MODEL, llama_server_fixture  # type: ignore[no-redef,import-not-found,unused-ignore]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

# one thread: on a busy CPU, two spin against each other (a request then takes minutes, not seconds)
llama_server = llama_server_fixture(scope="module", threads=1)
TRAITS = ("Ideas",)


def _score(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MADRAG_NO_KEY"}
    env["COLUMNS"] = "400"  # the summary lines unwrapped
    cmd = [sys.executable, "-m", "madrag.cli", "score", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=550, env=env)


def _run(llama_server: str, asap: Path, tmp_path: Path, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    rubric = json.loads((asap / "rubric_set7.json").read_text(encoding="utf-8"))
    rubric["traits"] = [t for t in rubric["traits"] if t["name"] in TRAITS]
    (tmp_path / "rubric.json").write_text(json.dumps(rubric), encoding="utf-8")
    return _score(
        [
            "--data", str(asap / "training_set_rel3_sets7_8.tsv"),
            "--rubric", str(tmp_path / "rubric.json"),
            "--limit", "1",
            "--provider", "openai", "--model", SERVED_MODEL, "--base-url", llama_server,
            "--api-key-env", "MADRAG_NO_KEY",
            "--embedder", "hashing",
            "--debater-max-tokens", "16", "--judge-max-tokens", "16", "--exemplar-max-words", "30",
            "--run-dir", str(tmp_path / name), "--cache-dir", str(tmp_path / "cache"),
            *extra,
        ]
    )  # fmt: skip


def _judges(run_dir: Path) -> list[AgentRecord]:
    store = open_store(run_dir)
    try:
        return [r for r in store.records() if r.role == "judge" and not r.failed]
    finally:
        store.close()


def test_constrained_scoring_reads_every_score_where_the_text_cannot(
    llama_server: str, asap: Path, tmp_path: Path
) -> None:
    text = _run(llama_server, asap, tmp_path, "text")
    assert text.returncode == 0, text.stderr
    judges = _judges(tmp_path / "text")
    assert len(judges) == len(TRAITS)
    assert {r.settings["score_reading"] for r in judges} == {"text"}
    (found,) = unusable_by_protocol(judges, [], [], [], sorted({r.protocol for r in judges})).values()
    assert found.unusable >= 1  # cut at 16 tokens, SmolLM2 states no score
    out = " ".join(text.stdout.split())
    for cause in found.causes:  # the summary names the cause of every unusable score
        assert cause in out, out
    assert "cut off at the token limit (--judge-max-tokens 16" in out

    # the same debate (from the response cache), the Judge's score asked for under the schema
    constrained = _run(llama_server, asap, tmp_path, "constrained", "--score-method", "constrained")
    assert constrained.returncode == 0, constrained.stderr
    judges = _judges(tmp_path / "constrained")
    assert len(judges) == len(TRAITS)
    for record in judges:  # every Judge call gave a readable score, under the schema
        assert record.settings["score_reading"] == "schema"
        assert record.score is not None and record.score.mode == "constrained_schema"
        assert record.score.reported is not None and 0 <= record.score.reported <= 3
    assert "judge scores unusable" not in " ".join(constrained.stdout.split())
    store = open_store(tmp_path / "constrained")
    try:
        assert store.get_meta("preflight")["*"]["json_schema_probe"] == "honoured"
    finally:
        store.close()


def test_geval_reads_its_expectation_from_the_schema_score_steps_logprobs(
    llama_server: str, asap: Path, tmp_path: Path
) -> None:
    """G-Eval on llama.cpp's server with logprobs: the score step under the JSON schema keeps the logprobs, and
    the distribution at the score's token gives G-Eval's expectation (it was missing: 'no score distribution')."""
    done = _run(llama_server, asap, tmp_path, "geval", "-p", "GEval", "--score-method", "constrained")
    assert done.returncode == 0, done.stderr
    store = open_store(tmp_path / "geval")
    try:  # G-Eval's scores are its score rows, each computed from its rater's record (no Judge record of its own)
        rows = [s for s in store.scores() if s.protocol == "GEval"]
        raters = {r.key for r in store.records() if r.role == "rater" and not r.failed}
    finally:
        store.close()
    assert len(rows) == len(TRAITS) and {row.record_key for row in rows} <= raters
    for row in rows:
        score = row.result
        assert score is not None and score.reported_from == "expected" and score.reported is not None
        assert score.distribution and set(score.distribution) <= {0, 1, 2, 3}
        assert score.expected is not None and abs(sum(score.distribution.values()) - 1.0) < 1e-6
    assert "unusable" not in " ".join(done.stdout.split())
