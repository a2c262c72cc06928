"""The test tiers (docs/development.md, "Tests"): every test file is in a tier's folder, a package's tests mirror
``src/madrag/``, the slow list names tests that exist, and the default run leaves out the slow and integration
tests while ``.ci/run`` runs every tier."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest
from tests.tiers import BESIDE_OTHERS, ON_THE_CLOCK, SLOW, TESTS, TIERS, is_serial, marks_of, tier_of

REPO = TESTS.parent
PACKAGES = {p.name for p in (REPO / "src" / "madrag").iterdir() if p.is_dir() and p.name != "__pycache__"}


def test_every_test_file_is_in_a_tier_folder() -> None:
    files = sorted(TESTS.rglob("test_*.py"))
    assert files, "no test file found"
    outside = [f.relative_to(TESTS).as_posix() for f in files if tier_of(f) is None]
    assert outside == [], f"test files outside tests/unit, tests/e2e, tests/integration: {outside}"
    assert not list(TESTS.glob("test_*.py"))


def test_unit_and_integration_folders_mirror_the_package() -> None:
    """tests/unit/<name> and tests/integration/<name> are a package of src/madrag (or core, project)."""
    for tier in ("unit", "integration"):
        names = {p.name for p in (TESTS / tier).iterdir() if p.is_dir() and p.name != "__pycache__"}
        assert names - PACKAGES - {"core", "project"} == set(), tier


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_each_slow_entry_names_a_test_that_exists() -> None:
    files = {f.stem: f for f in TESTS.rglob("test_*.py")}
    for key, why in SLOW.items():
        stem, name = key.split("::")
        assert stem in files and name in _test_names(files[stem]), f"SLOW names no test: {key}"
        assert why.strip(), key
    for key, why in BESIDE_OTHERS.items():
        stem, _, name = key.partition("::")
        assert stem in files and (not name or name in _test_names(files[stem])), f"BESIDE_OTHERS names no test: {key}"
        assert why.strip(), key
    for key, why in ON_THE_CLOCK.items():
        stem, name = key.split("::")
        assert stem in files and name in _test_names(files[stem]), f"ON_THE_CLOCK names no test: {key}"
        assert why.strip(), key


def test_marks_follow_the_folder_and_the_slow_list() -> None:
    unit = TESTS / "unit" / "store" / "test_store.py"
    assert [m.name for m in marks_of(unit, "test_x", integration=False)] == ["unit"]
    browser = TESTS / "e2e" / "browser" / "test_server_browser.py"
    assert not is_serial(browser, integration=False)  # its own server and Chromium: beside others
    assert [m.name for m in marks_of(browser, "test_x", integration=False)] == ["e2e", "slow"]
    banks = TESTS / "unit" / "pipeline" / "test_fold_each.py"
    assert not is_serial(banks, integration=True, name="test_fold_each_with_real_banks")
    vectors = TESTS / "unit" / "retrieval" / "test_vectors.py"
    assert not is_serial(vectors, integration=True, name="test_fold_each_embeds_each_essay_once")
    assert is_serial(vectors, integration=True, name="test_shipped_vectors_are_minilms_vectors")  # MiniLM
    assert not is_serial(TESTS / "e2e" / "cli" / "test_cli.py", integration=False)
    assert is_serial(TESTS / "e2e" / "cli" / "test_cli.py", integration=True)
    real = marks_of(TESTS / "integration" / "providers" / "test_llama_server.py", "test_x", integration=False)
    assert [m.name for m in real] == ["integration", "serial"]
    if SLOW:
        stem, name = next(iter(SLOW)).split("::")
        path = next(TESTS.rglob(f"{stem}.py"))
        assert "slow" in [m.name for m in marks_of(path, name, integration=False)]
    assert set(TIERS) == {"unit", "e2e", "integration"}


def test_the_default_run_is_the_fast_tier_and_ci_runs_every_tier() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert config["addopts"] == ["-m", "not slow and not integration"]
    declared = {m.split(":")[0].split("(")[0] for m in config["markers"]}
    assert {"unit", "e2e", "integration", "slow", "serial"} <= declared
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    runs = [line for line in ci.splitlines() if line.startswith("run_tests ")]
    assert runs == [
        'run_tests -m "not serial" -n "${MADRAG_TEST_WORKERS:-auto}" "$@" || status=$?',
        'run_tests -m "serial" "$@" || status=$?',
    ]


def test_the_conftest_gives_each_collected_test_its_tier(request: pytest.FixtureRequest) -> None:
    """This test itself is in tests/unit: it carries ``unit`` and no other tier."""
    own = {m.name for m in request.node.iter_markers()}
    assert "unit" in own and not own & {"e2e", "integration"}
