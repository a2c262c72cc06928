"""SummEval (the consensus paper's summarization task) as essays: each system summary is an essay whose ``source``
is its
news article, scored on coherence, consistency, fluency and relevance (``docs/rubrics/rubric_summeval.json``).

:func:`load_summeval` reads both layouts the data comes in (SummEval's paired annotations, and the
``mteb/summeval`` copy the consensus paper sampled); :func:`madrag.data.loaders.load_essays` calls it for
``--format summeval`` and for a JSONL file :func:`looks_like_summeval` recognises. Problems are one-line
:class:`InputError` s, as for every loader.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from madrag.data.essay import Essay
from madrag.data.essay import essay_id as checked_id
from madrag.data.reading import check_range, check_unique, jsonl_rows, parse_score, read_text
from madrag.errors import InputError
from madrag.rubric import Rubric, Trait

SUMMEVAL_FIELDS = ("id", "text", "decoded", "expert_annotations")
"""The fields of a row of SummEval's ``model_annotations.aligned.paired.jsonl`` that madrag reads."""

MTEB_SUMMEVAL_FIELDS = ("id", "text", "machine_summaries")
"""The fields (besides one list of scores per criterion) of a row of the ``mteb/summeval`` layout."""


def _annotation_key(trait: Trait) -> str:
    """The SummEval field of a rubric trait: its ``column``, else its name (compared case-insensitively)."""
    return (trait.column or trait.name).casefold()


def _expert_scores(
    raw: dict[str, Any], rubric: Rubric, where: str
) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    """Each rubric trait's expert scores (one per annotator, in order) from ``expert_annotations``."""
    annotations = raw["expert_annotations"]
    if not isinstance(annotations, list) or not all(isinstance(a, dict) for a in annotations):
        raise InputError(f"{where}: 'expert_annotations' must be a list of objects, one per annotator")
    scores: dict[str, list[float]] = {}
    ids: dict[str, list[int]] = {}
    for trait in rubric.traits:
        key = _annotation_key(trait)
        for rater_idx, annotation in enumerate(annotations):
            found = {k.casefold(): v for k, v in annotation.items()}
            if key not in found:
                raise InputError(f"{where}: annotator {rater_idx + 1} gives no {key!r} (rubric trait {trait.name!r})")
            value = parse_score(str(found[key]) if found[key] is not None else "", f"{where} {key}")
            if value is not None:
                scores.setdefault(trait.name, []).append(value)
                ids.setdefault(trait.name, []).append(rater_idx)
    return scores, ids


def _summary(
    raw: dict[str, Any],
    summary: Any,
    essay_id: str,
    scores: tuple[dict[str, list[float]], dict[str, list[int]]],
    metadata: dict[str, Any],
    rubric: Rubric,
    where: str,
) -> Essay:
    """One summary as an essay: its text, the row's article as ``source``, its (scores, rater ids) and
    ``metadata`` besides the article's id."""
    essay_id = checked_id(essay_id, where)
    text, article = str(summary or "").strip(), str(raw["text"] or "").strip()
    if not text or not article:
        raise InputError(f"{where}: {essay_id!r} has an empty {'summary' if not text else 'source text'}")
    fold = raw.get("fold")
    essay = Essay(
        id=essay_id,
        text=text,
        source=article,
        prompt=rubric.prompt,
        fold=int(fold) if fold not in (None, "") else None,
        rater_scores=scores[0],
        rater_ids=scores[1],
        metadata={"article_id": str(raw["id"]), **metadata},
    )
    check_range(essay, rubric, where)
    return essay


def _paired_summary(raw: dict[str, Any], rubric: Rubric, where: str) -> Essay:
    """A row of the paired layout: one summary, each expert's scores as one rater's."""
    missing = [f for f in SUMMEVAL_FIELDS if f not in raw]
    if missing:
        raise InputError(f"{where}: missing SummEval field(s) {missing}")
    model_id = str(raw.get("model_id") or "").strip()
    essay_id = f"{raw['id']}_{model_id}" if model_id else str(raw["id"])
    metadata = {"model_id": model_id} if model_id else {}
    return _summary(raw, raw["decoded"], essay_id, _expert_scores(raw, rubric, where), metadata, rubric, where)


def _mteb_summaries(raw: dict[str, Any], rubric: Rubric, where: str) -> list[Essay]:
    """A row of the ``mteb/summeval`` layout: an article's ``machine_summaries`` and, per criterion, a list of
    each summary's score (already the experts' average: one rater)."""
    missing = [f for f in MTEB_SUMMEVAL_FIELDS if f not in raw]
    if missing:
        raise InputError(f"{where}: missing SummEval field(s) {missing}")
    summaries = raw["machine_summaries"]
    found = {k.casefold(): v for k, v in raw.items()}
    columns: dict[str, list[Any]] = {}
    for trait in rubric.traits:
        values = found.get(_annotation_key(trait))
        if not isinstance(summaries, list) or not isinstance(values, list) or len(values) != len(summaries):
            raise InputError(f"{where}: {_annotation_key(trait)!r} must list one score per machine summary")
        columns[trait.name] = values
    essays = []
    for i, summary in enumerate(summaries):
        scores: dict[str, list[float]] = {}
        for name, values in columns.items():
            value = parse_score(str(values[i]) if values[i] is not None else "", f"{where} {name}")
            if value is not None:
                scores[name] = [value]
        one_rater = (scores, {name: [0] for name in scores})
        essays.append(_summary(raw, summary, f"{raw['id']}_{i}", one_rater, {"summary_index": i}, rubric, where))
    return essays


def load_summeval(path: str | Path, rubric: Rubric) -> list[Essay]:
    """Load SummEval summaries from a JSONL file in either of its two layouts; each summary is an essay whose
    text is the summary and whose ``source`` is its article.

    * ``model_annotations.aligned.paired.jsonl`` (SummEval's repository): one row per (article, system
      summary) with ``id`` (the article), ``text`` (the article), ``decoded`` (the summary), ``model_id`` and
      ``expert_annotations`` (one object per expert: ``coherence``, ``consistency``, ``fluency``,
      ``relevance``; other fields are ignored). The essay id is ``<id>_<model_id>``; every expert's score is
      one rater's, so the human reference (the raters' mean) is the experts' average, as the consensus paper uses it.
    * ``mteb/summeval`` (the HuggingFace copy the consensus paper sampled, written as JSONL): one row per article with
      ``id``, ``text``, ``machine_summaries`` and per criterion the list of each summary's experts' average.
      The essay id is ``<id>_<index>``.

    A rubric trait is matched to a criterion by its ``column``, else by its name (case-insensitive).
    """
    p = Path(path)
    essays: list[Essay] = []
    for where, raw in jsonl_rows(read_text(p, ("utf-8",)), p):
        if "machine_summaries" in raw:
            essays += _mteb_summaries(raw, rubric, where)
        else:
            essays.append(_paired_summary(raw, rubric, where))
    if not essays:
        raise InputError(f"{p}: no summaries")
    check_unique(essays, p)
    return essays


def looks_like_summeval(path: Path) -> bool:
    """Whether the first row of a JSONL file is SummEval's: ``decoded`` and ``expert_annotations`` (paired
    layout) or ``machine_summaries`` (``mteb/summeval``)."""
    try:
        with path.open(encoding="utf-8") as fh:
            first = next((line for line in fh if line.strip()), "")
        row = json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False  # the table loader says what is wrong with the file
    if not isinstance(row, dict):
        return False
    return ("decoded" in row and "expert_annotations" in row) or "machine_summaries" in row


SUMMEVAL_SAMPLE_ARTICLES = 100
SUMMEVAL_SAMPLE_SEED = 42
SUMMEVAL_SAMPLE_RULE = (
    "articles in file order, numpy.random.default_rng(42).permutation(n)[:100] "
    "(HuggingFace datasets' shuffle(seed=42).select(range(100)))"
)
"""How :func:`sample_summeval` draws (the consensus paper's B.2: 'seed=42, using HuggingFace's shuffle().select()'; the
``datasets`` library shuffles a table by ``np.random.default_rng(seed).permutation(len)``), recorded in each
sampled summary's metadata."""


def _system(essay: Essay) -> str:
    """A summary's system: its ``model_id`` (paired layout), else its index among the article's summaries."""
    return str(essay.metadata.get("model_id", essay.metadata.get("summary_index", "")))


def sample_summeval(
    essays: list[Essay],
    articles: int = SUMMEVAL_SAMPLE_ARTICLES,
    seed: int = SUMMEVAL_SAMPLE_SEED,
    systems: list[str] | None = None,
) -> list[Essay]:
    """The consensus paper's B.2's sample: ``articles`` news articles (:data:`SUMMEVAL_SAMPLE_RULE`), each expanded
    across
    its summaries (only ``systems``' when given: model ids, or summary indices in the ``mteb/summeval``
    layout), in drawn article order. Fewer articles than ``articles``, or a named system absent from a drawn
    article, is an error."""
    by_article: dict[str, list[Essay]] = {}
    for essay in essays:
        by_article.setdefault(str(essay.metadata["article_id"]), []).append(essay)
    order = list(by_article)
    if len(order) < articles:
        raise InputError(f"SummEval sample: {len(order)} articles, fewer than the {articles} to draw")
    picked = np.random.default_rng(seed).permutation(len(order))[:articles]
    rule = SUMMEVAL_SAMPLE_RULE.replace("(42)", f"({seed})").replace("100", str(articles))
    if systems:
        rule += f"; systems {', '.join(systems)}"
    drawn: list[Essay] = []
    for index in picked:
        group = by_article[order[int(index)]]
        if systems:
            have = {_system(e): e for e in group}
            absent = [s for s in systems if s not in have]
            if absent:
                raise InputError(f"SummEval sample: article {order[int(index)]!r} has no summary of {absent}")
            group = [have[s] for s in systems]
        drawn += [e.model_copy(update={"metadata": {**e.metadata, "sample": rule}}) for e in group]
    return drawn
