"""LLM-free baselines stored in a run, scored like a protocol: ``madrag paper baseline``.

Two ways, both writing one record per (baseline, essay, trait) with role ``baseline`` and the score as the
record's parsed score, so that ``madrag eval`` and the report show the baselines as rows beside the LLM
protocols, on the same essays:

* :func:`score_run` - in an existing run made by ``madrag score``: trained on the run's exemplar pool (the
  folds it did not score) and scored on exactly the run's scored essays. The kNN scorer retrieves from the
  same pool with the run's embedder. With ``--fold all`` (every essay scored, every essay in the pool) the
  forest is trained on the pool without the scored essays and the kNN leaves the essay itself out, as the
  run's bank does.
* :func:`cross_validate_run` - on any data and rubric, a new run folder of out-of-fold predictions over the
  data's ``fold`` column (:func:`~madrag.paper.baselines.feature_scorer.cross_validate_features` and
  :func:`~madrag.paper.baselines.retrieval_scorer.cross_validate_retrieval`, as ``bench/baselines.py``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from madrag.data.essay import Essay
from madrag.data.loaders import load_essays
from madrag.data.splits import EACH, split_by_fold
from madrag.errors import InputError
from madrag.paper.baselines.feature_scorer import CVResult, FeatureScorer, ForestSettings, cross_validate_features
from madrag.paper.baselines.retrieval_scorer import RetrievalScorer, cross_validate_retrieval
from madrag.pipeline.final_scores import rows
from madrag.pipeline.job import fingerprint_file
from madrag.pipeline.migrations import open_store, stored_embedder
from madrag.protocols.scores import combine_judges
from madrag.records import BASELINE_ROLE, AgentRecord, ScoreResult, call_key
from madrag.retrieval import ExemplarBank, make_embedder
from madrag.retrieval.vectors import VECTORS_FILE, CachingEmbedder
from madrag.rubric import Rubric
from madrag.store import RunStore

FOREST_NAME = "FeatEng-RF"
"""The feature random forest's protocol name in a run (the MADRAG paper's Table 1 row it reproduces)."""

DEFAULT_K = 10
"""Neighbours of the kNN baseline by default."""


def knn_name(k: int) -> str:
    """The retrieval kNN's protocol name in a run, e.g. ``kNN-10``."""
    return f"kNN-{k}"


@dataclass
class BaselineRun:
    """What :func:`score_run` / :func:`cross_validate_run` stored: records new and already there, per baseline
    the predictions by (essay id, trait), and the settings each baseline was recorded with."""

    run_dir: Path
    mode: str
    written: int = 0
    existing: int = 0
    predictions: dict[str, dict[tuple[str, str], int | None]] = field(default_factory=dict)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)


def baseline_record(
    run_id: str, protocol: str, essay_id: str, trait: str, score: int | None, settings: dict[str, Any]
) -> AgentRecord:
    """One baseline score as a record: role ``baseline``, the score parsed and reported (None: no prediction)."""
    result = ScoreResult(parsed=score, reported=score, mode="baseline" if score is not None else "failed")
    return AgentRecord(
        run_id=run_id,
        key=call_key(protocol, essay_id, trait, BASELINE_ROLE),
        essay_id=essay_id,
        trait=trait,
        protocol=protocol,
        role=BASELINE_ROLE,
        provider="none",
        model=protocol,
        settings=settings,
        score=result,
        answers=0,
    )


def _store(store: RunStore, outcome: BaselineRun, run_id: str) -> None:
    """Write every prediction of ``outcome`` as a record (a record already stored is kept), in one transaction:
    a cross-validated set is some 12,000 records, one commit (and fsync) each would take a minute."""
    records = [
        baseline_record(run_id, protocol, essay_id, trait, score, outcome.settings[protocol])
        for protocol, predictions in outcome.predictions.items()
        for (essay_id, trait), score in predictions.items()
    ]
    written = store.put_many(records)
    outcome.written += written
    outcome.existing += len(records) - written
    # the run's final scores: each stored baseline record's (a record already stored is the one kept)
    config = store.get_meta("config")
    rubric = Rubric.model_validate(config["rubric"] if isinstance(config, dict) else None)
    kept = store.records(role=BASELINE_ROLE)
    store.put_scores(rows([combine_judges(r.protocol, rubric.trait(r.trait), [r]) for r in kept]))


def _open_run(run_dir: Path) -> tuple[RunStore, dict[str, Any]]:
    db = run_dir / "store.sqlite"
    if not db.is_file():
        raise InputError(f"no run at {run_dir} (missing store.sqlite)")
    store = open_store(db, lock=True)
    config = store.get_meta("config")
    if not isinstance(config, dict) or "rubric" not in config or "data" not in config:
        store.close()
        raise InputError(f"run at {run_dir} has no stored configuration (was it started by madrag score?)")
    return store, config


def _run_essays(config: dict[str, Any], rubric: Rubric, data: Path | None, fmt: str) -> list[Essay]:
    """The run's data file (or ``data``), checked against the fingerprint the run stored."""
    if data is None and not config.get("data"):
        raise InputError("the run's essays were given in memory, not as a file; give the data file with --data")
    if data is None and "pool" in config:
        raise InputError("the run's exemplar pool was given in memory; the baselines need it as the run's data file")
    path = data or Path(str(config["data"]))
    if not path.is_file():
        raise InputError(f"the run's data file {path} is missing; give it with --data")
    stored = config.get("data_sha256")
    if stored and fingerprint_file(path) != stored:
        raise InputError(f"{path} is not the data file the run was made with (its contents differ)")
    return load_essays(path, rubric, fmt, max_rows=None)  # the run's own data, held to the limit when it ran


def score_run(
    run_dir: Path,
    cache_dir: Path,
    *,
    data: Path | None = None,
    fmt: str = "auto",
    k: int = DEFAULT_K,
    forest: ForestSettings | None = None,
    retrieval: bool = True,
) -> BaselineRun:
    """Score a run's essays with both baselines, split as the run: trained on its pool, scored on its essays."""
    store, config = _open_run(run_dir)
    with closing(store):
        rubric = Rubric.model_validate(config["rubric"])
        scored = store.essays()
        if not scored:
            raise InputError(f"run at {run_dir} has no scored essays yet")
        essays, eval_fold = _run_essays(config, rubric, data, fmt), config.get("eval_fold")
        fold = "all" if eval_fold is None else eval_fold
        outcome = BaselineRun(run_dir, f"the run's split (eval fold {fold})")
        settings = forest or ForestSettings()
        # --fold each: every fold's essays from a model of the other folds, as the run's exemplars were
        folds = sorted({e.fold for e in scored if e.fold is not None}) if eval_fold == EACH else [eval_fold]
        for part_fold in folds:
            split = split_by_fold(essays, part_fold)
            part = [e for e in scored if e.fold == part_fold] if eval_fold == EACH else scored
            ids = {e.id for e in part}
            train = [e for e in split.pool if e.id not in ids] if split.eval_fold is None else split.pool
            rf = FeatureScorer(rubric, settings).fit(train)
            trained = outcome.settings.get(FOREST_NAME, {}).get("trained_on", [])
            outcome.settings[FOREST_NAME] = {
                **_forest_settings(settings),
                "trained_on": [*trained, len(train)] if eval_fold == EACH else len(train),
                "split": "run",
            }
            outcome.predictions.setdefault(FOREST_NAME, {}).update(_by_essay(part, rf.predict(part)))
            if retrieval:
                name, predictions, knn_settings = _knn_on_pool(split.pool, part, rubric, config, cache_dir, k)
                outcome.settings[name] = knn_settings
                outcome.predictions.setdefault(name, {}).update(predictions)
        _store(store, outcome, str(store.get_meta("run_id") or uuid.uuid4().hex[:12]))
        store.set_meta("baselines", outcome.settings)
        return outcome


def _forest_settings(settings: ForestSettings) -> dict[str, Any]:
    return {
        "baseline": "feature random forest",
        "model": settings.model,
        "n_estimators": settings.n_estimators,
        "features": settings.features,  # the paper's set (with the parsed features) or "light"
    }


def _knn_settings(k: int, embedder: str) -> dict[str, Any]:
    return {"baseline": "retrieval kNN, similarity-weighted mean", "k": k, "embedder": embedder}


def _by_essay(essays: list[Essay], predictions: dict[str, list[int]]) -> dict[tuple[str, str], int | None]:
    return {(e.id, trait): values[i] for trait, values in predictions.items() for i, e in enumerate(essays)}


def _knn_on_pool(
    pool: list[Essay], scored: list[Essay], rubric: Rubric, config: dict[str, Any], cache_dir: Path, k: int
) -> tuple[str, dict[tuple[str, str], int | None], dict[str, Any]]:
    """kNN predictions of the scored essays from the run's pool (the run's bank: same embedder, same folder)."""
    embedder = make_embedder(stored_embedder(config))  # a run made before minilm meant windows: windows
    caching = CachingEmbedder(embedder, cache_dir / VECTORS_FILE)
    vectors = caching.embed([e.text for e in scored])
    bank = ExemplarBank.build_or_load(pool, rubric, caching, cache_dir / "banks")
    scorer = RetrievalScorer(bank, rubric, k)
    predictions: dict[tuple[str, str], int | None] = {
        (essay.id, trait): value
        for essay, vector in zip(scored, vectors, strict=True)
        for trait, value in scorer.score(essay, query_vector=vector).items()
    }
    return knn_name(k), predictions, {**_knn_settings(k, caching.name), "pool": len(pool), "split": "run"}


def cv_cache_dir(cache_dir: Path, data: Path, rubric: Rubric) -> Path:
    """The folder of a data set's cross-validation fold banks and vectors under ``cache_dir`` (by the data
    file's contents and the rubric), shared by ``madrag paper baseline`` and ``bench/baselines.py``."""
    blob = fingerprint_file(data) + json.dumps(rubric.model_dump(mode="json"), sort_keys=True)
    return cache_dir / "baselines" / f"cv-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


@dataclass(frozen=True)
class CVOptions:
    """How :func:`cross_validate_run` builds the baselines: the kNN's ``k`` and ``embedder`` (``retrieval``
    False: the random forest only) and the forest's settings."""

    k: int = DEFAULT_K
    forest: ForestSettings = field(default_factory=ForestSettings)
    retrieval: bool = True
    embedder: str = "minilm"


def cross_validate_run(
    data: Path,
    rubric_path: Path,
    run_dir: Path,
    cache_dir: Path,
    *,
    fmt: str = "auto",
    options: CVOptions | None = None,
) -> tuple[BaselineRun, list[CVResult]]:
    """Cross-validate both baselines over the data's folds and store the out-of-fold predictions as a new run
    in ``run_dir`` (a run folder of baselines only, which ``madrag eval`` reads)."""
    from madrag.rubric import load_rubric

    opts = options or CVOptions()
    rubric = load_rubric(rubric_path)
    essays = load_essays(data, rubric, fmt)
    results = [cross_validate_features(essays, rubric, opts.forest)]
    names = [FOREST_NAME]
    outcome = BaselineRun(run_dir, "cross-validated over folds")
    outcome.settings[FOREST_NAME] = {**_forest_settings(opts.forest), "split": "cross-validated"}
    if opts.retrieval:
        vectors = make_embedder(opts.embedder)
        results.append(cross_validate_retrieval(essays, rubric, vectors, cv_cache_dir(cache_dir, data, rubric), opts.k))
        names.append(knn_name(opts.k))
        knn = _knn_settings(opts.k, results[1].notes["embedder"])
        outcome.settings[knn_name(opts.k)] = {**knn, "split": "cross-validated"}
    for name, result in zip(names, results, strict=True):
        outcome.predictions[name] = {
            (essay_id, cv.trait): pred
            for cv in result.traits.values()
            for essay_id, pred in zip(cv.essay_ids, cv.predictions, strict=True)
        }
    _store_cv_run(run_dir, _cv_config(data, rubric, names, outcome), essays, outcome)
    return outcome, results


def _cv_config(data: Path, rubric: Rubric, names: list[str], outcome: BaselineRun) -> dict[str, Any]:
    """The stored configuration of a cross-validated baselines run."""
    return {
        "data": str(data.resolve()),
        "data_sha256": fingerprint_file(data),
        "rubric": rubric.model_dump(mode="json"),
        "eval_fold": None,
        "protocols": [{"name": n, **outcome.settings[n]} for n in names],
        "baselines": "cross-validated over the data's folds",
    }


def _store_cv_run(run_dir: Path, config: dict[str, Any], essays: list[Essay], outcome: BaselineRun) -> None:
    """Bind the run's configuration, store its essays and the baselines' records."""
    with closing(open_store(run_dir / "store.sqlite", lock=True)) as store:
        store.bind_config(config)
        run_id = store.get_meta("run_id") or uuid.uuid4().hex[:12]
        store.set_meta("run_id", run_id)
        store.add_essays(essays)
        _store(store, outcome, str(run_id))
        store.set_meta("baselines", outcome.settings)
