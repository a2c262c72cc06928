"""What is refused of the essays a request brings: all of them above the one limit on essays (413, however
they arrive: a list, a data file, a page's upload), and single rows, summarised (:class:`~madrag.data.refusals.
Refusals`: how many, how many for each reason, and the first few with where and why), as a draft's or run's
description holds them (:class:`RefusedFields`), so that neither its ``run.json`` nor ``GET /api/runs`` carries one
entry per refused row.
"""

from __future__ import annotations

import csv
import io
import json

from pydantic import BaseModel, Field

from madrag.data.refusals import Refusals
from madrag.server.http.faults import OverLimit


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


class RefusedFields(BaseModel):
    """The refused rows as a draft or run describes them: ``refused`` (the first
    :data:`~madrag.data.refusals.MAX_EXAMPLES`, where and why), ``n_refused`` (all of them) and
    ``refused_reasons`` (how many for each reason). (A description written before the summary, every refused row
    listed, is read with its count and reasons: :func:`madrag.pipeline.migrations.upgrade_run_description`,
    :func:`~madrag.pipeline.migrations.upgrade_draft`.)"""

    refused: list[dict[str, str]] = Field(default_factory=list)
    n_refused: int = 0
    refused_reasons: dict[str, int] = Field(default_factory=dict)

    def refusals(self) -> Refusals:
        """The summary this description holds."""
        return Refusals(total=self.n_refused, reasons=dict(self.refused_reasons), examples=list(self.refused))
