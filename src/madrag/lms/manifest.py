"""What a pull recorded (``canvas-pull.json`` or ``classroom-pull.json`` beside the pulled essays, one format for
both LMSs): the LMS, the course and assignment (Canvas: its posting policy and which criterion each trait is;
Classroom: whether madrag's own Cloud project made the coursework, so may grade it), and per submission its ids,
attempt and the grade the LMS held at the pull, so a push finds a grade changed there since (a conflict, left
alone). :func:`save_pull` writes a pull's four files. No credential is in any of them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from madrag.errors import InputError
from madrag.files.atomic import write_text_atomic
from madrag.lms.rubric_import import CriterionLink
from madrag.rubric import Rubric

Lms = Literal["canvas", "classroom"]
LmsId = int | str
"""An id in an LMS: Canvas's are numbers, Google Classroom's strings."""
MANIFESTS: dict[Lms, str] = {"canvas": "canvas-pull.json", "classroom": "classroom-pull.json"}
ESSAYS = "essays.jsonl"
RUBRIC = "rubric.json"
ROSTER = "roster.json"
LMS_NAMES: dict[Lms, str] = {"canvas": "Canvas", "classroom": "Google Classroom"}


def grade_number(value: Any) -> float | None:
    """A grade or points value an LMS answered (a number, or a numeric string) as a float; None when it gave none."""
    return None if value is None else float(value)


class Criterion(BaseModel):
    """A trait and its Canvas criterion: the rating id of each level that is a rating (Classroom: the trait and
    its points only; ``criterion_id`` empty)."""

    trait: str
    criterion_id: str
    ratings: dict[int, str]
    points: float

    @classmethod
    def of(cls, link: CriterionLink) -> Criterion:
        return cls(trait=link.trait, criterion_id=link.criterion_id, ratings=link.ratings, points=link.points)


class PulledSubmission(BaseModel):
    """One student's submission as pulled: ``score`` / ``grade`` / ``excused`` are the LMS's at the pull (Classroom:
    ``score`` its ``assignedGrade``, ``draft`` its ``draftGrade``, ``state`` the submission's state)."""

    essay_id: str
    user_id: LmsId
    submission_id: LmsId | None = None
    attempt: int | None = None
    submission_type: str | None = None
    source: str = ""
    score: float | None = None
    grade: str | None = None
    excused: bool = False
    graded_at: str | None = None
    draft: float | None = None
    state: str | None = None


@dataclass(frozen=True)
class Pulled:
    """What a pull wrote: the folder, the manifest and how many essays."""

    folder: Path
    manifest: PullManifest
    essays: int


class Refused(BaseModel):
    """A student whose submission was not pulled, and why."""

    user_id: LmsId
    name: str
    reason: str


class PullManifest(BaseModel):
    lms: Lms = "canvas"
    canvas_url: str = ""
    course_id: LmsId
    course_name: str = ""
    assignment_id: LmsId
    assignment_name: str = ""
    points_possible: float | None = None
    post_manually: bool = False
    made_by_madrag: bool | None = None
    """Classroom: whether this coursework was made by madrag's Cloud project (``associatedWithDeveloper``), the
    only project Google lets change its grades; None for Canvas."""
    pulled_at: str
    criteria: list[Criterion]
    submissions: list[PulledSubmission] = Field(default_factory=list)
    refused: list[Refused] = Field(default_factory=list)

    def by_essay(self) -> dict[str, PulledSubmission]:
        return {s.essay_id: s for s in self.submissions}

    @property
    def lms_name(self) -> str:
        return LMS_NAMES[self.lms]


@dataclass
class Gathered:
    """A pull's submissions read: the essays (id, text), each pulled submission, the refused and the roster."""

    essays: list[dict[str, str]] = field(default_factory=list)
    submissions: list[PulledSubmission] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    roster: dict[str, dict[str, str]] = field(default_factory=dict)


def gather(
    found: Iterable[tuple[LmsId, Any, dict[str, str]]],
    text_of: Callable[[Any], tuple[str, str]],
    record: Callable[[Any, str, str], PulledSubmission],
) -> Gathered:
    """Each (user id, submission, student's identifiers) of ``found`` read by ``text_of`` (text, where it came
    from; an InputError says why there is none: the student is refused) and recorded by ``record``."""
    out = Gathered()
    for user_id, submission, who in found:
        essay_id = str(user_id)
        try:
            text, source = text_of(submission)
        except InputError as exc:
            out.refused.append(Refused(user_id=user_id, name=who["name"], reason=str(exc)))
            continue
        out.essays.append({"id": essay_id, "text": text})
        out.submissions.append(record(submission, essay_id, source))
        out.roster[essay_id] = who
    return out


def save_manifest(folder: Path, manifest: PullManifest) -> Path:
    path = folder / MANIFESTS[manifest.lms]
    write_text_atomic(path, manifest.model_dump_json(indent=2))
    return path


def save_pull(folder: Path, gathered: Gathered, rubric: Rubric, manifest: PullManifest) -> Pulled:
    """A pull's files: ``essays.jsonl`` (id, text), ``rubric.json``, ``roster.json`` (by essay id) and the manifest,
    each written whole."""
    lines = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in gathered.essays)
    write_text_atomic(folder / ESSAYS, lines)
    write_text_atomic(folder / RUBRIC, json.dumps(rubric.model_dump(mode="json"), indent=2, ensure_ascii=False))
    write_text_atomic(folder / ROSTER, json.dumps(gathered.roster, ensure_ascii=False, indent=2))
    save_manifest(folder, manifest)
    return Pulled(folder, manifest, len(gathered.essays))


def load_manifest(folder: Path) -> PullManifest:
    """The manifest of a pull folder (Canvas's or Classroom's); an InputError naming what is wrong."""
    found = [folder / name for name in MANIFESTS.values() if (folder / name).is_file()]
    if len(found) != 1:
        what = "both " + " and ".join(MANIFESTS.values()) if found else f"no {' or '.join(MANIFESTS.values())}"
        raise InputError(f"{folder} holds {what}: give the folder one `madrag lms pull` wrote")
    path = found[0]
    try:
        return PullManifest.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, ValidationError) as exc:
        raise InputError(f"{path} is not a pull manifest madrag wrote: {str(exc)[:200]}") from None


def load_roster(folder: Path) -> dict[str, dict[str, str]]:
    path = folder / ROSTER
    found: dict[str, dict[str, str]] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return found
