"""A scripted fake provider for fast tests: outputs from a list, a mapping or a callable; scripted logprobs.

Every request is kept in ``calls`` so a test can check what the pipeline sent.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from madrag.errors import ProviderError
from madrag.providers.base import (
    Capabilities,
    ChatRequest,
    ChatResponse,
    Provider,
    TokenLogprob,
    TopLogprob,
    Usage,
)


@dataclass
class FakeReply:
    """One scripted answer. ``logprobs`` gives per-token logprobs (tokens = whitespace-split pieces);
    ``finish_reason`` is what the backend says ended it (``"length"``: cut by the token limit); ``usage`` the
    token counts it reports (default: words counted; ``Usage(prompt_tokens=None, completion_tokens=None)``: a
    server that reports none)."""

    text: str
    logprobs: list[float] | None = None
    choice_logprobs: dict[str, float] | None = None
    error: Exception | None = None
    finish_reason: str = "stop"
    usage: Usage | None = None


Script = Sequence[str | FakeReply] | Mapping[str, str | FakeReply] | Callable[[ChatRequest], str | FakeReply]
"""Replies in order, replies by a substring of the messages, or a function of the request."""

_PIECE = re.compile(r"\s*\S+")


def _as_reply(item: str | FakeReply) -> FakeReply:
    return item if isinstance(item, FakeReply) else FakeReply(text=item)


ROLE_MARKERS = (
    ("advocate", "You are an Advocate Agent"),
    ("skeptic", "You are a Skeptic Agent"),
    ("judge", "You are the Synthesizer-Judge"),
    ("judge", "You are an impartial Judge"),
    ("meta_evaluator", "You are a meta-evaluator"),
    # the consensus paper's consensus judges (madrag/prompts/cj_*_system.txt); both Symmetric MAD agents read "neutral"
    ("single", "You are an evaluator who directly and consistently scores"),
    ("strict", "You are an evaluator who directly scores student essays very strictly"),
    ("lenient", "You are an evaluator who directly scores student essays while fairly recognizing"),
    ("neutral", "You are an evaluator who directly scores student essays fairly and impartially"),
    ("strict", "You are a strict essay evaluator who has completed"),
    ("lenient", "You are a lenient essay evaluator who has completed"),
    ("neutral", "You are a neutral essay evaluator who has completed"),
)
"""(role, wording) pairs by which a server that sees only the messages (``madrag.testing.stub_server``) tells
the roles apart. The fake provider does not use them: it reads the request's ``role`` label."""

CONSENSUS_ROLES = frozenset({"single", "strict", "lenient", "neutral"})
"""The consensus judges of the consensus paper, as :func:`request_role` names them."""

NEUTRAL_ROLES = frozenset({"neutral_a", "neutral_b"})
"""The two Symmetric MAD agents: one role for a scripted answer (they read the same instructions)."""

_SCORE_LINE = re.compile(r"^(.+?): N \(an integer from (-?\d+) to (-?\d+)\)$", re.MULTILINE)


def request_role(request: ChatRequest) -> str:
    """Which agent a request is for, from its ``role`` label (set by the pipeline, independent of the prompt
    wording): advocate, skeptic, judge, meta_evaluator, or a consensus judge (single, strict, lenient, neutral
    for either Symmetric MAD agent); ``other`` for a request without a label."""
    role = request.role
    if role is None:
        return "other"
    return "neutral" if role in NEUTRAL_ROLES else role


def default_script(request: ChatRequest) -> FakeReply:
    """Role-aware canned answers, so the whole pipeline runs without a script."""
    role = request_role(request)
    if role == "meta_evaluator":
        return _meta_reply(request)
    if request.choices is not None and role == "mts":
        return _spread_choice(request)
    if role == "mts" and request.round == 2:
        return _mts_score_reply(request)
    if request.choices is not None:  # prefer the middle choice, with a spread over the others
        return _choice_at(request.choices, len(request.choices) // 2)
    if role == "advocate":
        return FakeReply(text="The essay stays on topic and gives a concrete example of waiting patiently.")
    if role == "skeptic":
        return FakeReply(text="The example is thin: few details, and the ending is abrupt.")
    if role in CONSENSUS_ROLES:
        return _consensus_reply(request, role)
    if role == "compare":
        return _compare_reply(request)
    low = re.search(r"between (-?\d+) and (-?\d+)", request.messages[0].content + request.messages[-1].content)
    score = (int(low.group(1)) + int(low.group(2))) // 2 if low else 1
    return FakeReply(text=f"Weighing both arguments against the rubric.\nFinal score: {score}")


def _spread_choice(request: ChatRequest) -> FakeReply:
    """A constrained choice that varies with the conversation (MTS's 0-10 scores must vary over a run's essays
    for its min-max scaling to have a range)."""
    assert request.choices is not None
    return _choice_at(request.choices, _crc(*(m.content for m in request.messages)) % len(request.choices))


def _choice_at(choices: list[str], pick: int) -> FakeReply:
    """Choice ``pick``, the others less likely the further they are from it."""
    return FakeReply(text=choices[pick], choice_logprobs={c: -0.2 - abs(i - pick) for i, c in enumerate(choices)})


def _crc(*texts: str) -> int:
    return zlib.crc32("\n".join(texts).encode("utf-8"))


def _mts_score_reply(request: ChatRequest) -> FakeReply:
    """An MTS score turn's answer on 0-10, varying with the conversation (its min-max needs a range): in the
    authors' ``Score: <score>N</score>`` format when the turn asks for it, else a ``Final score: N`` line."""
    pick = _crc(*(m.content for m in request.messages)) % 11
    line = f"Score: <score>{pick}</score>" if "<score>" in request.messages[-1].content else f"Final score: {pick}"
    return FakeReply(text=f"Weighing the quotations against the criteria.\n{line}")


def _compare_reply(request: ChatRequest) -> FakeReply:
    """A comparative judgment's answer (CJ): A or B, varying with the pair compared."""
    pick = ("A", "B")[_crc(request.messages[-1].content) % 2]
    return FakeReply(text=f"Both essays address the trait; weighing them against the rubric.\nAnswer: {pick}")


def _consensus_reply(request: ChatRequest, role: str) -> FakeReply:
    """A consensus judge's answer (the consensus paper): a rationale, then a ``Scores:`` block filling in the prompt's
    ``<Trait>: N (an integer from a to b)`` lines - the middle of each range, the upper middle for the lenient
    judge (0-3: strict 1, lenient 2)."""
    lines = [
        f"{name}: {(int(lo) + int(hi) + (1 if role == 'lenient' else 0)) // 2}"
        for name, lo, hi in _SCORE_LINE.findall(request.messages[-1].content)
    ]
    rationale = f"The {role} evaluator checked each trait against the essay."
    return FakeReply(text=rationale + "\nScores:\n" + "\n".join(lines))


def _meta_reply(request: ChatRequest) -> FakeReply:
    """A meta-evaluator's answer (the confidence paper) that varies with the response judged: the JSON object, or in
    constrained mode the chosen value of the field being filled (scores 1-3, the critical flag mostly 0)."""
    seed = _crc(request.messages[-1].content)
    if request.choices is not None:
        field = request.prefill.rsplit('"', 2)[-2] if request.prefill and request.prefill.count('"') >= 2 else ""
        if field == "critical_flag":
            return FakeReply(text="1" if seed % 5 == 0 else "0")
        return FakeReply(text=request.choices[(seed >> (2 * len(request.prefill or ""))) % len(request.choices)])
    reasoning = "The response is judged on its role, reasoning and evidence."
    return FakeReply(text=reasoning + '"' if request.prefill is not None else meta_judgment_json(seed, reasoning))


def meta_judgment_json(seed: int, reasoning: str) -> str:
    """A canned meta-evaluator JSON judgment that varies with ``seed``: each dimension 1-3, the critical flag
    set for one seed in five (shared by the fake provider and the stub server)."""
    scores = [1 + (seed >> (4 * i)) % 3 for i in range(3)]
    fields = ("instruction_following", "justification_quality", "evidence_grounding")
    judgment = {**dict(zip(fields, scores, strict=True)), "critical_flag": int(seed % 5 == 0)}
    return json.dumps({**judgment, "critical_issues_description": "", "reasoning": reasoning})


@dataclass
class FakeProvider(Provider):
    """Scripted provider. ``script`` is a list (consumed in order, cycling if ``cycle``), a mapping from a
    substring of the request's messages to a reply (first match wins), or a callable on the request."""

    script: Script | None = None
    caps: Capabilities = field(
        default_factory=lambda: Capabilities(logprobs=True, max_top_logprobs=20, prefill=True, choices=True, seed=True)
    )
    model_name: str = "fake-model"
    latency_s: float = 0.0
    cycle: bool = False
    concurrency: int = 64
    calls: list[ChatRequest] = field(default_factory=list)
    _index: int = 0

    def __post_init__(self) -> None:
        self.name = "fake"
        self.model = self.model_name
        self.capabilities = self.caps

    @property
    def max_concurrency(self) -> int:
        """``concurrency``: requests served at once."""
        return self.concurrency

    def _next(self, request: ChatRequest) -> FakeReply:
        script = self.script
        if script is None:
            return default_script(request)
        if callable(script):
            return _as_reply(script(request))
        if isinstance(script, Mapping):
            haystack = "\n".join(m.content for m in request.messages)
            for key, value in script.items():
                if key in haystack:
                    return _as_reply(value)
            raise ProviderError(f"fake provider: no scripted reply matches request {haystack[:80]!r}")
        if self._index >= len(script):
            if not self.cycle or not script:
                raise ProviderError(f"fake provider: script exhausted after {len(script)} replies")
            self._index = 0
        item = script[self._index]
        self._index += 1
        return _as_reply(item)

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        self.calls.append(request)
        reply = self._next(request)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if reply.error is not None:
            raise reply.error
        text = reply.text
        for stop in request.stop:
            text = text[:cut] if (cut := text.find(stop)) >= 0 else text
        tokens = None
        if request.logprobs:
            pieces = _PIECE.findall(text) or [text]
            lps = reply.logprobs or [-0.1] * len(pieces)
            tokens = [
                TokenLogprob(token=p, logprob=lp, top=[TopLogprob(token=p, logprob=lp)])
                for p, lp in zip(pieces, itertools.cycle(lps), strict=False)
            ]
        choice_lps = None
        if request.choices is not None:
            choice_lps = reply.choice_logprobs or {
                c: (math.log(0.9) if c == text.strip() else math.log(0.1 / max(len(request.choices) - 1, 1)))
                for c in request.choices
            }
            text = max(choice_lps, key=lambda c: choice_lps[c])
            if tokens is not None:
                tokens = [TokenLogprob(token=text, logprob=choice_lps[text])]
        n_prompt = sum(len(m.content.split()) for m in request.messages)
        return ChatResponse(
            text=text,
            tokens=tokens,
            choice_logprobs=choice_lps,
            finish_reason=reply.finish_reason,
            usage=reply.usage or Usage(prompt_tokens=n_prompt, completion_tokens=len(text.split())),
            latency_s=self.latency_s,
            model=self.model,
            raw={"fake": True},
        )
