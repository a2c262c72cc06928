"""What the disk refuses is one line and exit code 2, the store stays consistent, and the same command continues
once there is room: a run directory on a real 2 MB file system (tmpfs; skipped where mounting is not permitted),
filled during the run, nearly full at the start, and a full cache folder; plus the same failure simulated at
SQLite's level (a page limit on the store's writer), which runs everywhere."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import madrag
from madrag.errors import StorageError
from madrag.evaluation.run import open_store
from madrag.store import run_store as store_module

RUBRIC = {"traits": [{"name": "Ideas", "min": 0, "max": 3, "levels": dict.fromkeys(range(4), "...")}]}


def _essays(n: int) -> list[str]:
    return [f"Essay {i}. " + "The lake was calm and the day was long. " * 40 for i in range(n)]


def _integrity(run: Path) -> None:
    conn = sqlite3.connect(run / "store.sqlite")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def test_disk_full_simulated_in_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = store_module._connect

    def limited(path: Path, *, check_same_thread: bool = True) -> sqlite3.Connection:
        conn = real(path, check_same_thread=check_same_thread)
        if not check_same_thread:  # the writer thread's connection: room for a few more pages only
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {pages + 4}")
        return conn

    run = tmp_path / "run"
    args: dict[str, Any] = {"protocol": "MA", "provider": "fake", "run_dir": run, "cache_dir": tmp_path / "c"}
    monkeypatch.setattr(store_module, "_connect", limited)
    with pytest.raises(StorageError) as caught:
        madrag.score(_essays(30), RUBRIC, progress=False, **args)
    message = str(caught.value)
    assert "\n" not in message and "the disk is full" in message and "run the same command again" in message
    store = open_store(run)
    kept = store.count()
    store.close()
    assert 0 < kept < 30
    _integrity(run)
    monkeypatch.setattr(store_module, "_connect", real)
    done = madrag.score(_essays(30), RUBRIC, progress=False, **args)  # the same call continues
    assert done.stats.reused == kept and done.stats.made == 30 - kept


@contextlib.contextmanager
def _tmpfs(folder: Path, size: str = "2m") -> Iterator[Path]:
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip() or 'not permitted'})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _fill(folder: Path, leave: int) -> Path:
    """A filler file taking all but ``leave`` bytes of ``folder``'s file system."""
    stats = os.statvfs(folder)
    free = stats.f_bavail * stats.f_frsize
    filler = folder / "filler"
    filler.write_bytes(b"\0" * max(0, free - leave))
    return filler


def _score_cli(data: Path, rubric: Path, run: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = ["score", "--data", str(data), "--rubric", str(rubric), "--run-dir", str(run), "--cache-dir", str(cache),
            "--provider", "fake", *extra]  # fmt: skip
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=300)


def _one_line(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "was never retrieved" not in proc.stderr, proc.stderr[-2000:]
    assert any(n in errors[0] for n in needles), errors[0]
    return errors[0]


@pytest.fixture
def files(asap: Path) -> tuple[Path, Path]:
    return asap / "training_set_rel3_sets7_8.tsv", asap / "rubric_set7.json"


def test_a_real_full_disk_during_the_run(files: tuple[Path, Path], tmp_path: Path) -> None:
    data, rubric = files
    with _tmpfs(tmp_path / "small") as small:
        filler = _fill(small, leave=150_000)
        run = small / "run"
        extra = ("--protocol", "MA", "--limit", "20")
        line = _one_line(_score_cli(data, rubric, run, tmp_path / "cache", *extra), "the disk is full", "I/O error")
        assert "run the same command again" in line
        filler.unlink()
        again = _score_cli(data, rubric, run, tmp_path / "cache", *extra)
        assert again.returncode == 0, again.stderr[-2000:]
        _integrity(run)
        store = open_store(run)
        assert store.count() == 20 * 4
        store.close()


def test_a_nearly_full_disk_at_the_start(files: tuple[Path, Path], tmp_path: Path) -> None:
    data, rubric = files
    with _tmpfs(tmp_path / "small") as small:
        _fill(small, leave=2_000)
        proc = _score_cli(data, rubric, small / "run", tmp_path / "cache", "--protocol", "MA", "--limit", "2")
        _one_line(proc, "the disk is full", "I/O error")


def test_a_full_cache_folder(files: tuple[Path, Path], tmp_path: Path) -> None:
    data, rubric = files
    with _tmpfs(tmp_path / "small") as small:
        (small / "cache").mkdir()
        _fill(small, leave=2_000)
        proc = _score_cli(data, rubric, tmp_path / "run", small / "cache", "--protocol", "MARAG", "--limit", "2",
                          "--embedder", "hashing")  # fmt: skip
        line = _one_line(proc, "the disk is full", "I/O error")
        assert "cache directory" in line


def test_a_read_only_file_system(files: tuple[Path, Path], tmp_path: Path) -> None:
    data, rubric = files
    with _tmpfs(tmp_path / "ro", size="1m,ro") as readonly:
        proc = _score_cli(data, rubric, readonly / "run", tmp_path / "cache", "--protocol", "MA", "--limit", "1")
        _one_line(proc, "read-only")
