"""The audit's result (:class:`AuditReport`, written as ``<run>/audit/audit.json``) and its renderings: plain
text (``madrag audit``), markdown (recorded results) and an HTML section (``madrag report`` and the web app's run
page, both through :func:`audit_html`)."""

from __future__ import annotations

import html
from contextlib import closing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from madrag.audit.compression import CompressionRow
from madrag.audit.shifts import ShiftRow
from madrag.audit.stability import RepeatRow, StabilityRow
from madrag.audit.stats import Interval
from madrag.pipeline.migrations import open_store

AUDIT_FILE = "audit.json"


class ConditionCost(BaseModel):
    """What one condition's sub-runs hold: calls (records, failed ones apart), answers used and requests sent."""

    condition: str
    kind: str
    essays: int
    calls: int
    failed_calls: int
    requests: int  # answers the calls used (audit.json's name)
    attempts: int | None  # requests sent, failed attempts included (None: a record made before they were counted)
    cached_calls: int
    run_dirs: list[str]


class PerturbationInfo(BaseModel):
    """A perturbation of the audit: what it changes, on how many sampled essays, and the shift a valid scorer
    shows per trait (``"0"``, ``"down"``, ``"not_up"`` or ``"any"``)."""

    name: str
    description: str
    essays_changed: int
    expected: dict[str, str]


class AuditReport(BaseModel):
    """Everything an audit measured (see :mod:`madrag.audit`)."""

    run_dir: str
    protocols: list[str]
    sample: list[str]
    baseline: str  # "run" (the run's own scores) or "rescore"
    bootstrap: int
    repeats: list[RepeatRow] = Field(default_factory=list)
    stability: list[StabilityRow] = Field(default_factory=list)
    perturbation_plan: list[PerturbationInfo] = Field(default_factory=list)
    perturbations: list[ShiftRow] = Field(default_factory=list)
    compression: list[CompressionRow] = Field(default_factory=list)
    evidence: list[dict[str, Any]] = Field(default_factory=list)
    costs: list[ConditionCost] = Field(default_factory=list)
    calls_per_sampled_essay: float | None = None
    run_calls_per_essay: float | None = None
    notes: list[str] = Field(default_factory=list)


def condition_cost(name: str, kind: str, essays: int, dirs: list[Path]) -> ConditionCost:
    """The cost of one condition from the records of its sub-runs."""
    calls = failed = requests = cached = 0
    attempts: int | None = 0
    for folder in dirs:
        with closing(open_store(folder / "store.sqlite", read_only=True)) as store:
            for record in store.records():
                failed += record.failed
                calls += not record.failed
                requests += record.answers
                cached += record.cached
                attempts = None if attempts is None or record.attempts is None else attempts + record.attempts
    return ConditionCost(
        condition=name,
        kind=kind,
        essays=essays,
        calls=calls,
        failed_calls=failed,
        requests=requests,
        attempts=attempts,
        cached_calls=cached,
        run_dirs=[str(d) for d in dirs],
    )


def load_audit(run_dir: Path) -> AuditReport | None:
    """The audit recorded for the run in ``run_dir`` (None when it has none)."""
    path = Path(run_dir) / "audit" / AUDIT_FILE
    if not path.is_file():
        return None
    return AuditReport.model_validate_json(path.read_text(encoding="utf-8"))


def _f(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "—"
    return f"{0.0 if abs(value) < 0.5 * 10**-digits else value:.{digits}f}"  # never "-0.00"


def ci(value: Interval, digits: int = 2) -> str:
    """``estimate [low, high]`` (— where undefined)."""
    if value.estimate is None:
        return "—"
    return f"{_f(value.estimate, digits)} [{_f(value.low, digits)}, {_f(value.high, digits)}]"


def _verdict(row: ShiftRow) -> str:
    if row.as_expected is None:
        return "—"
    moved = f"moved {row.direction}" if row.moved else "not moved"
    return f"{moved} ({'as expected' if row.as_expected else 'NOT as expected'})"


Table = tuple[str, list[str], list[list[str]]]
"""(title, header, rows) of one table of the report, as text cells."""


def tables(report: AuditReport) -> list[Table]:
    """Each table of the report that has rows: its repeats and perturbations, then what the run itself shows."""
    every = [
        (
            "stability: the run's score against each repeat",
            ["repeat", "protocol", "trait", "n", "exact agreement", "QWK", "mean abs diff"],
            [
                [r.condition, r.protocol, r.trait, str(r.n), ci(r.exact), ci(r.qwk), _f(r.mean_abs_diff)]
                for r in report.repeats
            ],
        ),
        (
            "stability over every repeat",
            ["protocol", "trait", "n", "flip share", "Judge distribution SD", "unstable"],
            [
                [r.protocol, r.trait, str(r.n), ci(r.flip_share), ci(r.judge_sd), _yes(r.unstable)]
                for r in report.stability
            ],
        ),
        (
            "perturbations: what each changes and the shift a valid scorer shows",
            ["perturbation", "changes", "essays changed", "expected shift per trait"],
            [
                [p.name, p.description, str(p.essays_changed), ", ".join(f"{t} {e}" for t, e in p.expected.items())]
                for p in report.perturbation_plan
            ],
        ),
        (
            "perturbations: score shift (variant - original)",
            ["perturbation", "protocol", "trait", "n", "shift", "share changed", "expected", "verdict"],
            [
                [
                    r.perturbation,
                    r.protocol,
                    r.trait,
                    str(r.n),
                    ci(r.shift),
                    _f(r.share_changed),
                    r.expected,
                    _verdict(r),
                ]
                for r in report.perturbations
            ],
        ),
        *_run_tables(report),
    ]
    return [table for table in every if table[2]]


def _compression_table(report: AuditReport) -> Table:
    """Compression against the human scores, on every scored essay of the run."""
    return (
        "compression: predicted vs human (every scored essay of the run)",
        [
            "protocol",
            "trait",
            "n",
            "predicted",
            "human",
            "ends pred/human",
            "slope",
            "extreme n",
            "Agree@1",
            "MAE",
            "compressed",
        ],
        [
            [
                r.protocol,
                r.trait,
                str(r.n),
                _dist(r.predicted),
                _dist(r.human),
                f"{_f(r.predicted_ends)}/{_f(r.human_ends)}",
                ci(r.slope),
                str(r.extreme_n),
                _f(r.extreme_agree_at_1),
                _f(r.extreme_mae),
                _yes(r.compressed),
            ]
            for r in report.compression
        ],
    )


def _run_tables(report: AuditReport) -> list[Table]:
    """The compression, evidence and cost tables: the run's own scores and records, and the audit's calls."""
    return [
        _compression_table(report),
        (
            "evidence and placeholders (the run's records)",
            ["protocol", "role", "calls", "quotes", "unverified", "unverified %", "placeholder errors"],
            [
                [
                    *(str(e[k]) for k in ("protocol", "role", "calls", "quotes", "unverified")),
                    _rate(e),
                    str(e["placeholder_errors"]),
                ]
                for e in report.evidence
            ],
        ),
        (
            "cost of the audit",
            ["condition", "kind", "essays", "calls", "failed", "answers", "requests sent", "cached"],
            [
                [
                    c.condition,
                    c.kind,
                    str(c.essays),
                    str(c.calls),
                    str(c.failed_calls),
                    str(c.requests),
                    "— (not counted)" if c.attempts is None else str(c.attempts),
                    str(c.cached_calls),
                ]
                for c in report.costs
            ],
        ),
    ]


def _dist(counts: dict[int, int]) -> str:
    return " ".join(f"{k}:{v}" for k, v in sorted(counts.items())) or "—"


def _yes(value: bool | None) -> str:
    return "—" if value is None else ("yes" if value else "no")


def _rate(row: dict[str, Any]) -> str:
    rate = row.get("unverified_rate")
    return "—" if not row.get("quotes") or rate is None else f"{100 * float(rate):.1f}%"


def summary_lines(report: AuditReport) -> list[str]:
    """The audit's one-line summary and notes."""
    cost = f"{_f(report.calls_per_sampled_essay, 1)} calls per sampled essay"
    if report.run_calls_per_essay is not None:
        cost += f" (the run: {_f(report.run_calls_per_essay, 1)} per essay)"
    head = (
        f"audit of {report.run_dir}: {len(report.sample)} sampled essays, protocols {', '.join(report.protocols)}, "
        f"shifts and repeats against the {'run' if report.baseline == 'run' else 'rescored'} scores; {cost}"
    )
    return [head, *[f"note: {n}" for n in report.notes]]


def markdown(report: AuditReport) -> str:
    """The report as markdown tables."""
    parts = ["\n".join(summary_lines(report))]
    for title, header, rows in tables(report):
        lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def text(report: AuditReport) -> str:
    """The report as plain text (aligned columns)."""
    parts = ["\n".join(summary_lines(report))]
    for title, header, rows in tables(report):
        widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]
        lines = [title, "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def audit_html(run_dir: Path) -> str:
    """The run's audit as an HTML section ("" when it has none): what ``madrag report`` and the run page show."""
    report = load_audit(run_dir)
    if report is None:
        return ""
    esc = html.escape
    parts = [f"<h2>Audit</h2><p class='muted'>{'<br>'.join(esc(line) for line in summary_lines(report))}</p>"]
    for title, header, rows in tables(report):
        head = "".join(f"<th>{esc(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
        parts.append(f"<h3>{esc(title)}</h3><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    return f"<section class='audit' id='audit'>{''.join(parts)}</section>"
