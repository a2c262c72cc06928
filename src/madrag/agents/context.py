"""What the agents are shown: template values, role messages, exemplar blocks and debate transcripts.

The per-trait values are the shared input context x_i(e) = <q, e, r_i, [m_i, M_i], alpha> of the MADRAG paper (3.4);
the all-traits values are those of a call that scores the whole rubric at once (SA, SARAG, the consensus paper's
judges).
:class:`ExemplarSource` is what the agents ask of an exemplar bank.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from madrag.agents.placeholders import mask_placeholders
from madrag.agents.prompts import PromptLibrary, inert
from madrag.agents.scores import blank_score_line
from madrag.data.essay import Essay
from madrag.providers.base import Message
from madrag.records import AgentRecord
from madrag.rubric import Rubric, Trait
from madrag.settings import Placeholders, PromptLayout

if TYPE_CHECKING:
    from madrag.retrieval.bank import Exemplar, LevelExemplar


class ExemplarSource(Protocol):
    """What the agents ask of an exemplar bank (the real one: :class:`madrag.retrieval.bank.ExemplarBank`)."""

    def per_level(self, essay: Essay, trait: Trait) -> list[LevelExemplar]:
        """One exemplar (or none) per score level of ``trait``, never ``essay`` itself (the MADRAG paper's 3.3.2)."""
        ...

    def similar(self, essay: Essay, k: int) -> list[Exemplar]:
        """The ``k`` pool essays most similar to ``essay``, with all their trait scores."""
        ...


@dataclass(frozen=True)
class Turn:
    """One debate message as the Judge (or the next debater) sees it."""

    speaker: str
    round: int
    message: str
    confidence: float | None


DEFAULT_SOURCE_LABEL = "Source text"
"""What the prompts call an essay's ``source`` when the rubric does not say (its ``source_label``)."""


def _essay_values(
    prompts: PromptLibrary, essay: Essay, placeholders: Placeholders, source_label: str | None
) -> dict[str, str]:
    """The essay's prompt, its text (placeholders masked under ``placeholders=mask``) and the note that says
    what the placeholders (``note``) or the neutral words replacing them (``mask``) are. An essay
    with a ``source`` (the article a summary summarises) shows it after the prompt, under ``source_label``;
    without one the values are exactly those of an essay (nothing is added)."""
    mask = placeholders == "mask"
    notes = {"note": "anon_note", "mask": "mask_note"}
    prompt = inert(essay.prompt) if essay.prompt else "(no prompt given)"
    if essay.source:
        source = prompts.render(
            "source_block",
            SOURCE_LABEL=source_label or DEFAULT_SOURCE_LABEL,
            SOURCE=mask_placeholders(essay.source) if mask else essay.source,
        )
        prompt = f"{prompt}\n\n{source}"
    return {
        "PROMPT": prompt,
        "ESSAY": mask_placeholders(essay.text) if mask else essay.text,
        "ANON_CONTEXT": prompts.render(notes[placeholders]) if placeholders in notes else "",
    }


def essay_values(
    prompts: PromptLibrary,
    essay: Essay,
    trait: Trait,
    placeholders: Placeholders,
    self_report: bool,
    source_label: str | None = None,
) -> dict[str, str]:
    """Template values shared by every role for one essay and trait (``source_label``: the rubric's name for
    the essay's source text, if it has one)."""
    values = {
        **_essay_values(prompts, essay, placeholders, source_label),
        "TRAIT_NAME": trait.name,
        "TRAIT_JSON": trait.as_prompt_json(),
        "MIN_POINTS": str(trait.min),
        "MAX_POINTS": str(trait.max),
        "CONFIDENCE_INSTRUCTION": prompts.render("confidence_instruction") if self_report else "",
    }
    values["ESSAY_CONTEXT"] = prompts.render("essay_context", **values)
    values["CONTEXT"] = prompts.render("context", **values)
    return values


def all_traits_values(
    prompts: PromptLibrary, essay: Essay, rubric: Rubric, placeholders: Placeholders
) -> dict[str, str]:
    """Template values of a call that scores every trait: the essay (masked under ``placeholders=mask``) and
    its prompt, the placeholder note, the rubric's traits as JSON and the ``Scores:`` lines to fill in."""
    values = {
        **_essay_values(prompts, essay, placeholders, rubric.source_label),
        "TRAITS_JSON": json.dumps([json.loads(t.as_prompt_json()) for t in rubric.traits], indent=2),
        "SCORE_LINES": "\n".join(blank_score_line(t) for t in rubric.traits),
    }
    values["ESSAY_CONTEXT"] = prompts.render("essay_context", **values)
    return values


def role_messages(
    prompts: PromptLibrary, layout: PromptLayout, role: str, user: str, values: dict[str, str]
) -> list[Message]:
    """The system and user messages of one role call, in the run's prompt layout.

    ``seed``: the role's template (e.g. ``advocate_system``) is the system message. ``shared_prefix``: every
    role shares one system message; the role's instructions (same template, same wording) follow the essay and
    trait in the user message, so an essay's calls share the longest possible common prefix.
    """
    if layout == "seed":
        return [
            Message(role="system", content=prompts.render(role, **values)),
            Message(role="user", content=prompts.render(user, **{**values, "ROLE": ""})),
        ]
    role_text = prompts.render(role, **{**values, "ANON_CONTEXT": ""}).rstrip()
    return [
        Message(role="system", content=prompts.render("shared_system", **values)),
        Message(
            role="user",
            content=prompts.render(user, **{**values, "ROLE": prompts.render("role_block", ROLE_TEXT=role_text)}),
        ),
    ]


def render_evidence_feedback(prompts: PromptLibrary, debate: list[AgentRecord]) -> str:
    """Under ``--evidence-check feedback``, what the Judge is told about the debate's quotes: each quoted
    passage not found in the essay, with who quoted it (empty when every quote was found)."""
    items = [
        prompts.render("evidence_feedback_item", SPEAKER=r.role.capitalize(), ROUND=r.round, QUOTE=quote)
        for r in debate
        if r.evidence is not None
        for quote in r.evidence.unverified_quotes
    ]
    return prompts.render("evidence_feedback", QUOTES="\n".join(items)) + "\n" if items else ""


def shorten(text: str, max_words: int | None) -> str:
    """An exemplar's text cut to its first ``max_words`` words plus `` [...]`` when longer (None: whole)."""
    words = text.split()
    return text if max_words is None or len(words) <= max_words else " ".join(words[:max_words]) + " [...]"


def render_exemplars(prompts: PromptLibrary, trait: Trait, levels: list[LevelExemplar], max_words: int | None) -> str:
    """The per-trait Judge's exemplar block: one exemplar per score level of ``trait`` (or a line saying there
    is none), each cut to ``max_words``."""
    items = []
    for level in levels:
        if level.exemplar is None:
            items.append(prompts.render("exemplar_missing", SCORE=level.score, TRAIT_NAME=trait.name))
            continue
        text = shorten(level.exemplar.text, max_words)
        items.append(prompts.render("exemplar_item", SCORE=level.score, TRAIT_NAME=trait.name, TEXT=text))
    return prompts.render("exemplar_block", TRAIT_NAME=trait.name, EXEMPLAR_LIST="\n".join(items)) + "\n"


def render_similar_exemplars(prompts: PromptLibrary, found: list[Exemplar], max_words: int | None) -> str:
    """SARAG's exemplar block: the most similar pool essays, each with all its trait scores, cut to
    ``max_words``."""
    items = [
        prompts.render(
            "sa_exemplar_item",
            SCORES=", ".join(f"{t}={s}" for t, s in ex.scores.items()),
            TEXT=shorten(ex.text, max_words),
        )
        for ex in found
    ]
    return prompts.render("sa_exemplar_block", EXEMPLAR_LIST="\n".join(items)) + "\n"


_STATED_CONFIDENCE = re.compile(r"\n[ \t*_]*confidence\s*[:=]\s*[01](?:\.\d+)?[ \t*_.]*$", re.IGNORECASE)
"""A debater's closing ``Confidence: X`` line (asked for when the backend gives no logprobs)."""


def without_stated_confidence(message: str) -> str:
    """``message`` without its closing ``Confidence: X`` line, if it ends with one."""
    return _STATED_CONFIDENCE.sub("", message.rstrip())


def render_debate(prompts: PromptLibrary, turns: list[Turn], confidences: bool = True) -> str:
    """The debate transcript block (empty when there are no turns yet), one rendered turn per message.

    ``confidences``: the Judge's view, each turn headed with its confidence (the MADRAG paper Algorithm 1: Judge(x, F,
    tau, c^A, c^K)). Without, a debater's view: headers without confidence and each message without its stated
    ``Confidence: X`` line, since a debater conditions on the essay and the arguments only (Skeptic(x, a)).
    """
    if not turns:
        return ""
    rendered = [
        prompts.render(
            "debate_turn",
            SPEAKER=t.speaker,
            ROUND=t.round,
            CONFIDENCE="n/a" if t.confidence is None else f"{t.confidence:.2f}",
            MESSAGE=t.message.strip(),
        )
        if confidences
        else prompts.render(
            "debater_turn", SPEAKER=t.speaker, ROUND=t.round, MESSAGE=without_stated_confidence(t.message).strip()
        )
        for t in turns
    ]
    return prompts.render("debate_block", TURNS="\n".join(rendered)) + "\n"
