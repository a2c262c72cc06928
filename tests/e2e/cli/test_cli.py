"""The command line as a user meets it: real processes, exit codes, one-line errors, nothing lost."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest


def madrag(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=timeout)


def _one_line_error(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and needle in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.fixture
def base(asap: Path, tmp_path: Path) -> list[str]:
    return [
        "score",
        "--data", str(asap / "training_set_rel3_sets7_8.tsv"),
        "--rubric", str(asap / "rubric_set7.json"),
        "--run-dir", str(tmp_path / "run"),
        "--cache-dir", str(tmp_path / "cache"),
        "--protocol", "MAD",
    ]  # fmt: skip


def test_fake_run_then_export(base: list[str], tmp_path: Path) -> None:
    proc = madrag(*base, "--provider", "fake", "--limit", "2")
    assert proc.returncode == 0, proc.stderr
    assert "24 agent calls made" in proc.stdout.replace("\n", " ")
    out = madrag("runs", "export", str(tmp_path / "run"), "--format", "jsonl")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in (tmp_path / "run" / "scores.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and {r["trait"] for r in rows} == {"Ideas", "Organization", "Style", "Conventions"}
    assert all(r["reference"] is not None and r["score"] is not None for r in rows)
    rec = madrag("runs", "export", str(tmp_path / "run"), "--what", "records")
    assert rec.returncode == 0 and len((tmp_path / "run" / "records.jsonl").read_text().splitlines()) == 24
    listed = madrag("runs", "list", str(tmp_path))
    assert listed.returncode == 0 and "MAD" in listed.stdout


def test_resuming_with_other_settings_is_refused(base: list[str]) -> None:
    assert madrag(*base, "--provider", "fake", "--limit", "1").returncode == 0
    _one_line_error(madrag(*base, "--provider", "fake", "--limit", "1", "--seed", "9"), "different settings")


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (["--data", "/nonexistent/essays.tsv"], "data file not found"),
        (["--rubric", "/nonexistent/rubric.json"], "rubric file not found"),
        (["--provider", "bogus"], "--provider must be one of llamacpp, openai, fake, anthropic"),
        (["--model-path", "/nonexistent/model.gguf"], "model file not found"),
        (["--protocol", "NOPE"], "unknown protocol 'NOPE'"),
        (["--fold", "x"], "--fold must be an integer, 'each' or 'all'"),
        (["--ids", "nope-1"], "unknown essay id(s): nope-1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(base: list[str], change: list[str], needle: str) -> None:
    args = list(base)
    for i in range(0, len(change), 2):
        if change[i] in args:
            args[args.index(change[i]) + 1] = change[i + 1]
        else:
            args += change[i : i + 2]
    _one_line_error(madrag(*args), needle)


def test_server_down_stops_cleanly(base: list[str], tmp_path: Path) -> None:
    """An unreachable server: one line and exit 2 before any call (a server that is up but fails calls: the run
    records the failed calls and exits 3, tests/e2e/cli/test_run_failures.py)."""
    proc = madrag(
        *base, "--provider", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
        "--retries", "1", "--timeout", "5", "--limit", "1", "--fail-fast",
    )  # fmt: skip
    _one_line_error(proc, "cannot reach the openai-compatible server")  # before any call (preflight)
    assert not (tmp_path / "run").exists()  # checked before anything is written: no run folder to bind


def test_settings_out_of_range_is_one_line(base: list[str]) -> None:
    _one_line_error(madrag(*base, "--provider", "fake", "--judge-max-tokens", "0"), "judge_max_tokens")


def test_dry_run_scores_a_sample_and_estimates_the_whole_run(base: list[str], tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("fake-model: {prompt: 1.0, completion: 2.0}\n")
    proc = madrag(*base, "--provider", "fake", "--dry-run", "--sample", "1", "--prices", str(prices))
    assert proc.returncode == 0, proc.stderr
    assert "estimate for 313 essays x 4 traits" in proc.stdout  # fold 0 of set 7
    assert "calls     3,756" in proc.stdout and "spend $" in proc.stdout  # 313 x 4 x 3 calls
    assert re.search(r"time: about \d+ (s|min) at the sample's pace \(12 calls answered in", proc.stdout)
    assert (tmp_path / "run" / "dry-run" / "store.sqlite").is_file()
    assert not (tmp_path / "run" / "store.sqlite").exists()  # the real run was not started


def test_help_shows_bracketed_protocol_names() -> None:
    """Names such as MADRAG[both_r1] are text, not rich markup, in the help."""
    proc = madrag("score", "--help")
    shown = proc.stdout.replace("\n", " ").replace("│", "")
    assert proc.returncode == 0 and "MADRAG[both_r1]" in shown
    assert "NAME[rounds=N]" in re.sub(r"\s+", "", shown)  # the --protocols preset's note, wrapped anywhere
