"""What is refused of the essays a request brings: all of them above the one limit on essays (413, however
they arrive: a list, a data file, a page's upload), and single rows, summarised: how many, how many for each
reason, and the first few with where and why.

An upload can have as many bad rows as the row limit allows; a run's ``run.json`` and every ``GET /api/runs``
would otherwise carry one entry per refused row. A :class:`Refusals` keeps the count exactly and, bounded,
the reasons (at most :data:`MAX_REASONS` distinct ones, the rest counted under :data:`OTHER`) and the first
:data:`MAX_EXAMPLES` rows.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

from pydantic import BaseModel, Field, model_validator

from madrag.server.http.faults import OverLimit

MAX_EXAMPLES = 20
"""Refused rows kept with where and why (the first ones)."""
MAX_REASONS = 20
"""Distinct reasons counted one by one; rows refused for any other reason are counted together."""
OTHER = "other reasons"
_MAX_TEXT = 300


def check_count(n: int, max_rows: int, where: str = "essays") -> None:
    """The one limit on essays, however they arrive: :class:`OverLimit` above it."""
    if n > max_rows:
        raise OverLimit(f"{n:,} essays in one request: the limit is {max_rows:,} (madrag serve --max-essays)", where)


def row_id(text: str, suffix: str) -> str | None:
    """The ``id`` a one-row CSV or JSONL text gives (None when it has none), to count refusals by reason."""
    try:
        row = json.loads(text) if suffix in {".jsonl", ".ndjson"} else next(csv.DictReader(io.StringIO(text)), {})
    except (ValueError, csv.Error):
        return None
    found = row.get("id") if isinstance(row, dict) else None
    return str(found).strip() if found is not None else None


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 1] + "…"


def reason_kind(where: str, reason: str, essay_id: str | None) -> str:
    """The reason without the row it names (``row 7:2: ``) or the essay's id, so rows refused for the same
    reason count together: ``row 7:2: essay 'a' is empty`` -> ``essay '…' is empty``."""
    kind = re.sub(rf"^{re.escape(where)}(:\d+)?: ", "", reason)
    if essay_id:
        kind = kind.replace(repr(essay_id), "'…'").replace(f"essay {essay_id}", "essay …")
    return _cut(kind)


class Refusals(BaseModel):
    """The refused rows of one upload (or of several, :meth:`extend`)."""

    total: int = 0
    reasons: dict[str, int] = Field(default_factory=dict)
    examples: list[dict[str, str]] = Field(default_factory=list)

    def add(self, where: str, reason: str, essay_id: str | None = None) -> None:
        """Count one refused row (``essay_id``: the id it gave, when known)."""
        self.total += 1
        kind = reason_kind(where, reason, essay_id)
        key = kind if kind in self.reasons or len(self.reasons) < MAX_REASONS else OTHER
        self.reasons[key] = self.reasons.get(key, 0) + 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append({"where": _cut(where), "reason": _cut(reason)})

    def extend(self, other: Refusals) -> Refusals:
        """These and ``other``'s refused rows together (a new summary)."""
        merged = self.model_copy(deep=True)
        merged.total += other.total
        for reason, count in other.reasons.items():
            key = reason if reason in merged.reasons or len(merged.reasons) < MAX_REASONS else OTHER
            merged.reasons[key] = merged.reasons.get(key, 0) + count
        merged.examples = (merged.examples + other.examples)[:MAX_EXAMPLES]
        return merged

    def fields(self) -> dict[str, Any]:
        """As the fields of :class:`RefusedFields`."""
        return {"refused": list(self.examples), "n_refused": self.total, "refused_reasons": dict(self.reasons)}

    @classmethod
    def of(cls, owner: RefusedFields) -> Refusals:
        """The summary a draft or run holds."""
        return cls(total=owner.n_refused, reasons=dict(owner.refused_reasons), examples=list(owner.refused))


class RefusedFields(BaseModel):
    """The refused rows as a draft or run describes them: ``refused`` (the first :data:`MAX_EXAMPLES`, where
    and why), ``n_refused`` (all of them) and ``refused_reasons`` (how many for each reason). A description
    written before the summary (every refused row listed) is read with its count and reasons."""

    refused: list[dict[str, str]] = Field(default_factory=list)
    n_refused: int = 0
    refused_reasons: dict[str, int] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _summarise_old(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "n_refused" in data or not data.get("refused"):
            return data
        summary = Refusals()
        for row in data["refused"]:
            summary.add(str(row.get("where", "")), str(row.get("reason", "")))
        return {**data, **summary.fields()}
