"""The evidence table of a run: quoted evidence not found in the essay, and placeholders cited as errors, per
protocol and role (the MADRAG paper's failure mechanisms C3 and C6; the per-call counts are made by
:mod:`madrag.agents.evidence` and kept in each record's ``evidence``).

Debate calls are shared by the protocols that read the same transcript (MAD and MADRAG): a debater's record
counts for every protocol whose Judge read it, so each protocol's row is what its own Judge was shown.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd

from madrag.evaluation.run import open_store
from madrag.records import AgentRecord

EVIDENCE_COLUMNS = [
    *["protocol", "role", "calls", "calls_checked", "quotes", "verified", "unverified", "unverified_rate"],
    *["placeholder_errors", "calls_with_placeholder_errors"],
]
"""One row per (protocol, role): calls with counts, quotes found / verified / unverified, the unverified share
of the quotes (NaN without quotes), sentences citing a placeholder as an error and the calls with any."""

ROLE_ORDER = {"advocate": 0, "skeptic": 1, "judge": 2}
"""How roles are listed: the debate's order, then the Judge."""


def _owners(records: list[AgentRecord]) -> dict[str, set[str]]:
    """Debate record key -> the protocols whose Judges read it."""
    owners: dict[str, set[str]] = defaultdict(set)
    for record in records:
        for key in record.context.get("debate", []) or []:
            owners[str(key)].add(record.protocol)
    return owners


def _row(protocol: str, role: str, records: list[AgentRecord]) -> dict[str, Any]:
    """The evidence row of one protocol and role over its records that carry counts."""
    counted = [r.evidence for r in records if r.evidence is not None]
    checked = [e for e in counted if e.checked]
    quotes = sum(e.quotes_found for e in checked)
    unverified = sum(e.quotes_unverified for e in checked)
    return {
        "protocol": protocol,
        "role": role,
        "calls": len(counted),
        "calls_checked": len(checked),
        "quotes": quotes,
        "verified": sum(e.quotes_verified for e in checked),
        "unverified": unverified,
        "unverified_rate": unverified / quotes if quotes else float("nan"),
        "placeholder_errors": sum(e.placeholder_errors for e in counted),
        "calls_with_placeholder_errors": sum(1 for e in counted if e.placeholder_errors),
    }


def evidence_frame(records: list[AgentRecord], protocols: list[str] | None = None) -> pd.DataFrame:
    """The evidence table (:data:`EVIDENCE_COLUMNS`) of a run's records, rows in ``protocols`` order (then any
    others), roles as :data:`ROLE_ORDER` then alphabetically; empty when no record carries counts (a run made
    before the check)."""
    owners = _owners(records)
    groups: dict[tuple[str, str], list[AgentRecord]] = defaultdict(list)
    for record in records:
        if record.evidence is None:
            continue
        for protocol in sorted(owners.get(record.key, {record.protocol})):
            groups[(protocol, record.role)].append(record)
    order = {name: i for i, name in enumerate(protocols or [])}
    keys = sorted(
        groups, key=lambda k: (order.get(k[0], len(order)), k[0], ROLE_ORDER.get(k[1], len(ROLE_ORDER)), k[1])
    )
    rows = [_row(protocol, role, groups[(protocol, role)]) for protocol, role in keys]
    return pd.DataFrame(rows, columns=EVIDENCE_COLUMNS)


def evidence_table(run_dir: Path, protocols: list[str] | None = None) -> pd.DataFrame:
    """The evidence table of the run in ``run_dir`` (every record of its store; empty when there is no store)."""
    if not (Path(run_dir) / "store.sqlite").is_file():
        return pd.DataFrame(columns=EVIDENCE_COLUMNS)
    store = open_store(run_dir)
    try:
        records = [counts_only(r) for r in store.records()]  # one record's text at a time, not the run's
    finally:
        store.close()
    return evidence_frame(records, protocols)


def counts_only(record: AgentRecord) -> AgentRecord:
    """What the evidence table reads of a record (its key, protocol, role, counts and the debate its Judge
    read), without its prompt, answer or tokens."""
    context = {"debate": record.context.get("debate") or []}
    return record.model_copy(update={"messages": [], "tokens": None, "text": "", "rationale": None, "context": context})


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
