"""A scoring protocol added as a plugin in one file of its own - ``toy_protocol.py`` beside this file, registered
with the decorator, no other edit anywhere - runs through the command line (as a ``$MADRAG_PLUGINS`` plugin),
the Python API, ``madrag eval``, the report, the web app's protocol list and a run of the web app, and a local
Ray instance (integration). In this process too it is loaded as a plugin (``$MADRAG_PLUGINS``), not imported.

The toy is a per-trait rater with its own name: one call per trait with MA's prompt, stored as a Judge record,
and its final score the Judge's read score (so every reader of a run reads it back by the default rule).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import madrag_with_plugin, needs_ray, plugin_env
from typer.testing import CliRunner

import madrag
from madrag.protocols import available, get_protocol
from madrag.protocols.base import essay_width

TOY = "Toy"
PLUGIN = "toy_protocol"
"""The plugin's module: ``toy_protocol.py`` beside this file."""


@pytest.fixture(autouse=True)
def toy_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin named in ``$MADRAG_PLUGINS``, as a user names it: madrag imports it at its first lookup."""
    monkeypatch.setenv("MADRAG_PLUGINS", PLUGIN)


# -- helpers ---------------------------------------------------------------------------------------------------


def madrag_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``madrag`` in its own process, with this file as a plugin."""
    return madrag_with_plugin(__file__, PLUGIN, *args, timeout=timeout)


def score_args(asap: Path, run_dir: Path, *extra: str) -> list[str]:
    return [
        "score", "--data", str(asap / "training_set_rel3_sets7_8.tsv"), "--rubric", str(asap / "rubric_set7.json"),
        "--run-dir", str(run_dir), "--cache-dir", str(run_dir.parent / "cache"), "--protocol", TOY,
        "--provider", "fake", *extra,
    ]  # fmt: skip


def stored_toy_scores(run_dir: Path) -> list[dict[str, Any]]:
    """The run's final scores as ``madrag runs export`` writes them (in this process)."""
    from madrag.cli.app import app

    done = CliRunner().invoke(app, ["runs", "export", str(run_dir), "--format", "jsonl"])
    assert done.exit_code == 0, done.output
    return [json.loads(line) for line in (run_dir / "scores.jsonl").read_text().splitlines()]


# -- the registry, the API, the command line, eval and the report --------------------------------------------


def test_the_plugin_registers_the_toy_with_the_defaults_of_its_needs() -> None:
    proto = get_protocol(TOY)
    assert type(proto).__module__ == PLUGIN and TOY in available()
    assert not proto.needs.bank and proto.needs.per_trait and not proto.needs.over_run
    assert essay_width([proto], 2) == 2  # one call chain per trait


def test_the_python_api_scores_with_the_toy(tmp_path: Path) -> None:
    rubric = {"traits": [{"name": t, "min": 0, "max": 3, "levels": dict.fromkeys(range(4), "...")} for t in "AB"]}
    result = madrag.score(["One essay.", "Another one."], rubric, protocol=TOY, provider="fake", run_dir=tmp_path / "r")
    assert {(s.protocol, s.trait) for s in result.trait_scores} == {(TOY, "A"), (TOY, "B")}
    assert len(result.trait_scores) == 4 and all(s.score == 2 for s in result.trait_scores)  # the fake: the middle
    assert result.stats.made == 4  # one call per essay and trait
    again = madrag.score(["One essay.", "Another one."], rubric, protocol=TOY, provider="fake", run_dir=tmp_path / "r")
    assert again.resumed and again.stats.made == 0 and again.trait_scores == result.trait_scores


def test_the_cli_loads_the_plugin_scores_then_eval_and_the_report_read_the_toy(asap: Path, tmp_path: Path) -> None:
    from madrag.cli.app import app

    run_dir = tmp_path / "run"
    proc = madrag_cli(*score_args(asap, run_dir, "--limit", "2"))
    assert proc.returncode == 0, proc.stderr
    assert "8 agent calls made" in proc.stdout.replace("\n", " ")  # 2 essays x 4 traits, one call each
    rows = stored_toy_scores(run_dir)
    assert len(rows) == 8 and {r["protocol"] for r in rows} == {TOY} and all(r["score"] is not None for r in rows)
    runner = CliRunner()
    evaluated = runner.invoke(app, ["eval", str(run_dir), "--bootstrap", "20"])
    assert evaluated.exit_code == 0, evaluated.output
    found = json.loads((run_dir / "eval" / "evaluation.json").read_text())
    assert found["protocols"] == [TOY]
    toy_rows = {r["trait"]: r["n"] for r in found["qwk"] if r["protocol"] == TOY}
    assert {t: toy_rows.get(t) for t in ("Ideas", "Organization", "Style", "Conventions")} == dict.fromkeys(
        ("Ideas", "Organization", "Style", "Conventions"), 2
    )
    reported = runner.invoke(app, ["report", str(run_dir), "--bootstrap", "20"])
    assert reported.exit_code == 0, reported.output
    assert f">{TOY}<" in (run_dir / "report.html").read_text(encoding="utf-8")


def test_an_unknown_plugin_is_one_line(asap: Path, tmp_path: Path) -> None:
    env = {**plugin_env(__file__, PLUGIN), "MADRAG_PLUGINS": "no_such_madrag_plugin"}
    command = [sys.executable, "-m", "madrag.cli", *score_args(asap, tmp_path / "run", "--limit", "1")]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "protocol plugin 'no_such_madrag_plugin' ($MADRAG_PLUGINS) could not be imported" in proc.stderr


# -- the web app ----------------------------------------------------------------------------------------------


def test_the_web_app_lists_the_toy_and_runs_it(tmp_path: Path) -> None:
    from tests.web_helpers import FAKE, RUBRIC, client_for, essays_json, make_config, wait_status

    with client_for(make_config(tmp_path)) as client:
        listed = {p["name"]: p["retrieval"] for p in client.get("/api/protocols").json()}
        assert listed[TOY] is False
        body = {"rubric": RUBRIC, "essays": essays_json(), "protocols": [TOY], "backend": FAKE}
        started = client.post("/api/runs", json=body)
        assert started.status_code == 201, started.text
        done = wait_status(client, started.json()["id"], timeout=60)
        assert done["status"] == "finished", done
        detail = client.get(f"/api/runs/{done['id']}/essays/e1").json()
        assert {p["protocol"] for t in detail["traits"] for p in t["protocols"]} == {TOY}


# -- Ray ------------------------------------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_a_local_ray_instance_scores_with_the_toy(asap: Path, tmp_path: Path) -> None:
    needs_ray()
    run_dir = tmp_path / "ray-run"
    proc = madrag_cli(*score_args(asap, run_dir, "--limit", "3", "--ray", "--ray-workers", "1"), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 workers on 1 node(s) (local)" in proc.stderr
    rows = stored_toy_scores(run_dir)
    assert len(rows) == 12 and {r["protocol"] for r in rows} == {TOY} and all(r["score"] is not None for r in rows)
