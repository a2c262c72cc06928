"""What a retrieval answers: a pool essay with its reference scores and its distance to the query
(:class:`Exemplar`), one per score level (:class:`LevelExemplar`), and the metadata key of a reference score.
Shared by the bank (:mod:`madrag.retrieval.bank`) and the anchors (:mod:`madrag.retrieval.anchors`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

SCORE_PREFIX = "score::"


class Exemplar(BaseModel):
    """A pool essay returned by a retrieval, with its reference scores and its distance to the query."""

    model_config = ConfigDict(frozen=True)

    essay_id: str
    text: str
    scores: dict[str, int] = Field(default_factory=dict)
    essay_set: int | None = None
    distance: float  # cosine distance, 1 - similarity
    similarity: float  # cosine similarity of the two essay vectors


class LevelExemplar(BaseModel):
    """Procedure 2's answer for one score level of one trait; ``exemplar`` is None when none is available."""

    model_config = ConfigDict(frozen=True)

    trait: str
    score: int
    exemplar: Exemplar | None = None


def score_key(trait_name: str) -> str:
    """Metadata key holding a pool essay's reference score for ``trait_name``."""
    return f"{SCORE_PREFIX}{trait_name}"
