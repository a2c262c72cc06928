"""A teacher's review of a run: accepted and overridden trait scores, each its own record.

Reviews live in ``<run_dir>/reviews.sqlite``, next to the run store and apart from it: an agent record is never
changed. Every review is appended (who, when, which essay, trait and protocol, the agent's score at that moment,
the new score, the comment); the latest review of an essay-trait-protocol is the one in force, and the history
stays. Exports show the agent's score and the review side by side.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

SCHEMA = """
CREATE TABLE IF NOT EXISTS reviews (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    essay_id TEXT NOT NULL,
    trait TEXT NOT NULL,
    protocol TEXT NOT NULL,
    action TEXT NOT NULL,
    agent_score INTEGER,
    new_score INTEGER,
    comment TEXT NOT NULL,
    reviewer TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS reviews_cell ON reviews (essay_id, trait, protocol);
"""

Action = Literal["accept", "override"]


class Review(BaseModel):
    """One review of a trait score: ``accept`` keeps the agent's score, ``override`` replaces it."""

    id: int = 0
    essay_id: str
    trait: str
    protocol: str
    action: Action
    agent_score: int | None = None
    new_score: int | None = None
    comment: str = Field(default="", max_length=5000)
    reviewer: str = Field(default="teacher", max_length=200)
    created_at: float = Field(default_factory=time.time)

    @property
    def final(self) -> int | None:
        """The score in force after this review."""
        return self.new_score if self.action == "override" else self.agent_score


def _connect(run_dir: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(run_dir / "reviews.sqlite", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.executescript(SCHEMA)
    return conn


_COLUMNS = "id, essay_id, trait, protocol, action, agent_score, new_score, comment, reviewer, created_at"


def add_review(run_dir: Path, review: Review) -> Review:
    """Append a review; returns it with its id."""
    conn = _connect(run_dir)
    try:
        cur = conn.execute(
            f"INSERT INTO reviews ({_COLUMNS.replace('id, ', '', 1)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                review.essay_id,
                review.trait,
                review.protocol,
                review.action,
                review.agent_score,
                review.new_score,
                review.comment,
                review.reviewer,
                review.created_at,
            ),
        )
        return review.model_copy(update={"id": int(cur.lastrowid or 0)})
    finally:
        conn.close()


def all_reviews(run_dir: Path, essay_id: str | None = None) -> list[Review]:
    """Every review of the run (or of one essay), oldest first."""
    if not (run_dir / "reviews.sqlite").is_file():
        return []
    conn = _connect(run_dir)
    try:
        sql, args = f"SELECT {_COLUMNS} FROM reviews", []
        if essay_id is not None:
            sql, args = sql + " WHERE essay_id = ?", [essay_id]
        rows = conn.execute(sql + " ORDER BY id", args).fetchall()
    finally:
        conn.close()
    names = [c.strip() for c in _COLUMNS.split(",")]
    return [Review.model_validate(dict(zip(names, row, strict=True))) for row in rows]


def review_version(run_dir: Path) -> int:
    """A number that changes whenever a review is added (the last review's id; 0 without reviews)."""
    if not (run_dir / "reviews.sqlite").is_file():
        return 0
    conn = _connect(run_dir)
    try:
        return int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM reviews").fetchone()[0])
    finally:
        conn.close()


def latest(reviews: list[Review]) -> dict[tuple[str, str, str], Review]:
    """The review in force per (essay, trait, protocol)."""
    out: dict[tuple[str, str, str], Review] = {}
    for review in reviews:
        out[(review.essay_id, review.trait, review.protocol)] = review
    return out
