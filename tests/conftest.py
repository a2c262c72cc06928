"""Shared fixtures: the ASAP data shipped with the package, rubrics, and a small in-memory exemplar bank."""

from __future__ import annotations

from pathlib import Path

import pytest

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
