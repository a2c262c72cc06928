"""A backend that returns no logprobs: what docs/scoring.md promises (``--no-logprobs``: the debaters then state
their confidence) and what the error says when the flag is missing, end to end against the local stub server in its
no-logprobs mode (an OpenAI-compatible server that silently ignores the logprobs request, as several do).

The CLI runs as a user runs it (a subprocess of ``python -m madrag.cli``, so the one-line error and exit code 2
of ``madrag.cli.app.main`` are checked); the Python API runs in process. The rerun takes its flag and its Python
argument from the error message itself, so the message cannot name an option that does not exist.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.servers import free_port

import madrag
from madrag.errors import ProviderError
from madrag.providers import ProviderSpec
from madrag.testing.stub_server import StubServer

MODEL = "stub-model"
ESSAYS = [{"id": "e1", "text": "Waiting for the bus in the rain taught me patience, and my sister too."}]
LEVELS = {3: "excellent", 2: "adequate", 1: "weak", 0: "missing"}
RUBRIC = {"traits": [{"name": "Ideas", "min": 0, "max": 3, "levels": LEVELS}]}


@pytest.fixture(scope="module")
def server() -> Iterator[StubServer]:
    """The stub server answering without logprobs, even when they are asked for."""
    with StubServer(latency_s=0.0, logprobs=False) as stub:
        yield stub


@pytest.fixture()
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    """A one-essay CSV and a one-trait rubric (JSON) in ``tmp_path``."""
    data = tmp_path / "essays.csv"
    data.write_text("id,text\ne1,Waiting for the bus in the rain taught me patience.\n", encoding="utf-8")
    rubric = tmp_path / "rubric.json"
    rubric.write_text(json.dumps(RUBRIC), encoding="utf-8")
    return data, rubric


def madrag_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``madrag ARGS`` in ``cwd``, with a key for the stub (it checks none) and a private cache."""
    env = {**os.environ, "OPENAI_API_KEY": "sk-stub", "MADRAG_CACHE": str(cwd / "cache")}
    command = [sys.executable, "-m", "madrag.cli", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def score_args(data: Path, rubric: Path, base_url: str, run_dir: str) -> list[str]:
    return [
        "score", "--data", str(data), "--rubric", str(rubric), "--fold", "all", "--protocol", "MAD",
        "--provider", "openai", "--model", MODEL, "--base-url", base_url, "--retries", "0",
        "--run-dir", run_dir,
    ]  # fmt: skip


def test_the_cli_error_names_the_flag_and_the_rerun_with_it_works(
    tmp_path: Path, server: StubServer, inputs: tuple[Path, Path]
) -> None:
    data, rubric = inputs
    refused = madrag_cli(score_args(data, rubric, server.base_url, "runs/lp"), tmp_path)
    assert refused.returncode == 2, refused.stderr
    error = refused.stderr.strip().splitlines()[-1]
    assert error.startswith("error: ") and "returned no logprobs" in error
    assert "supports_logprobs" not in error  # a Python constructor argument, not what a CLI user can type
    assert "self-reported" in error and "self_reported" in error  # what changes
    flag = re.search(r"rerun with (--[a-z-]+)", error)
    assert flag is not None and flag.group(1) == "--no-logprobs"
    assert not (tmp_path / "runs").exists()  # the check came before anything was written

    # the command the error suggests, on the same run folder
    rerun = madrag_cli([*score_args(data, rubric, server.base_url, "runs/lp"), flag.group(1)], tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    exported = madrag_cli(["runs", "export", "runs/lp", "--what", "records"], tmp_path)
    assert exported.returncode == 0, exported.stderr
    records = [json.loads(line) for line in (tmp_path / "runs/lp/records.jsonl").read_text().splitlines()]
    debaters = [r for r in records if r["role"] in ("advocate", "skeptic")]
    assert len(debaters) == 2  # one Advocate and one Skeptic call: the one trait's debate
    assert {r["confidence_source"] for r in debaters} == {"self_reported"}
    assert all(0.0 <= r["confidence"] <= 1.0 for r in debaters)


def test_the_python_api_argument_the_error_names_works(
    tmp_path: Path, server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_KEY", "sk-stub")
    spec = ProviderSpec(kind="openai", model=MODEL, base_url=server.base_url, api_key_env="STUB_KEY", retries=0)
    with pytest.raises(ProviderError, match="returned no logprobs") as info:
        madrag.score(ESSAYS, RUBRIC, protocol="MAD", provider=spec, cache_dir=tmp_path, progress=False)
    argument = re.search(r"Python API: ProviderSpec\(kind='openai', \.\.\., (\w+)=False\)", str(info.value))
    assert argument is not None and argument.group(1) in {
        **ProviderSpec.model_fields,
        **type(spec.options).model_fields,
    }

    fixed = spec.model_copy(update={argument.group(1): False})
    result = madrag.score(ESSAYS, RUBRIC, protocol="MAD", provider=fixed, cache_dir=tmp_path, progress=False)
    debaters = [r for r in result.records if r.role in ("advocate", "skeptic")]
    assert len(debaters) == 2 and {r.confidence_source for r in debaters} == {"self_reported"}
    assert result.scores["score"].notna().all()


def test_a_dead_port_leaves_a_folder_as_it_was_and_the_fixed_command_works_on_it(
    tmp_path: Path, server: StubServer, inputs: tuple[Path, Path]
) -> None:
    """Nothing listens on a free port: the run stops before writing, an existing folder is left as it was, and the
    command with the right server runs in that same folder."""
    data, rubric = inputs
    folder = tmp_path / "runs" / "mine"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("mine\n", encoding="utf-8")
    dead = f"http://127.0.0.1:{free_port()}/v1"
    refused = madrag_cli([*score_args(data, rubric, dead, str(folder)), "--no-logprobs", "--timeout", "5"], tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert "cannot reach" in refused.stderr.strip().splitlines()[-1]
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]

    fixed = madrag_cli([*score_args(data, rubric, server.base_url, str(folder)), "--no-logprobs"], tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    assert (folder / "store.sqlite").is_file() and (folder / "notes.txt").read_text(encoding="utf-8") == "mine\n"
