"""What a pull recorded (``canvas-pull.json`` beside the pulled essays): the course and assignment, its posting
policy, which Canvas criterion each trait is, and per submission its ids, attempt and the grade Canvas held at
the pull, so a push finds a grade changed in Canvas since (a conflict, left alone). No credential is in it."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from madrag.atomic_files import write_text_atomic
from madrag.errors import InputError
from madrag.lms.rubric_import import CriterionLink

MANIFEST = "canvas-pull.json"
ESSAYS = "essays.jsonl"
RUBRIC = "rubric.json"
ROSTER = "roster.json"


class Criterion(BaseModel):
    """A trait and its Canvas criterion: the rating id of each level that is a rating."""

    trait: str
    criterion_id: str
    ratings: dict[int, str]
    points: float

    @classmethod
    def of(cls, link: CriterionLink) -> Criterion:
        return cls(trait=link.trait, criterion_id=link.criterion_id, ratings=link.ratings, points=link.points)


class PulledSubmission(BaseModel):
    """One student's submission as pulled: ``score`` / ``grade`` / ``excused`` are Canvas's at the pull."""

    essay_id: str
    user_id: int
    submission_id: int | None = None
    attempt: int | None = None
    submission_type: str | None = None
    source: str = ""
    score: float | None = None
    grade: str | None = None
    excused: bool = False
    graded_at: str | None = None


class Refused(BaseModel):
    """A student whose submission was not pulled, and why."""

    user_id: int
    name: str
    reason: str


class PullManifest(BaseModel):
    canvas_url: str
    course_id: int
    course_name: str = ""
    assignment_id: int
    assignment_name: str = ""
    points_possible: float | None = None
    post_manually: bool = False
    pulled_at: str
    criteria: list[Criterion]
    submissions: list[PulledSubmission] = Field(default_factory=list)
    refused: list[Refused] = Field(default_factory=list)

    def by_essay(self) -> dict[str, PulledSubmission]:
        return {s.essay_id: s for s in self.submissions}


def save_manifest(folder: Path, manifest: PullManifest) -> Path:
    path = folder / MANIFEST
    write_text_atomic(path, manifest.model_dump_json(indent=2))
    return path


def load_manifest(folder: Path) -> PullManifest:
    """The manifest of a pull folder; an InputError naming what is wrong."""
    path = folder / MANIFEST
    if not path.is_file():
        raise InputError(f"{folder} holds no {MANIFEST}: give the folder `madrag lms pull` wrote")
    try:
        return PullManifest.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, ValidationError) as exc:
        raise InputError(f"{path} is not a pull manifest madrag wrote: {str(exc)[:200]}") from None


def load_roster(folder: Path) -> dict[str, dict[str, str]]:
    path = folder / ROSTER
    found: dict[str, dict[str, str]] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return found
