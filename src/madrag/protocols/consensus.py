"""Single judge vs strict / lenient consensus multi-agent judging (the consensus paper, "Beyond Consensus", Section 2).

==================  ===========================  ===========  =====================================================
name                agents (roles)               rounds       the consensus paper
==================  ===========================  ===========  =====================================================
SingleJudge         single                       0            2.1 Single Judge, neutral prompt A.2
StrictJudge         strict                       0            2.2 Strict Role Judge: A.3 strict prompt, no interaction
LenientJudge        lenient                      0            G.1 Lenient Role Judge: A.3 lenient prompt
ConsensusMAD        strict, lenient              0 + R        2.1 Consensus-based MAD: A.3, then A.4 each round
SymmetricMAD        neutral_a, neutral_b         0 + R        2.2 Symmetric MAD: A.5 neutral prompts for both
ScoreMaskedMAD      strict, lenient              0 + R        2.2 Score-Masked MAD: rationales only (C.2)
==================  ===========================  ===========  =====================================================

Each agent scores every rubric trait in one call per round (trait ``"*"``), with the machinery of
:mod:`madrag.protocols.whole_essay`: on backends with prefill + choices (the embedded model) the rationale is
generated up to ``Scores:`` and each trait's score token is then restricted to its valid scores; elsewhere each
``<Trait>: N`` line is parsed, with one follow-up request for missing traits. The paper asks for one JSON object
per answer (A.1, C.1); madrag keeps its ``Scores:`` block instead, which every backend can produce and parse
(and the constrained reader can fill in), with the same content: a rationale per trait, then the scores.

Interaction (Section 2.1): round 0 is independent; in each round r = 1..R every agent sees its own round r-1
rationale and scores and the OTHER agent's round r-1 rationale and scores (Score-Masked MAD: the rationale
without scores and with every number masked, see :func:`madrag.agents.roles.mask_scores`), and
revises or keeps its scores. The final prediction per trait is the arithmetic mean of the two agents' final-round
scores (``TraitScore.mean_score``; ``score`` is the mean rounded half up, for QWK tables); a trait either agent
could not score is unusable (None), never imputed. R = 4 by default (the paper's Round 0 + 4 adjustment rounds);
``ConsensusMAD[rounds=N]`` (1 <= N <= 10) sets it, likewise for the other MAD protocols.

Call sharing. The round-0 Strict and Lenient calls have the same prompt in StrictJudge, LenientJudge,
ConsensusMAD and ScoreMaskedMAD, so they are one call each, keyed ``consensus/init|<essay>|*|strict|0`` (and
``lenient``): the run store and the in-flight table make each once, whichever protocols run. Rounds r >= 1 are
keyed under the protocol's base name (``ConsensusMAD|<essay>|*|strict|<r>``): a round's prompt does not depend on
R, so ``ConsensusMAD[rounds=2]`` reuses the first two rounds of ``ConsensusMAD``. SingleJudge and SymmetricMAD
(round 0 included) are keyed under their own names. Each agent's calls go through ``ctx.for_role(role)``, so a
run can put the two agents on different models (cross-model pairs, Section 4.3).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from madrag.agents.calls import AgentCall, CallContext
from madrag.agents.context import all_traits_values
from madrag.agents.judge import judge_all_traits
from madrag.agents.prompts import CONSENSUS_PROMPT_NAMES
from madrag.agents.roles import (
    LENIENT,
    NEUTRAL_A,
    NEUTRAL_B,
    SINGLE,
    STRICT,
    AgentSpec,
    Turn,
    adjust_messages,
    initial_messages,
)
from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.metrics import round_half_up_clamped
from madrag.protocols.base import ProtocolNeeds, RecordReader, ScoringProtocol
from madrag.protocols.concurrency import gather_or_cancel
from madrag.protocols.registry import register_protocol
from madrag.protocols.scores import ALL_TRAITS, TraitScore, expand_trait_scores
from madrag.records import AgentRecord, call_key
from madrag.rubric import Rubric

CONSENSUS_PROTOCOLS: tuple[str, ...] = (
    "SingleJudge",
    "StrictJudge",
    "LenientJudge",
    "ConsensusMAD",
    "SymmetricMAD",
    "ScoreMaskedMAD",
)
"""The consensus paper's protocol names (without options), in the paper's order."""
INIT_NAMESPACE = "consensus/init"
"""Protocol field of the shared round-0 Strict and Lenient calls."""
DEFAULT_ROUNDS = 4
"""Adjustment rounds R of a MAD protocol named without ``[rounds=N]`` (the paper's Round 0 + 4)."""
MAX_ROUNDS = 10
"""The largest R that ``[rounds=N]`` accepts."""
FRAME_COLUMNS = ["protocol", "essay_id", "trait", "round", "agent", "score", "record_key"]
"""Fields of :func:`agent_score_rows` (the columns of the consensus paper's agent-score frame)."""

_AGENTS: dict[str, tuple[AgentSpec, ...]] = {
    "SingleJudge": (SINGLE,),
    "StrictJudge": (STRICT,),
    "LenientJudge": (LENIENT,),
    "ConsensusMAD": (STRICT, LENIENT),
    "SymmetricMAD": (NEUTRAL_A, NEUTRAL_B),
    "ScoreMaskedMAD": (STRICT, LENIENT),
}
_SHARED_INIT_ROLES = frozenset({STRICT.role, LENIENT.role})
_NAME = re.compile(r"^(\w+)(?:\[(.*)\])?$")
_ROUNDS = re.compile(r"^rounds=(\d+)$")


@dataclass(frozen=True)
class ConsensusProtocol(ScoringProtocol):
    """One of the protocols of the table above; ``name`` is the configured name (``ConsensusMAD[rounds=2]``)."""

    name: str
    base: str
    agents: tuple[AgentSpec, ...]
    rounds: int = 0
    masked: bool = False

    @property
    def needs(self) -> ProtocolNeeds:
        """No exemplars; each agent scores every trait in one call per round; the consensus judges' templates
        (:mod:`madrag.agents.roles`); its rounds' records (round 0 shared: ``consensus/init``) and, without
        rounds, the shared round-0 calls of its agents' roles that it reads (StrictJudge, LenientJudge)."""
        groups = frozenset(self.namespace(r) for r in range(self.rounds + 1))
        shared = not self.rounds and self.namespace(0) == INIT_NAMESPACE
        reads = {INIT_NAMESPACE: frozenset(a.role for a in self.agents)} if shared else {}
        return ProtocolNeeds(
            per_trait=False, templates=CONSENSUS_PROMPT_NAMES, record_groups=groups, shared_calls=reads
        )

    def describe(self) -> dict[str, Any]:
        """The protocol as a run's configuration records it."""
        sharing = "none" if self.rounds == 0 else "rationale_only" if self.masked else "rationale_and_scores"
        return {
            "name": self.name,
            "debate": None,
            "exemplars": False,
            "per_trait": False,
            "agents": [a.role for a in self.agents],
            "rounds": self.rounds,
            "sharing": sharing,
        }

    def namespace(self, round_: int) -> str:
        """The protocol field of this protocol's calls in ``round_`` (shared round 0: ``consensus/init``)."""
        if round_ == 0 and all(a.role in _SHARED_INIT_ROLES for a in self.agents):
            return INIT_NAMESPACE
        return self.base

    def record_key(self, essay_id: str, role: str, round_: int) -> str:
        """The key of agent ``role``'s call for ``essay_id`` in ``round_``."""
        return call_key(self.namespace(round_), essay_id, ALL_TRAITS, role, round_)

    def read_scores(self, reader: RecordReader, rubric: Rubric) -> list[TraitScore]:
        """Its final scores from its agents' final-round records (:func:`stored_trait_scores`)."""
        found = (r for space in sorted(self.needs.record_groups) for r in reader.records(protocol=space))
        return stored_trait_scores(found, rubric, [self.name])

    async def score_essay(self, ctx: CallContext, essay: Essay, rubric: Rubric) -> list[TraitScore]:
        """Round 0, then rounds 1..R (each agent reading the other's previous round), then the final scores."""
        values = all_traits_values(ctx.prompts, essay, rubric, ctx.settings.placeholders)
        records: Sequence[AgentRecord] = ()
        for round_ in range(self.rounds + 1):
            previous = records
            records = await gather_or_cancel(
                *(self._turn(ctx, essay, rubric, values, round_, i, previous) for i in range(len(self.agents)))
            )
        return self.final_scores(records, rubric)

    async def _turn(
        self,
        ctx: CallContext,
        essay: Essay,
        rubric: Rubric,
        values: dict[str, str],
        round_: int,
        index: int,
        previous: Sequence[AgentRecord],
    ) -> AgentRecord:
        """Agent ``index``'s call in ``round_``: round 0 on its own, a later round reading its own and the other
        agent's ``previous`` records."""
        agent = self.agents[index]
        actx = ctx.for_role(agent.role)
        if round_:
            own, other = Turn(agent, previous[index]), Turn(self.agents[1 - index], previous[1 - index])
            messages = adjust_messages(actx, values, rubric, round_, own, other, self.masked)
            context = {
                "own_previous": own.record.key,
                "other_previous": other.record.key,
                "scores_shared": not self.masked,
            }
        else:
            messages, context = initial_messages(actx, values, agent), {}
        call = AgentCall(
            protocol=self.namespace(round_),
            essay_id=essay.id,
            trait=ALL_TRAITS,
            role=agent.role,
            round=round_,
            messages=messages,
            temperature=ctx.settings.judge_temperature,
            max_tokens=ctx.settings.judge_max_tokens,
            context=context,
            essay=values["ESSAY"],
        )
        return await judge_all_traits(actx, call, rubric)

    def final_scores(self, finals: Sequence[AgentRecord], rubric: Rubric) -> list[TraitScore]:
        """The protocol's TraitScores from its agents' final-round records (in the agents' order): one agent's
        scores as they are; two agents' mean, unusable when either score is."""
        if len(finals) == 1:
            return expand_trait_scores(finals[0], rubric, protocol=self.name)
        first = finals[0]
        rationale = "\n---\n".join(f"[{r.role}] {(r.rationale or '').strip()}" for r in finals)
        out = []
        for trait in rubric.traits:
            results = [(r.trait_scores or {}).get(trait.name) for r in finals]
            values = [res.reported for res in results if res is not None and res.reported is not None]
            mean = sum(values) / len(values) if len(values) == len(finals) else None
            out.append(
                TraitScore(
                    essay_id=first.essay_id,
                    trait=trait.name,
                    protocol=self.name,
                    score=None if mean is None else round_half_up_clamped(mean, trait.min, trait.max),
                    result=results[0],
                    rationale=rationale,
                    record_key=first.key,
                    n_judges=len(finals),
                    n_usable=len(values),
                    mean_score=mean,
                    truncated=any(r.truncated for r in finals),
                )
            )
        return out


def consensus_protocol(name: str) -> ConsensusProtocol | None:
    """The consensus protocol called ``name`` (``ConsensusMAD``, ``SymmetricMAD[rounds=2]``...); None when
    ``name`` is not one; ConfigError for a bad suffix."""
    m = _NAME.match(name)
    if m is None or m.group(1) not in CONSENSUS_PROTOCOLS:
        return None
    base, suffix = m.group(1), m.group(2)
    agents = _AGENTS[base]
    if len(agents) == 1:
        if suffix is not None:
            raise ConfigError(f"protocol {base} takes no options (it has no rounds); got {name!r}")
        return ConsensusProtocol(name, base, agents)
    rounds = DEFAULT_ROUNDS
    if suffix is not None:
        r = _ROUNDS.match(suffix)
        if r is None or not 1 <= int(r.group(1)) <= MAX_ROUNDS:
            raise ConfigError(f"{name!r}: write {base}[rounds=N] with N from 1 to {MAX_ROUNDS}")
        rounds = int(r.group(1))
    return ConsensusProtocol(name, base, agents, rounds=rounds, masked=base == "ScoreMaskedMAD")


register_protocol(*CONSENSUS_PROTOCOLS, options=True, listed=CONSENSUS_PROTOCOLS)(consensus_protocol)
"""The names of the table above, the MAD ones with an optional ``[rounds=N]``."""


def _resolve(
    records: Iterable[AgentRecord], protocols: Iterable[str]
) -> tuple[list[ConsensusProtocol], dict[str, AgentRecord]]:
    """The consensus protocols of ``protocols`` and their records by key."""
    protos = [p for p in (consensus_protocol(n) for n in protocols) if p is not None]
    wanted = {p.namespace(r) for p in protos for r in range(p.rounds + 1)}
    return protos, {r.key: r for r in records if r.protocol in wanted}


def _essays(by_key: dict[str, AgentRecord], proto: ConsensusProtocol) -> list[str]:
    """Essays with at least one of ``proto``'s records, in the order first seen."""
    spaces = {proto.namespace(r) for r in range(proto.rounds + 1)}
    roles = {a.role for a in proto.agents}
    seen = dict.fromkeys(r.essay_id for r in by_key.values() if r.protocol in spaces and r.role in roles)
    return list(seen)


def stored_trait_scores(records: Iterable[AgentRecord], rubric: Rubric, protocols: Sequence[str]) -> list[TraitScore]:
    """The final TraitScores of the named consensus protocols from stored records, exactly as the protocols
    returned them; an essay whose final-round records are not all there (an interrupted run) has none."""
    protos, by_key = _resolve(records, protocols)
    out: list[TraitScore] = []
    for proto in protos:
        for essay_id in _essays(by_key, proto):
            finals = [by_key.get(proto.record_key(essay_id, a.role, proto.rounds)) for a in proto.agents]
            present = [r for r in finals if r is not None]
            if len(present) == len(finals):
                out.extend(proto.final_scores(present, rubric))
    return out


def agent_score_rows(records: Iterable[AgentRecord], rubric: Rubric, protocols: Sequence[str]) -> list[dict[str, Any]]:
    """One row (:data:`FRAME_COLUMNS`) per (protocol, essay_id, trait, round, agent) for each named consensus
    protocol in ``records``.

    ``protocol`` is the configured name; shared round-0 records appear under every protocol that uses them
    (StrictJudge's round 0 is the ``consensus/init`` strict call, ConsensusMAD's round 0 the strict and lenient
    ones); only rounds 0..R of the protocol's own R. ``score`` is the agent's reported score (NaN when unusable).
    Non-consensus names are ignored.
    """
    protos, by_key = _resolve(records, protocols)
    rows: list[dict[str, Any]] = []
    for proto in protos:
        for essay_id in _essays(by_key, proto):
            for round_ in range(proto.rounds + 1):
                for agent in proto.agents:
                    record = by_key.get(proto.record_key(essay_id, agent.role, round_))
                    if record is not None:
                        rows += _agent_rows(proto.name, record, rubric, round_)
    return rows


def _agent_rows(protocol: str, record: AgentRecord, rubric: Rubric, round_: int) -> list[dict[str, Any]]:
    """One row per rubric trait of one agent's record in one round."""
    results = record.trait_scores or {}
    rows = []
    for trait in rubric.traits:
        result = results.get(trait.name)
        reported = result.reported if result is not None else None
        rows.append(
            {
                "protocol": protocol,
                "essay_id": record.essay_id,
                "trait": trait.name,
                "round": round_,
                "agent": record.role,
                "score": math.nan if reported is None else float(reported),
                "record_key": record.key,
            }
        )
    return rows
