"""Write docs/cli.md, the command-line reference, from the CLI's own ``--help``: every command and command group
``madrag --help`` lists (hidden aliases left out), each with its help exactly as ``madrag ... --help`` prints it
at a fixed width of 100 columns.

    python scripts/cli_reference.py           # rewrite docs/cli.md
    python scripts/cli_reference.py --check   # exit 1 (saying so) when docs/cli.md is not what the CLI prints

Defaults that depend on the machine (the cache and the server's folder, read from ``$MADRAG_CACHE`` and
``$MADRAG_SERVER_DIR``, else under the home folder) are shown as the home-folder defaults, ``~/...``, and
``$MADRAG_PLUGINS`` is ignored, so the page is the same on every machine. tests/e2e/docs/test_cli_reference.py runs the
check.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "cli.md"
WIDTH = 100
FIXED_ENV = {"MADRAG_CACHE": "~/.cache/madrag", "MADRAG_SERVER_DIR": "~/.local/share/madrag/server"}
"""Environment variables set before madrag is imported: the defaults they stand for, as the home-folder paths."""

HEAD = """# Command-line reference

Every command of `madrag`, with its help as `madrag ... --help` prints it. This page is generated from the CLI by
`python scripts/cli_reference.py` (do not edit it by hand: `tests/e2e/docs/test_cli_reference.py` fails when it differs
from what the CLI prints).

`madrag --help` lists the commands by audience: scoring essays and reading the results, the teachers' web app and
HTTP API (`madrag serve`), and reproducing the papers (`madrag paper ...`, see
[Reproducing the papers](reproduce.md)). Old names still run, hidden from the listing, and say their new form on
stderr: `madrag ablate` is `madrag score --protocols paper-ablation`, `madrag ablate-consensus` is
`madrag score --protocols consensus-ablation`, and `madrag confidence`, `eval-consensus` and `baseline` are
`madrag paper confidence`, `paper eval-consensus` and `paper baseline`.
"""


def command_paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every visible command and group under ``command`` (a click group or command), depth first, in the order
    their group lists them; ``path``: the words that reach ``command``."""
    import typer

    paths = [path]
    if hasattr(command, "list_commands"):
        ctx = typer.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                paths += command_paths(sub, (*path, name))
    return paths


def help_text(path: tuple[str, ...]) -> str:
    """``madrag PATH --help`` as printed at :data:`WIDTH` columns, trailing spaces removed."""
    from typer.testing import CliRunner

    from madrag.cli.app import app

    done = CliRunner().invoke(app, [*path, "--help"], prog_name="madrag", env={"COLUMNS": str(WIDTH)})
    if done.exit_code != 0:
        raise RuntimeError(f"madrag {' '.join(path)} --help exited {done.exit_code}: {done.output}")
    return "\n".join(line.rstrip() for line in done.output.strip("\n").splitlines())


def reference() -> str:
    """The page: :data:`HEAD`, then one section per command."""
    import typer.main

    from madrag.cli.app import app

    sections = [HEAD]
    for path in command_paths(typer.main.get_command(app)):
        title = " ".join(("madrag", *path))
        sections.append(f"## {title}\n\n```text\n{help_text(path)}\n```\n")
    return "\n".join(sections)


def main(argv: list[str]) -> int:
    for name in ("MADRAG_PLUGINS", "TERMINAL_WIDTH", "FORCE_COLOR", "PY_COLORS", "GITHUB_ACTIONS"):
        os.environ.pop(name, None)
    os.environ.update(FIXED_ENV)
    text = reference()
    if "--check" in argv:
        if not PAGE.is_file() or PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE.relative_to(REPO)} is out of date: run python scripts/cli_reference.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
