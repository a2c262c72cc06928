"""The largest prompt each protocol and role of a run can send, for the start-up check of the server's context.

Nothing is estimated from the parts: each protocol is rehearsed (:func:`worst_prompts`) on the run's longest
essay, with the real templates (the run's :class:`~madrag.agents.prompts.PromptLibrary`, its settings, the
protocol's own code), against a scripted backend that records every request it is sent and answers each
free-text request with a placeholder. An exemplar bank that returns, for every score level, the longest pool
essay with that level (:class:`LongestBank`: more than any retrieval can return) stands in for the run's.
A placeholder in a later prompt (a debate turn shown to the Judge, an earlier round's rationale, an earlier turn
of an MTS conversation) stands for an answer of its request's full token limit (``--debater-max-tokens`` for
Advocate and Skeptic, ``--judge-max-tokens`` for the others): that is the most a debate of the run's rounds can
add. Whatever the rehearsal renders of its own answers (no score read, no ``Confidence:`` line) is at most a few
tokens away from a real answer's.

A rehearsal debates every trait (``--adaptive-debate`` off: its largest prompts are the debate's) and, with no
logprobs, its debaters are asked to state their confidence (a longer prompt than with logprobs).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from madrag.agents.calls import CallContext
from madrag.agents.prompts import PromptLibrary
from madrag.data.essay import Essay
from madrag.protocols.base import ScoringProtocol
from madrag.providers.base import Capabilities, ChatRequest
from madrag.providers.fake import FakeProvider, FakeReply, default_script
from madrag.providers.policy import ManagedProvider, RetryPolicy
from madrag.records import AgentRecord
from madrag.retrieval.exemplars import Exemplar, LevelExemplar
from madrag.rubric import Rubric, Trait
from madrag.settings import ScoringSettings
from madrag.store.writer import ScoreRow

MARK = re.compile("\u27e6(\\d+)\u27e7")
"""The placeholder answer: ``⟦i⟧``, ``i`` the index of the answer in the rehearsal."""
DEBATERS = frozenset({"advocate", "skeptic"})
"""Roles whose answers are limited by ``--debater-max-tokens`` (every other role's by ``--judge-max-tokens``)."""
OPTION = {"debater_max_tokens": "--debater-max-tokens", "judge_max_tokens": "--judge-max-tokens"}


@dataclass(frozen=True)
class Limit:
    """An answer's token limit, and the setting it is (None: a fixed limit, e.g. a score step's few tokens)."""

    setting: str | None
    tokens: int


@dataclass(frozen=True)
class WorstPrompt:
    """One request of a rehearsal: its protocol, role and the backend it goes to (``*``: the main one, else the
    role's own), its messages' text with the placeholders taken out, the earlier answers it shows (``shown``,
    each at its full limit) and its own answer's limit."""

    protocol: str
    role: str
    backend: str
    essay: str
    trait: str
    text: str
    messages: int
    shown: tuple[Limit, ...]
    answer: Limit

    def shown_tokens(self) -> int:
        """The most tokens the earlier answers it shows can take."""
        return sum(limit.tokens for limit in self.shown)

    def uses(self, setting: str) -> int:
        """How many times a token limit of ``setting`` counts in this prompt and its answer."""
        return sum(limit.setting == setting for limit in (*self.shown, self.answer))

    def where(self) -> str:
        """The prompt in words: ``MADRAG's judge prompt for essay 5978, trait Ideas``."""
        trait = "every trait" if self.trait == "*" else f"trait {self.trait}"
        return f"{self.protocol}'s {self.role} prompt for essay {self.essay}, {trait}"


class LongestBank:
    """An exemplar bank that answers every retrieval with the longest pool essays: per score level the longest
    with that reference level, and for ``similar`` the ``k`` longest (never the essay asked about)."""

    def __init__(self, pool: Sequence[Essay], rubric: Rubric, settings: ScoringSettings) -> None:
        self._pool = sorted(pool, key=lambda e: len(e.text), reverse=True)
        self._rubric = rubric
        self._ties = settings.reference_ties

    def _exemplar(self, essay: Essay) -> Exemplar:
        scores = {t.name: s for t in self._rubric.traits if (s := essay.reference(t, self._ties)) is not None}
        return Exemplar(essay_id=essay.id, text=essay.text, scores=scores, distance=0.0, similarity=1.0)

    def per_level(self, essay: Essay, trait: Trait) -> list[LevelExemplar]:
        """Per score level of ``trait``, the longest pool essay of that level (None where the pool has none)."""
        longest: dict[int, Essay] = {}
        for candidate in self._pool:
            level = candidate.reference(trait, self._ties)
            if level is not None and level not in longest and candidate.id != essay.id:
                longest[level] = candidate
        return [
            LevelExemplar(trait=trait.name, score=s, exemplar=self._exemplar(e) if (e := longest.get(s)) else None)
            for s in range(trait.min, trait.max + 1)
        ]

    def anchors(self, essay: Essay, trait: Trait) -> list[LevelExemplar]:
        """The anchors: the same as :meth:`per_level`, the longest a level can show."""
        return self.per_level(essay, trait)

    def similar(self, essay: Essay, k: int) -> list[Exemplar]:
        """The ``k`` longest pool essays."""
        return [self._exemplar(e) for e in self._pool if e.id != essay.id][:k]


class _Store:
    """The rehearsal's run store: its records in memory."""

    def __init__(self) -> None:
        self.records: dict[str, AgentRecord] = {}

    def get(self, key: str) -> AgentRecord | None:
        return self.records.get(key)

    async def aput(self, record: AgentRecord) -> bool:
        self.records[record.key] = record
        return True

    async def aput_scores(self, rows: Sequence[ScoreRow]) -> None:
        """A rehearsal keeps no scores."""


@dataclass
class _Script:
    """The rehearsal backend's answers: a placeholder for each free-text request (its limit kept), the fake
    backend's own answer where the request restricts it to choices."""

    settings: ScoringSettings
    limits: list[Limit] = field(default_factory=list)

    def limit(self, request: ChatRequest) -> Limit:
        setting = "debater_max_tokens" if (request.role or "") in DEBATERS else "judge_max_tokens"
        return Limit(setting if request.max_tokens == getattr(self.settings, setting) else None, request.max_tokens)

    def __call__(self, request: ChatRequest) -> FakeReply:
        if request.choices is not None:
            return default_script(request)
        self.limits.append(self.limit(request))
        return FakeReply(text=f"\u27e6{len(self.limits) - 1}\u27e7")


def longest_essay(essays: Sequence[Essay]) -> Essay:
    """The essay whose text, prompt and source together are longest."""
    return max(essays, key=lambda e: len(e.text) + len(e.prompt or "") + len(e.source or ""))


async def worst_prompts(
    protocols: Sequence[ScoringProtocol],
    essay: Essay,
    pool: Sequence[Essay],
    rubric: Rubric,
    prompts: PromptLibrary,
    settings: ScoringSettings,
    capabilities: dict[str, Capabilities],
) -> list[WorstPrompt]:
    """Every request each of ``protocols`` makes for ``essay`` (the run's longest), rehearsed as the module
    docstring says; ``capabilities``: each backend's (``*``, the main one, and each role's own), so that the
    rehearsal reads its scores as the run will."""
    rehearsed = settings.model_copy(update={"adaptive_debate": None})
    script = _Script(rehearsed)
    fakes = {
        backend: FakeProvider(script=script, caps=caps.model_copy(update={"logprobs": False}))
        for backend, caps in capabilities.items()
    }
    managed = {b: ManagedProvider(provider=f, policy=RetryPolicy(retries=0, timeout_s=60)) for b, f in fakes.items()}
    found: list[WorstPrompt] = []
    for protocol in protocols:
        for fake in fakes.values():
            fake.calls.clear()
        ctx = CallContext(
            run_id="rehearsal",
            provider=managed["*"],
            store=_Store(),
            prompts=prompts,
            settings=rehearsed,
            bank=LongestBank(pool, rubric, rehearsed),
            role_providers={b: m for b, m in managed.items() if b != "*"},
        )
        await protocol.score_essay(ctx, essay, rubric)
        for backend, fake in fakes.items():
            found += [_worst(protocol.name, backend, essay.id, request, script) for request in fake.calls]
    return found


def _worst(protocol: str, backend: str, essay: str, request: ChatRequest, script: _Script) -> WorstPrompt:
    text = "\n".join(m.content for m in request.messages) + (request.prefill or "")
    shown = tuple(script.limits[int(i)] for i in MARK.findall(text))
    return WorstPrompt(
        protocol=protocol,
        role=request.role or "other",
        backend=backend,
        essay=essay,
        trait=request.trait or "*",
        text=MARK.sub("", text),
        messages=len(request.messages),
        shown=shown,
        answer=script.limit(request),
    )


def rehearsal(
    protocols: Sequence[ScoringProtocol],
    essays: Sequence[Essay],
    pool: Sequence[Essay],
    rubric: Rubric,
    prompts: PromptLibrary,
    settings: ScoringSettings,
    capabilities: dict[str, Capabilities],
) -> Callable[[], Awaitable[list[WorstPrompt]]] | None:
    """The run's rehearsal on its longest essay, made when called (a start-up check calls it only when a server
    says its context); None without essays."""
    if not essays:
        return None
    essay = longest_essay(essays)
    return lambda: worst_prompts(protocols, essay, pool, rubric, prompts, settings, capabilities)
