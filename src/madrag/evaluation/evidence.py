"""The evidence table of a run: quoted evidence not found in the essay, and placeholders cited as errors, per
protocol and role (the MADRAG paper's failure mechanisms C3 and C6; the per-call counts are made by
:mod:`madrag.agents.evidence` and kept in each record's ``evidence``).

Debate calls are shared by the protocols that read the same transcript (MAD and MADRAG): a debater's record
counts for every protocol whose Judge read it, so each protocol's row is what its own Judge was shown.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from madrag.evaluation.run import open_store
from madrag.records import AgentRecord, EvidenceCounts

EVIDENCE_COLUMNS = [
    *["protocol", "role", "calls", "calls_checked", "quotes", "verified", "unverified", "unverified_rate"],
    *["placeholder_errors", "calls_with_placeholder_errors"],
]
"""One row per (protocol, role): calls with counts, quotes found / verified / unverified, the unverified share
of the quotes (NaN without quotes), sentences citing a placeholder as an error and the calls with any."""

ROLE_ORDER = {"advocate": 0, "skeptic": 1, "judge": 2}
"""How roles are listed: the debate's order, then the Judge."""


@dataclass
class _Tally:
    """The evidence counts of one protocol and role, added up one record at a time."""

    calls: int = 0
    calls_checked: int = 0
    quotes: int = 0
    verified: int = 0
    unverified: int = 0
    placeholder_errors: int = 0
    calls_with_placeholder_errors: int = 0

    def add(self, counts: EvidenceCounts) -> None:
        self.calls += 1
        if counts.checked:
            self.calls_checked += 1
            self.quotes += counts.quotes_found
            self.verified += counts.quotes_verified
            self.unverified += counts.quotes_unverified
        self.placeholder_errors += counts.placeholder_errors
        self.calls_with_placeholder_errors += bool(counts.placeholder_errors)

    def row(self, protocol: str, role: str) -> dict[str, Any]:
        rate = self.unverified / self.quotes if self.quotes else float("nan")
        return {"protocol": protocol, "role": role, **asdict(self), "unverified_rate": rate}


Counted = tuple[str, str, str, EvidenceCounts | None]
"""What the table reads of a record: its key, protocol, role and evidence counts."""


def _owners(judges: Iterable[tuple[str, object]]) -> dict[str, set[str]]:
    """Debate record key -> the protocols whose Judges read it, from (protocol, the debate a record read)."""
    owners: dict[str, set[str]] = defaultdict(set)
    for protocol, debate in judges:
        for key in debate if isinstance(debate, list) else []:
            owners[str(key)].add(protocol)
    return owners


def _table(counted: Iterable[Counted], owners: dict[str, set[str]], protocols: list[str] | None) -> pd.DataFrame:
    """The evidence table of records' counts, each added to the rows of the protocols that read it."""
    groups: dict[tuple[str, str], _Tally] = defaultdict(_Tally)
    for key, protocol, role, counts in counted:
        if counts is None:
            continue
        for owner in sorted(owners.get(key, {protocol})):
            groups[(owner, role)].add(counts)
    order = {name: i for i, name in enumerate(protocols or [])}
    keys = sorted(
        groups, key=lambda k: (order.get(k[0], len(order)), k[0], ROLE_ORDER.get(k[1], len(ROLE_ORDER)), k[1])
    )
    return pd.DataFrame([groups[k].row(*k) for k in keys], columns=EVIDENCE_COLUMNS)


def evidence_frame(records: list[AgentRecord], protocols: list[str] | None = None) -> pd.DataFrame:
    """The evidence table (:data:`EVIDENCE_COLUMNS`) of a run's records, rows in ``protocols`` order (then any
    others), roles as :data:`ROLE_ORDER` then alphabetically; empty when no record carries counts (a run made
    before the check)."""
    owners = _owners((r.protocol, r.context.get("debate")) for r in records)
    return _table(((r.key, r.protocol, r.role, r.evidence) for r in records), owners, protocols)


FIELDS = {"protocol": "$.protocol", "role": "$.role", "evidence": "$.evidence"}
"""What :func:`evidence_table` reads of each stored record (SQLite reads it from the record's JSON)."""


def _counts(stored: object) -> EvidenceCounts | None:
    return None if stored is None else EvidenceCounts.model_validate(stored)


def evidence_table(run_dir: Path, protocols: list[str] | None = None) -> pd.DataFrame:
    """The evidence table of the run in ``run_dir`` (every record of its store; empty when there is no store),
    streamed: two passes over the records' counts and debates read by SQLite, none parsed whole and none held (a
    large run's table costs the memory of its debate keys, not of its records)."""
    if not (Path(run_dir) / "store.sqlite").is_file():
        return pd.DataFrame(columns=EVIDENCE_COLUMNS)
    store = open_store(run_dir)
    try:
        judges = store.each_record_fields({"protocol": "$.protocol", "debate": "$.context.debate"})
        owners = _owners((f["protocol"], f["debate"]) for _key, f in judges if f["debate"])
        counted = (
            (key, f["protocol"], f["role"], _counts(f["evidence"])) for key, f in store.each_record_fields(FIELDS)
        )
        return _table(counted, owners, protocols)
    finally:
        store.close()


EVIDENCE_TITLE = "evidence check: quotes not in the essay, placeholders cited as errors"
"""The evidence table's title in ``eval``'s output and the report."""
EVIDENCE_DEFINITION = (
    "Evidence check: quoted spans of at least 3 words in each answer, looked up in the essay (exact, then case, "
    "spacing and placeholders normalised, then near-exact: difflib ratio >= 0.88); unverified % = unverified / "
    "quotes. Placeholder errors: sentences citing a placeholder (@CAPS1 or a masked word) with an error word. "
    "Debate calls count for each protocol whose Judge read them."
)
"""What the evidence table's numbers mean (the markdown definitions)."""


def evidence_display(frame: pd.DataFrame) -> pd.DataFrame:
    """The evidence table as strings, one row per ``protocol / role`` (empty for an empty table)."""
    if frame.empty:
        return pd.DataFrame()
    rows = [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]

    def rate(r: dict[str, Any]) -> str:
        return "-" if r["quotes"] == 0 else f"{100 * r['unverified_rate']:.1f}%"

    return pd.DataFrame(
        {
            "calls": [f"{r['calls']}" for r in rows],
            "quotes": [f"{r['quotes']}" if r["calls_checked"] else "off" for r in rows],
            "unverified": [f"{r['unverified']}" if r["calls_checked"] else "off" for r in rows],
            "unverified %": [rate(r) if r["calls_checked"] else "off" for r in rows],
            "placeholder errors (calls)": [
                f"{r['placeholder_errors']} ({r['calls_with_placeholder_errors']})" for r in rows
            ],
        },
        index=[f"{r['protocol']} / {r['role']}" for r in rows],
    )
