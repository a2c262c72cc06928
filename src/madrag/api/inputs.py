"""In-memory inputs of the Python API: essays and exemplar pools as a notebook holds them, and rubrics.

Essays (and pools) may be a list of texts, a list of dicts, a pandas DataFrame or a list of :class:`Essay`.
Dicts and DataFrame rows use the fields of madrag's CSV/JSONL files: ``id``, ``text``, optional ``prompt``,
``fold``, ``essay_set`` and scores (a column named like a rubric trait, or ``rater1_<trait>``,
``rater2_<trait>`` ...); other fields are kept as metadata. Plain texts get the ids ``"1"``, ``"2"`` ...
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import pandas as pd

from madrag.data.essay import Essay, essay_id
from madrag.data.loaders import essay_from_row
from madrag.data.reading import check_range, check_text, check_unique
from madrag.errors import InputError, RubricError
from madrag.rubric import Rubric, load_rubric, rubric_from_mapping

EssayItem: TypeAlias = str | Mapping[str, Any] | Essay
EssaysLike: TypeAlias = pd.DataFrame | Sequence[EssayItem]
"""Essays in memory: a DataFrame, or a list of texts, dicts or :class:`Essay` objects."""
RubricLike: TypeAlias = Rubric | Mapping[str, Any] | str | Path
"""A rubric: a :class:`Rubric`, a dict in the rubric file layout, or the path of a JSON/YAML rubric file."""


def to_rubric(rubric: RubricLike) -> Rubric:
    """A :class:`Rubric` from a rubric, a dict or a file path; any problem is a one-line RubricError.

    >>> to_rubric({"traits": [{"name": "Ideas", "min": 0, "max": 1, "levels": {0: "none", 1: "some"}}]}).trait_names
    ['Ideas']
    """
    if isinstance(rubric, Rubric):
        return rubric
    if isinstance(rubric, str | Path):
        return load_rubric(rubric)
    if not isinstance(rubric, Mapping):
        raise RubricError(
            f"rubric: expected a Rubric, a dict in the rubric file layout or a file path, got {type(rubric).__name__}"
        )
    return rubric_from_mapping(rubric)


def _clean(value: Any) -> Any:
    """A missing DataFrame cell (NaN, None, pd.NA) as None; numpy scalars as Python ones."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    item = getattr(value, "item", None)  # numpy scalars
    return item() if callable(item) and getattr(value, "ndim", None) == 0 else value


def _from_mapping(raw: Mapping[str, Any], rubric: Rubric, where: str) -> Essay:
    """One essay from a dict, read as a row of a CSV/JSONL data file (plus ``essay_set``)."""
    return essay_from_row({str(k): _clean(v) for k, v in raw.items()}, rubric, where)


def _item(item: EssayItem, position: int, rubric: Rubric, what: str) -> Essay:
    where = f"{what}[{position}]"
    if isinstance(item, Essay):  # checked as a loaded essay is: a usable id, scores in the rubric's ranges
        essay_id(item.id, where)
        check_text(item.text, f"{where}: essay {item.id!r}")
        check_range(item, rubric, where)
        return item
    if isinstance(item, str):
        return _from_mapping({"id": str(position + 1), "text": item}, rubric, where)
    if isinstance(item, Mapping):
        return _from_mapping(item, rubric, where)
    raise InputError(f"{where}: expected a text, a dict or an Essay, got {type(item).__name__}")


def to_essays(essays: EssaysLike, rubric: Rubric, what: str = "essays") -> list[Essay]:
    """Essays from a DataFrame or a list of texts, dicts or Essays (see the module docstring); ``what`` names
    the argument in errors. Ids must be unique; scores must lie in the rubric's ranges.

    >>> rubric = to_rubric({"traits": [{"name": "Ideas", "min": 0, "max": 3, "levels": dict.fromkeys(range(4), "")}]})
    >>> [(e.id, e.rater_scores) for e in to_essays([{"id": "a", "text": "Hi.", "Ideas": 2}, "Hello."], rubric)]
    [('a', {'Ideas': [2.0]}), ('2', {})]
    """
    if isinstance(essays, pd.DataFrame):
        rows: Sequence[EssayItem] = [{str(k): v for k, v in row.items()} for row in essays.to_dict(orient="records")]
    elif isinstance(essays, str | bytes) or not isinstance(essays, Sequence):
        raise InputError(
            f"{what}: expected a list of texts, dicts or Essays, or a DataFrame; got {type(essays).__name__}"
        )
    else:
        rows = essays
    out = [_item(item, i, rubric, what) for i, item in enumerate(rows)]
    if not out:
        raise InputError(f"{what}: no essays")
    check_unique(out, what)
    return out
