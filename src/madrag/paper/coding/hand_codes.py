"""Hand work in an error export is never lost: before ``madrag errors`` writes over an export that someone has
coded, the codes are carried into the new rows.

A cell is hand work when it is in a coding column (:data:`madrag.paper.coding.errors_export.CODING_COLUMNS`) or in a
column the export does not write (one the coder added; not a protocol's ``<name>_score`` ... columns), and is not
empty. Rows are matched on their key, the
essay and the trait (one export row per essay-trait). The new export keeps every coded row's hand cells; the old
file is copied beside it first (``<name>.previous.csv``). When a coded row is not among the new rows (the run or
the selection changed), nothing is written and the command says which rows: the codes would be lost."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from madrag.errors import InputError
from madrag.files.atomic import copy_atomic

ROW_KEY = ("essay_id", "trait")
"""What identifies an export row."""
_MACHINE = re.compile(r"_(?:score|error|rationale|mentions_placeholders|debate)$")
"""A protocol's columns, written by the export (an earlier export's protocol the run no longer has is not hand work)."""


@dataclass(frozen=True)
class KeptCodes:
    """The coded rows of the file written over (``rows``), their hand columns, and where the old file was copied."""

    rows: int = 0
    columns: tuple[str, ...] = ()
    backup: Path | None = None

    def line(self, target: Path) -> str:
        """What was kept, in one line (empty when the old file had no hand work)."""
        if not self.rows:
            return ""
        return (
            f"kept the hand codes of {self.rows} coded rows of the previous {target.name} (merged on essay_id and "
            f"trait; the previous file is {self.backup})"
        )


def _read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            reader = csv.DictReader(fh)
            return list(reader.fieldnames or []), list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path} exists and cannot be read as an export ({exc}): not overwritten") from None


def keep_hand_codes(target: Path, rows: list[dict[str, Any]], columns: list[str], coding: list[str]) -> KeptCodes:
    """Carry the hand cells of ``target`` (an earlier export, if any) into ``rows`` (matched on :data:`ROW_KEY`),
    adding to ``columns`` the coder's own columns; copy ``target`` beside itself first. :class:`InputError` when
    a coded row of ``target`` is not among ``rows``, or ``target`` has hand work but no row key."""
    if not target.is_file():
        return KeptCodes()
    header, old = _read(target)
    hand = [c for c in header if c in coding or (c not in columns and not _MACHINE.search(c))]
    coded = [r for r in old if any((r.get(c) or "").strip() for c in hand)]
    if not coded:
        return KeptCodes()
    if not all(k in header for k in ROW_KEY):
        raise InputError(f"{target} holds hand codes but no essay_id / trait columns: not overwritten (use --out)")
    by_key = {(r["essay_id"], r["trait"]): r for r in rows}
    lost = [r for r in coded if (r["essay_id"], r["trait"]) not in by_key]
    if lost:
        first = lost[0]
        raise InputError(
            f"{target} has {len(lost)} coded rows the new export would not hold (e.g. essay {first['essay_id']}, "
            f"trait {first['trait']}): not overwritten, so no code is lost; write elsewhere with --out"
        )
    for r in coded:
        by_key[(r["essay_id"], r["trait"])].update({c: r.get(c) or "" for c in hand})
    columns.extend(c for c in hand if c not in columns)
    backup = target.with_name(target.stem + ".previous.csv")
    copy_atomic(target, backup)
    return KeptCodes(len(coded), tuple(hand), backup)
