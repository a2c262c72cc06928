"""FeatEng-RF-style supervised baseline and the 5-fold cross-validation protocol shared by both baselines.

The MADRAG paper (Table 1, Appendix C) compares MADRAG with FeatEng-RF (Mathias and Bhattacharyya 2020): a Random
Forest per trait over hand-crafted features, evaluated with five-fold cross-validation. Here:

* features: :mod:`madrag.paper.baselines.features`, computed once per essay and reused by every fold and trait;
* model: one :class:`~sklearn.ensemble.RandomForestRegressor` per trait, trained on the reference labels
  (raters' mean rounded half up, the MADRAG paper's B.5); predictions are rounded half up and clipped to the trait's
  range. A regressor, not a classifier, because trait scores are ordinal and QWK charges squared distance:
  averaging the trees keeps the order of the scale and moves a borderline essay to the neighbouring score,
  where a classifier treats 0..3 as unrelated classes and predicts the majority class's mode. ``model=
  "classifier"`` is available for comparison;
* protocol: the ASAP ``fold`` column (0-4). For each fold, train on the other four and predict it; QWK is
  reported on the pooled out-of-fold predictions and as the mean of the five per-fold QWKs, each over the
  trait's full scale (:func:`madrag.metrics.qwk`). No hyper-parameter search is run on the evaluation folds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from madrag.data.essay import Essay
from madrag.errors import InputError
from madrag.metrics import qwk, round_half_up_clamped
from madrag.paper.baselines.features import PAPER_FEATURE_SET, FeatureSet, feature_matrix
from madrag.rubric import Rubric, Trait

IntArray = NDArray[np.int64]
FloatMatrix = NDArray[np.float64]


class Estimator(Protocol):
    """The slice of the scikit-learn estimator API the baseline uses."""

    def fit(self, x: FloatMatrix, y: NDArray[Any]) -> Any:
        """Learn from feature rows ``x`` and their labels ``y``."""
        ...

    def predict(self, x: FloatMatrix) -> NDArray[Any]:
        """One (continuous or integer) prediction per row of ``x``."""
        ...


@dataclass(frozen=True)
class Fold:
    """One cross-validation split: row indices of the essays trained on and of the essays predicted."""

    fold: int
    train: IntArray
    test: IntArray


def fold_indices(folds: Sequence[int | None]) -> list[Fold]:
    """One :class:`Fold` per distinct fold value, in order: test = rows of that fold, train = every other row."""
    if any(f is None for f in folds):
        raise InputError("cross-validation needs a fold for every essay (the ASAP 'fold' column)")
    values = np.asarray(folds, dtype=np.int64)
    distinct = sorted(set(values.tolist()))
    if len(distinct) < 2:
        raise InputError(f"cross-validation needs at least two folds, got {distinct}")
    return [Fold(f, np.flatnonzero(values != f), np.flatnonzero(values == f)) for f in distinct]


def to_scale(value: float, trait: Trait) -> int:
    """A continuous prediction as a valid score: rounded half up, clipped to ``[trait.min, trait.max]``."""
    return round_half_up_clamped(value, trait.min, trait.max)


@dataclass
class TraitCV:
    """Out-of-fold results of one trait: predictions and references by essay, QWK pooled and per fold."""

    trait: str
    essay_ids: list[str]
    folds: list[int]
    references: list[int]
    predictions: list[int | None]
    pooled_qwk: float
    fold_qwk: dict[int, float] = field(default_factory=dict)

    @property
    def missing(self) -> int:
        """Essays without a prediction (excluded from QWK, never imputed)."""
        return sum(1 for p in self.predictions if p is None)


@dataclass
class CVResult:
    """Cross-validation results of one baseline on one data set, per trait (rubric order)."""

    method: str
    traits: dict[str, TraitCV]
    seconds: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)


def _qwk_of(refs: Sequence[int], preds: Sequence[int | None], trait: Trait) -> float:
    pairs = [(r, p) for r, p in zip(refs, preds, strict=True) if p is not None]
    if not pairs:
        return math.nan
    a, b = zip(*pairs, strict=True)
    return qwk(list(a), list(b), trait.min, trait.max)


def evaluate_trait(
    trait: Trait, essays: Sequence[Essay], predictions: Sequence[int | None], folds: Sequence[Fold]
) -> TraitCV:
    """QWK of out-of-fold ``predictions`` (row-aligned with ``essays``) against the reference labels.

    Essays without a reference for the trait are left out (their prediction too).
    """
    rows = [i for i, e in enumerate(essays) if e.reference(trait) is not None]
    refs = {i: int(essays[i].reference(trait) or 0) for i in rows}
    fold_of = {int(i): f.fold for f in folds for i in f.test}
    fold_qwk = {}
    for f in folds:
        test = [int(i) for i in f.test if int(i) in refs]
        fold_qwk[f.fold] = _qwk_of([refs[i] for i in test], [predictions[i] for i in test], trait)
    return TraitCV(
        trait=trait.name,
        essay_ids=[essays[i].id for i in rows],
        folds=[fold_of[i] for i in rows],
        references=[refs[i] for i in rows],
        predictions=[predictions[i] for i in rows],
        pooled_qwk=_qwk_of([refs[i] for i in rows], [predictions[i] for i in rows], trait),
        fold_qwk=fold_qwk,
    )


@dataclass(frozen=True)
class ForestSettings:
    """Random Forest settings: common defaults (1/3 of the features per split, the usual choice for regression
    forests; 200 trees to keep a full run on 2 cores short), not searched on the evaluation folds."""

    model: Literal["regressor", "classifier"] = "regressor"
    n_estimators: int = 200
    features: FeatureSet = PAPER_FEATURE_SET  # the MADRAG paper's (with the parsed ones); "light": parser-free
    max_features: float = 1 / 3
    min_samples_leaf: int = 1
    random_state: int = 0
    n_jobs: int = 2


def make_forest(settings: ForestSettings) -> Estimator:
    """A fresh scikit-learn Random Forest for ``settings``."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    forests = {"classifier": RandomForestClassifier, "regressor": RandomForestRegressor}
    if settings.model not in forests:
        raise InputError(f"unknown model {settings.model!r}; use 'regressor' or 'classifier'")
    common = {k: v for k, v in asdict(settings).items() if k not in ("model", "features")}
    forest: Estimator = forests[settings.model](**common)
    return forest


class FeatureScorer:
    """Per-trait Random Forests over :mod:`~madrag.paper.baselines.features`: ``fit`` on scored essays, ``predict``.

    ``estimator_factory`` builds one fresh estimator per trait (default: :func:`make_forest`).
    """

    def __init__(
        self,
        rubric: Rubric,
        settings: ForestSettings | None = None,
        estimator_factory: Callable[[], Estimator] | None = None,
    ) -> None:
        self.rubric = rubric
        self.settings = settings or ForestSettings()
        self._factory = estimator_factory or (lambda: make_forest(self.settings))
        self.models: dict[str, Estimator] = {}

    def features(self, essays: Sequence[Essay]) -> FloatMatrix:
        """The essays' feature rows (:func:`~madrag.paper.baselines.features.feature_matrix`, with the
        rubric's prompt)."""
        return feature_matrix([e.text for e in essays], prompt=self.rubric.prompt, feature_set=self.settings.features)

    def fit_matrix(self, x: FloatMatrix, essays: Sequence[Essay]) -> FeatureScorer:
        """Fit one model per trait on feature rows ``x`` (row i = ``essays[i]``) and their reference labels."""
        for trait in self.rubric.traits:
            rows = [i for i, e in enumerate(essays) if e.reference(trait) is not None]
            if not rows:
                raise InputError(f"no training essay has a reference score for {trait.name!r}")
            y = np.array([essays[i].reference(trait) for i in rows], dtype=np.int64)
            model = self._factory()
            model.fit(x[rows], y)
            self.models[trait.name] = model
        return self

    def predict_matrix(self, x: FloatMatrix) -> dict[str, list[int]]:
        """Scores by trait for feature rows ``x``: rounded half up and clipped to each trait's range."""
        if not self.models:
            raise InputError("FeatureScorer.predict before fit")
        out: dict[str, list[int]] = {}
        for trait in self.rubric.traits:
            raw = np.asarray(self.models[trait.name].predict(x), dtype=np.float64) if len(x) else np.zeros(0)
            out[trait.name] = [to_scale(float(v), trait) for v in raw]
        return out

    def fit(self, essays: Sequence[Essay]) -> FeatureScorer:
        """Compute the essays' features and fit one model per trait on them (:meth:`fit_matrix`)."""
        return self.fit_matrix(self.features(essays), essays)

    def predict(self, essays: Sequence[Essay]) -> dict[str, list[int]]:
        """Scores by trait for ``essays`` (:meth:`predict_matrix` of their features)."""
        return self.predict_matrix(self.features(essays))


def cross_validate_features(
    essays: Sequence[Essay],
    rubric: Rubric,
    settings: ForestSettings | None = None,
    *,
    features: FloatMatrix | None = None,
    estimator_factory: Callable[[], Estimator] | None = None,
) -> CVResult:
    """5-fold CV of :class:`FeatureScorer` on the essays' ``fold`` column (train on 4 folds, predict the 5th).

    ``features`` (row i = ``essays[i]``) skips feature extraction, e.g. to reuse a matrix across settings.
    """
    start = time.perf_counter()
    folds = fold_indices([e.fold for e in essays])
    chosen = settings or ForestSettings()
    texts = [e.text for e in essays]
    x = features if features is not None else feature_matrix(texts, prompt=rubric.prompt, feature_set=chosen.features)
    if x.shape[0] != len(essays):
        raise InputError(f"feature matrix has {x.shape[0]} rows for {len(essays)} essays")
    preds: dict[str, list[int | None]] = {t.name: [None] * len(essays) for t in rubric.traits}
    for fold in folds:
        scorer = FeatureScorer(rubric, chosen, estimator_factory)
        scorer.fit_matrix(x[fold.train], [essays[i] for i in fold.train])
        for name, values in scorer.predict_matrix(x[fold.test]).items():
            for row, value in zip(fold.test, values, strict=True):
                preds[name][int(row)] = value
    traits = {t.name: evaluate_trait(t, essays, preds[t.name], folds) for t in rubric.traits}
    notes = {"model": chosen.model, "n_estimators": chosen.n_estimators, "features": chosen.features}
    notes["n_features"] = int(x.shape[1])
    return CVResult("FeatEng-RF (ours)", traits, time.perf_counter() - start, notes)
