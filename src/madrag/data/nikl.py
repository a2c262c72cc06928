"""The NIKL Grading Writing Data 2024 (the consensus paper's Korean essay task, Appendix B.1) as essays.

The consensus paper describes the corpus as "structured JSON documents in which each essay is recorded at the paragraph
level, accompanied by rubric-based holistic scores assigned independently by two trained human annotators";
content is scored out of 25, organization and expression out of 10. The data is not on these machines and the
seed gives no field names, so madrag reads this layout (one JSON object per essay, in one file: a ``.jsonl`` of
them, or a ``.json`` holding one object or a list; a run fingerprints one data file, so a folder of documents is
first joined with ``jq -c . DIR/*.json > nikl.jsonl``)::

    {"id": "essay-0001", "prompt_id": "Q4", "prompt": "<the question, optional>",
     "paragraphs": ["<paragraph 1>", {"form": "<paragraph 2>"}],
     "evaluators": [{"content": 18, "organization": 7, "expression": 8},
                    {"content": 20, "organization": 8, "expression": 7}]}

Each raw score becomes ``raw / max * 5`` (B.1); each evaluator's normalised score is one rater's, so the
human reference (the raters' mean) is the seed's gold. Paragraphs are joined with blank lines. The seed's
sample (100 essays per prompt, seed 42, Python's ``random.sample``) is :func:`sample_nikl`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from madrag.data.essay import Essay
from madrag.data.essay import essay_id as checked_id
from madrag.data.reading import check_unique, jsonl_rows, read_text
from madrag.errors import InputError
from madrag.rubric import Rubric

NIKL_RAW_MAX = {"content": 25.0, "organization": 10.0, "expression": 10.0}
"""The consensus paper's B.1: each criterion's maximum raw score (the corpus' scale); a rubric trait's ``column`` (else
name, case-insensitive) picks its criterion."""

NIKL_SAMPLE_SIZE = 100
NIKL_SAMPLE_SEED = 42
NIKL_SAMPLE_RULE = (
    "per prompt id in sorted order, random.sample(sorted ids of that prompt, 100) from one random.Random(42)"
)
"""How :func:`sample_nikl` draws (madrag's reading of B.1's 'seed=42, using Python's random.sample'; the seed
publishes no code), recorded in each sampled essay's metadata."""


def _documents(p: Path) -> list[tuple[str, dict[str, Any]]]:
    """(where, object) for each essay document at ``p``."""
    if p.is_dir():
        raise InputError(
            f"{p}: a folder; give one file: a .jsonl of the NIKL documents (jq -c . {p}/*.json > nikl.jsonl)"
        )
    if p.suffix.lower() in {".jsonl", ".ndjson"}:
        return jsonl_rows(read_text(p, ("utf-8", "utf-8-sig")), p)
    try:
        obj = json.loads(read_text(p, ("utf-8", "utf-8-sig")))
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}: not valid JSON: {exc.msg}") from exc
    except RecursionError:
        raise InputError(f"{p}: JSON nested too deeply to be a NIKL document") from None
    items = obj if isinstance(obj, list) else [obj]
    if not all(isinstance(item, dict) for item in items):
        raise InputError(f"{p}: each NIKL document must be a JSON object")
    return [(f"{p}[{i}]" if isinstance(obj, list) else str(p), item) for i, item in enumerate(items)]


def _paragraph_text(raw: dict[str, Any], where: str) -> str:
    """The essay body: its paragraphs' form fields joined with double newlines (B.1)."""
    paragraphs = raw.get("paragraphs")
    if not isinstance(paragraphs, list) or not paragraphs:
        raise InputError(f"{where}: 'paragraphs' must be a non-empty list of strings or {{'form': ...}} objects")
    parts = []
    for para in paragraphs:
        form = para.get("form") if isinstance(para, dict) else para
        if not isinstance(form, str):
            raise InputError(f"{where}: a paragraph is neither a string nor an object with a 'form' string")
        if form.strip():
            parts.append(form.strip())
    if not parts:
        raise InputError(f"{where}: the essay's paragraphs are all empty")
    return "\n\n".join(parts)


def _normalised(raw: dict[str, Any], rubric: Rubric, where: str) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    """Each trait's per-evaluator ``raw / max * 5`` scores; an evaluator's missing score stays missing."""
    evaluators = raw.get("evaluators")
    if not isinstance(evaluators, list) or not all(isinstance(e, dict) for e in evaluators) or not evaluators:
        raise InputError(f"{where}: 'evaluators' must be a non-empty list of objects, one per human evaluator")
    scores: dict[str, list[float]] = {}
    ids: dict[str, list[int]] = {}
    for trait in rubric.traits:
        key = (trait.column or trait.name).casefold()
        if key not in NIKL_RAW_MAX:
            raise InputError(f"rubric trait {trait.name!r}: no NIKL criterion {key!r} (use {', '.join(NIKL_RAW_MAX)})")
        top = NIKL_RAW_MAX[key]
        for idx, evaluator in enumerate(evaluators):
            value = {k.casefold(): v for k, v in evaluator.items()}.get(key)
            if value is None or value == "":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise InputError(f"{where}: evaluator {idx + 1} {key}: {value!r} is not a number")
            try:
                number = float(value)
            except ValueError as exc:
                raise InputError(f"{where}: evaluator {idx + 1} {key}: {value!r} is not a number") from exc
            if not 0 <= number <= top:
                raise InputError(f"{where}: evaluator {idx + 1} {key}: raw score {number:g} outside [0, {top:g}]")
            scores.setdefault(trait.name, []).append(number / top * 5)
            ids.setdefault(trait.name, []).append(idx)
    return scores, ids


def _essay(raw: dict[str, Any], rubric: Rubric, where: str) -> Essay:
    essay_id = checked_id(raw.get("id"), where)
    prompt_id = str(raw.get("prompt_id") or "").strip()
    if not prompt_id:
        raise InputError(f"{where}: essay {essay_id!r} has no 'prompt_id' (the question, e.g. Q4)")
    scores, ids = _normalised(raw, rubric, where)
    prompt = str(raw.get("prompt") or "").strip() or rubric.prompt
    return Essay(
        id=essay_id,
        text=_paragraph_text(raw, where),
        prompt=prompt,
        rater_scores=scores,
        rater_ids=ids,
        metadata={"prompt_id": prompt_id, "nikl_normalisation": "raw / max * 5"},
    )


def load_nikl(path: str | Path, rubric: Rubric) -> list[Essay]:
    """Every essay at ``path`` (the NIKL layout above), scores normalised to 5 points; ids must be unique."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or folder")
    essays = [_essay(raw, rubric, where) for where, raw in _documents(p)]
    if not essays:
        raise InputError(f"{p}: no essays")
    check_unique(essays, p)
    return essays


def sample_nikl(essays: list[Essay], size: int = NIKL_SAMPLE_SIZE, seed: int = NIKL_SAMPLE_SEED) -> list[Essay]:
    """The consensus paper's B.1's sample: ``size`` essays per prompt without replacement (:data:`NIKL_SAMPLE_RULE`), in
    sorted prompt order, each prompt's in drawn order; each essay's metadata records the rule. A prompt with
    fewer than ``size`` essays is an error (use ``--format nikl-all`` to score every essay)."""
    by_prompt: dict[str, list[Essay]] = {}
    for essay in essays:
        by_prompt.setdefault(str(essay.metadata["prompt_id"]), []).append(essay)
    rng = random.Random(seed)
    rule = NIKL_SAMPLE_RULE.replace("100", str(size)).replace("(42)", f"({seed})")
    drawn: list[Essay] = []
    for prompt_id in sorted(by_prompt):
        group = sorted(by_prompt[prompt_id], key=lambda e: e.id)
        if len(group) < size:
            raise InputError(
                f"NIKL prompt {prompt_id!r} has {len(group)} essays, fewer than the sample's {size} "
                "(use --format nikl-all for every essay)"
            )
        for essay in rng.sample(group, size):
            drawn.append(essay.model_copy(update={"metadata": {**essay.metadata, "sample": rule}}))
    return drawn
