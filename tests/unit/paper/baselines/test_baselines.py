"""Fast tests of the LLM-free baselines: features, the fold protocol, the RF scorer and the retrieval-only scorer.

No MiniLM here: the retrieval scorer runs on a stub bank that only answers ``similar``, or (one test, marked
``integration``) on a hashed bag-of-words fake embedder with real fold banks in tmp_path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from tests.helpers import BagOfWordsEmbedder

from madrag.data.essay import Essay
from madrag.paper.baselines import (
    FEATURE_NAMES,
    CachingEmbedder,
    ForestSettings,
    RetrievalScorer,
    cross_validate_features,
    cross_validate_retrieval,
    essay_features,
    feature_matrix,
    fold_indices,
    weighted_score,
)
from madrag.paper.baselines.features import feature_names, mattr, mtld, paragraphs
from madrag.paper.baselines.retrieval_scorer import SimilarBank, minilm_bank_factory
from madrag.retrieval import Exemplar
from madrag.retrieval.embedder import FloatArray
from madrag.rubric import Rubric, Trait

LEVELS = {0: "none", 1: "some", 2: "good", 3: "great"}
RUBRIC = Rubric(
    traits=[Trait(name="Ideas", min=0, max=3, levels=LEVELS), Trait(name="Style", min=0, max=3, levels=LEVELS)]
)
IDEAS, STYLE = RUBRIC.traits
LEXICON = frozenset("i was patient when we went to the store and waited in line for a long time it".split())
TOPICS = ["apple orchard harvest", "river boat journey", "mountain snow climb", "city market noise", "school bus ride"]


def feats(text: str, lexicon: frozenset[str] = LEXICON) -> dict[str, float]:
    """The features of ``text`` against the small test lexicon."""
    return essay_features(text, lexicon)


def make_essays(per_fold: int = 4, folds: int = 5) -> list[Essay]:
    """Synthetic scored essays: longer essays get higher scores, so a model has something to learn."""
    essays = []
    for fold in range(folds):
        for j in range(per_fold):
            score = (fold + j) % 4
            topic = TOPICS[(fold * per_fold + j) % len(TOPICS)]
            text = " ".join([f"I was patient on the {topic} day {j}."] * (score + 1))
            essays.append(
                Essay(
                    id=f"e{fold}{j}",
                    text=text,
                    essay_set=7,
                    fold=fold,
                    rater_scores={"Ideas": [float(score), float(score)], "Style": [float(score), max(score - 1.0, 0)]},
                )
            )
    return essays


def exemplar(eid: str, similarity: float, **scores: int) -> Exemplar:
    """An exemplar with the given similarity and trait scores."""
    return Exemplar(essay_id=eid, text=eid, scores=scores, distance=1 - similarity, similarity=similarity)


class StubBank:
    """Answers ``similar`` with a fixed list, deliberately including the query essay itself first."""

    def __init__(self, others: list[Exemplar]) -> None:
        self.others = others
        self.calls: list[tuple[str, int]] = []

    def similar(self, essay: Essay, k: int, query_vector: FloatArray | None = None) -> list[Exemplar]:
        """The query itself first, then the fixed exemplars; the first ``k``."""
        self.calls.append((essay.id, k))
        return [exemplar(essay.id, 1.0, Ideas=0, Style=0), *self.others][:k]


# ------------------------------------------------------------------ features


def test_feature_matrix_is_finite_for_odd_texts() -> None:
    texts = ["...", "@CAPS1 @NUM2", "One word", "A normal sentence. Another one!  New paragraph here?"]
    matrix = feature_matrix(texts, lexicon=LEXICON)
    assert matrix.shape == (4, len(feature_names("paper")))
    assert np.isfinite(matrix).all()
    assert len(set(FEATURE_NAMES)) == len(FEATURE_NAMES)


def test_length_features_grow_with_text() -> None:
    short, long = feats("I was patient."), feats("I was patient. I waited in line for a long time at the store.")
    for name in ("words", "chars", "sentences", "unique_words"):
        assert long[name] > short[name], name
    assert long["sentences"] == 2


def test_misspellings_raise_the_oov_rate() -> None:
    clean = feats("I was patient when we went to the store.")
    typos = feats("I was pashent wen we whent to the stor.")
    assert clean["oov"] == 0 and clean["oov_rate"] == 0
    assert typos["oov"] == 4 and typos["oov_rate"] > clean["oov_rate"]


def test_real_word_list_flags_misspellings() -> None:
    pytest.importorskip("spellchecker")
    from madrag.paper.baselines import english_lexicon

    lexicon = english_lexicon()
    clean = feats("I didn\u2019t complain because I was patient.", lexicon)
    typos = feats("I didnt complane becuase I was pashent.", lexicon)
    assert clean["oov"] == 0
    assert typos["oov"] == 4 and typos["oov_rate"] > clean["oov_rate"]


def test_connectives_are_counted_including_phrases() -> None:
    f = feats("However, I waited because it was late. In addition, I was patient. Then we went home.")
    assert f["conn_contrast"] == 1
    assert f["conn_cause"] == 1
    assert f["conn_addition"] == 1  # "in addition": a two-word phrase
    assert f["conn_sequence"] == 1
    assert feats("I was patient.")["conn_total_rate"] == 0


def test_placeholders_are_counted_and_not_misspellings() -> None:
    f = feats("@CAPS1 went to the @LOCATION2 with @PERSON1 and @CAPS3.", LEXICON | {"with"})
    assert f["placeholders"] == 4 and f["ph_caps"] == 2 and f["ph_location"] == 1 and f["ph_person"] == 1
    assert f["oov"] == 0
    assert f["words"] == 5  # went, to, the, with, and: placeholders are not words


def test_lexical_diversity_and_paragraphs() -> None:
    varied = "the quick brown fox jumps over lazy dogs while seven wizards quietly hex bold jumbled quartz".split()
    repeated = ["the", "cat"] * 30
    assert mtld(varied) > mtld(repeated)
    assert mattr(varied * 4) > mattr(repeated)
    assert len(paragraphs("First part. Still first.   Second part here.")) == 2
    assert len(paragraphs("One  sentence with a double space.")) == 1


def test_curly_and_straight_apostrophes_are_the_same_word() -> None:
    lexicon = frozenset({"i", "didn't", "wait"})
    assert feats("I didn\u2019t wait.", lexicon)["oov"] == feats("I didn't wait.", lexicon)["oov"] == 0


# ------------------------------------------------------------------ CV protocol and the RF scorer


def test_fold_indices_partition_without_overlap() -> None:
    folds = [2, 0, 1, 0, 2, 1, 1]
    splits = fold_indices(folds)
    assert [s.fold for s in splits] == [0, 1, 2]
    for split in splits:
        assert not set(split.train) & set(split.test)
        assert sorted([*split.train, *split.test]) == list(range(len(folds)))
        assert all(folds[i] == split.fold for i in split.test)
        assert all(folds[i] != split.fold for i in split.train)


class SpyEstimator:
    """Records the row ids (column 0 of X) it is fitted on and asked about; predicts an out-of-range 99."""

    def __init__(self, log: list[tuple[str, list[int]]]) -> None:
        self.log = log
        self.trained: list[int] = []

    def fit(self, x: NDArray[np.float64], y: NDArray[Any]) -> SpyEstimator:
        """Remember the training rows' ids."""
        self.trained = [int(v) for v in x[:, 0]]
        return self

    def predict(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """Log the rows trained on and asked about; predict 99 for each."""
        self.log.append(("fit", self.trained))
        self.log.append(("predict", [int(v) for v in x[:, 0]]))
        return np.full(len(x), 99.0)


def test_cv_never_trains_on_the_test_fold() -> None:
    essays = make_essays()
    ids = np.arange(len(essays), dtype=np.float64)[:, None]
    log: list[tuple[str, list[int]]] = []
    result = cross_validate_features(essays, RUBRIC, features=ids, estimator_factory=lambda: SpyEstimator(log))
    pairs = list(zip(log[::2], log[1::2], strict=True))
    assert len(pairs) == 5 * len(RUBRIC.traits)
    predicted: set[int] = set()
    for (_, trained), (_, asked) in pairs:
        test_folds = {essays[i].fold for i in asked}
        assert len(test_folds) == 1
        assert not {essays[i].fold for i in trained} & test_folds
        predicted.update(asked)
    assert predicted == set(range(len(essays)))
    for trait in RUBRIC.traits:  # 99 is clipped to the top of the scale
        assert set(result.traits[trait.name].predictions) == {trait.max}


def test_real_forest_predictions_are_in_range_and_learn_length() -> None:
    essays = make_essays(per_fold=8)
    x = feature_matrix([e.text for e in essays], lexicon=LEXICON)
    result = cross_validate_features(essays, RUBRIC, ForestSettings(n_estimators=20, n_jobs=1), features=x)
    for trait in RUBRIC.traits:
        cv = result.traits[trait.name]
        assert len(cv.predictions) == len(essays) and cv.missing == 0
        assert all(p is not None and trait.min <= p <= trait.max for p in cv.predictions)
        assert set(cv.fold_qwk) == {0, 1, 2, 3, 4}
    assert result.traits["Ideas"].pooled_qwk > 0.5  # the score is a function of the essay's length


# ------------------------------------------------------------------ retrieval-only scorer


def test_weighted_mean_clips_negative_weights_and_rounds_half_up() -> None:
    near = [exemplar("a", 0.9, Ideas=3), exemplar("b", 0.5, Ideas=1), exemplar("c", -0.3, Ideas=0)]
    assert weighted_score(near, IDEAS) == 2  # (0.9*3 + 0.5*1 + 0*0) / 1.4 = 2.29 -> 2
    assert weighted_score([exemplar("a", 0.5, Ideas=2), exemplar("b", 0.5, Ideas=3)], IDEAS) == 3  # 2.5 -> 3
    assert weighted_score([exemplar("a", 0.5, Ideas=0), exemplar("b", 0.5, Ideas=1)], IDEAS) == 1  # 0.5 -> 1
    assert weighted_score([exemplar("a", -0.2, Ideas=1), exemplar("b", 0.0, Ideas=2)], IDEAS) == 2  # plain mean
    assert weighted_score([exemplar("a", 0.7, Style=2)], IDEAS) is None


def test_scorer_never_uses_the_query_essay() -> None:
    bank = StubBank([exemplar("x", 0.8, Ideas=3, Style=2), exemplar("y", 0.4, Ideas=3, Style=1)])
    scorer = RetrievalScorer(bank, RUBRIC, k=3)
    query = Essay(id="q", text="query essay", rater_scores={"Ideas": [0.0]})
    assert [ex.essay_id for ex in scorer.neighbours(query)] == ["x", "y"]
    assert scorer.score(query) == {"Ideas": 3, "Style": 2}  # (0.8*2 + 0.4*1) / 1.2 = 1.67 -> 2
    assert bank.calls == [("q", 3), ("q", 3)]


def test_caching_embedder_embeds_each_text_once(tmp_path: Path) -> None:
    inner = BagOfWordsEmbedder()
    cache = CachingEmbedder(inner, tmp_path / "v.sqlite")
    first = cache.embed(["a b", "c d", "a b"])
    again = cache.embed(["c d", "e f"])
    assert inner.texts_embedded == 3 and cache.name == inner.name
    np.testing.assert_allclose(first[1], again[0])
    reloaded = CachingEmbedder(BagOfWordsEmbedder(), tmp_path / "v.sqlite")  # written as they were computed
    np.testing.assert_allclose(reloaded.embed(["e f"]), again[1:])
    assert reloaded.inner.texts_embedded == 0  # type: ignore[attr-defined]


@pytest.mark.integration
def test_retrieval_cv_with_real_banks_uses_other_folds_only(tmp_path: Path) -> None:
    essays = make_essays(per_fold=3)
    embedder = BagOfWordsEmbedder()
    pools: dict[int, set[str]] = {}

    def factory(pool: list[Essay], fold: int) -> SimilarBank:
        pools[fold] = {e.id for e in pool}
        return minilm_bank_factory(RUBRIC, cache, tmp_path / "banks")(pool, fold)

    cache = CachingEmbedder(embedder)
    result = cross_validate_retrieval(essays, RUBRIC, cache, tmp_path, k=3, bank_factory=factory)
    assert embedder.texts_embedded == len({e.text for e in essays})  # each essay embedded once for all folds
    for fold, pool in pools.items():
        assert pool == {e.id for e in essays if e.fold != fold}
    for trait in RUBRIC.traits:
        cv = result.traits[trait.name]
        assert cv.missing == 0 and all(trait.min <= (p or 0) <= trait.max for p in cv.predictions)
