"""The Python API refuses what it cannot use, each time with one madrag error naming the argument: unknown or
invalid settings, a missing rubric, a missing id, a single rater's score that is not a whole number (only the
raters' mean is rounded, the MADRAG paper's B.5) and an essay that is also in its own exemplar pool."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from tests.helpers import BagOfWordsEmbedder

import madrag
from madrag import ConfigError, Essay, InputError, Rubric, RubricError, Trait
from madrag.data.loaders import load_asap, load_essays

LEVELS = dict.fromkeys(range(4), "a level")
RUBRIC = Rubric(traits=[Trait(name="Ideas", min=0, max=3, levels=LEVELS)])
POOL = [{"id": f"p{i}", "text": f"Exemplar essay {i} about gardens.", "Ideas": i % 4} for i in range(4)]


@pytest.fixture(autouse=True)
def _tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MADRAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()


def score(**kwargs: Any) -> madrag.ScoringResult:
    args: dict[str, Any] = {"essays": ["An essay."], "rubric": RUBRIC, "protocol": "MA", "provider": "fake"}
    return madrag.score(**{**args, **kwargs}, progress=False)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"reprot": "argmax"}, "settings: unknown key 'reprot' (did you mean 'report'?)"),
        ({"judge_max_token": 10}, "settings: unknown key 'judge_max_token' (did you mean 'judge_max_tokens'?)"),
        ({"report": "x"}, "settings.report: must be one of parsed, argmax, expected (got 'x')"),
        ({"judge_temperature": 5}, "settings.judge_temperature: should be less than or equal to 2 (got 5)"),
        ({"seed": "abc"}, "settings.seed: should be a valid integer"),
        ({"min_usable_judges": 3}, "settings: min_usable_judges (3) exceeds judges_per_trait (1)"),
        (["report"], "settings: expected a ScoringSettings or a dict, got list"),
    ],
)
def test_bad_settings_are_one_config_error(settings: Any, message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as found:
        score(settings=settings)
    assert str(found.value).startswith(message) and "\n" not in str(found.value)
    assert not any((tmp_path / "tmp").iterdir())  # refused before a run directory was made


def test_known_settings_still_apply() -> None:
    result = score(settings={"report": "argmax", "judge_max_tokens": 64})
    assert result.scores["score"].notna().all()


def test_a_missing_rubric_is_one_rubric_error() -> None:
    with pytest.raises(RubricError, match=r"^rubric: expected a Rubric, a dict .* got NoneType$"):
        score(rubric=None)


@pytest.mark.parametrize(
    "essays",
    [
        [{"id": None, "text": "An essay."}],
        pd.DataFrame({"id": ["a", None], "text": ["One.", "Two."]}),
        pd.DataFrame({"id": [1.0, math.nan], "text": ["One.", "Two."]}),
    ],
)
def test_a_missing_id_is_refused_not_named_none(essays: Any) -> None:
    with pytest.raises(InputError, match=r"^essays\[\d\]: the essay id is missing$"):
        score(essays=essays)


def test_an_essay_object_with_an_unusable_id_or_score_is_refused() -> None:
    with pytest.raises(InputError, match=r"essays\[0\]: essay id '\.\.' cannot be used"):
        score(essays=[Essay(id="..", text="An essay.")])
    with pytest.raises(InputError, match=r"essays\[0\]: essay a: Ideas score 7 outside \[0, 3\]"):
        score(essays=[Essay(id="a", text="An essay.", rater_scores={"Ideas": [7.0]})])


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"Ideas": 1.5}, "field Ideas"),
        ({"rater1_Ideas": 2, "rater2_Ideas": 1.5}, "field rater2_Ideas"),
        ({"Ideas": "2.5"}, "field Ideas"),
    ],
)
def test_a_single_raters_fractional_score_is_refused_naming_essay_and_column(row: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as found:
        score(essays=[{"id": "e7", "text": "An essay.", **row}])
    assert str(found.value).startswith(f"essays[0]: essay 'e7' {field}: score ")
    assert "is not a whole number" in str(found.value)
    pool = [*POOL, {"id": "p9", "text": "Another exemplar.", **row}]
    with pytest.raises(InputError, match=rf"^pool\[4\]: essay 'p9' {field}: score .* is not a whole number"):
        score(pool=pool, protocol="MADRAG", embedder=BagOfWordsEmbedder())


def test_fractional_scores_in_data_files_are_refused(tmp_path: Path) -> None:
    csv = tmp_path / "essays.csv"
    csv.write_text("id,text,rater1_Ideas,rater2_Ideas\na,One.,2,3\nb,Two.,1.5,2\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"essays\.csv:3: essay 'b' field rater1_Ideas: score 1\.5 is not a whole"):
        load_essays(csv, RUBRIC)
    asap_rubric = Rubric(essay_set=7, traits=[Trait(name="Ideas", column="trait1", min=0, max=3, levels=LEVELS)])
    tsv = tmp_path / "asap.tsv"
    tsv.write_text("essay_id\tessay_set\tessay\trater1_trait1\trater2_trait1\n1\t7\tOne.\t2\t2.5\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"asap\.tsv:2: essay '1' column rater2_trait1: score 2\.5 is not a whole"):
        load_asap(tsv, asap_rubric)


def test_the_mean_of_whole_rater_scores_is_still_rounded_half_up() -> None:
    essays = madrag.to_essays([{"id": "a", "text": "One.", "rater1_Ideas": 1, "rater2_Ideas": 2, "Ideas": 2.0}], RUBRIC)
    assert essays[0].rater_scores == {"Ideas": [1.0, 2.0, 2.0]}  # 2.0 is a whole score
    two = madrag.to_essays([{"id": "a", "text": "One.", "rater1_Ideas": 1, "rater2_Ideas": 2}], RUBRIC)
    assert two[0].reference(RUBRIC.traits[0]) == 2  # the mean 1.5, rounded half up (the MADRAG paper's B.5)


def test_an_essay_in_its_own_pool_is_refused(tmp_path: Path) -> None:
    essays = [{"id": "p1", "text": "Exemplar essay 1 about gardens."}, {"id": "new", "text": "A new essay."}]
    with pytest.raises(InputError, match=r"^pool: essay id\(s\) 'p1' are also essays to score"):
        score(essays=essays, pool=POOL, protocol="MADRAG", embedder=BagOfWordsEmbedder())
    assert not any((tmp_path / "tmp").iterdir())
    ok = score(essays=essays[1:], pool=POOL, protocol="MADRAG", embedder=BagOfWordsEmbedder())
    assert ok.scores["essay"].tolist() == ["new"]


@pytest.mark.parametrize("module", ["madrag.api.arguments", "madrag.data.essay"])
def test_docstring_examples_run(module: str) -> None:
    import doctest
    import importlib

    failures, tried = doctest.testmod(importlib.import_module(module))
    assert tried > 0 and failures == 0
