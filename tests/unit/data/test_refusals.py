"""The refused rows' summary keeps its count exact and its reasons bounded, added one by one or merged."""

from __future__ import annotations

from madrag.data.refusals import MAX_EXAMPLES, MAX_REASONS, OTHER, Refusals


def _distinct(n: int, start: int = 0) -> Refusals:
    summary = Refusals()
    for i in range(start, start + n):
        summary.add(f"row {i}", f"row {i}: reason number {i}")
    return summary


def test_reasons_past_the_bound_are_counted_together_and_nothing_is_lost() -> None:
    summary = _distinct(MAX_REASONS + 5)
    assert summary.total == MAX_REASONS + 5 and sum(summary.reasons.values()) == summary.total
    assert len(summary.reasons) == MAX_REASONS + 1 and summary.reasons[OTHER] == 5
    assert "reason number 0" in summary.reasons and "reason number 24" not in summary.reasons
    assert len(summary.examples) == MAX_EXAMPLES


def test_a_reason_already_kept_is_counted_under_its_own_name() -> None:
    summary = _distinct(MAX_REASONS)
    summary.add("row 99", "row 99: reason number 3")  # the row is left out of the reason: it counts with row 3's
    assert summary.reasons["reason number 3"] == 2 and OTHER not in summary.reasons


def test_merged_summaries_keep_the_same_bound() -> None:
    merged = _distinct(15).extend(_distinct(15, start=10))  # 10..14 in both, 15..24 new
    assert merged.total == 30 and sum(merged.reasons.values()) == 30
    assert len(merged.reasons) == MAX_REASONS + 1
    assert merged.reasons["reason number 10"] == 2 and merged.reasons[OTHER] == 5  # 20..24 past the bound
    assert len(merged.examples) == MAX_EXAMPLES
