"""Fresh virtual environments for the install tests (test_core_install.py, test_extras_install.py): ``python -m
venv``, then ``pip install`` of madrag (with an extra or none) from a copy of this checkout's package files, and
madrag run as that venv's own processes.

The copy (``pyproject.toml``, ``README.md`` and ``src/``, 15 MB) is what pip builds from: pip builds in
the source tree (``build/``, ``src/madrag.egg-info``), and two installs building in the checkout beside each other
would write the same files. Each venv runs without this checkout on ``PYTHONPATH`` and with a ``MADRAG_CACHE`` of
its own; pip keeps its own cache, so an install reads its wheels from it (docs/dependencies.md gives each install's
size and time).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO

INSTALL_TIMEOUT_S = 900.0
PACKAGE_FILES = ("pyproject.toml", "README.md")
"""The files beside ``src/`` that the build reads (the project's metadata and readme)."""


def run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``cmd`` to its end, its output captured as text (no check: the test reads the exit code)."""
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout, check=False)


def isolated_env(tmp_path: Path) -> dict[str, str]:
    """This process's environment without this checkout's source (``PYTHONPATH``) or venv, with a madrag cache in
    ``tmp_path`` and tables wide enough that no cell is cut."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MADRAG_CACHE", "VIRTUAL_ENV")}
    env["MADRAG_CACHE"] = str(tmp_path / "cache")
    env["COLUMNS"] = "200"
    return env


def package_copy(dest: Path) -> Path:
    """The package's files copied to ``dest`` (without bytecode or build output), for pip to build from."""
    dest.mkdir(parents=True)
    for name in PACKAGE_FILES:
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(REPO / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    return dest


@dataclass(frozen=True)
class Venv:
    """A fresh venv with madrag installed, the environment its commands run in, and the seconds pip took."""

    root: Path
    env: dict[str, str]
    cwd: Path
    install_s: float

    def bin(self, name: str) -> Path:
        """A console script of the venv (``madrag``, ``python``, ``pip``)."""
        return self.root / "bin" / name

    def run(self, args: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """``args`` with the first word taken from the venv's ``bin/`` (``["madrag", "--help"]``)."""
        return run([str(self.bin(args[0])), *args[1:]], self.env, self.cwd, timeout)

    def pip(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``python -m pip ARGS`` in the venv, within the install timeout."""
        return run([str(self.bin("python")), "-m", "pip", *args], self.env, self.cwd, INSTALL_TIMEOUT_S)

    def distributions(self) -> set[str]:
        """The names of the distributions installed, normalized (lower case, ``-`` for ``_`` and ``.``)."""
        listed = self.pip("list", "--format=json")
        assert listed.returncode == 0, listed.stderr
        return {p["name"].lower().replace("_", "-").replace(".", "-") for p in json.loads(listed.stdout)}


def install(tmp_path: Path, extras: str = "") -> Venv:
    """A venv in ``tmp_path / "venv"`` with ``pip install 'madrag[EXTRAS]'`` (the core for ``""``) from a copy of
    this checkout; commands run in ``tmp_path``."""
    env = isolated_env(tmp_path)
    root = tmp_path / "venv"
    made = run([sys.executable, "-m", "venv", str(root)], env, tmp_path)
    assert made.returncode == 0, made.stderr
    source = package_copy(tmp_path / "madrag-src")
    venv = Venv(root=root, env=env, cwd=tmp_path, install_s=0.0)
    started = time.monotonic()
    installed = venv.pip("install", "-q", f"{source}[{extras}]" if extras else str(source))
    assert installed.returncode == 0, installed.stderr[-3000:]
    return Venv(root=root, env=env, cwd=tmp_path, install_s=time.monotonic() - started)
