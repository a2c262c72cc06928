"""A teacher's review of a run: accepted and overridden trait scores, each its own record.

Reviews live in ``<run_dir>/reviews.sqlite``, next to the run store and apart from it: an agent record is never
changed. Every review is appended (who, when, which essay, trait and protocol, the agent's score at that moment,
the new score, the comment); the history stays. Four actions:

- ``override``: the teacher's own score replaces the AI's;
- ``accept``: the teacher confirmed the AI's score, this one score;
- ``bulk-accept``: the AI's score approved in bulk (one click for many scores: recorded as such, never as a
  decision of the teacher's on this score; :func:`add_bulk_approvals` writes them in one transaction);
- ``comment``: a comment saved alone; it sets no score and decides nothing.

The decision in force of an essay-trait-protocol is its latest override, acceptance or bulk approval; the comment
in force is the one the teacher last wrote (with a decision or alone; a bulk approval writes none and keeps it).
Stores written before bulk approvals and comments were their own actions (only ``accept`` / ``override``) read as
they were. Exports show the agent's score and the review side by side.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from madrag.store.schema import immediate

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

Action = Literal["accept", "override", "bulk-accept", "comment"]
DECISIONS: frozenset[str] = frozenset({"accept", "override", "bulk-accept"})
"""The actions that decide a grade (a ``comment`` decides nothing)."""
ACTION_WORDS: dict[str, str] = {
    "accept": "confirmed madrag's score",
    "override": "changed the score",
    "bulk-accept": "approved in bulk",
    "comment": "comment",
}


class Review(BaseModel):
    """One review of a trait score: ``accept`` keeps the agent's score, ``override`` replaces it, ``bulk-accept``
    keeps it in a bulk approval, ``comment`` only saves a comment."""

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
        """The score in force after this review (a comment alone: the agent's, as before it)."""
        return self.new_score if self.action == "override" else self.agent_score

    @property
    def decides(self) -> bool:
        """This review decides the grade (every action but a comment alone)."""
        return self.action in DECISIONS

    @property
    def words(self) -> str:
        """The action in plain words, for the review history."""
        return ACTION_WORDS[self.action]


def _connect(run_dir: Path) -> sqlite3.Connection:
    # a writer waits for another's transaction (a large bulk approval) rather than failing at once
    conn = sqlite3.connect(run_dir / "reviews.sqlite", isolation_level=None, timeout=60)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.executescript(SCHEMA)
    return conn


_COLUMNS = "id, essay_id, trait, protocol, action, agent_score, new_score, comment, reviewer, created_at"
_NAMES = [c.strip() for c in _COLUMNS.split(",")]
"""The columns by name, each a :class:`Review` field."""
_INSERT = f"INSERT INTO reviews ({_COLUMNS.replace('id, ', '', 1)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
_UNDECIDED = (
    "SELECT 1 FROM reviews WHERE essay_id = ? AND trait = ? AND protocol = ? "
    f"AND action IN ({', '.join(repr(a) for a in sorted(DECISIONS))}) LIMIT 1"
)


def _values(review: Review) -> tuple[object, ...]:
    return tuple(getattr(review, name) for name in _NAMES[1:])  # _INSERT's columns, by name (the id is SQLite's)


def add_review(run_dir: Path, review: Review) -> Review:
    """Append a review; returns it with its id."""
    with closing(_connect(run_dir)) as conn:
        cur = conn.execute(_INSERT, _values(review))
        return review.model_copy(update={"id": int(cur.lastrowid or 0)})


@dataclass
class BulkProgress:
    """How far a bulk approval has got while it is written, what its page shows: ``done`` of ``total`` scores
    checked inside its one transaction (nothing is approved until all are: the count is progress, not scores
    saved); ``written`` once it committed, or ``error`` when it stopped (none approved). ``back``: the page to
    return to, which the count approved ends (``...?approved=``)."""

    run_id: str
    back: str
    total: int | None = None
    done: int = 0
    written: int | None = None
    error: str | None = None
    ended_at: float | None = None
    work: object = field(default=None, repr=False)  # what keeps the approval's task alive while it runs

    def advance(self, done: int, total: int) -> None:
        self.done, self.total = done, total

    def end(self, written: int | None, error: str | None = None) -> None:
        self.written, self.error, self.ended_at = written, error, time.time()


def add_bulk_approvals(
    run_dir: Path, approvals: list[Review], progress: Callable[[int, int], None] | None = None
) -> int:
    """Write a bulk approval whole, in one transaction: every one of ``approvals`` (action ``bulk-accept``) whose
    essay-trait-protocol nobody decided yet, or none of them (an error or a kill midway leaves the store as it was
    before). Undecided is checked inside the transaction, so a decision the teacher made while the approval was
    being prepared stays in force. ``progress(done, total)``: told as each approval is checked. Returns how many
    were written."""
    if any(a.action != "bulk-accept" for a in approvals):
        raise ValueError("a bulk approval writes only bulk-accept reviews")
    with closing(_connect(run_dir)) as conn:
        written = 0
        with immediate(conn):  # the write lock for the whole approval: no decision slips in between
            for done, review in enumerate(approvals, 1):
                if conn.execute(_UNDECIDED, (review.essay_id, review.trait, review.protocol)).fetchone() is None:
                    conn.execute(_INSERT, _values(review))
                    written += 1
                if progress is not None:
                    progress(done, len(approvals))
        return written


def all_reviews(run_dir: Path, essay_id: str | None = None) -> list[Review]:
    """Every review of the run (or of one essay), oldest first."""
    if not (run_dir / "reviews.sqlite").is_file():
        return []
    sql, args = f"SELECT {_COLUMNS} FROM reviews", []
    if essay_id is not None:
        sql, args = sql + " WHERE essay_id = ?", [essay_id]
    with closing(_connect(run_dir)) as conn:
        rows = conn.execute(sql + " ORDER BY id", args).fetchall()
    return [Review.model_validate(dict(zip(_NAMES, row, strict=True))) for row in rows]


def review_version(run_dir: Path) -> int:
    """A number that changes whenever a review is added (the last review's id; 0 without reviews)."""
    if not (run_dir / "reviews.sqlite").is_file():
        return 0
    with closing(_connect(run_dir)) as conn:
        return int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM reviews").fetchone()[0])


def latest(reviews: list[Review]) -> dict[tuple[str, str, str], Review]:
    """The review in force per (essay, trait, protocol): its latest decision (override, acceptance or bulk
    approval) carrying the comment in force (the one last written, with a decision or alone; a bulk approval
    keeps the one before it); where nothing is decided but a comment was saved, the latest ``comment`` review."""
    decided: dict[tuple[str, str, str], Review] = {}
    commented: dict[tuple[str, str, str], Review] = {}
    for review in reviews:
        cell = (review.essay_id, review.trait, review.protocol)
        if review.action != "bulk-accept":
            commented[cell] = review
        if review.decides:
            decided[cell] = review
    out: dict[tuple[str, str, str], Review] = {}
    for cell, note in commented.items():
        if cell not in decided:
            out[cell] = note
    for cell, decision in decided.items():
        comment = commented[cell].comment if cell in commented else decision.comment
        out[cell] = decision if comment == decision.comment else decision.model_copy(update={"comment": comment})
    return out
