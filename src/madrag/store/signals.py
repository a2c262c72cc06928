"""The review queue's signals of a final score, kept with its row in the run store (the ``signals`` column of
``scores``): what the agents behind the score answered, apart from the score itself - each debater's confidence in
its last round (``advocate_confidence``, ``skeptic_confidence``) and the quotes an evidence check could not find in
the essay (``unverified_quotes``), the fields of :class:`madrag.teacher.review_queue.ItemSignals` they fill.

They are derived here, the one home of that derivation (:func:`debate_signals`), from a few JSON values of the
score's Judge record and of the debate turns it read (:data:`SIGNAL_FIELDS`, read by SQLite, no record parsed),
in the transaction that writes the row (:func:`signals_json`): the review desk then reads the rows alone, not every
record of a large run. A store written before the rows carried them gets them derived the same way by
:mod:`madrag.pipeline.migrations`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from madrag.records import EvidenceCounts
from madrag.store.schema import chunks

__all__ = ["SIGNAL_FIELDS", "debate_signals", "record_fields", "signals_json"]

SIGNAL_FIELDS = {
    "role": "$.role",
    "round": "$.round",
    "confidence": "$.confidence",
    "evidence": "$.evidence",
    "debate": "$.context.debate",
}
"""What the signals read of a Judge record and of the debate turns it read (nothing of their texts)."""


def debate_signals(judge: dict[str, Any] | None, records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The signals of a score whose Judge record has the fields ``judge`` (:data:`SIGNAL_FIELDS`; None: no Judge
    record), the debate turns it read found in ``records`` (key -> fields): each role's confidence in its latest
    round that gave one, and the unverified quotes of every record whose evidence was checked (absent: none was)."""
    if judge is None:
        return {}
    turns = [records[k] for k in judge["debate"] or [] if k in records]
    out: dict[str, Any] = {}
    for role in ("advocate", "skeptic"):
        mine = [t for t in turns if t["role"] == role and t["confidence"] is not None]
        if mine:
            out[f"{role}_confidence"] = max(mine, key=lambda t: t["round"] or 0)["confidence"]
    checked = [EvidenceCounts.model_validate(r["evidence"]) for r in [judge, *turns] if r["evidence"] is not None]
    checked = [e for e in checked if e.checked]
    if checked:
        out["unverified_quotes"] = sum(e.quotes_unverified for e in checked)
    return out


def record_fields(
    conn: sqlite3.Connection, paths: Mapping[str, str], keys: Collection[str] | None = None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key, the values at ``paths``: names -> JSON paths, None where absent) of each stored record of ``keys``
    (None: all), read by SQLite from its JSON, none parsed, streamed."""
    columns = ", ".join("record -> ?" for _ in paths)
    for chunk in [None] if keys is None else chunks(sorted(set(keys))):
        where = "" if chunk is None else f" WHERE key IN ({', '.join('?' * len(chunk))})"
        for key, *values in conn.execute(
            f"SELECT key, {columns} FROM records{where}", [*paths.values(), *(chunk or [])]
        ):
            yield key, {n: None if v is None else json.loads(v) for n, v in zip(paths, values, strict=True)}


def _fields(conn: sqlite3.Connection, keys: Collection[str]) -> dict[str, dict[str, Any]]:
    """Per stored record of ``keys``, its values at :data:`SIGNAL_FIELDS` (None where absent)."""
    return dict(record_fields(conn, SIGNAL_FIELDS, keys))


def signals_json(conn: sqlite3.Connection, judge_keys: Sequence[str]) -> list[str]:
    """The signals (JSON, keys sorted) of the scores whose Judge records have ``judge_keys`` (one per key; an empty
    key or one of no stored record: ``{}``), read from the records on ``conn`` - in the writer's transaction, the
    records it wrote before included."""
    judges = _fields(conn, [k for k in judge_keys if k])
    debate = {str(k) for judge in judges.values() for k in judge["debate"] or []} - set(judges)
    records = judges | _fields(conn, debate)
    return [json.dumps(debate_signals(judges.get(k), records), sort_keys=True) for k in judge_keys]
