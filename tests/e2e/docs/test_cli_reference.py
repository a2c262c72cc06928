"""docs/cli.md, the command-line reference, is what the CLI's ``--help`` prints now: scripts/cli_reference.py
regenerates it from the CLI, and fails its check when the page differs (a command, option or help text changed
without the page)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from madrag.cli.app import COMMANDS
from madrag.cli.paper import PAPER_COMMANDS

REPO = Path(__file__).resolve().parents[3]
PAGE = REPO / "docs" / "cli.md"


def test_the_cli_reference_is_up_to_date() -> None:
    script = REPO / "scripts" / "cli_reference.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr + "\n(run: python scripts/cli_reference.py, and commit docs/cli.md)"


def test_the_reference_has_every_listed_command_and_no_hidden_alias() -> None:
    headings = {line[3:] for line in PAGE.read_text(encoding="utf-8").splitlines() if line.startswith("## ")}
    visible = {f"madrag {name}" for name, lazy in COMMANDS.items() if not lazy.hidden}
    assert visible | {f"madrag paper {name}" for name in PAPER_COMMANDS} <= headings
    assert not {f"madrag {name}" for name, lazy in COMMANDS.items() if lazy.hidden} & headings
    assert "madrag paper confidence meta-eval" in headings and "madrag runs export" in headings
