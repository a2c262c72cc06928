"""The JSON shapes the HTTP API returns, as pydantic models: FastAPI checks every answer against them and
``/docs`` (OpenAPI) shows them, endpoint by endpoint. The requests are in :mod:`madrag.server.http.schemas`;
a run and its progress in :mod:`madrag.server.runs.responses`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from madrag.server.reviews import Review


class Health(BaseModel):
    """The server is up: its version, and whether requests need its token."""

    status: str = "ok"
    version: str
    token_required: bool


class ProtocolInfo(BaseModel):
    """A scoring protocol and whether it retrieves scored exemplars (needs an exemplar pool)."""

    name: str
    retrieval: bool


class RubricSummary(BaseModel):
    """A rubric of the catalog: shipped (ASAP sets 7 and 8) or created, and whether the shipped exemplar pool
    fits it."""

    id: str
    name: str
    traits: list[str]
    shipped: bool
    shipped_pool: bool


class RubricOut(BaseModel):
    """One rubric with its traits, scales and level descriptions (as the library's rubric JSON)."""

    id: str
    rubric: dict[str, Any]


class ScoreRow(BaseModel):
    """One trait score of one essay by one protocol, with the human reference and the review in force."""

    model_config = ConfigDict(extra="allow")

    essay_id: str
    protocol: str
    trait: str
    score: int | None
    reference: int | None = None
    rater1: float | None = None
    rater2: float | None = None
    score_mode: str | None = None
    expected: float | None = None
    distribution: dict[int, float] | None = None
    n_judges: int | None = None
    n_usable: int | None = None
    truncated: bool | None = None
    rationale: str = ""
    review: str | None = None
    override_score: int | None = None
    final_score: int | None = None
    review_comment: str | None = None
    reviewer: str | None = None
    reviewed_at: float | None = None
    grade: int | None = None
    """The grade in force: the teacher's override, else the teacher's own score from the class file, else the AI's."""
    graded_by: str | None = None
    """``teacher`` or ``ai`` (None: no grade)."""


class RunScores(BaseModel):
    """Every trait score of a run (essay x trait x protocol), each with its review."""

    run_id: str
    rows: list[ScoreRow]


class DebateTurn(BaseModel):
    role: str
    round: int
    text: str
    confidence: float | None = None
    confidence_source: str | None = None


class ProtocolDetail(BaseModel):
    """One protocol's score of one trait: the Judge's rationale and score distribution, the exemplars it saw,
    the debate with confidences, and the reviews (``review``: the one in force)."""

    protocol: str
    scored: bool
    score: int | None
    score_mode: str | None = None
    distribution: dict[str, float] | None = None
    expected: float | None = None
    rationale: str = ""
    judge_error: str | None = None
    exemplars: list[dict[str, Any]] = Field(default_factory=list)
    confidences: dict[str, Any] = Field(default_factory=dict)
    debate: list[DebateTurn] = Field(default_factory=list)
    reviews: list[Review] = Field(default_factory=list)
    review: Review | None = None
    grade: int | None = None
    """The grade in force (the teacher's override, else the teacher's own score from the class file, else the
    AI's ``score``): the score every page and file shows."""
    graded_by: str | None = None
    """``teacher`` or ``ai`` (None: no grade)."""
    graded_how: str = "missing"
    """``override``, ``class file``, ``accepted``, ``ai`` or ``missing``."""
    grading: bool = False
    """Whether this protocol's scores are the run's grades (the others are shown for comparison)."""


class TraitDetail(BaseModel):
    trait: str
    min: int
    max: int
    levels: dict[int, str] = Field(default_factory=dict)
    """The rubric's description of each score of the trait."""
    reference: int | None = None
    raters: list[float] = Field(default_factory=list)
    protocols: list[ProtocolDetail]


class EssayText(BaseModel):
    id: str
    text: str
    fold: int | None = None


class EssayRecords(BaseModel):
    """One essay of a run: its text and, per trait and protocol, what the agents said."""

    run_id: str
    essay: EssayText
    traits: list[TraitDetail]


class EvaluationOut(BaseModel):
    """``madrag eval``'s tables of a run (QWK per trait and protocol against the human scores)."""

    run_id: str
    tables: dict[str, list[list[str]]] = Field(description="title -> rows, the first row the header")


class TraitResult(BaseModel):
    trait: str
    score: int | None
    rationale: str = ""
    score_mode: str | None = None
    distribution: dict[int, float] | None = None


class SingleScore(BaseModel):
    """One essay scored now: its trait scores, the run that holds its records, and how long it took."""

    run_id: str
    essay_id: str
    protocol: str
    scores: list[TraitResult]
    elapsed_s: float | None = None
