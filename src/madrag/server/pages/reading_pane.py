"""The review desk's reading pane: one essay of the shown page beside the queue, with each criterion's levels,
the grade in force, madrag's suggestion, why the queue flags it and the Judge's reasons, so a flagged score is
checked without leaving the desk. Only one essay is read (the one asked for with ``?open=``, else the first
row's), so the desk's size stays bounded however large the run; the page's script swaps in another row's essay from the
JSON API as the teacher moves through the rows, and without script each essay of the page is a link."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

from fastapi import Request

from madrag.server import results
from madrag.server.http.faults import NotFound
from madrag.server.service import State


def pane(
    state: State, run_id: str, request: Request, rows: Sequence[dict[str, Any]], queue_rows: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """What the pane shows: the essay asked for (``?open=``: one of the run's, such as the one whose score was
    just decided and moved down the queue), else the first shown row's; None when no row is shown."""
    shown = list(dict.fromkeys(r["essay_id"] for r in rows))
    if not shown:
        return None
    asked = request.query_params.get("open", "")
    try:
        detail = results.essay_detail(state, run_id, asked or shown[0])
    except NotFound:  # not an essay of the run
        detail = results.essay_detail(state, run_id, shown[0])
    essay_id = detail["essay"]["id"]
    flags = {r["trait"]: r["reasons"] for r in queue_rows if r["essay_id"] == essay_id}
    traits = []
    for trait in detail["traits"]:
        entry = next((p for p in trait["protocols"] if p["grading"]), trait["protocols"][0])
        grade = entry["in_force"]
        traits.append(
            {
                "trait": trait["trait"],
                "levels": [(s, trait["levels"].get(s, "")) for s in range(trait["min"], trait["max"] + 1)],
                "grade": grade.points,
                "words": grade.words,
                "ai": entry["score"],
                "flags": flags.get(trait["trait"], []),
                "reasons": entry["rationale"],
            }
        )
    kept = [(k, v) for k, v in request.query_params.multi_items() if k not in ("open", "approved")]
    current = next((r["trait"] for r in rows if r["essay_id"] == essay_id), "")
    return {
        "essay_id": essay_id,
        "text": detail["essay"]["text"],
        "trait": current,
        "traits": traits,
        "shown": shown,
        "query": urlencode(kept) + "&" if kept else "",
    }
