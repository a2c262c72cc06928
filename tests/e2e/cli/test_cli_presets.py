"""One CLI for three audiences: ``madrag score --protocols PRESET`` (the papers' protocol lists by name, checked
against the papers' own tables as transcribed in madrag.paper.reported), the old ``ablate`` /
``ablate-consensus`` and the paper commands' old top-level names as hidden aliases that say their new form, the
``madrag paper`` group, and ``madrag --help`` grouped by audience."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from madrag.cli.app import COMMANDS, PANELS
from madrag.cli.paper import PAPER_COMMANDS
from madrag.cli.presets import PRESETS, ChosenProtocols, choose_protocols
from madrag.errors import InputError
from madrag.paper.reported import figures
from madrag.protocols import CONSENSUS_PROTOCOLS, get_protocol
from madrag.store import RunStore


def madrag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=300)


def _rows(paper: str, table: str) -> list[str]:
    return list(dict.fromkeys(f.protocol for f in figures(paper, table=table) if f.protocol))  # type: ignore[arg-type]


def test_the_presets_are_the_papers_tables() -> None:
    assert list(PRESETS["paper-ablation"].protocols) == _rows("madrag", "Table 9")  # the paper's ablation table
    assert list(PRESETS["transcript-variants"].protocols) == _rows("madrag", "Table 7") == _rows("madrag", "Table 8")
    assert PRESETS["consensus-ablation"].protocols == CONSENSUS_PROTOCOLS
    assert set(_rows("consensus", "Table 1")) <= set(PRESETS["consensus-ablation"].protocols)
    for preset in PRESETS.values():
        assert [get_protocol(name).name for name in preset.protocols] == list(preset.protocols)


def test_presets_and_explicit_protocols_combine_or_replace_the_default() -> None:
    assert choose_protocols(None, None, ["MADRAG"]) == ChosenProtocols(["MADRAG"], None)
    assert choose_protocols(None, [], "paper-ablation").preset == "paper-ablation"  # typer's empty -p
    assert choose_protocols(None, ["MAD", "CJ"], "paper-ablation") == ChosenProtocols(["MAD", "CJ"], None)
    combined = choose_protocols("consensus-ablation", ["MADRAG"], ["MADRAG"])
    assert combined == ChosenProtocols([*CONSENSUS_PROTOCOLS, "MADRAG"], "consensus-ablation")
    with pytest.raises(InputError, match=r"^protocol MAD given twice \(--protocols paper-ablation has it\)"):
        choose_protocols("paper-ablation", ["MAD"], ["MADRAG"])
    with pytest.raises(InputError, match=r"^protocol CJ given twice: name each protocol once$"):
        choose_protocols(None, ["CJ", "CJ"], ["MADRAG"])
    with pytest.raises(InputError, match=r"^--protocols must be one of paper-ablation, .*; got 'ablation'$"):
        choose_protocols("ablation", None, ["MADRAG"])


def test_help_groups_the_commands_by_audience_and_hides_the_old_names() -> None:
    listing = madrag("--help")
    assert listing.returncode == 0, listing.stderr
    out = listing.stdout
    order = ["│ score ", PANELS[1], "│ serve ", PANELS[2], "│ paper "]
    assert out.index(PANELS[0]) < out.index("│ score ")
    assert [out.index(text) for text in order] == sorted(out.index(text) for text in order)
    for name, lazy in COMMANDS.items():
        assert (f"│ {name} " in out) is not lazy.hidden, name
    assert {"ablate", "ablate-consensus", "confidence", "eval-consensus", "baseline"} == {
        n for n, c in COMMANDS.items() if c.hidden
    }
    paper = madrag("paper", "--help")
    assert paper.returncode == 0 and all(f"│ {name} " in paper.stdout for name in PAPER_COMMANDS)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (["eval-consensus", "--help"], "madrag paper eval-consensus"),
        (["confidence", "analyze", "--help"], "madrag paper confidence"),
        (["baseline", "--help"], "madrag paper baseline"),
    ],
)
def test_an_old_paper_command_still_runs_and_names_its_new_form(old: list[str], new: str) -> None:
    done = madrag(*old)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [f"note: 'madrag {old[0]}' is now '{new}' (the old name still works)"]
    same = madrag("paper", *old).stdout.replace(" paper ", " ", 1)  # the usage line names the path it was run by
    assert [line.rstrip() for line in done.stdout.splitlines()] == [line.rstrip() for line in same.splitlines()]


def test_ablate_is_score_with_the_preset_recorded_in_the_run(asap: Path, tmp_path: Path) -> None:
    common = [
        "--data", str(asap / "training_set_rel3_sets7_8.tsv"), "--rubric", str(asap / "rubric_set7.json"),
        "--cache-dir", str(tmp_path / "cache"), "--provider", "fake", "--embedder", "hashing", "--limit", "1",
    ]  # fmt: skip
    old = madrag("ablate", *common, "--run-dir", str(tmp_path / "old"))
    assert old.returncode == 0, old.stderr
    note = "note: 'madrag ablate' is now 'madrag score --protocols paper-ablation' (the old name still works)"
    assert old.stderr.splitlines()[0] == note
    new = madrag("score", "--protocols", "paper-ablation", *common, "--run-dir", str(tmp_path / "new"))
    assert new.returncode == 0 and "note:" not in new.stderr, new.stderr
    configs: list[Any] = []
    for run in ("old", "new"):
        store = RunStore(tmp_path / run / "store.sqlite", read_only=True)
        try:
            configs.append(store.get_meta("config"))
        finally:
            store.close()
    assert configs[0]["protocols"] == configs[1]["protocols"]
    assert [p["name"] for p in configs[1]["protocols"]] == list(PRESETS["paper-ablation"].protocols)
    assert configs[0]["protocol_preset"] == configs[1]["protocol_preset"] == "paper-ablation"
    # the preset is provenance, not identity: the same protocols named one by one resume the run
    explicit = [a for p in PRESETS["paper-ablation"].protocols for a in ("-p", p)]
    again = madrag("score", *explicit, *common, "--run-dir", str(tmp_path / "new"))
    assert again.returncode == 0 and "0 agent calls made" in again.stdout.replace("\n", " "), again.stderr


def test_a_clash_is_one_line(asap: Path, tmp_path: Path) -> None:
    done = madrag(
        "score", "--data", str(asap / "training_set_rel3_sets7_8.tsv"), "--rubric", str(asap / "rubric_set7.json"),
        "--run-dir", str(tmp_path / "run"), "--protocols", "paper-ablation", "-p", "MADRAG",
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: protocol MADRAG given twice (--protocols paper-ablation has it): name each protocol once"
    ]
    assert not (tmp_path / "run").exists()
