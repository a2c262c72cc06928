"""The pipeline's structured concurrency, kept here for existing imports: it lives in :mod:`madrag.concurrency`
(below the protocols, which use it too)."""

from __future__ import annotations

from madrag.concurrency import RECORDED, gather_or_cancel, gather_settled

__all__ = ["RECORDED", "gather_or_cancel", "gather_settled"]
