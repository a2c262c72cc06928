"""A protocol is a few concepts: ``ScoringProtocol`` has at most six public members, and a protocol of the common
kind (one call per trait) is one short file (``tests/e2e/protocols/toy_protocol.py``, a plugin)."""

from __future__ import annotations

import re
from pathlib import Path

from madrag.protocols import available, get_protocol
from madrag.protocols.base import ProtocolNeeds, ScoringProtocol

REPO = Path(__file__).resolve().parents[3]
TOY_PLUGIN = REPO / "tests" / "e2e" / "protocols" / "toy_protocol.py"


def test_scoring_protocol_has_at_most_six_public_members() -> None:
    public = {n for n in [*dir(ScoringProtocol), *ScoringProtocol.__annotations__] if not n.startswith("_")}
    assert public == {"name", "needs", "describe", "score_essay", "read_scores"}
    assert len(public) <= 6


def test_the_toy_protocol_plugin_is_under_40_lines() -> None:
    lines = TOY_PLUGIN.read_text(encoding="utf-8").splitlines()
    assert 0 < len(lines) < 40
    assert "class ToyProtocol(TraitProtocol)" in "\n".join(lines)  # a protocol, not a stub


def test_the_docs_show_the_toy_as_it_is() -> None:
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("## How to add a protocol", 1)[1].split("\n## ", 1)[0]
    (shown,) = re.findall(r"^```python\n(.*?)^```$", section, flags=re.DOTALL | re.MULTILINE)
    assert shown.strip() and shown.strip() in TOY_PLUGIN.read_text(encoding="utf-8")


def test_every_protocol_states_its_needs() -> None:
    for name in available():
        needs = get_protocol(name).needs
        assert isinstance(needs, ProtocolNeeds)
        assert needs.chains is None or not needs.per_trait  # a number of chains only for a whole-essay protocol
