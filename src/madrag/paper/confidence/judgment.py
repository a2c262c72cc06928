"""The meta-evaluator's judgment (the confidence paper, 3.4.2-3.4.3, Figure 7's output object): its fields and
ranges, the
JSON schema a backend may be held to, and the reading of an evaluator's answer into a :class:`MetaJudgment`.

Three scores of 1-3 (instruction following, justification quality, evidence grounding) and a critical-issue
flag of 0/1; ``Q1`` is the sum of the scores and ``Q`` is 0 when the flag is raised, else ``Q1``. An answer that
is not a usable judgment raises :class:`MetaParseError` saying why; nothing is ever imputed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

SCORE_FIELDS: tuple[str, ...] = ("instruction_following", "justification_quality", "evidence_grounding")
"""The three scored dimensions, in Figure 7's order."""
RANGES: dict[str, tuple[int, int]] = {**{f: (1, 3) for f in SCORE_FIELDS}, "critical_flag": (0, 1)}
"""Each judged field's valid range (inclusive)."""

META_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **{f: {"type": "integer", "enum": [1, 2, 3]} for f in SCORE_FIELDS},
        "critical_flag": {"type": "integer", "enum": [0, 1]},
        "critical_issues_description": {"type": "string"},
        "reasoning": {"type": "string"},
    },
    "required": [*SCORE_FIELDS, "critical_flag", "critical_issues_description", "reasoning"],
    "additionalProperties": False,
}
"""The judgment as a JSON schema (a response format for backends that support one)."""


class MetaParseError(ValueError):
    """An evaluator answer that is not a usable judgment; the message says why."""


class MetaJudgment(BaseModel):
    """One judgment (Figure 7's output object). Scores must be JSON integers in range: no bools, no strings."""

    model_config = ConfigDict(strict=True)

    instruction_following: int = Field(ge=1, le=3)
    justification_quality: int = Field(ge=1, le=3)
    evidence_grounding: int = Field(ge=1, le=3)
    critical_flag: int = Field(ge=0, le=1)
    critical_issues_description: str = ""
    reasoning: str = ""

    @field_validator("critical_issues_description", "reasoning", mode="before")
    @classmethod
    def _free_text(cls, value: object) -> object:
        """The free-text fields never make a judgment unusable: null is empty, a non-string is kept as JSON."""
        if value is None:
            return ""
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    @property
    def q1(self) -> int:
        """Q1 = s_instruction + s_justification + s_evidence (3.4.3)."""
        return self.instruction_following + self.justification_quality + self.evidence_grounding

    @property
    def q(self) -> int:
        """Q = 0 if a critical issue is flagged, else Q1 (3.4.3); in [0, 9]."""
        return 0 if self.critical_flag else self.q1


def _problem(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        name = ".".join(str(p) for p in err["loc"]) or "object"
        if err["type"] == "missing":
            parts.append(f"missing field {name}")
        elif err["type"] in ("greater_than_equal", "less_than_equal"):
            lo, hi = RANGES[name]
            parts.append(f"{name} = {json.dumps(err['input'], default=repr)} out of range {lo}..{hi}")
        elif err["type"] == "int_type":
            parts.append(f"{name} must be an integer, got {json.dumps(err['input'], default=repr)}")
        else:
            parts.append(f"{name}: {err['msg']}")
    return "; ".join(parts)


def parse_meta_judgment(text: str) -> MetaJudgment:
    """The judgment in ``text``: its last complete JSON object (code fences and prose around it are ignored), or
    an object cut off in its free text whose four judged fields were all written (:func:`_cut_object`).

    Raises :class:`MetaParseError` naming the problem: no JSON object, a missing field, a value out of range
    or not an integer.
    """
    if not text.strip():
        raise MetaParseError("empty answer")
    decoder = json.JSONDecoder()
    last: dict[str, Any] | None = None
    start = text.find("{")
    while start >= 0:
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        last = obj
        start = text.find("{", end)
    if last is None:
        last = _cut_object(text)
    if last is None:
        what = "no complete JSON object (malformed or cut off)" if "{" in text else "no JSON object"
        raise MetaParseError(f"{what} in the answer")
    try:
        return MetaJudgment.model_validate(last)
    except ValidationError as exc:
        raise MetaParseError(_problem(exc)) from None


_FREE_TEXT = ("critical_issues_description", "reasoning")


def _cut_object(text: str) -> dict[str, Any] | None:
    """The fields of a JSON object cut off before its end (an answer stopped by the token limit in its free text):
    every judged field (:data:`RANGES`) the model wrote in full, as an integer, and each free-text field as far as
    it got; None unless all four judged fields are there. The scores the model stated are read, never guessed."""
    body = text[text.find("{") :] if "{" in text else ""
    found: dict[str, Any] = {}
    for name in RANGES:
        value = re.search(rf'"{name}"\s*:\s*(-?\d+)\s*[,}}\n]', body)
        if value is None:
            return None
        found[name] = int(value.group(1))
    for name in _FREE_TEXT:
        said = re.search(rf'"{name}"\s*:\s*"((?:[^"\\]|\\.)*)', body)
        if said is not None:
            try:
                found[name] = json.loads(f'"{said.group(1).rstrip(chr(92))}"')
            except json.JSONDecodeError:
                found[name] = said.group(1)
    return found
