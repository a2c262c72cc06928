"""Benchmark the CLI's start: ``madrag --help``, ``madrag score --help`` and ``import madrag``, each timed in a
fresh interpreter, side by side with the eager way (before the lazy imports): every public name of
``madrag.__all__`` and every command's module imported first, as ``import madrag`` and the CLI's app did.

Runs alternate (lazy, eager, lazy, ...) so both see the same machine load; prints the median and the fastest of
``--repeat`` runs, their ratio, and which heavy libraries each way imported. ``--old-src DIR`` adds a third
column: the same commands on another checkout's ``src`` folder (e.g. ``git archive <commit> src | tar -x``),
run as ``python -m madrag.cli``.
Run: ``PYTHONPATH=src .venv/bin/python bench/cli_startup.py --repeat 5``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HEAVY = ("pandas", "scipy", "numpy", "torch", "fastapi", "pydantic", "rich")
SRC = str(Path(__file__).resolve().parent.parent / "src")
EAGER = (
    "import madrag; from madrag.cli.app import COMMANDS; import importlib; "
    "[getattr(madrag, n) for n in madrag.__all__]; "
    "[importlib.import_module(c.module_name) for c in COMMANDS.values()]; "
)
REPORT = "; import json, sys as s; print(json.dumps([m for m in {heavy!r} if m in s.modules]), file=s.stderr)"
CASES = {  # name: (lazy code, eager code); both run with sys.argv set to the command's arguments
    "madrag --help": ("from madrag.cli.app import main", EAGER + "from madrag.cli.app import main"),
    "madrag score --help": ("from madrag.cli.app import main", EAGER + "from madrag.cli.app import main"),
    "import madrag": ("import madrag", EAGER),
}
ARGS = {"madrag --help": ["--help"], "madrag score --help": ["score", "--help"], "import madrag": []}


def code_for(case: str, body: str) -> str:
    run_main = "\ntry:\n    main()\nexcept SystemExit:\n    pass" if "main" in body else ""
    return f"import sys; sys.argv = ['madrag', *{ARGS[case]!r}]\n{body}{run_main}\n{REPORT.format(heavy=HEAVY)[2:]}"


def timed(argv: list[str], src: str) -> tuple[float, list[str]]:
    """Seconds of one run in a fresh interpreter, and the heavy libraries it imported."""
    env = {**os.environ, "PYTHONPATH": src, "COLUMNS": "120"}
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.strip()[-300:]}")
    heavy = json.loads(proc.stderr.strip().splitlines()[-1]) if proc.stderr.strip() else []
    return elapsed, heavy


def old_argv(case: str) -> list[str]:
    if case == "import madrag":
        return [sys.executable, "-c", "import madrag" + REPORT.format(heavy=HEAVY)]
    return [sys.executable, "-c", code_for(case, "from madrag.cli.app import main")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each way per command")
    parser.add_argument("--old-src", type=Path, help="another checkout's src folder, timed as a third column")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {args.repeat} runs")
    for case, (lazy, eager) in CASES.items():
        ways = {
            "lazy": [sys.executable, "-c", code_for(case, lazy)],
            "eager": [sys.executable, "-c", code_for(case, eager)],
        }
        srcs = {"lazy": SRC, "eager": SRC}
        if args.old_src is not None:
            ways["old src"], srcs["old src"] = old_argv(case), str(args.old_src)
        times: dict[str, list[float]] = {w: [] for w in ways}
        heavy: dict[str, list[str]] = {}
        for _ in range(args.repeat):
            for way, argv in ways.items():
                seconds, heavy[way] = timed(argv, srcs[way])
                times[way].append(seconds)
        print(f"\n{case}")
        lazy_median = statistics.median(times["lazy"])
        for way, values in times.items():
            median = statistics.median(values)
            print(
                f"  {way:8s} median {median:6.3f} s  fastest {min(values):6.3f} s  "
                f"x{median / lazy_median:5.1f} the lazy median  imports: {', '.join(heavy[way]) or '-'}"
            )


if __name__ == "__main__":
    main()
