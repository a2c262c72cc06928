"""The review store's actions: a comment saved alone decides nothing, a bulk approval is its own action (written
whole or not at all, never over a decision), and a store of the older two actions reads as it did."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from madrag.server import reviews
from madrag.server.reviews import Review, add_bulk_approvals, add_review, all_reviews, latest

CELL = ("e1", "Ideas", "MAD")


def _review(action: str, essay: str = "e1", score: int | None = 2, comment: str = "", who: str = "Ms. R") -> Review:
    new = 3 if action == "override" else score
    return Review(
        essay_id=essay,
        trait="Ideas",
        protocol="MAD",
        action=action,  # type: ignore[arg-type]
        agent_score=score,
        new_score=None if action == "comment" else new,
        comment=comment,
        reviewer=who,
    )


def test_a_comment_alone_decides_nothing_and_a_later_one_stays_with_the_decision(tmp_path: Path) -> None:
    add_review(tmp_path, _review("comment", comment="thesis?"))
    alone = latest(all_reviews(tmp_path))[CELL]
    assert alone.action == "comment" and not alone.decides and alone.comment == "thesis?"
    add_review(tmp_path, _review("override", comment="thesis?"))
    add_review(tmp_path, _review("comment", comment="a clear thesis now"))
    in_force = latest(all_reviews(tmp_path))[CELL]
    assert (in_force.action, in_force.new_score, in_force.comment) == ("override", 3, "a clear thesis now")
    assert [r.action for r in all_reviews(tmp_path)] == ["comment", "override", "comment"]  # the history stays


def test_a_bulk_approval_keeps_the_comment_written_before_it(tmp_path: Path) -> None:
    add_review(tmp_path, _review("comment", comment="check the ending"))
    assert add_bulk_approvals(tmp_path, [_review("bulk-accept")]) == 1
    in_force = latest(all_reviews(tmp_path))[CELL]
    assert (in_force.action, in_force.final, in_force.comment) == ("bulk-accept", 2, "check the ending")
    assert in_force.words == "approved in bulk"


def test_a_bulk_approval_never_writes_over_a_decision(tmp_path: Path) -> None:
    add_review(tmp_path, _review("override", essay="e1"))
    add_review(tmp_path, _review("comment", essay="e2", comment="only a comment"))
    written = add_bulk_approvals(tmp_path, [_review("bulk-accept", essay=e) for e in ("e1", "e2", "e3")])
    assert written == 2  # e1 was decided (an override): left as it is; e2 had a comment only: still undecided
    found = latest(all_reviews(tmp_path))
    assert {k[0]: r.action for k, r in found.items()} == {"e1": "override", "e2": "bulk-accept", "e3": "bulk-accept"}
    assert found[("e2", "Ideas", "MAD")].comment == "only a comment"
    with pytest.raises(ValueError, match="bulk-accept"):
        add_bulk_approvals(tmp_path, [_review("accept", essay="e4")])


def test_a_bulk_approval_that_fails_midway_writes_none_of_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add_review(tmp_path, _review("override", essay="before"))
    real = reviews._values
    calls = []

    def failing(review: Review) -> tuple[object, ...]:
        calls.append(review.essay_id)
        if len(calls) == 50:
            raise OSError("disk gone midway")
        return real(review)

    monkeypatch.setattr(reviews, "_values", failing)
    approvals = [_review("bulk-accept", essay=f"e{i}") for i in range(100)]
    with pytest.raises(OSError, match="midway"):
        add_bulk_approvals(tmp_path, approvals)
    assert len(calls) == 50  # 49 rows were inserted in the transaction before the failure
    assert [r.essay_id for r in all_reviews(tmp_path)] == ["before"]  # and none of them stayed
    monkeypatch.setattr(reviews, "_values", real)
    assert add_bulk_approvals(tmp_path, approvals) == 100  # the store is not left locked


def test_a_store_of_the_older_two_actions_reads_as_before(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "reviews.sqlite")
    conn.executescript(reviews.SCHEMA)
    rows = [
        ("e1", "Ideas", "MAD", "override", 2, 3, "mine", "Ms. R", 1.0),
        ("e2", "Ideas", "MAD", "accept", 2, 2, "", "Ms. R", 2.0),
    ]
    conn.executemany(
        f"INSERT INTO reviews ({reviews._COLUMNS.replace('id, ', '', 1)}) VALUES ({','.join('?' * 9)})", rows
    )
    conn.commit()
    conn.close()
    found = latest(all_reviews(tmp_path))
    assert [(r.action, r.final, r.comment) for r in found.values()] == [("override", 3, "mine"), ("accept", 2, "")]
