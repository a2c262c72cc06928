"""The push journal, ``canvas-push.jsonl`` in the run folder: one line before each student's grade is sent
(``sending``) and one after Canvas took it (``sent``), with the assignment, the student, the points and a digest of
what was sent. A push killed midway and run again reads it: a student ``sent`` with the same digest is not sent
again, and a grade Canvas holds that this journal says madrag sent is madrag's own, not a conflict. Appended and
flushed line by line; a last line cut by a kill is skipped. No credential is in it."""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

JOURNAL = "canvas-push.jsonl"
Event = Literal["sending", "sent"]


@dataclass(frozen=True)
class Entry:
    event: Event
    assignment_id: int
    user_id: int
    score: float
    digest: str


def digest(payload: dict[str, Any]) -> str:
    """A short digest of what is sent to one student (grade, rubric assessment, comment)."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


class Journal:
    """The journal of one run folder's pushes."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / JOURNAL

    def entries(self, assignment_id: int) -> list[Entry]:
        if not self.path.is_file():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                raw = json.loads(line)
                entry = Entry(
                    raw["event"], int(raw["assignment_id"]), int(raw["user_id"]), float(raw["score"]), raw["digest"]
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


def sent_digests(entries: list[Entry]) -> dict[int, str]:
    """The digest last sent to each student (``sent`` lines)."""
    return {e.user_id: e.digest for e in entries if e.event == "sent"}


def our_scores(entries: list[Entry]) -> dict[int, set[float]]:
    """Every score madrag sent, or began to send, to each student (a grade Canvas holds among them is madrag's)."""
    out: dict[int, set[float]] = {}
    for e in entries:
        out.setdefault(e.user_id, set()).add(e.score)
    return out
