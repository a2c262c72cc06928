"""The ASAP data shipped inside the package: sets 7 and 8 with every rater's trait scores, the standard folds and
the official rubrics (provenance and terms in ``madrag/datasets/asap/README.md``).

Every caller that needs "the ASAP data" (``madrag demo``, the web app's shipped rubrics and exemplars, the docs'
examples, the benches, the tests) finds it here: ``$MADRAG_ASAP_DIR`` when set (a folder with the same file names),
else the package's own copy, so a fresh install needs nothing beside it.
"""

from __future__ import annotations

import csv
import os
from functools import cache
from importlib import resources
from pathlib import Path

from madrag.errors import InputError

ASAP_DATA = "training_set_rel3_sets7_8.tsv"
"""The essays file's name, in the shipped folder and in any ``$MADRAG_ASAP_DIR``."""
ASAP_RUBRICS = {7: "rubric_set7.json", 8: "rubric_set8.json"}
"""Each shipped essay set's rubric file."""
ENV = "MADRAG_ASAP_DIR"


def shipped_asap_dir() -> Path:
    """The package's own ASAP folder (a real folder of the installed package)."""
    folder = Path(str(resources.files("madrag.datasets") / "asap"))
    if not (folder / ASAP_DATA).is_file():
        raise InputError(f"the shipped ASAP data is missing from the installed package ({folder}): reinstall madrag")
    return folder


def find_asap_dir(explicit: Path | None = None) -> Path:
    """The ASAP folder to use: ``explicit``, else ``$MADRAG_ASAP_DIR``, else the shipped copy.

    A folder named explicitly or by the variable must hold the essays file: a wrong path is an error, never a
    silent switch to the shipped copy.
    """
    chosen, why = (explicit, "the folder given") if explicit is not None else (None, "")
    if chosen is None and os.environ.get(ENV):
        chosen, why = Path(os.environ[ENV]), f"${ENV}"
    if chosen is None:
        return shipped_asap_dir()
    if not (chosen / ASAP_DATA).is_file():
        raise InputError(f"ASAP data not found in {chosen} ({why}): it needs {ASAP_DATA} and the rubric files")
    return chosen.resolve()


def asap_data_file(explicit: Path | None = None) -> Path:
    """The ASAP essays file (see :func:`find_asap_dir`)."""
    return find_asap_dir(explicit) / ASAP_DATA


def asap_rubric_file(essay_set: int, explicit: Path | None = None) -> Path:
    """The rubric file of ASAP set ``essay_set`` (7 or 8)."""
    if essay_set not in ASAP_RUBRICS:
        raise InputError(f"madrag ships ASAP sets 7 and 8, not set {essay_set}")
    return find_asap_dir(explicit) / ASAP_RUBRICS[essay_set]


@cache
def shipped_essay_ids() -> dict[int, list[str]]:
    """Each shipped essay set's essay ids, in the file's order, from the package's own copy (not
    ``$MADRAG_ASAP_DIR``: what is asked for is ASAP's ids, e.g. the MTS authors' sample of them)."""
    out: dict[int, list[str]] = {}
    with (shipped_asap_dir() / ASAP_DATA).open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            out.setdefault(int(row["essay_set"]), []).append(row["essay_id"].strip())
    return out
