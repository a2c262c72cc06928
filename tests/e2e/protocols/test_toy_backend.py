"""A backend added in this file alone - an options model, traits and a factory registered with
``register_backend``, no other edit anywhere - works through the command line (as a ``$MADRAG_PLUGINS`` plugin,
its option generated into ``madrag score --help``), the Python API's backend strings, the web app's form and
a run of the web app, and a local Ray instance (integration).

The toy answers as the fake backend does (canned answers), under a model name made of its own option
(``--toy-flavour``), so each path shows the option reached the provider and the run's record.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from tests.helpers import madrag_with_plugin, needs_ray

import madrag
from madrag.providers import BackendOptions, BackendTraits, option, register_backend
from madrag.providers.backends import CallLimits, unregister_backend
from madrag.providers.fake import FakeProvider

TOY = "toy"
RUBRIC = {"traits": [{"name": t, "min": 0, "max": 3, "levels": dict.fromkeys(range(4), "...")} for t in "AB"]}


class ToyOptions(BackendOptions):
    """The toy's one setting: part of what it answers (so of a run's identity)."""

    toy_flavour: str = option("plain", "toy: the flavour of its answers (its model name).", web=True)


def build_toy(model: str | None, options: ToyOptions, limits: CallLimits, key: SecretStr | None) -> FakeProvider:
    return FakeProvider(model_name=f"{model or 'toy'}-{options.toy_flavour}", concurrency=limits.concurrency or 4)


def register_toy() -> None:
    traits = BackendTraits(label="a toy", valid_grades=False, not_grades="is a toy")
    register_backend(TOY, ToyOptions, build_toy, traits)


if __name__ in os.environ.get("MADRAG_PLUGINS", "").split(","):  # loaded as madrag's plugin: the CLI, Ray workers
    register_toy()


@pytest.fixture(autouse=True)
def toy_registered() -> Iterator[None]:
    """In the tests' own process the toy is a backend for this file's tests only: the other files see madrag's."""
    register_toy()
    yield
    unregister_backend(TOY)


# -- helpers ---------------------------------------------------------------------------------------------------


def madrag_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``madrag`` in its own process, with this file as a plugin."""
    return madrag_with_plugin(__file__, __name__, *args, timeout=timeout)


def score_args(asap: Path, run_dir: Path, *extra: str) -> list[str]:
    return [
        "score", "--data", str(asap / "training_set_rel3_sets7_8.tsv"), "--rubric", str(asap / "rubric_set7.json"),
        "--run-dir", str(run_dir), "--cache-dir", str(run_dir.parent / "cache"), "--protocol", "MA",
        "--provider", TOY, "--toy-flavour", "mint", *extra,
    ]  # fmt: skip


def recorded_provider(run_dir: Path) -> dict[str, Any]:
    """The backend identity the run's store recorded."""
    with sqlite3.connect(run_dir / "store.sqlite") as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()
    provider: dict[str, Any] = json.loads(row[0])["provider"]
    return provider


def called_models(run_dir: Path) -> set[str]:
    """The model names the run's stored agent records were answered by."""
    with sqlite3.connect(run_dir / "store.sqlite") as conn:
        rows = conn.execute("SELECT record FROM records").fetchall()
    return {json.loads(r[0])["model"] for r in rows}


def server_run(data_dir: Path, run_id: str) -> Path:
    """The folder of the web app's run ``run_id``."""
    found = [p.parent for p in data_dir.rglob("store.sqlite") if p.parent.name == run_id]
    assert len(found) == 1, found
    return found[0]


# -- the registry and the Python API ---------------------------------------------------------------------------


def test_the_toy_is_a_kind_with_its_options_and_traits() -> None:
    spec = madrag.ProviderSpec(kind=TOY, toy_flavour="mint")
    assert isinstance(spec.options, ToyOptions) and spec.options.toy_flavour == "mint"
    assert spec.traits.valid_grades is False and spec.traits.remote is False
    assert madrag.ProviderSpec.model_validate(spec.model_dump()) == spec


def test_the_python_api_takes_the_toy_by_its_string(tmp_path: Path) -> None:
    result = madrag.score(["One essay.", "Another one."], RUBRIC, protocol="MA", provider="toy:m", run_dir=tmp_path)
    assert len(result.trait_scores) == 4 and all(s.score is not None for s in result.trait_scores)
    assert recorded_provider(tmp_path) == {"kind": TOY, "model": "m", "toy_flavour": "plain"}
    again = madrag.score(["One essay.", "Another one."], RUBRIC, protocol="MA", provider="toy:m", run_dir=tmp_path)
    assert again.resumed and again.stats.made == 0


# -- the command line --------------------------------------------------------------------------------------------


def test_the_cli_generates_the_toys_option_and_scores_with_it(asap: Path, tmp_path: Path) -> None:
    shown = madrag_cli("score", "--help")
    assert shown.returncode == 0, shown.stderr
    plain = re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─]", " ", shown.stdout))
    assert "--toy-flavour" in plain and "toy (a toy)" in plain
    run_dir = tmp_path / "run"
    proc = madrag_cli(*score_args(asap, run_dir, "--limit", "1"))
    assert proc.returncode == 0, proc.stderr
    assert recorded_provider(run_dir) == {"kind": TOY, "model": None, "toy_flavour": "mint"}
    assert called_models(run_dir) == {"toy-mint"}
    lemon = ["lemon" if a == "mint" else a for a in score_args(asap, run_dir, "--limit", "1")]
    refused = madrag_cli(*lemon)  # another flavour answers otherwise: not this run
    assert refused.returncode != 0 and "provider.toy_flavour" in refused.stderr


# -- the web app ----------------------------------------------------------------------------------------------


def test_the_web_app_offers_the_toy_and_runs_it(tmp_path: Path) -> None:
    from tests.web_helpers import RUBRIC as WEB_RUBRIC
    from tests.web_helpers import client_for, essays_json, make_config, wait_status

    with client_for(make_config(tmp_path)) as client:
        backend = {"kind": TOY, "options": {"toy_flavour": "mint"}}
        body = {"rubric": WEB_RUBRIC, "essays": essays_json(), "protocols": ["MA"], "backend": backend}
        started = client.post("/api/runs", json=body)
        assert started.status_code == 201, started.text
        done = wait_status(client, started.json()["id"], timeout=60)
        assert done["status"] == "finished", done
        assert called_models(server_run(tmp_path, done["id"])) == {"toy-mint"}
        odd = client.post("/api/runs", json={**body, "backend": {"kind": TOY, "options": {"slots": 3}}})
        assert odd.status_code == 422 and "offers no option slots" in odd.text
        refused = client.post("/api/runs", json={**body, "backend": {"kind": "no-such-backend"}})
        assert refused.status_code == 422 and "unknown provider 'no-such-backend'" in refused.text


def test_the_backend_page_offers_the_toy_to_try_and_starts_a_run_with_it(tmp_path: Path) -> None:
    from tests.e2e.server.test_server_pages import new_draft, post
    from tests.web_helpers import HTML, client_for, essays_csv, make_config, wait_status
    from tests.web_helpers import RUBRIC as WEB_RUBRIC

    with client_for(make_config(tmp_path)) as client:
        draft, token = new_draft(client)
        files = {"file": ("rubric.json", json.dumps(WEB_RUBRIC).encode(), "application/json")}
        assert post(client, f"/drafts/{draft}/rubric", token, mode="upload", files=files).status_code == 303
        data = {"file": ("c.csv", essays_csv(4).encode(), "text/csv")}
        assert "Read 4 essays" in post(client, f"/drafts/{draft}/essays", token, mode="upload", files=data).text
        assert post(client, f"/drafts/{draft}/exemplars", token, pool="folds", eval_fold="0").status_code == 303
        page = client.get(f"/drafts/{draft}/backend", headers=HTML).text
        offered = re.search(r'id="try-pipeline">(.*?)</fieldset>', page, re.S)
        assert offered is not None and 'value="toy"' in offered.group(1) and "a toy" in offered.group(1)
        assert 'name="option-toy-toy_flavour"' in offered.group(1)  # its option, from its options model
        fields = {"kind": TOY, "protocols": "MA", "action": "start", "option-toy-toy_flavour": "lemon"}
        start = post(client, f"/drafts/{draft}/backend", token, **fields)
        assert start.status_code == 303, start.text
        run_id = start.headers["location"].rsplit("/", 1)[-1]
        done = wait_status(client, run_id, timeout=60)
        assert done["status"] == "finished" and done["backend"]["kind"] == TOY, done
        assert called_models(server_run(tmp_path, run_id)) == {"toy-lemon"}


# -- Ray ------------------------------------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_a_local_ray_instance_scores_with_the_toy(asap: Path, tmp_path: Path) -> None:
    needs_ray()
    run_dir = tmp_path / "ray-run"
    proc = madrag_cli(*score_args(asap, run_dir, "--limit", "2", "--ray", "--ray-workers", "1"), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 workers on 1 node(s) (local)" in proc.stderr
    assert recorded_provider(run_dir) == {"kind": TOY, "model": None, "toy_flavour": "mint"}
    assert called_models(run_dir) == {"toy-mint"}
