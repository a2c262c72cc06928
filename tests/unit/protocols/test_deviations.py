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
HEADER = ["id", "what", "paper", "madrag default", "option (the other choice)", "why the option exists"]
_PIPE = re.compile(r"(?<!\\)\|")  # a cell border: a pipe not escaped (inside backticks too, as GitHub splits)
_ID = re.compile(r"^`([a-z0-9-]+)`$")


def cells(line: str) -> list[str]:
    """A markdown table row's cells, split at its unescaped pipes and stripped."""
    parts = _PIPE.split(line.strip())
    assert parts[0] == "" and parts[-1] == "", f"a row must start and end with a pipe: {line[:80]!r}"
    return [c.strip() for c in parts[1:-1]]


def table() -> list[list[str]]:
    """The rows of the table (below its header and rule), each as its cells; the table is the document's only
    one, and runs to the first line that is not a row."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| id |"))
    assert cells(lines[start]) == HEADER
    assert set(cells(lines[start + 1])) == {"---"}
    body = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        body.append(cells(line))
    after = [line for line in lines[start + 2 + len(body) :] if line.startswith("|")]
    assert after == [], "a table row after the table's end (a blank line inside the table?)"
    return body


def rows() -> dict[str, str]:
    """Row id -> the row's text after its id."""
    found = table()
    ids = []
    for row in found:
        match = _ID.match(row[0])
        assert match is not None, f"a row whose first cell is not an id in backticks: {row[0]!r}"
        ids.append(match.group(1))
    assert len(ids) == len(set(ids)), f"an id is given to two rows: {sorted(i for i in ids if ids.count(i) > 1)}"
    return {i: " | ".join(row[1:]) for i, row in zip(ids, found, strict=True)}


def test_every_row_has_six_cells_none_empty() -> None:
    wrong = {row[0]: len(row) for row in table() if len(row) != len(HEADER)}
    assert wrong == {}, f"rows of docs/differences.md without {len(HEADER)} cells (id: cells)"
    assert [row[0] for row in table() if any(not c for c in row)] == [], "a row with an empty cell"


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
