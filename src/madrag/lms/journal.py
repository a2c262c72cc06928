"""The push journal, ``canvas-push.jsonl`` (``classroom-push.jsonl`` for Google Classroom) in the run folder: one line
before each student's grade is sent (``sending``) and one after the LMS took it (``sent``), with the assignment, the
student, the points and a digest of what was sent. A push killed midway and run again reads it: a student ``sent``
with the same digest is not sent again, and a grade the LMS holds that this journal says madrag sent is madrag's own,
not a conflict. Appended and flushed line by line; a last line cut by a kill is skipped. No credential is in it."""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from madrag.lms.manifest import Lms, LmsId

JOURNALS: dict[Lms, str] = {"canvas": "canvas-push.jsonl", "classroom": "classroom-push.jsonl"}
JOURNAL = JOURNALS["canvas"]
Event = Literal["sending", "sent"]


@dataclass(frozen=True)
class Entry:
    event: Event
    assignment_id: LmsId
    user_id: LmsId
    score: float
    digest: str


def _id(value: object) -> LmsId:
    """An id as the journal holds it: Canvas's a number, Classroom's a string (as JSON kept them)."""
    if isinstance(value, int | str) and not isinstance(value, bool):
        return value
    raise TypeError(f"not an id: {value!r}")


def digest(payload: dict[str, Any]) -> str:
    """A short digest of what is sent to one student (grade, rubric assessment, comment)."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


class Journal:
    """The journal of one run folder's pushes."""

    def __init__(self, run_dir: Path, lms: Lms = "canvas") -> None:
        self.path = run_dir / JOURNALS[lms]

    def entries(self, assignment_id: LmsId) -> list[Entry]:
        if not self.path.is_file():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                raw = json.loads(line)
                entry = Entry(
                    raw["event"], _id(raw["assignment_id"]), _id(raw["user_id"]), float(raw["score"]), raw["digest"]
                )
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a kill
            if entry.assignment_id == assignment_id:
                out.append(entry)
        return out

    def write(self, entry: Entry) -> None:
        line = json.dumps({**entry.__dict__, "at": round(time.time(), 3)}) + "\n"
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())


def sent_digests(entries: list[Entry]) -> dict[LmsId, str]:
    """The digest last sent to each student (``sent`` lines)."""
    return {e.user_id: e.digest for e in entries if e.event == "sent"}


def our_scores(entries: list[Entry]) -> dict[LmsId, set[float]]:
    """Every score madrag sent, or began to send, to each student (a grade the LMS holds among them is madrag's)."""
    out: dict[LmsId, set[float]] = {}
    for e in entries:
        out.setdefault(e.user_id, set()).add(e.score)
    return out
