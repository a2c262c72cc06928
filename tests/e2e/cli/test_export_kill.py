"""Kill `madrag runs export` (SIGKILL) in the middle of writing a large file, at several points: the target is
always the old complete file or the new complete one, never a cut one (madrag/files/atomic.py), and the next
export leaves no temporary file behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.synthetic_runs import rubric_of, synthesize_run

from madrag.store import RunStore

OLD = "an older export, complete\n"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    return runs / synthesize_run(runs, 100, rubric_of(2))  # 600 records, about 12 MB of JSON lines


def _export(run_dir: Path, out: Path, what: str) -> list[str]:
    fmt = "jsonl" if what == "records" else "csv"
    return [sys.executable, "-m", "madrag.cli", "runs", "export", "--run-dir", str(run_dir), "--what", what,
            "--format", fmt, "--out", str(out)]  # fmt: skip


def _written(folder: Path) -> int:
    """The most bytes any file in ``folder`` holds (the target, or the temporary beside it)."""
    sizes = []
    for entry in os.scandir(folder):
        try:
            sizes.append(entry.stat().st_size)
        except FileNotFoundError:  # renamed away meanwhile
            pass
    return max(sizes, default=0)


def _kill_when(cmd: list[str], folder: Path, done: int, at_bytes: int) -> bool:
    """Run ``cmd`` and SIGKILL it once a file in ``folder`` holds ``at_bytes`` beyond ``done`` (the old file's
    size); whether it was killed before it finished."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and _written(folder) < max(at_bytes, done + 1):
        time.sleep(0.002)
    killed = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    return killed


def _reference(run_dir: Path, tmp_path: Path) -> bytes:
    store = RunStore(run_dir / "store.sqlite")
    try:
        store.export_records_jsonl(tmp_path / "reference.jsonl")
    finally:
        store.close()
    return (tmp_path / "reference.jsonl").read_bytes()


def test_kill_9_mid_records_export_leaves_the_old_file_or_the_new_one(run_dir: Path, tmp_path: Path) -> None:
    new = _reference(run_dir, tmp_path)
    killed = 0
    for over_old, fraction in [(True, 0.2), (True, 0.5), (True, 0.85), (False, 0.3), (False, 0.7)]:
        folder = tmp_path / f"out-{over_old}-{fraction}"
        folder.mkdir()
        target = folder / "records.jsonl"
        if over_old:
            target.write_text(OLD, encoding="utf-8")
        killed += _kill_when(_export(run_dir, target, "records"), folder, len(OLD), int(len(new) * fraction))
        found = target.read_bytes() if target.exists() else None
        expected = [OLD.encode(), new] if over_old else [None, new]
        assert found in expected, f"cut file at {fraction:.0%}: {len(found or b'')} of {len(new)} bytes"
    assert killed >= 3, "the export must be killed mid-write, not after it finished"
    # the next export over a killed one is complete, and leaves no temporary file beside it
    folder = tmp_path / "out-True-0.5"
    done = subprocess.run(_export(run_dir, folder / "records.jsonl", "records"), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (folder / "records.jsonl").read_bytes() == new and [p.name for p in folder.iterdir()] == ["records.jsonl"]
