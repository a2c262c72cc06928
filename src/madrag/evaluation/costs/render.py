"""A cost report or a dry-run estimate for people (plain text) and for programs (JSON-ready dicts)."""

from __future__ import annotations

from typing import Any

from madrag.evaluation.costs.durations import duration
from madrag.evaluation.costs.estimate import RunEstimate
from madrag.evaluation.costs.tally import WHOLE_ESSAY, CostReport, Tally


def _money(value: float) -> str:
    """Dollars: four decimals below one dollar, two above."""
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def _num(value: float) -> str:
    """Whole numbers as such, shares and estimates with one decimal."""
    return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 1000 else f"{value:,.1f}"


def _line(label: str, t: Tally, priced: bool) -> str:
    """One tally on one line: agent calls, the answers they used (a two-step Judge call uses 2; the HTTP requests
    sent are on the ``requests sent`` line), tokens and (``priced``) the spend."""
    text = (
        f"{label:<36} calls {_num(t.calls):>9}  answers {_num(t.requests):>9}  "
        f"prompt tok {_num(t.prompt_tokens):>13}  completion tok {_num(t.completion_tokens):>11}"
    )
    if priced:
        text += f"  spend {_money(t.spend)} (gross {_money(t.gross_spend)})"
    return text


def _unit_summary(report: CostReport) -> list[str]:
    """Mean and max per essay-trait (per-trait calls) and per essay (calls that score every trait at once)."""
    lines = []
    for label, whole in (("per essay-trait", False), ("per essay, calls scoring every trait", True)):
        units = [t for (_essay, trait), t in report.per_unit.items() if (trait == WHOLE_ESSAY) == whole]
        if not units:
            continue
        calls = sorted(u.calls for u in units)
        tokens = [u.prompt_tokens + u.completion_tokens for u in units]
        line = (
            f"{label} ({len(units)}): calls mean {sum(calls) / len(units):.2f}, max {calls[-1]:.0f}; "
            f"tokens mean {sum(tokens) / len(units):,.0f}, max {max(tokens):,.0f}"
        )
        if report.priced:
            line += f"; spend mean {_money(sum(u.spend for u in units) / len(units))}"
        lines.append(line)
    return lines


def _retry_lines(report: CostReport, examples: int = 3) -> list[str]:
    """Retries by kind of reason and the reasons of the first few retried calls (nothing when none)."""
    retried = report.retried_calls
    if not retried:
        return ["retries: none"]
    kinds = ", ".join(f"{kind} x{n}" for kind, n in report.retry_kinds.items())
    lines = [f"retries {report.total.retries:,.0f} over {len(retried):,} calls: {kinds}"]
    for call in retried[:examples]:
        lines.append(f"  {call.key}: {'; '.join(call.retries)}")
    if len(retried) > examples:
        lines.append(f"  ... and {len(retried) - examples:,} more calls (every reason is in each record's 'retries')")
    return lines


def _sent_line(t: Tally) -> str:
    """Requests sent to the backend (failed attempts included) and the calls that got no answer."""
    per_call = t.attempts_per_call
    line = f"requests sent {t.attempts:,.0f}" + ("" if per_call is None else f" ({per_call:.3f} per call)")
    line += f", of which failed and retried or given up {t.retries:,.0f}"
    if t.attempts_unknown:
        line += f"; {t.attempts_unknown:,.0f} calls recorded before requests sent were counted"
    line += f"; failed calls {t.failed_calls:,.0f}"
    return line + (" (no answer after retries; resume the run to retry them)" if t.failed_calls else "")


def _checks_lines(report: CostReport) -> list[str]:
    """The requests of the checks before the first call, by check, and every request sent (nothing for a report
    of records alone)."""
    checks = report.checks
    if checks is None:
        return []
    kinds = ", ".join(f"{check} {n:,}" for check, n in sorted(checks.by_check.items()))
    line = f"requests of the checks before the first call {checks.total:,}" + (f" ({kinds})" if kinds else "")
    if not checks.complete:
        line += "; a session's checks were not counted (it ran before madrag counted them)"
    sent = report.requests_sent
    return [line + ("" if sent is None else f"; requests sent in all {sent:,}")]


def _prefix_cache_line(t: Tally) -> str:
    """Prompt tokens served from the servers' prefix caches, where they said, and the calls that did not say."""
    reported = t.calls - t.no_usage_calls - t.cache_unreported_calls
    if not reported:
        line = "prefix-cached prompt tokens: not reported by the server"
    else:
        share = t.cached_prompt_tokens / t.cache_reported_prompt_tokens if t.cache_reported_prompt_tokens else 0.0
        line = (
            f"prefix-cached prompt tokens {_num(t.cached_prompt_tokens)} ({share:.1%}), uncached "
            f"{_num(t.uncached_prompt_tokens)}, over {_num(reported)} calls that reported it"
        )
    return line + (f"; not reported by {_num(t.cache_unreported_calls)} calls" if t.cache_unreported_calls else "")


def render_report(report: CostReport) -> str:
    """A cost report as text: total, per-unit means, each protocol three ways, then by model and by role."""
    t, priced = report.total, report.priced
    lines = [
        _line("total", t, priced),
        f"answers per call {t.requests_per_call:.3f}; cache hits {t.cached_calls:,.0f} calls; "
        f"errors {t.errors:,.0f}; truncated {t.truncated_calls:,.0f}; without usage {t.no_usage_calls:,.0f}"
        + (f"; unpriced calls {t.unpriced_calls:,.0f}" if priced else ""),
        _sent_line(t),
        *_checks_lines(report),
        _prefix_cache_line(t),
        *_retry_lines(report),
        *_unit_summary(report),
        "by protocol (own = its own calls; shared = debates / shared round-0 calls it read, whole; "
        "attributed = own + equal share):",
    ]
    for name, pc in report.protocols.items():
        with_ = f" (shared {', '.join(pc.debates)} with {', '.join(pc.shared_with)})" if pc.shared_with else ""
        lines += [
            f"  {name}{with_}",
            "    " + _line("own", pc.own, priced),
            "    " + _line("shared calls read", pc.shared, priced),
            "    " + _line("attributed", pc.attributed, priced),
        ]
    if report.unattributed.calls:
        lines.append("  " + _line("shared calls nothing read", report.unattributed, priced))
    lines.append("by model:")
    lines += ["  " + _line(model or "(unknown)", tally, priced) for model, tally in sorted(report.by_model.items())]
    lines.append("by role:")
    lines += ["  " + _line(role, tally, priced) for role, tally in sorted(report.by_role.items())]
    if not priced:
        lines.append("no price table given: pass one to estimate the spend")
    return "\n".join(lines)


def render_estimate(estimate: RunEstimate, priced: bool) -> str:
    """A dry-run estimate as text: total, each group needed, each protocol run alone (``priced``: gross spend)."""
    lines = [
        f"estimate for {estimate.n_essays} essays x {estimate.n_traits} traits with {', '.join(estimate.protocols)} "
        "(sample means per unit x units; debates counted once; spend as if nothing were cached):",
        _line("total", estimate.total, False) + (f"  spend {_money(estimate.total.gross_spend)}" if priced else ""),
    ]
    lines.append("  " + _time_line(estimate))
    for group, tally in estimate.groups.items():
        basis = f"{group} (from {estimate.sample_units[group]} sample units)"
        lines.append("  " + _line(basis, tally, False) + (f"  spend {_money(tally.gross_spend)}" if priced else ""))
    for name, tally in estimate.per_protocol.items():
        lines.append(
            f"  {name} run alone: {tally.calls:,.0f} calls" + (f", {_money(tally.gross_spend)}" if priced else "")
        )
    return "\n".join(lines)


def _time_line(estimate: RunEstimate) -> str:
    """The planned run's time at the sample's pace, or why there is none."""
    pace = estimate.pace
    if pace is None:
        return "time: not estimated (the backend answered none of the sample's calls: all from the response cache)"
    at_once = estimate.served.at_once
    served = "" if at_once is None else f", the server working on {at_once} at once"
    if estimate.served.slots is not None:
        served += f" of its {estimate.served.slots} slots"
    flight = "" if pace.in_flight is None else f"; {pace.in_flight:.1f} requests in flight on average{served}"
    slower = f"; x{estimate.slowdown:.2f} for --concurrency {estimate.concurrency}" if estimate.slowdown > 1 else ""
    return (
        f"time: {duration(estimate.seconds)} at the sample's pace ({pace.calls:,} calls answered in "
        f"{pace.seconds:.0f} s, {pace.per_call_s:.2f} s a call{flight}{slower}; a run keeps as many requests in "
        "flight as the sample did, and is not assumed to go faster with more essays in flight: a server whose "
        "slots are all taken, or a CPU-bound one, answers no more calls a second)"
    )


def render_text(item: CostReport | RunEstimate, priced: bool | None = None) -> str:
    """Plain-text rendering of a report or an estimate (``priced``: show spend; default for a report: its own)."""
    if isinstance(item, CostReport):
        return render_report(item)
    return render_estimate(item, bool(priced))


def _tally_dict(t: Tally) -> dict[str, float | None]:
    """A tally's fields, its answers (``requests_per_call``) and requests sent (``attempts_per_call``) per call."""
    fields: dict[str, float | None] = {n: getattr(t, n) for n in t.__dataclass_fields__}
    return fields | {
        "requests_per_call": t.requests_per_call,
        "attempts_per_call": t.attempts_per_call,
        "uncached_prompt_tokens": t.uncached_prompt_tokens,
    }


def report_to_dict(report: CostReport) -> dict[str, Any]:
    """A JSON-ready summary of a report (per-unit tallies summarised, not listed)."""
    return {
        "total": _tally_dict(report.total),
        "priced": report.priced,
        "essay_traits": len(report.per_unit),
        "protocols": {
            name: {k: _tally_dict(v) if isinstance(v, Tally) else v for k, v in vars(pc).items()}
            for name, pc in report.protocols.items()
        },
        "unattributed": _tally_dict(report.unattributed),
        "retry_kinds": report.retry_kinds,
        "retried_calls": {c.key: list(c.retries) for c in report.retried_calls},
        "by_model": {m: _tally_dict(t) for m, t in report.by_model.items()},
        "by_role": {r: _tally_dict(t) for r, t in report.by_role.items()},
        "check_requests": None
        if report.checks is None
        else {"by_check": report.checks.by_check, "total": report.checks.total, "complete": report.checks.complete},
        "requests_sent": report.requests_sent,
    }


def estimate_to_dict(estimate: RunEstimate) -> dict[str, Any]:
    """A JSON-ready estimate."""
    return {
        "n_essays": estimate.n_essays,
        "n_traits": estimate.n_traits,
        "protocols": estimate.protocols,
        "total": _tally_dict(estimate.total),
        "groups": {g: _tally_dict(t) for g, t in estimate.groups.items()},
        "per_protocol": {p: _tally_dict(t) for p, t in estimate.per_protocol.items()},
        "sample_units": estimate.sample_units,
        "seconds": estimate.seconds,
        "pace": None  # the sample's pace and what the server served it with
        if (pace := estimate.pace) is None
        else {
            "calls": pace.calls,
            "seconds": pace.seconds,
            "in_flight": pace.in_flight,
            "slots": estimate.served.slots,
            "concurrency": estimate.served.concurrency,
            "slowdown": estimate.slowdown,
        },
    }
