"""Rubrics: the ASAP files load as they are; bad rubric files give one-line errors."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from madrag.errors import RubricError
from madrag.rubric import MAX_LEVELS, load_rubric, rubric_from_mapping


def test_asap_rubrics_load_as_they_are(rubric7, rubric8) -> None:  # type: ignore[no-untyped-def]
    assert rubric7.trait_names == ["Ideas", "Organization", "Style", "Conventions"]
    assert all((t.min, t.max) == (0, 3) for t in rubric7.traits)
    assert len(rubric8.traits) == 6 and all((t.min, t.max) == (1, 6) for t in rubric8.traits)
    assert rubric7.traits[0].column == "trait1"
    assert "patience" in rubric7.prompt.lower()
    assert json.loads(rubric7.traits[0].as_prompt_json())["levels"]["3"].startswith("Tells a story")


def _write(tmp_path: Path, payload: object, name: str = "r.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(payload) if name.endswith(".json") else str(payload), encoding="utf-8")
    return p


def trait(name: str = "A", lo: int = 0, hi: int = 2, levels: dict[str, str] | None = None) -> dict[str, object]:
    """A raw trait mapping with a description for every level (``levels`` overrides)."""
    return {
        "name": name,
        "min": lo,
        "max": hi,
        "levels": levels or {str(i): f"L{i}" for i in range(lo, hi + 1)},
    }


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"traits": [trait(lo=3, hi=1, levels={"1": "a"})]}, "min 3 > max 1"),
        ({"traits": [trait("A"), trait("a")]}, "duplicate trait name"),
        ({"traits": [trait(levels={"0": "x", "2": "y"})]}, "no description for level(s) [1]"),
        ({"traits": [trait(levels={"0": "x", "1": "y", "2": "z", "5": "w"})]}, "outside [0, 2]"),
        ({"traits": []}, "traits"),
        ([1, 2], "must be a mapping"),
    ],
)
def test_rubric_errors_are_one_line(tmp_path: Path, payload: object, message: str) -> None:
    with pytest.raises(RubricError) as info:
        load_rubric(_write(tmp_path, payload))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_yaml_rubric_any_scale(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("traits:\n  - name: Voice\n    min: 1\n    max: 3\n    levels: {1: weak, 2: ok, 3: strong}\n")
    rubric = load_rubric(p)
    assert rubric.trait("voice").scores == [1, 2, 3]


def test_missing_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(RubricError, match="not found"):
        load_rubric(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(RubricError, match="not valid"):
        load_rubric(bad)


def test_only_keeps_the_named_traits_in_rubric_order(rubric7) -> None:  # type: ignore[no-untyped-def]
    kept = rubric7.only(["style", "Ideas"])  # any case, any order: the rubric's names, in its order
    assert kept.trait_names == ["Ideas", "Style"] and kept.prompt == rubric7.prompt
    assert kept.trait("Style") == rubric7.trait("Style")
    with pytest.raises(RubricError, match="unknown trait 'Voice'"):
        rubric7.only(["Ideas", "Voice"])


@pytest.mark.parametrize(("lo", "hi"), [(0, 10**9), (-(10**12), 10**12), (1, 102)])
def test_a_scale_too_wide_is_refused_by_arithmetic_at_once(tmp_path: Path, lo: int, hi: int) -> None:
    payload = {"traits": [trait(lo=lo, hi=hi, levels={str(lo): "lowest", str(hi): "highest"})]}
    start = time.monotonic()
    with pytest.raises(RubricError, match=f"{hi - lo + 1:,} levels; a trait has at most {MAX_LEVELS}"):
        load_rubric(_write(tmp_path, payload))  # the CLI's and the Python API's file
    with pytest.raises(RubricError, match="at most 101"):
        rubric_from_mapping(payload)  # a dict given to the Python API, a page's form, the HTTP API's body
    assert time.monotonic() - start < 1.0


def test_the_widest_scale_is_a_percentage_and_scores_stay_small() -> None:
    widest = rubric_from_mapping({"traits": [trait(lo=0, hi=100)]})
    assert len(widest.traits[0].scores) == MAX_LEVELS
    far = {str(10**7 + i): f"L{i}" for i in range(3)}
    with pytest.raises(RubricError, match="scores beyond 1,000,000"):
        rubric_from_mapping({"traits": [trait(lo=10**7, hi=10**7 + 2, levels=far)]})
