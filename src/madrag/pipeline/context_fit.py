"""Whether a run's largest prompts fit its server's context, checked before its first call.

Each protocol and role's largest rehearsed prompt (:mod:`madrag.pipeline.worst_case`) is counted by the server's
``/tokenize`` where it has one (llama.cpp), else estimated (:func:`~madrag.providers.server_props.estimate_tokens`),
plus :data:`TEMPLATE_TOKENS` a message for the chat template's role headers, plus the earlier answers it shows at
their full limits, plus its own answer's limit; a run where one does not fit one slot's context is refused in one
line with the numbers and the settings that would make it fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from madrag.errors import hint, token_limit
from madrag.pipeline.worst_case import OPTION, WorstPrompt
from madrag.providers.server_props import CHARS_PER_TOKEN, SaysItsProps, ServerProps, estimate_tokens

TEMPLATE_TOKENS = 8
"""Tokens allowed per message for what the chat template wraps it in (ChatML's ``<|im_start|>user\\n`` and
``<|im_end|>\\n`` are 5), beyond the messages' text that ``/tokenize`` counts."""


@dataclass(frozen=True)
class Need:
    """What one prompt needs of the context: its own ``tokens`` (counted or estimated, ``counted`` says), the
    earlier answers it shows and its answer, at their limits."""

    prompt: WorstPrompt
    tokens: int
    counted: bool

    @property
    def total(self) -> int:
        return self.tokens + self.prompt.shown_tokens() + self.prompt.answer.tokens


def largest(prompts: Sequence[WorstPrompt]) -> list[WorstPrompt]:
    """Per protocol and role, its largest prompt by estimate (the ones worth asking the server to count)."""
    best: dict[tuple[str, str], tuple[int, WorstPrompt]] = {}
    for p in prompts:
        size = estimate_tokens(p.text) + p.shown_tokens() + p.answer.tokens
        key = (p.protocol, p.role)
        if key not in best or size > best[key][0]:
            best[key] = (size, p)
    return [p for _, p in best.values()]


async def needs(provider: object, prompts: Sequence[WorstPrompt]) -> list[Need]:
    """Each of ``prompts`` counted by the provider's server (``/tokenize``), else estimated."""
    found = []
    for p in prompts:
        counted = await provider.count_tokens(p.text) if isinstance(provider, SaysItsProps) else None
        tokens = counted if counted is not None else estimate_tokens(p.text)
        found.append(Need(p, tokens + TEMPLATE_TOKENS * p.messages, counted is not None))
    return found


def fixes(over: Sequence[Need], n_ctx: int, settings: dict[str, int]) -> list[str]:
    """The token limits that would make every prompt of ``over`` fit ``n_ctx``, each alone
    (``--debater-max-tokens 212``); none for a limit that some of them do not use, or that would have to be 0."""
    out = []
    for setting, option in OPTION.items():
        value = settings[setting]
        fits = []
        for need in over:
            uses = need.prompt.uses(setting)
            fits.append(math.floor((n_ctx - (need.total - uses * value)) / uses) if uses else 0)
        fit = min(fits, default=0)
        if 1 <= fit < value:
            out.append(token_limit(option, fit))
    return out


def refusal(over: Sequence[Need], props: ServerProps, settings: dict[str, int], where: str) -> str:
    """The one line that refuses a run whose prompts ``over`` do not fit ``props``' context: the largest one's
    numbers, the server's setting to change and the token limits that would make them all fit (a resumed run
    takes them too)."""
    need = max(over, key=lambda n: n.total)
    p = need.prompt
    how = "counted by the server's /tokenize" if need.counted else f"estimated at {CHARS_PER_TOKEN} characters a token"
    shown = f" + {p.shown_tokens()} for {len(p.shown)} earlier answers at their token limits" if p.shown else ""
    options = fixes(over, props.n_ctx or 0, settings)
    return (
        f"{where}: {p.where()} needs up to {need.tokens} prompt tokens ({how}, with the chat template){shown} + "
        f"{p.answer.tokens} answer tokens = {need.total}, more than {props.context_words()}"
        + (f"; {hint('context-limits', options=' or '.join(options))}" if options else "")
    )


async def context_problem(
    provider: object, props: ServerProps | None, prompts: Sequence[WorstPrompt], settings: dict[str, int], where: str
) -> str | None:
    """Why the largest of ``prompts`` (one backend's) cannot fit one slot of its server, or None."""
    if props is None or props.n_ctx is None or not prompts:
        return None
    counted = await needs(provider, largest(prompts))
    over = [n for n in counted if n.total > props.n_ctx]
    if not over:
        return None
    return refusal(over, props, settings, where)
