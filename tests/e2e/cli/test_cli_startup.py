"""A fast start: ``import madrag``, ``madrag --help`` and ``madrag score --help`` do not import the heavy
libraries (pandas, scipy, torch, fastapi), checked in a fresh interpreter's ``sys.modules``; the
lazily listed commands show the help their modules give them; the public API is still all there.

Not timed (timings depend on the machine): bench/cli_startup.py measures the times."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import madrag
from madrag.cli.app import COMMANDS
from madrag.cli.lazy import LazyCommand
from madrag.cli.paper import PAPER_COMMANDS

HEAVY = ("pandas", "scipy", "torch", "fastapi", "sentence_transformers", "ray")

# Runs ``code`` in a fresh interpreter, then prints which of HEAVY it imported (stdout's last line, as JSON).
PROBE = """
import json, sys
try:
    {code}
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def loaded_after(code: str) -> list[str]:
    probe = PROBE.format(code=code, heavy=HEAVY)
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found: list[str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


def test_import_madrag_loads_no_heavy_library() -> None:
    assert loaded_after("import madrag") == []


@pytest.mark.parametrize("args", [["--help"], ["data", "--help"], ["score", "--help"], ["paper", "--help"]])
def test_help_loads_no_heavy_library(args: list[str]) -> None:
    code = f"sys.argv = ['madrag', *{args!r}]; from madrag.cli.app import main; main()"
    assert loaded_after(code) == []


def test_python_dash_m_madrag_is_the_cli() -> None:
    proc = subprocess.run([sys.executable, "-m", "madrag", "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert all((f"│ {name} " in proc.stdout) is not lazy.hidden for name, lazy in COMMANDS.items())


@pytest.mark.parametrize(("name", "lazy"), [*COMMANDS.items(), *PAPER_COMMANDS.items()])
def test_listed_help_is_the_commands_own(name: str, lazy: LazyCommand) -> None:
    # madrag --help (and madrag paper --help) reads each command's help from its module's source; it must be what
    # typer builds from it
    built = lazy.load(name)
    assert lazy.help() is not None
    assert lazy.help() == built.help


def test_public_api_resolves_lazily() -> None:
    from madrag import ProviderSpec, score

    assert score is madrag.api.scoring.score
    assert ProviderSpec.__name__ == "ProviderSpec"
    assert all(getattr(madrag, name) is not None for name in madrag.__all__)
    assert set(madrag.__all__) <= set(dir(madrag))
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        _ = madrag.not_a_name  # type: ignore[attr-defined]
