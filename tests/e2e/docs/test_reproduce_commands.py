"""Every command of docs/reproduce.md (the index of the three papers' tables and figures) runs, through the
rewrite table of tests/e2e/docs/test_readme_commands.py (fake backend, three essays per run), each in this process
as that file runs the README's (its module docstring says why): none of them can rot."""

from __future__ import annotations

import re
import time
from pathlib import Path

from tests.e2e.docs.test_readme_commands import REPO, cli_options, in_process, readme_commands, rewrite, user_files

REPRODUCE = REPO / "docs" / "reproduce.md"
PAPER_ITEMS = {
    "MADRAG": ["Table 1", "Table 2", "Table 3", "Table 4", "Table 5", "Table 6", "Table 7", "Table 8", "Table 9",
            "Table 10", "Table 11", "Tables 12-14", "Figure 2"],
    "confidence": ["Table 1", "Table 2", "Tables 3 and 4", "Figure 2", "Figure 3"],
    "consensus": ["Tables 1, 2, 8 and 9", "Table 3", "Figure 2", "Figures 3 and 4"],
}  # fmt: skip


def test_every_paper_table_and_figure_has_its_place() -> None:
    text = REPRODUCE.read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## The (\w+) paper: .*?\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M))
    for paper, items in PAPER_ITEMS.items():
        for item in items:
            number = item.replace("Tables ", "Table ").split()[1].rstrip(",")
            assert re.search(rf"\b{item.split()[0]}s?\b[^.]*\b{number}\b", sections[paper]), f"{paper}: {item}"


def test_every_reproduce_option_exists(tmp_path: Path) -> None:
    seen: dict[str, str] = {}
    commands, setup = readme_commands(REPRODUCE)
    assert len(commands) >= 15 and not setup
    for command in commands:
        path, options = cli_options(command.args)
        given = {word.split("=", 1)[0] for word in command.args if word.startswith("-")}
        assert given <= options, f"{command}: madrag {path} has no {', '.join(sorted(given - options))}"
        args = tuple(rewrite(command, tmp_path, seen))
        assert {w for w in args if w.startswith("--")} <= cli_options(args)[1], f"{command}: rewritten to {args}"


def test_every_reproduce_command_runs(tmp_path: Path) -> None:
    user_files(tmp_path)
    seen: dict[str, str] = {}
    timings = []
    for command in readme_commands(REPRODUCE)[0]:
        args = rewrite(command, tmp_path, seen)
        started = time.monotonic()
        done = in_process(args, tmp_path)
        timings.append((round(time.monotonic() - started, 1), " ".join(command.args[:2])))
        assert done.returncode == 0, f"{command}\nran as: madrag {' '.join(args)}\n{done.stderr[-3000:]}"
    print("slowest:", sorted(timings, reverse=True)[:6])
