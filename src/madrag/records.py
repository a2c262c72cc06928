"""One record per agent call (the MADRAG paper's A.1 output logging, plus what makes a result traceable)."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any, Literal

from pydantic import BaseModel, Field

from madrag.providers.base import Message, TokenLogprob, Usage

ConfidenceSource = Literal["first_token_logprob", "self_reported", "none"]
ScoreMode = Literal[
    "constrained_distribution", "constrained_schema", "parsed_text", "parsed_followup", "baseline", "failed"
]
"""How a score was read: from a Judge (constrained, parsed text or a follow-up), or set by an LLM-free baseline."""

BASELINE_ROLE = "baseline"
"""The role of an LLM-free baseline's records (``madrag baseline``); a protocol's final scores have role ``judge``."""


def call_key(protocol: str, essay_id: str, trait: str, role: str, round_: int = 1, index: int = 0) -> str:
    """The identity of one agent call inside a run: a finished key is never called again on resume."""
    return f"{protocol}|{essay_id}|{trait}|{role}|{round_}|{index}"


def called_by(key: str, protocol: str) -> bool:
    """Whether the call (or failed attempt) of record key ``key`` was made by ``protocol`` (:func:`call_key`); a
    score row naming another protocol's record reused that protocol's call (the adaptive debate's screening Judge)."""
    return key.startswith(f"{protocol}|")


FAILED_MARK = "|failed|"
"""What a failed call's record key adds to the call's key (:func:`failed_key`)."""


def failed_key(key: str, attempt_id: str) -> str:
    """The record key of a failed attempt at call ``key`` (``attempt_id`` tells attempts apart): never the call's
    own key, which stays free for the call to be made again on resume."""
    return f"{key}{FAILED_MARK}{attempt_id}"


def prompt_hash(messages: list[Message]) -> str:
    """A short SHA-256 of the request's messages (role and content), to see which calls got the same prompt."""
    blob = json.dumps([m.model_dump() for m in messages], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


class ScoreResult(BaseModel):
    """How the Judge's integer came about. ``reported`` is the value the run uses (a run setting)."""

    parsed: int | None = None  # from ``Final score: N`` (or the constrained token)
    distribution: dict[int, float] | None = None  # p(score) over valid scores, renormalised
    argmax: int | None = None
    expected: float | None = None
    mode: ScoreMode = "failed"
    reported: int | None = None
    reported_from: Literal["parsed", "argmax", "expected"] = "parsed"
    invalid_raw: str | None = None  # what was found when the score was unusable


class EvidenceCounts(BaseModel):
    """What an answer says about its essay (:mod:`madrag.agents.evidence`): the quoted spans it gives as
    evidence and how many were found in the essay, and its sentences citing an anonymization placeholder as an
    error. ``checked`` is False when quotes were not looked at (``--evidence-check off``)."""

    checked: bool = True
    quotes_found: int = 0
    quotes_verified: int = 0
    quotes_unverified: int = 0
    unverified_quotes: list[str] = Field(default_factory=list)
    placeholder_errors: int = 0


class AgentRecord(BaseModel):
    """Everything about one agent call: who (protocol, role, round, index) on what (essay, trait), the request
    (provider, model, settings, messages), the answer (text, rationale, token logprobs, confidence, score) and
    its cost (usage, latency, requests), or the error that ended it. Stored as JSON, keyed by :func:`call_key`.

    A call that got no answer after its retries is a *failed* record (``failed``, ``error`` saying why, no
    text), stored under :func:`failed_key` so that the call itself stays unfinished: readers of scores skip
    failed records, a resume makes the call again, and ``madrag costs`` still counts the requests it sent. (A
    Judge answer whose score could not be read is not failed: it has an ``error`` but is the call's record.)"""

    run_id: str
    key: str
    essay_id: str
    trait: str  # a rubric trait name, or "*" for a call that scores every trait
    protocol: str
    role: str
    round: int = 1
    index: int = 0
    provider: str = ""
    # the model the call's answers name (the ``model`` of each chat completion; the one asked for when they name
    # none): llama.cpp's server answers as the model it runs under any name asked
    model: str = ""
    requested_model: str | None = None  # the model the call asked for (None: a record made before it was kept)
    settings: dict[str, Any] = Field(default_factory=dict)
    prompt_hash: str = ""
    messages: list[Message] = Field(default_factory=list)
    text: str = ""
    rationale: str | None = None
    tokens: list[TokenLogprob] | None = None
    confidence: float | None = None
    confidence_source: ConfidenceSource = "none"
    score: ScoreResult | None = None
    trait_scores: dict[str, ScoreResult] | None = None  # for calls that score every trait at once
    context: dict[str, Any] = Field(default_factory=dict)  # exemplars shown, transcript fed, confidences
    usage: Usage = Field(default_factory=Usage)
    evidence: EvidenceCounts | None = None  # None: no essay to check against (or a record older than the check)
    latency_s: float = 0.0  # time the backend spent on this call's requests
    wall_s: float = 0.0  # from the call's start to its record, queueing for a backend slot included
    # answers the call used (a two-step Judge: 2; a follow-up adds one); a request retried once is one answer of
    # two requests sent (``attempts``). Records made before issue 48 named it ``requests``: a store holding them is
    # read through madrag.pipeline.migrations, which renames it
    answers: int = 1
    # requests sent to the backend, failed attempts included (0: every answer came from the response cache);
    # None on records made before they were counted
    attempts: int | None = None
    # why each failed attempt was retried (429, 5xx, timeout, dropped connection), over all the call's requests
    retries: list[str] = Field(default_factory=list)
    cached: bool = False
    # a response of this call was cut by the token limit (``finish_reason == "length"``): its text is not the
    # whole answer (a constrained one-token score step is not counted)
    truncated: bool = False
    error: str | None = None
    failed: bool = False  # no answer after the retries: not the call's record (see the class docstring)
    created_at: float = Field(default_factory=time.time)


class TraitScore(BaseModel):
    """A protocol's final score for one essay and trait, with the records it came from: what a run store keeps as
    one row of its final scores (:meth:`madrag.store.RunStore.scores`)."""

    essay_id: str
    trait: str
    protocol: str
    score: int | None
    result: ScoreResult | None = None
    rationale: str = ""
    record_key: str = ""
    record_keys: list[str] = Field(default_factory=list)  # every record it came from (empty: ``record_key`` alone)
    n_judges: int = 1
    n_usable: int | None = None  # judges whose score could be read (None: not counted, e.g. consensus agents)
    mean_score: float | None = None  # set when several judges are averaged
    truncated: bool = False  # a Judge answer behind this score was cut by the token limit

    @property
    def sources(self) -> list[str]:
        """The keys of the records the score came from."""
        return list(self.record_keys) or ([self.record_key] if self.record_key else [])
