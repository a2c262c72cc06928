"""The refused rows of an upload, summarised: how many, how many for each reason, and the first few with where
and why.

An upload can have as many bad rows as the row limit allows; a description of it (the web app's draft and run)
would otherwise carry one entry per refused row. A :class:`Refusals` keeps the count exactly and, bounded, the
reasons (at most :data:`MAX_REASONS` distinct ones, the rest counted under :data:`OTHER`) and the first
:data:`MAX_EXAMPLES` rows.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

MAX_EXAMPLES = 20
"""Refused rows kept with where and why (the first ones)."""
MAX_REASONS = 20
"""Distinct reasons counted one by one; rows refused for any other reason are counted together."""
OTHER = "other reasons"
_MAX_TEXT = 300


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
        self._count(reason_kind(where, reason, essay_id), 1)
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append({"where": _cut(where), "reason": _cut(reason)})

    def extend(self, other: Refusals) -> Refusals:
        """These and ``other``'s refused rows together (a new summary)."""
        merged = self.model_copy(deep=True)
        merged.total += other.total
        for reason, count in other.reasons.items():
            merged._count(reason, count)
        merged.examples = (merged.examples + other.examples)[:MAX_EXAMPLES]
        return merged

    def _count(self, reason: str, n: int) -> None:
        """``n`` more rows refused for ``reason``, counted under :data:`OTHER` once :data:`MAX_REASONS` are kept."""
        key = reason if reason in self.reasons or len(self.reasons) < MAX_REASONS else OTHER
        self.reasons[key] = self.reasons.get(key, 0) + n

    def fields(self) -> dict[str, Any]:
        """As a description's fields (``refused``, ``n_refused``, ``refused_reasons``: the web app's draft and run)."""
        return {"refused": list(self.examples), "n_refused": self.total, "refused_reasons": dict(self.reasons)}
