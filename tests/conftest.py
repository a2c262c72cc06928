"""Shared fixtures (the ASAP data shipped with the package, its rubrics and essays) and the tiers' markers: each
test gets its folder's tier (``unit``, ``e2e``, ``integration``), ``slow`` when it is one of ``SLOW``, and
``serial`` when it must not run beside another test (docs/development.md, "Tests")."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.tiers import marks_of

from madrag.data import Essay, load_asap
from madrag.data.shipped import find_asap_dir
from madrag.rubric import Rubric, load_rubric

REPO = Path(__file__).resolve().parents[1]


def asap_dir() -> Path:
    """The ASAP folder: $MADRAG_ASAP_DIR when set, else the copy shipped inside the package (no ../shared needed)."""
    return find_asap_dir()


@pytest.fixture(scope="session")
def asap() -> Path:
    """The ASAP data folder."""
    return asap_dir()


@pytest.fixture(scope="session")
def rubric7(asap: Path) -> Rubric:
    """The set-7 rubric."""
    return load_rubric(asap / "rubric_set7.json")


@pytest.fixture(scope="session")
def rubric8(asap: Path) -> Rubric:
    """The set-8 rubric."""
    return load_rubric(asap / "rubric_set8.json")


@pytest.fixture(scope="session")
def essays7(asap: Path, rubric7: Rubric) -> list[Essay]:
    """Every set-7 essay."""
    return load_asap(asap / "training_set_rel3_sets7_8.tsv", rubric7)


@pytest.fixture(scope="session")
def essays8(asap: Path, rubric8: Rubric) -> list[Essay]:
    """Every set-8 essay."""
    return load_asap(asap / "training_set_rel3_sets7_8.tsv", rubric8)


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its tier, ``slow`` and ``serial`` (tests/tiers.py)."""
    for item in items:
        integration = item.get_closest_marker("integration") is not None
        for mark in marks_of(item.path, getattr(item, "originalname", item.name), integration):
            item.add_marker(mark)
