"""FeatEng-RF's syntax and entity-grid features (the MADRAG paper's Appendix C) from TextBlob's bundled tagger:
the entity grid of Barzilay and Lapata (2008) on a text whose roles are known, the part-of-speech rates, the
feature sets and what a run records."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from madrag.data import load_asap
from madrag.errors import ConfigError
from madrag.paper.baselines import parsed_features as parsed
from madrag.paper.baselines.feature_scorer import ForestSettings, cross_validate_features
from madrag.paper.baselines.features import FEATURE_NAMES, feature_matrix, feature_names
from madrag.paper.baselines.parsed_features import PARSED_FEATURE_NAMES, entity_grid, parsed_features, tagged_sentences
from madrag.rubric import load_rubric

TEXT = "The patient boy waited for his mother at the station. The mother came late. She hugged the boy."


def test_the_entity_grid_of_a_known_text() -> None:
    # sentence 1: "The patient boy" before the verb (S), "his mother" and "the station" in prepositional phrases (X);
    # sentence 2: "The mother" before "came" (S); sentence 3: "the boy" right after "hugged" (O)
    assert entity_grid(tagged_sentences(TEXT)) == {
        "boy": ["S", "-", "O"], "mother": ["X", "S", "-"], "station": ["X", "-", "-"],
    }  # fmt: skip
    feats = parsed_features(TEXT)
    # six transitions of length 2 over the three columns: S-, -O / XS, S- / X-, --
    expected = {"SN": 2 / 6, "NO": 1 / 6, "XS": 1 / 6, "XN": 1 / 6, "NN": 1 / 6}
    for transition in ("SS", "SO", "SX", "SN", "OS", "OO", "OX", "ON", "XS", "XO", "XX", "XN", "NS", "NO", "NX", "NN"):
        assert feats[f"egrid_{transition}"] == pytest.approx(expected.get(transition, 0.0))
    assert feats["egrid_entity_span"] == pytest.approx((2 + 2 + 1) / 3)
    assert list(feats) == list(PARSED_FEATURE_NAMES)


def test_part_of_speech_rates_and_phrases() -> None:
    feats = parsed_features(TEXT)
    # 18 words: 6 nouns (boy, mother, station, mother, boy + "patient", tagged NN by the tagger), 3 past verbs
    words = [t for s in tagged_sentences(TEXT) for _, t, _ in s if t[:1].isalpha()]
    assert len(words) == 18
    assert feats["pos_noun_rate"] == pytest.approx(words.count("NN") / 18)
    assert feats["pos_past_verb_rate"] == pytest.approx(3 / 18) and feats["pos_verb_rate"] == pytest.approx(3 / 18)
    assert feats["vp_per_sentence"] == pytest.approx(1.0) and feats["verbless_sentence_ratio"] == 0.0
    assert parsed_features("") == dict.fromkeys(PARSED_FEATURE_NAMES, 0.0)  # empty: zeros, finite


def test_feature_sets() -> None:
    texts = [TEXT, "...", "@CAPS1 @NUM2 waited."]
    paper, light = feature_matrix(texts), feature_matrix(texts, feature_set="light")
    assert feature_names("paper") == (*FEATURE_NAMES, *PARSED_FEATURE_NAMES) and feature_names("light") == FEATURE_NAMES
    assert paper.shape == (3, len(FEATURE_NAMES) + len(PARSED_FEATURE_NAMES)) and np.isfinite(paper).all()
    assert np.array_equal(paper[:, : len(FEATURE_NAMES)], light)  # the paper's set adds columns, changes none


def test_without_the_extra_the_paper_set_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_textblob(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("textblob"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    parsed._parser.cache_clear()
    monkeypatch.setattr(builtins, "__import__", no_textblob)
    try:
        with pytest.raises(ConfigError, match=r"madrag\[parse\].*--features light"):
            feature_matrix([TEXT])
        assert feature_matrix([TEXT], feature_set="light").shape == (1, len(FEATURE_NAMES))
    finally:
        monkeypatch.undo()
        parsed._parser.cache_clear()


def test_a_cross_validation_records_its_feature_set(asap: Path) -> None:
    rubric = load_rubric(asap / "rubric_set7.json")
    essays = [e for e in load_asap(asap / "training_set_rel3_sets7_8.tsv", rubric)][:60]
    result = cross_validate_features(essays, rubric, ForestSettings(n_estimators=10))
    assert result.notes["features"] == "paper"
    assert result.notes["n_features"] == len(FEATURE_NAMES) + len(PARSED_FEATURE_NAMES)
