"""What a retrieval answers: a pool essay with its reference scores and its distance to the query
(:class:`Exemplar`), one per score level (:class:`LevelExemplar`), and the metadata key of a reference score.
Shared by the bank (:mod:`madrag.retrieval.bank`) and the anchors (:mod:`madrag.retrieval.anchors`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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

    @classmethod
    def stored(cls, essay_id: str, text: str, meta: Mapping[str, Any], distance: float) -> Exemplar:
        """A pool essay as a bank stores it (its reference scores under :func:`score_key`), at ``distance``."""
        set_raw = meta.get("essay_set")
        return cls(
            essay_id=essay_id,
            text=text,
            scores={k[len(SCORE_PREFIX) :]: int(v) for k, v in sorted(meta.items()) if k.startswith(SCORE_PREFIX)},
            essay_set=int(set_raw) if set_raw is not None else None,
            distance=distance,
            similarity=1.0 - distance,
        )


class LevelExemplar(BaseModel):
    """Procedure 2's answer for one score level of one trait; ``exemplar`` is None when none is available."""

    model_config = ConfigDict(frozen=True)

    trait: str
    score: int
    exemplar: Exemplar | None = None


def score_key(trait_name: str) -> str:
    """Metadata key holding a pool essay's reference score for ``trait_name``."""
    return f"{SCORE_PREFIX}{trait_name}"
