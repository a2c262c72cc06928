"""Loading essays: the ASAP layout, generic CSV / JSONL, reference labels, folds, and one-line input errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

from madrag.data import load_asap, load_essays, load_table, reference_label, split_by_fold
from madrag.errors import InputError
from madrag.rubric import Rubric


def test_asap_set7_counts_folds_and_references(essays7, rubric7) -> None:  # type: ignore[no-untyped-def]
    assert len(essays7) == 1569
    assert {e.fold for e in essays7} == {0, 1, 2, 3, 4}
    split = split_by_fold(essays7, 0)
    assert len(split.eval) + len(split.pool) == 1569
    assert not {e.id for e in split.eval} & {e.id for e in split.pool}
    first = next(e for e in essays7 if e.id == "17834")
    ideas = rubric7.trait("Ideas")
    assert first.rater_scores["Ideas"] == [1.0, 1.0]
    assert first.reference(rubric7.trait("Conventions")) == 3  # raters 3 and 2: mean 2.5 rounds half up
    assert first.reference(ideas) == 1


def test_human_human_qwk_matches_published_set7(essays7, rubric7) -> None:  # type: ignore[no-untyped-def]
    published = {"Ideas": 0.695, "Organization": 0.576, "Style": 0.544, "Conventions": 0.567}
    for name, expected in published.items():
        pairs = [(e.rater(name, 0), e.rater(name, 1)) for e in essays7]
        a = [int(x) for x, y in pairs if x is not None and y is not None]
        b = [int(y) for x, y in pairs if x is not None and y is not None]
        assert cohen_kappa_score(a, b, weights="quadratic") == pytest.approx(expected, abs=0.0015)


def test_set8_third_rater(essays8) -> None:  # type: ignore[no-untyped-def]
    assert len(essays8) == 723
    three = [e for e in essays8 if len(e.rater_scores.get("Ideas and Content", [])) == 3]
    assert len(three) == 128


def test_reference_label_rounds_half_up_and_clamps(rubric7) -> None:  # type: ignore[no-untyped-def]
    t = rubric7.trait("Ideas")
    assert reference_label([1, 2], t) == 2
    assert reference_label([0, 1], t) == 1
    assert reference_label([3, 3, 2], t) == 3
    assert reference_label([], t) is None


def _tsv(tmp_path: Path, rows: list[list[str]], header: list[str] | None = None, enc: str = "utf-8") -> Path:
    header = header or ["essay_id", "essay_set", "essay", "rater1_trait1", "rater2_trait1", "fold"]
    p = tmp_path / "d.tsv"
    p.write_bytes("\n".join("\t".join(r) for r in [header, *rows]).encode(enc))
    return p


@pytest.fixture
def one_trait() -> Rubric:
    """A set-7 rubric with the single trait Ideas (column trait1)."""
    return Rubric.model_validate(
        {
            "essay_set": 7,
            "traits": [
                {
                    "name": "Ideas",
                    "column": "trait1",
                    "min": 0,
                    "max": 3,
                    "levels": {i: "x" for i in range(4)},
                }
            ],
        }
    )


def test_asap_latin1_original_file(tmp_path: Path, one_trait: Rubric) -> None:
    p = _tsv(
        tmp_path,
        [["1", "7", "caf\u00e9 story", "2", "3", "0"], ["2", "1", "other set", "", "", "0"]],
        enc="latin-1",
    )
    essays = load_asap(p, one_trait)
    assert [e.id for e in essays] == ["1"] and essays[0].text == "caf\u00e9 story"


@pytest.mark.parametrize(
    ("rows", "header", "message"),
    [
        ([["1", "7", "a", "1", "1", "0"], ["1", "7", "b", "1", "1", "0"]], None, "duplicate essay id '1'"),
        ([["1", "7", "  ", "1", "1", "0"]], None, "is empty"),
        ([["1", "7", "a", "5", "1", "0"]], None, "Ideas score 5 outside [0, 3]"),
        ([["1", "7", "a", "x", "1", "0"]], None, "is not a number"),
        ([["1", "7", "a"]], ["essay_id", "essay_set", "essay"], "no rater columns for trait 'Ideas'"),
        ([["1", "a"]], ["essay_id", "text"], "missing column(s) ['essay_set', 'essay']"),
    ],
)
def test_asap_bad_input(tmp_path: Path, one_trait: Rubric, rows, header, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as info:
        load_asap(_tsv(tmp_path, rows, header), one_trait)
    assert message in str(info.value)


def test_missing_file_and_bad_format(tmp_path: Path, one_trait: Rubric) -> None:
    with pytest.raises(InputError, match="not found"):
        load_essays(tmp_path / "none.tsv", one_trait)
    with pytest.raises(InputError, match="unknown data format"):
        load_essays(tmp_path / "x.csv", one_trait, "xml")


def test_generic_csv_and_jsonl(tmp_path: Path, one_trait: Rubric) -> None:
    csv_path = tmp_path / "e.csv"
    csv_path.write_text('id,text,rater1_Ideas,rater2_Ideas,grade\n"a","One essay, with a comma",1,2,7\n')
    [essay] = load_table(csv_path, one_trait)
    assert essay.rater_scores == {"Ideas": [1.0, 2.0]} and essay.metadata == {"grade": "7"}
    assert essay.reference(one_trait.traits[0]) == 2
    jl = tmp_path / "e.jsonl"
    jl.write_text(json.dumps({"id": 1, "text": "t", "Ideas": 3}) + "\n\n" + json.dumps({"id": 2, "text": "u"}) + "\n")
    essays = load_essays(jl, one_trait)
    assert [e.id for e in essays] == ["1", "2"] and essays[0].rater_scores == {"Ideas": [3.0]}
    jl.write_text("{broken\n")
    with pytest.raises(InputError, match="not valid JSON"):
        load_essays(jl, one_trait)


def test_split_errors(essays7) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="no essays in fold 9"):
        split_by_fold(essays7, 9)
    everything = split_by_fold(essays7, None)
    assert len(everything.eval) == len(everything.pool) == 1569
