"""Kill a real `madrag score` process mid-run (SIGKILL), resume it, and check nothing is lost or duplicated."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from madrag.store import RunStore


def _count(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM records").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def test_sigkill_mid_run_then_resume(tmp_path: Path, asap: Path) -> None:
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "madrag.cli", "score",
        "--data", str(asap / "training_set_rel3_sets7_8.tsv"),
        "--rubric", str(asap / "rubric_set7.json"),
        "--run-dir", str(run_dir), "--provider", "fake", "--protocol", "MAD",
        "--limit", "4", "--essay-concurrency", "2", "--no-cache", "--cache-dir", str(tmp_path / "cache"),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([*cmd, "--fake-latency", "0.1"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    db = run_dir / "store.sqlite"
    deadline = time.monotonic() + 60
    while _count(db) < 12 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    killed_at = _count(db)
    assert proc.returncode == -signal.SIGKILL
    assert 12 <= killed_at < 48, "the run must be killed mid-way"

    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    store = RunStore(db)
    records = list(store.records())
    per_call = Counter((r.essay_id, r.trait, r.role) for r in records)
    essays = [e.id for e in store.essays()]
    store.close()
    assert len(essays) == 4
    expected = {(e, t, role) for e in essays for t in ("Ideas", "Organization", "Style", "Conventions")
                for role in ("advocate", "skeptic", "judge")}  # fmt: skip
    assert set(per_call) == expected and set(per_call.values()) == {1}
    assert f"{48 - killed_at} agent calls made, {killed_at} reused" in done.stdout.replace("\n", " ")
