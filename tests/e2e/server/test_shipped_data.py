"""The ASAP data ships inside the package: found from any working folder with no ``shared/`` beside the checkout,
``$MADRAG_ASAP_DIR`` still points elsewhere, a wrong folder is an error (never a silent switch), and the web app
offers the shipped set 7 and 8 rubrics from any folder."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.web_helpers import client_for, make_config

import madrag
from madrag.data import load_asap
from madrag.data.shipped import ASAP_DATA, asap_rubric_file, find_asap_dir, shipped_asap_dir
from madrag.errors import InputError


def test_shipped_folder_is_inside_the_package_with_provenance() -> None:
    folder = shipped_asap_dir()
    assert folder.is_relative_to(Path(madrag.__file__).parent)
    files = sorted(p.name for p in folder.iterdir() if p.is_file())
    assert [f for f in files if not f.startswith("vectors-")] == [
        "README.md",
        "rubric_set7.json",
        "rubric_set8.json",
        ASAP_DATA,
    ]
    assert all(f.endswith(".npz") for f in files if f.startswith("vectors-"))  # the shipped MiniLM vectors
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "Hewlett Foundation" in readme and "research" in readme.lower()


def test_shipped_data_has_both_sets_and_every_rater(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MADRAG_ASAP_DIR", raising=False)
    assert find_asap_dir() == shipped_asap_dir()
    set7 = load_asap(find_asap_dir() / ASAP_DATA, madrag.load_rubric(asap_rubric_file(7)))
    set8 = load_asap(find_asap_dir() / ASAP_DATA, madrag.load_rubric(asap_rubric_file(8)))
    assert (len(set7), len(set8)) == (1569, 723)
    assert {e.fold for e in set7} == {0, 1, 2, 3, 4}
    assert sum(1 for e in set8 if len(e.rater_scores["Voice"]) == 3) == 128  # the third rater


def test_env_folder_wins_and_a_wrong_one_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "asap"
    shutil.copytree(shipped_asap_dir(), copy)
    monkeypatch.setenv("MADRAG_ASAP_DIR", str(copy))
    assert find_asap_dir() == copy.resolve()
    monkeypatch.setenv("MADRAG_ASAP_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(InputError, match=r"ASAP data not found in .*nowhere \(\$MADRAG_ASAP_DIR\)"):
        find_asap_dir()


def test_data_command_prints_the_paths_from_any_folder(tmp_path: Path) -> None:
    env = {k: v for k, v in __import__("os").environ.items() if k != "MADRAG_ASAP_DIR"}
    run = [sys.executable, "-m", "madrag.cli", "data", "asap"]
    out = subprocess.run([*run, "essays"], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert Path(out.stdout.strip()) == shipped_asap_dir() / ASAP_DATA
    bad = subprocess.run([*run, "rubric9"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "rubric7" in bad.stderr


def test_web_app_offers_the_shipped_rubrics_from_any_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MADRAG_ASAP_DIR", raising=False)
    monkeypatch.chdir(tmp_path)  # no shared/ here or above
    with client_for(make_config(tmp_path)) as client:
        rubrics = {r["id"] for r in client.get("/api/rubrics").json()}
        assert {"asap-set7", "asap-set8"} <= rubrics
        assert client.get("/api/rubrics/asap-set8").json()["rubric"]["traits"][2]["name"] == "Voice"
