"""Reading a run never changes it: eval, report, errors and export open the store read-only, read an older schema
without migrating it, create no -wal / -shm file and work on a read-only filesystem; only resuming the run
migrates it on disk, and it says so first."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from madrag.cli.app import app
from madrag.errors import InputError
from madrag.evaluation.run import open_store
from madrag.records import AgentRecord
from madrag.store import RunStore
from madrag.store.schema import SCHEMA_VERSION, schema_version

MIGRATION_NOTE = f"was written by an older madrag (schema version 0): migrating it to version {SCHEMA_VERSION} on disk"


def madrag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=300)


def snapshot(folder: Path) -> dict[str, tuple[str, int, int]]:
    """Every file under ``folder``: (sha256, size, mtime in ns)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            info = path.stat()
            out[str(path.relative_to(folder))] = (
                hashlib.sha256(path.read_bytes()).hexdigest(),
                info.st_size,
                info.st_mtime_ns,
            )
    return out


def user_version(db: Path) -> int:
    """The file's schema version, read without creating -wal / -shm files (the store is closed)."""
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?immutable=1", uri=True)
    try:
        return schema_version(conn)
    finally:
        conn.close()


def to_unversioned(db: Path) -> None:
    """Make a store what madrag wrote before stores carried a version: the same tables, ``user_version`` 0."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA user_version = 0")
    conn.close()
    assert user_version(db) == 0 and not db.with_name(db.name + "-wal").exists()


@pytest.fixture
def score_args(asap: Path, tmp_path: Path) -> list[str]:
    return [
        "score",
        "--data", str(asap / "training_set_rel3_sets7_8.tsv"),
        "--rubric", str(asap / "rubric_set7.json"),
        "--run-dir", str(tmp_path / "run"),
        "--cache-dir", str(tmp_path / "cache"),
        "--protocol", "MAD",
        "--provider", "fake",
        "--limit", "2",
    ]  # fmt: skip


@pytest.fixture
def old_run(score_args: list[str], tmp_path: Path) -> Path:
    """A finished fake run whose store is in the unversioned (old) schema."""
    proc = madrag(*score_args)
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "run"
    to_unversioned(run / "store.sqlite")
    return run


def test_reading_an_old_run_leaves_its_files_as_they_were_and_resuming_migrates_it_saying_so(
    old_run: Path, score_args: list[str], tmp_path: Path
) -> None:
    before = snapshot(old_run)
    out = tmp_path / "out"
    commands = [
        ["eval", str(old_run), "--bootstrap", "20", "--out", str(out / "eval")],
        ["report", str(old_run), "--bootstrap", "20", "--out", str(out / "report.html")],
        ["errors", str(old_run), "--out", str(out / "errors.csv")],
        ["runs", "export", str(old_run), "--out", str(out / "scores.csv")],
        ["runs", "export", str(old_run), "--what", "records", "--out", str(out / "records.jsonl")],
        ["runs", "list", str(old_run.parent)],
    ]
    runner = CliRunner()
    for command in commands:  # in this process (quick); the resume below is a real process
        result = runner.invoke(app, command)
        assert result.exit_code == 0, (command, result.output, result.exception)
        assert MIGRATION_NOTE not in result.output
    assert (out / "report.html").is_file() and len((out / "records.jsonl").read_text().splitlines()) == 24
    assert len((out / "scores.csv").read_text().splitlines()) == 1 + 8  # header + 2 essays x 4 traits
    assert snapshot(old_run) == before  # same files (no -wal, -shm), same bytes, same times
    assert user_version(old_run / "store.sqlite") == 0

    resumed = madrag(*score_args)  # the same job again: the run is resumed, so written, so migrated
    assert resumed.returncode == 0, resumed.stderr
    assert MIGRATION_NOTE in resumed.stderr and "the store as it was is kept in store.v0.sqlite" in resumed.stderr
    assert user_version(old_run / "store.sqlite") == SCHEMA_VERSION
    assert user_version(old_run / "store.v0.sqlite") == 0  # the run as the older madrag left it, kept
    assert "24 agent calls made" not in resumed.stdout.replace("\n", " ")  # nothing was scored again


def _read_only_eval(run: Path, out: Path | None) -> subprocess.CompletedProcess[str]:
    """``madrag eval RUN [--out OUT]`` with ``run`` on a read-only filesystem (as root: a read-only bind mount
    in a private mount namespace; otherwise the folder's and the store's write permissions are removed)."""
    args = [sys.executable, "-m", "madrag.cli", "eval", str(run), "--bootstrap", "20"]
    args += ["--out", str(out)] if out is not None else []
    if os.geteuid() != 0:
        return subprocess.run(args, capture_output=True, text=True, timeout=300)
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("running as root without unshare: cannot make a read-only filesystem")
    script = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'
    wrapped = [unshare, "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh", str(run), *args]
    proc = subprocess.run(wrapped, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 and "mount" in proc.stderr and "madrag" not in proc.stderr:
        pytest.skip(f"cannot make a read-only bind mount here: {proc.stderr.strip()}")
    return proc


def test_a_run_on_a_read_only_filesystem_is_evaluated(old_run: Path, tmp_path: Path) -> None:
    db = old_run / "store.sqlite"
    db.chmod(0o444)
    old_run.chmod(0o555)
    try:
        before = snapshot(old_run)
        proc = _read_only_eval(old_run, tmp_path / "eval")
        assert proc.returncode == 0, proc.stderr
        assert "wrote 7 files" in proc.stdout and (tmp_path / "eval" / "qwk.csv").is_file()
        # the default output folder is inside the read-only run: one line, no traceback
        refused = _read_only_eval(old_run, None)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert refused.stderr.strip().startswith("error: cannot ") and "give --out a writable place" in refused.stderr
        assert snapshot(old_run) == before
    finally:
        old_run.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        db.chmod(0o644)


def _record(key: str) -> AgentRecord:
    return AgentRecord(run_id="r", key=key, essay_id="e1", trait="Ideas", protocol="MA", role="judge", text="2")


def test_a_store_whose_writer_died_is_read_with_its_last_records(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite"
    code = (
        "import os, sys; from madrag.store import RunStore; from madrag.records import AgentRecord\n"
        "s = RunStore(sys.argv[1])\n"
        "for i in range(5): s.put(AgentRecord(run_id='r', key=f'k{i}', essay_id='e1', trait='Ideas', protocol='MA', "
        "role='judge', text='2'))\n"
        "os._exit(0)"  # killed: the records are in the -wal file, the store file has none yet
    )
    subprocess.run([sys.executable, "-c", code, str(db)], check=True, timeout=60)
    assert db.with_name("store.sqlite-wal").stat().st_size > 0
    store = open_store(tmp_path)
    try:
        assert store.keys() == {f"k{i}" for i in range(5)}
    finally:
        store.close()


def test_a_store_being_written_is_read_while_open(tmp_path: Path) -> None:
    writer = RunStore(tmp_path / "store.sqlite")
    try:
        writer.put(_record("a"))
        reader = open_store(tmp_path)
        try:
            assert reader.keys() == {"a"} and reader.read_only
        finally:
            reader.close()
    finally:
        writer.close()


def test_a_read_only_store_refuses_writes_and_a_newer_one_is_refused(tmp_path: Path) -> None:
    RunStore(tmp_path / "store.sqlite").close()
    store = open_store(tmp_path)
    try:
        with pytest.raises(sqlite3.ProgrammingError, match="opened read-only"):
            store.put(_record("a"))
        with pytest.raises(sqlite3.ProgrammingError, match="opened read-only"):
            store.set_meta("x", 1)
    finally:
        store.close()
    conn = sqlite3.connect(tmp_path / "store.sqlite")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(InputError, match="newer than this madrag reads"):
        open_store(tmp_path)


def test_an_older_schema_is_migrated_in_memory_for_reading(tmp_path: Path) -> None:
    from madrag.pipeline.migrations import STORE_MIGRATIONS, read_view

    db = tmp_path / "store.sqlite"
    store = RunStore(db)
    store.put(_record("a"))
    store.close()
    before = snapshot(tmp_path)

    def add_column(conn: sqlite3.Connection) -> None:  # a future migration
        conn.execute("ALTER TABLE records ADD COLUMN note TEXT")

    conn = sqlite3.connect(f"{db.resolve().as_uri()}?immutable=1", uri=True, isolation_level=None)
    view = read_view(conn, db, [*STORE_MIGRATIONS, add_column])
    try:
        assert view is not conn and schema_version(view) == SCHEMA_VERSION + 1
        assert "note" in [row[1] for row in view.execute("PRAGMA table_info(records)")]
        assert [k for (k,) in view.execute("SELECT key FROM records")] == ["a"]
    finally:
        view.close()
    assert snapshot(tmp_path) == before and user_version(db) == SCHEMA_VERSION
