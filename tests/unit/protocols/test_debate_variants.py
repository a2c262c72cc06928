"""Transcript variants of the MADRAG paper's Appendix C.1: which debater speaks when, what each turn reads, and the
order
in which the Judge sees the turns."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.helpers import make_ctx

from madrag.agents.context import essay_values
from madrag.data.essay import Essay
from madrag.protocols.debate import VARIANTS, Variant, run_debate
from madrag.providers.fake import FakeProvider
from madrag.rubric import Trait

TRAIT = Trait(name="Ideas", min=0, max=3, levels={s: f"level {s}" for s in range(4)})
ADV_FIRST = [("advocate", 1, []), ("skeptic", 1, ["Advocate 1"])]
SKP_FIRST = [("skeptic", 1, []), ("advocate", 1, ["Skeptic 1"])]
# variant -> [(role, round, turns it reads)] in the order the Judge reads them
EXPECTED: dict[str, list[tuple[str, int, list[str]]]] = {
    "adv_r1": ADV_FIRST,
    "adv_r2": [
        *ADV_FIRST,
        ("advocate", 2, ["Advocate 1", "Skeptic 1"]),
        ("skeptic", 2, ["Advocate 1", "Skeptic 1", "Advocate 2"]),
    ],
    "skp_r1": SKP_FIRST,
    "skp_r2": [
        *SKP_FIRST,
        ("skeptic", 2, ["Skeptic 1", "Advocate 1"]),
        ("advocate", 2, ["Skeptic 1", "Advocate 1", "Skeptic 2"]),
    ],
    "both_r1": [*ADV_FIRST, *SKP_FIRST],
    "skponly_r1": [("skeptic", 1, [])],
    "skponly_r2": [("skeptic", 1, []), ("skeptic", 2, ["Skeptic 1"])],
    "split_r1": [("advocate", 1, []), ("skeptic", 1, [])],
    "split_r2": [
        ("advocate", 1, []),
        ("advocate", 2, ["Advocate 1"]),
        ("skeptic", 1, []),
        ("skeptic", 2, ["Skeptic 1"]),
    ],
}


def _debate(tmp_path: Path, variant: Variant) -> list[tuple[str, int, list[str]]]:
    ctx = make_ctx(tmp_path, FakeProvider())
    essay = Essay(id="e1", text="I waited in line for lunch.", prompt="Write about patience.")
    values = essay_values(ctx.prompts, essay, TRAIT, "note", False)
    records = asyncio.run(run_debate(ctx, essay.id, TRAIT, values, variant))
    ctx.store.close()
    return [(r.role, r.round, list(r.context["reads"])) for r in records]


@pytest.mark.parametrize("variant", sorted(EXPECTED))
def test_variant_turn_order_and_what_each_turn_reads(tmp_path: Path, variant: Variant) -> None:
    assert _debate(tmp_path, variant) == EXPECTED[variant]


def test_both_r2_concatenates_the_two_full_exchanges(tmp_path: Path) -> None:
    turns = _debate(tmp_path, "both_r2")
    assert [(role, rnd) for role, rnd, _ in turns[:4]] == [(r, n) for r, n, _ in EXPECTED["adv_r2"]]
    assert [(role, rnd) for role, rnd, _ in turns[4:]] == [(r, n) for r, n, _ in EXPECTED["skp_r2"]]
    assert set(VARIANTS) == {*EXPECTED, "both_r2"}
