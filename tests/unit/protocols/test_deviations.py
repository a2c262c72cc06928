"""Every difference from the papers has its row in docs/differences.md: the rows and the registry of named
deviations (:mod:`madrag.protocols.deviations`) match, each name an entry gives is in its row, and every protocol
name madrag offers and every scoring setting is named by a row or as following a paper."""

from __future__ import annotations

import re
from pathlib import Path

from madrag.protocols import available, get_protocol
from madrag.protocols.deviations import AS_THE_PAPERS, DEVIATIONS
from madrag.settings import ScoringSettings

DOC = Path(__file__).resolve().parents[3] / "docs" / "differences.md"
_ROW = re.compile(r"^\| `([a-z0-9-]+)` \|(.*)$", re.MULTILINE)


def rows() -> dict[str, str]:
    found = _ROW.findall(DOC.read_text(encoding="utf-8"))
    ids = [i for i, _ in found]
    assert len(ids) == len(set(ids)), f"an id is given to two rows: {sorted(i for i in ids if ids.count(i) > 1)}"
    return dict(found)


def test_every_row_has_its_entry_and_every_entry_its_row() -> None:
    ids = [d.id for d in DEVIATIONS]
    assert len(ids) == len(set(ids))
    table = rows()
    assert sorted(set(ids) - set(table)) == [], "a deviation without its row in docs/differences.md"
    assert sorted(set(table) - set(ids)) == [], "a row of docs/differences.md without its Deviation entry"


def _said(name: str) -> list[str]:
    """How a row may write a name: a setting as its command-line option or its field; anything else as it is."""
    if name.startswith("setting:"):
        field = name.removeprefix("setting:")
        return [f"--{field.replace('_', '-')}", f"`{field}`"]
    return [name]


def test_each_row_says_the_names_its_entry_gives() -> None:
    table = rows()
    for deviation in DEVIATIONS:
        for name in deviation.names:
            assert any(said in table[deviation.id] for said in _said(name)), (deviation.id, name)


def test_the_names_are_real_protocols_and_settings() -> None:
    fields = set(ScoringSettings.model_fields)
    for name in [n for d in DEVIATIONS for n in d.names] + list(AS_THE_PAPERS):
        if name.startswith("setting:"):
            assert name.removeprefix("setting:") in fields, name
        elif not name.startswith("--"):
            assert get_protocol(name.replace("FILE", "template.xlsx")).name == name.replace("FILE", "template.xlsx")


def test_every_offered_protocol_and_every_setting_is_a_row_or_follows_a_paper() -> None:
    named = {n for d in DEVIATIONS for n in d.names}
    own = [n for n in available() if type(get_protocol(n)).__module__.startswith("madrag.")]
    unclassified = [n for n in own if n not in named and n not in AS_THE_PAPERS]
    assert unclassified == [], "protocol names neither in a row of docs/differences.md nor in AS_THE_PAPERS"
    settings = [f"setting:{f}" for f in ScoringSettings.model_fields]
    unclassified = [s for s in settings if s not in named and s not in AS_THE_PAPERS]
    assert unclassified == [], "scoring settings neither in a row of docs/differences.md nor in AS_THE_PAPERS"
    assert not set(AS_THE_PAPERS) & named, "a name both follows a paper and differs from it"
