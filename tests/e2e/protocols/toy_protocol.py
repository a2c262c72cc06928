"""A scoring protocol as a plugin, in one file: one call per trait with MA's prompt, its score the call's read
score. madrag loads it as it loads any plugin (``MADRAG_PLUGINS=toy_protocol``, or an entry point of the group
``madrag.protocols``); ``test_toy_protocol.py`` beside it runs it through every front door."""

from __future__ import annotations

from typing import Any

from madrag import Essay, Trait
from madrag.protocols import CallContext, TraitProtocol, TraitScore, ask_for_score, register_protocol


class ToyProtocol(TraitProtocol):
    """One rater call per trait (MA's prompt), its score the read score of that call."""

    name = "Toy"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "calls": "one rater per trait"}

    async def score_trait(self, ctx: CallContext, essay: Essay, trait: Trait, source_label: str | None) -> TraitScore:
        return await ask_for_score(ctx, self.name, essay, trait, source_label)


@register_protocol("Toy")
def toy(name: str) -> ToyProtocol:
    return ToyProtocol()
