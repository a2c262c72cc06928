"""The shared input context x_i(e) = <q, e, r_i, [m_i, M_i], alpha> of seed 000 (3.4), as template values,
plus the renderers for exemplar blocks and debate transcripts."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from madrag.agents.prompts import PromptLibrary
from madrag.data.essay import Essay
from madrag.providers.base import Message
from madrag.rubric import Trait
from madrag.settings import Anonymization, PromptLayout

if TYPE_CHECKING:
    from madrag.retrieval.bank import LevelExemplar

PLACEHOLDER = re.compile(r"@([A-Z]+)(\d*)")
_MASKS = {
    "PERSON": "[person]",
    "CAPS": "[name]",
    "NUM": "[number]",
    "DATE": "[date]",
    "TIME": "[time]",
    "MONTH": "[month]",
    "LOCATION": "[place]",
    "CITY": "[city]",
    "STATE": "[state]",
    "ORGANIZATION": "[organization]",
    "MONEY": "[amount]",
    "PERCENT": "[percent]",
    "EMAIL": "[email]",
    "DR": "[doctor]",
}


def count_placeholders(text: str) -> int:
    return len(PLACEHOLDER.findall(text))


def mask_placeholders(text: str) -> str:
    """Replace ``@CAPS1``-style anonymization placeholders by neutral bracketed words."""
    return PLACEHOLDER.sub(lambda m: _MASKS.get(m.group(1), "[name]"), text)


@dataclass(frozen=True)
class Turn:
    """One debate message as the Judge (or the next debater) sees it."""

    speaker: str
    round: int
    message: str
    confidence: float | None


def essay_values(
    prompts: PromptLibrary, essay: Essay, trait: Trait, anonymization: Anonymization, self_report: bool
) -> dict[str, str]:
    """Template values shared by every role for one essay and trait."""
    text = mask_placeholders(essay.text) if anonymization == "mask" else essay.text
    values = {
        "PROMPT": essay.prompt or "(no prompt given)",
        "TRAIT_NAME": trait.name,
        "TRAIT_JSON": trait.as_prompt_json(),
        "MIN_POINTS": str(trait.min),
        "MAX_POINTS": str(trait.max),
        "ESSAY": text,
        "ANON_CONTEXT": prompts.render("anon_note") if anonymization == "note" else "",
        "CONFIDENCE_INSTRUCTION": prompts.render("confidence_instruction") if self_report else "",
    }
    values["ESSAY_CONTEXT"] = prompts.render("essay_context", **values)
    values["CONTEXT"] = prompts.render("context", **values)
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


def render_exemplars(prompts: PromptLibrary, trait: Trait, levels: list[LevelExemplar], max_words: int | None) -> str:
    items = []
    for level in levels:
        if level.exemplar is None:
            items.append(prompts.render("exemplar_missing", SCORE=level.score, TRAIT_NAME=trait.name))
            continue
        text = level.exemplar.text
        if max_words is not None:
            words = text.split()
            if len(words) > max_words:
                text = " ".join(words[:max_words]) + " [...]"
        items.append(prompts.render("exemplar_item", SCORE=level.score, TRAIT_NAME=trait.name, TEXT=text))
    return prompts.render("exemplar_block", TRAIT_NAME=trait.name, EXEMPLAR_LIST="\n".join(items)) + "\n"


def render_debate(prompts: PromptLibrary, turns: list[Turn]) -> str:
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
        for t in turns
    ]
    return prompts.render("debate_block", TURNS="\n".join(rendered)) + "\n"
