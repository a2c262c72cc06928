"""``MTS[template=FILE]``: MTS with the authors' own traits and prompts (Lee et al. 2024, "Unleashing Large
Language Models' Proficiency in Zero-shot Essay Scoring"), read at run time from the user's copy of their template
file (``ASAP/resource/template_mts.xlsx`` in their repository sanwooo/mts-llm-aes; madrag ships no copy).

The file (its first sheet, a header row, one row per prompt) has the columns :data:`COLUMNS`: ``prompt_id``; the
templates of the system message (``@trait``, ``@description``), the quotes turn (``@prompt``, ``@essay``,
``@trait``) and the score turn (``@trait``, ``@rubric``); the essay ``prompt`` (the authors leave it empty for the
user to fill in: madrag then uses the essay's prompt, and records which); four trait names, descriptions and
rubrics. For each essay, the row of its ``essay_set`` (else the rubric's) gives four conversations, one per trait
(role ``mts``, ``index`` the trait's number less one): the system message, the quotes turn, the answer, the
score turn; sampled as the authors sample (:mod:`madrag.protocols.mts_authors`), the essay cleaned as they clean
it, the score read as they read it (decimals kept).

The essay's score is theirs: the mean of its four trait scores (missing when one is), clipped to the IQR fences
and min-max scaled to the holistic score's range, rounded half to even. The rubric of such a run has one trait,
the holistic score (ASAP's, for their comparison: docs/protocols.md). The min-max group (``group=sample``, the
default) is the authors' own test sample (:func:`madrag.protocols.mts_authors.authors_sample`: their
``preprocess.py`` draw, ``random_state=41``, over ASAP's eight prompts in order, so the very essays they scored),
those of it the run scored; its fences and extremes scale every essay of the prompt, those outside the sample
clamped to the range. The evaluation's QWK of such a run is on the sample's essays, as theirs is
(``MTSTemplateProtocol.needs.population``), with every essay's beside it. ``group=run``: every scored essay of
the prompt is the group and the population.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from madrag.agents.calls import AgentCall, CallContext, debater
from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.extras import require
from madrag.protocols.base import Population, ProtocolNeeds, RecordReader, ScoringProtocol, TraitScore
from madrag.protocols.concurrency import gather_settled
from madrag.protocols.mts_authors import (
    MinMax,
    authors_sample,
    clean_essay,
    final_score,
    fit_minmax,
    id_order,
    sampling,
    score_turn,
    stored_score,
)
from madrag.providers.base import Message
from madrag.records import AgentRecord
from madrag.rubric import Rubric, Trait

TRAITS = 4
"""Traits per prompt in the authors' file."""
COLUMNS = (
    "prompt_id",
    "msg_system_template",
    "msg_user_retrieval_template",
    "msg_user_score_template",
    "prompt",
    *(f"{kind}_{i}" for kind in ("trait", "description", "rubric") for i in range(1, TRAITS + 1)),
)
"""The template file's columns (its header row; others are ignored)."""
GROUPS = ("sample", "run")
_PLACEHOLDER = re.compile(r"@(trait|description|prompt|essay|rubric)")


@dataclass(frozen=True)
class AuthorTrait:
    """One of a prompt's four traits: its name, description and 0-10 rubric."""

    name: str
    description: str
    rubric: str


@dataclass(frozen=True)
class PromptRow:
    """One prompt's row of the template file."""

    prompt_id: int
    system: str
    retrieval: str
    score: str
    prompt: str
    traits: tuple[AuthorTrait, ...]


@dataclass(frozen=True)
class Template:
    """The template file read: its rows by prompt id and the SHA-256 of its bytes."""

    rows: Mapping[int, PromptRow]
    sha256: str


def fill(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each of its ``@name`` placeholders named in ``values`` replaced, in one pass (a value is
    never searched for placeholders: an essay quoting ``@trait`` stays as written)."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _row(cells: dict[str, Any], where: str) -> PromptRow:
    raw_id = cells["prompt_id"]
    try:
        prompt_id = int(raw_id)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: prompt_id {raw_id!r} is not an integer") from exc
    traits = tuple(
        AuthorTrait(_cell(cells[f"trait_{i}"]), _cell(cells[f"description_{i}"]), _cell(cells[f"rubric_{i}"]))
        for i in range(1, TRAITS + 1)
    )
    if any(not t.name.strip() for t in traits):
        raise ConfigError(f"{where}: prompt {prompt_id} lacks a trait name (trait_1..trait_{TRAITS})")
    return PromptRow(
        prompt_id=prompt_id,
        system=_cell(cells["msg_system_template"]),
        retrieval=_cell(cells["msg_user_retrieval_template"]),
        score=_cell(cells["msg_user_score_template"]),
        prompt=_cell(cells["prompt"]),
        traits=traits,
    )


@cache
def read_template(path: str) -> Template:
    """The authors' template file at ``path`` (read once per process); ConfigError naming what is wrong (openpyxl,
    the ``documents`` extra's, not installed: :class:`madrag.extras.MissingExtra` naming it)."""
    load_workbook = require("documents", "openpyxl").load_workbook
    file = Path(path)
    try:
        data = file.read_bytes()
        sheet = load_workbook(file, read_only=True, data_only=True).worksheets[0]
        table = [list(r) for r in sheet.iter_rows(values_only=True)]
    except Exception as exc:  # a missing file, not an Excel workbook, a damaged one: one line for the user
        raise ConfigError(f"MTS template {path}: cannot be read as an Excel workbook ({exc})") from exc
    header = [_cell(h).strip() for h in (table[0] if table else [])]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise ConfigError(f"MTS template {path}: missing column(s) {', '.join(missing)}")
    rows: dict[int, PromptRow] = {}
    for n, values in enumerate(table[1:], start=2):
        cells = dict(zip(header, values, strict=False))
        if cells.get("prompt_id") is None:
            continue
        row = _row(cells, f"MTS template {path}, row {n}")
        rows[row.prompt_id] = row
    if not rows:
        raise ConfigError(f"MTS template {path}: no prompt rows")
    return Template(rows, hashlib.sha256(data).hexdigest())


def holistic_trait(rubric: Rubric, name: str) -> Trait:
    """The rubric's one trait, the holistic score; ConfigError for a rubric of several traits."""
    if len(rubric.traits) != 1:
        raise ConfigError(
            f"{name} gives one holistic score per essay: give a rubric of one trait, its range the holistic "
            f"score's (ASAP set 7: 0-30, set 8: 0-60); this rubric has {len(rubric.traits)} traits"
        )
    return rubric.traits[0]


@dataclass(frozen=True)
class MTSTemplateProtocol(ScoringProtocol):
    """The authors' MTS from their template file (see the module docstring)."""

    name: str
    template: str
    group: str = "sample"

    @property
    def needs(self) -> ProtocolNeeds:
        """One holistic score per essay, min-max over the run's essays (final scores read from the store), the four
        trait conversations of an essay side by side; its inputs checked, its authors' sample evaluated."""
        return ProtocolNeeds(
            per_trait=False, over_run=True, chains=TRAITS, check=self._check_inputs, population=self._evaluated_on
        )

    def describe(self) -> dict[str, Any]:
        """The protocol as a run's configuration records it (each record also keeps the file's SHA-256)."""
        return {
            "name": self.name,
            "variant": "authors_template",
            "template": self.template,
            "traits": "template",
            "turns": ["quotes_well_written", "score"],
            "reading": "first_match_decimal",
            "essay_cleanup": "authors",
            "sampling": sampling(1024),
            "post": "mean_iqr_clip_minmax",
            "minmax_group": "authors_asap_sample_10pct_seed41" if self.group == "sample" else "run",
            "per_trait": False,
        }

    def _check_inputs(self, rubric: Rubric, essays: Sequence[Essay]) -> None:
        """Before anything is written: the rubric of one trait, the template file read, a row for every essay's
        prompt, and an essay prompt for every call (the template's cell or the essay's)."""
        holistic_trait(rubric, self.name)
        template = read_template(self.template)
        for essay in essays:
            _essay_prompt(self.name, _row_of(self.name, template, essay, rubric), essay)

    def _evaluated_on(self, essays: Sequence[Essay], rubric: Rubric) -> Population | None:
        """``group=sample``: the run's essays in the authors' sample, which their QWK is computed on; None
        (every essay) for ``group=run``."""
        if self.group != "sample":
            return None
        by_prompt: dict[int, list[str]] = defaultdict(list)
        for essay in essays:
            prompt_id = essay.essay_set if essay.essay_set is not None else rubric.essay_set
            if prompt_id is not None:
                by_prompt[prompt_id].append(essay.id)
        members = authors_sample(by_prompt)
        ids = frozenset().union(*(m for m in members.values() if m is not None))
        unknown = sorted(p for p, m in members.items() if m is None)
        label = (
            "the MTS authors' test sample (10% of each ASAP prompt, drawn by their preprocess.py with random_state 41 "
            f"over the eight prompts in order): {len(ids)} of the run's {len(essays)} essays"
        )
        if unknown:
            label += f"; prompt(s) {', '.join(map(str, unknown))}: not a whole ASAP prompt, its sample not known"
        return Population(ids=ids, label=label, tag="the MTS authors' sample")

    async def score_essay(self, ctx: CallContext, essay: Essay, rubric: Rubric) -> list[TraitScore]:
        """The essay's four conversations, concurrently; one provisional holistic score (None: the final one is
        scaled over the run when read), none when a call failed."""
        trait = holistic_trait(rubric, self.name)
        template = read_template(self.template)
        row = _row_of(self.name, template, essay, rubric)
        talks = [self._conversation(ctx, essay, trait, (row, i, template.sha256)) for i in range(TRAITS)]
        records = await gather_settled(*talks)
        if any(r is None for r in records):
            return []
        last = records[-1]
        assert last is not None
        return [TraitScore(essay_id=essay.id, trait=trait.name, protocol=self.name, score=None, record_key=last.key)]

    async def _conversation(
        self, ctx: CallContext, essay: Essay, trait: Trait, where: tuple[PromptRow, int, str]
    ) -> AgentRecord:
        """One trait's quotes turn then score turn; the score turn's record."""
        row, index, sha = where
        own = row.traits[index]
        text = clean_essay(essay.text)
        prompt = _essay_prompt(self.name, row, essay)
        system = Message(role="system", content=fill(row.system, {"trait": own.name, "description": own.description}))
        ask = Message(role="user", content=fill(row.retrieval, {"prompt": prompt, "essay": text, "trait": own.name}))
        context = {
            "mts_trait": own.name,
            "trait_index": index + 1,
            "prompt_id": row.prompt_id,
            "prompt_source": "template" if row.prompt.strip() else "essay",
            "template_sha256": sha,
        }
        quotes = await debater(ctx, self._call(ctx, essay, trait, (1, index), [system, ask], text, context))
        turn = Message(role="user", content=fill(row.score, {"trait": own.name, "rubric": own.rubric}))
        history = [system, ask, Message(role="assistant", content=quotes.text), turn]
        return await score_turn(ctx, self._call(ctx, essay, trait, (2, index), history, text, context))

    def _call(
        self,
        ctx: CallContext,
        essay: Essay,
        trait: Trait,
        at: tuple[int, int],
        messages: list[Message],
        text: str,
        context: dict[str, Any],
    ) -> AgentCall:
        turn, index = at
        sampled = sampling(ctx.settings.judge_max_tokens)
        return AgentCall(
            protocol=self.name,
            essay_id=essay.id,
            trait=trait.name,
            role="mts",
            round=turn,
            index=index,
            messages=messages,
            temperature=sampled["temperature"],
            max_tokens=sampled["max_tokens"],
            context={**context, "turn": "quotes" if turn == 1 else "score", "sampling": sampled},
            essay=text,
        )

    def read_scores(self, reader: RecordReader, rubric: Rubric) -> list[TraitScore]:
        """The final holistic scores: per essay the mean of its four 0-10 scores, scaled per prompt by the min-max
        fitted on the prompt's group (module docstring)."""
        if len(rubric.traits) != 1:
            return []
        trait = rubric.traits[0]
        turns = [r for r in reader.records(protocol=self.name, role="mts") if r.round == 2 and not r.failed]
        raw = _raw_means(self.name, trait, turns)
        by_prompt: dict[int, list[str]] = defaultdict(list)
        for essay_id, (prompt_id, _) in raw.items():
            by_prompt[prompt_id].append(essay_id)
        for ids in by_prompt.values():
            ids.sort(key=id_order)
        members = (
            authors_sample(by_prompt) if self.group == "sample" else {p: frozenset(ids) for p, ids in by_prompt.items()}
        )
        out: list[TraitScore] = []
        for prompt_id, ids in by_prompt.items():
            group = [raw[e][1].mean_score for e in ids if e in (members[prompt_id] or ())]
            fit: MinMax | None = fit_minmax(group)
            why = None if group else _no_sample(prompt_id, members[prompt_id])
            for essay_id in ids:
                mean = raw[essay_id][1].mean_score
                value = None if mean is None or fit is None else fit.scale(mean, trait.min, trait.max)
                out.append(final_score(raw[essay_id][1], value, group, why))
        return out


def _no_sample(prompt_id: int, members: frozenset[str] | None) -> str:
    """Why a prompt has no min-max group under ``group=sample``."""
    if members is None:
        return (
            f"prompt {prompt_id} is not a whole ASAP prompt, so the MTS authors' sample of it is not known "
            "(MTS[template=FILE,group=run] scales over the run's essays)"
        )
    return (
        f"none of the run's essays of prompt {prompt_id} is in the MTS authors' sample, the min-max group "
        "(MTS[template=FILE,group=run] scales over the run's essays)"
    )


def _row_of(name: str, template: Template, essay: Essay, rubric: Rubric) -> PromptRow:
    """The template's row of ``essay``'s prompt (its ``essay_set``, else the rubric's); ConfigError when none."""
    prompt_id = essay.essay_set if essay.essay_set is not None else rubric.essay_set
    row = template.rows.get(prompt_id) if prompt_id is not None else None
    if row is None:
        raise ConfigError(
            f"{name}: no row of the template for essay {essay.id!r}'s prompt ({prompt_id}); it has "
            f"prompts {', '.join(map(str, sorted(template.rows)))}"
        )
    return row


def _essay_prompt(name: str, row: PromptRow, essay: Essay) -> str:
    """The essay prompt a call shows: the template's ``prompt`` cell, else the essay's (its data's ``prompt``
    column, else the rubric's); ConfigError when both are empty, never an empty prompt."""
    if row.prompt.strip():
        return row.prompt
    if essay.prompt.strip():
        return essay.prompt
    raise ConfigError(
        f"{name}: the template's prompt cell of prompt {row.prompt_id} is empty and essay {essay.id!r} has no "
        "prompt (neither a prompt column in the data nor a prompt in the rubric): fill the template's prompt "
        "column, as the MTS authors' README asks, or give the rubric its prompt"
    )


def _raw_means(protocol: str, trait: Trait, turns: list[AgentRecord]) -> dict[str, tuple[int, TraitScore]]:
    """Essay id -> (its prompt id, its raw score: ``mean_score`` the mean of its four 0-10 scores, None unless all
    four were read)."""
    by_essay: dict[str, dict[int, AgentRecord]] = defaultdict(dict)
    for record in turns:
        by_essay[record.essay_id][record.index] = record
    out: dict[str, tuple[int, TraitScore]] = {}
    for essay_id, records in by_essay.items():
        scores = [stored_score(records[i]) if i in records else None for i in range(TRAITS)]
        usable = [s for s in scores if s is not None]
        mean = float(np.mean(usable)) if len(usable) == TRAITS else None  # the authors' np.mean: NaN if one is
        last = records[max(records)]
        said = "\n".join(f"{r.context.get('mts_trait')}: {stored_score(r)}" for _, r in sorted(records.items()))
        score = TraitScore(
            essay_id=essay_id,
            trait=trait.name,
            protocol=protocol,
            score=None,
            rationale=said,
            record_key=last.key,
            n_judges=TRAITS,
            n_usable=len(usable),
            mean_score=mean,
            truncated=any(r.truncated for r in records.values()),
        )
        out[essay_id] = (int(last.context.get("prompt_id", 0)), score)
    return out


def template_protocol(name: str, options: Mapping[str, str]) -> MTSTemplateProtocol:
    """``MTS[template=FILE]`` or ``MTS[template=FILE,group=sample|run]``; ConfigError for a bad option (the file is
    read when the first essay is scored, so a finished run reads without it)."""
    group = options.get("group", "sample")
    if group not in GROUPS:
        raise ConfigError(f"unknown MTS group {group!r}; choose from {', '.join(GROUPS)}")
    if not options.get("template"):
        raise ConfigError("MTS[template=FILE] needs the path of the authors' template file")
    return MTSTemplateProtocol(name, template=options["template"], group=group)
