"""madrag/files/atomic.py: a file is written complete or not at all; nothing is left beside it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from madrag.files.atomic import copy_atomic, open_atomic, write_bytes_atomic, write_text_atomic
from madrag.files.csv_safe import write_csv

SRC = Path(__file__).resolve().parents[3] / "src" / "madrag"


class Boom(RuntimeError):
    pass


def test_a_failure_mid_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "records.jsonl"
    target.write_text("old complete\n", encoding="utf-8")
    with pytest.raises(Boom), open_atomic(target) as fh:
        fh.write("new, half")
        fh.flush()
        raise Boom
    assert target.read_text(encoding="utf-8") == "old complete\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records.jsonl"]


def test_a_failure_on_a_new_path_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(Boom), open_atomic(tmp_path / "scores.csv", newline="") as fh:
        fh.write("a,b\r\n")
        raise Boom
    assert list(tmp_path.iterdir()) == []


def test_a_refused_rename_leaves_no_temporary(tmp_path: Path) -> None:
    (tmp_path / "report.html").mkdir()  # a folder in the way: os.replace refuses
    with pytest.raises(OSError):
        write_text_atomic(tmp_path / "report.html", "<html>")
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"] and (tmp_path / "report.html").is_dir()


def test_a_csv_export_that_fails_mid_way_leaves_the_old_file(tmp_path: Path) -> None:
    """csv_safe.write_csv streams its rows: one that fails after many rows are written leaves the old file."""
    target = tmp_path / "scores.csv"
    target.write_bytes(b"old,complete\r\n")

    def rows() -> Iterator[list[object]]:
        yield ["essay_id", "score"]
        for i in range(100_000):  # far past the write buffer: rows reach the disk before the failure
            yield [f"e{i}", i % 6]
        raise Boom

    with pytest.raises(Boom):
        write_csv(target, rows())
    assert target.read_bytes() == b"old,complete\r\n" and len(list(tmp_path.iterdir())) == 1


def test_the_new_file_replaces_the_old_and_streams(tmp_path: Path) -> None:
    target = tmp_path / "big.jsonl"
    target.write_text("old\n", encoding="utf-8")
    with open_atomic(target) as fh:
        for i in range(1000):
            fh.write(f"{i}\n")
        assert target.read_text(encoding="utf-8") == "old\n"  # the old file until the block ends
    assert target.read_text(encoding="utf-8").splitlines() == [str(i) for i in range(1000)]
    write_bytes_atomic(tmp_path / "fig.png", b"\x89PNG")
    assert (tmp_path / "fig.png").read_bytes() == b"\x89PNG"
    copy_atomic(target, tmp_path / "copy.jsonl")
    assert (tmp_path / "copy.jsonl").read_bytes() == target.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.jsonl", "copy.jsonl", "fig.png"]


def test_permissions_as_a_plain_write_gives_them(tmp_path: Path) -> None:
    kept = tmp_path / "kept.csv"
    kept.write_text("x", encoding="utf-8")
    kept.chmod(0o640)
    write_text_atomic(kept, "y")
    assert kept.stat().st_mode & 0o777 == 0o640
    plain, atomic = tmp_path / "plain.txt", tmp_path / "atomic.txt"
    plain.write_text("x", encoding="utf-8")
    write_text_atomic(atomic, "x")
    assert atomic.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777  # the umask, not mkstemp's 0600


def test_a_killed_writers_temporary_is_removed_by_the_next_write(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    stale = tmp_path / f".out.csv.{dead_pid}.0123abcd.tmp"
    alive = tmp_path / f".out.csv.{os.getppid()}.0123abcd.tmp"  # a live writer's: kept
    other = tmp_path / f".out.csv.5.{dead_pid}.0123abcd.tmp"  # the temporary of out.csv.5, not of out.csv
    for p in (stale, alive, other):
        p.write_text("cut", encoding="utf-8")
    write_text_atomic(tmp_path / "out.csv", "whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, other.name, "out.csv"])


def test_only_whole_file_modes() -> None:
    with pytest.raises(ValueError, match="whole file"), open_atomic("x", "a"):
        pass


# a module that writes a file a person or a later command reads goes through madrag/files/atomic.py; these write
# only into a folder of their own that is removed when the call ends (library.py's uploads, the Ray worker's
# prompts) or renamed into place whole (run_dir.py's kept prompts)
SCRATCH_WRITERS = {"server/library.py", "distributed/worker.py", "pipeline/run_dir.py"}
# append-only journals: each entry one line, appended and fsynced, a line cut by a kill skipped when read back
# (lms/journal.py: an LMS push's record of what each student was sent); only their appends are allowed
JOURNALS = {"lms/journal.py"}


def _appends(call: ast.Call) -> bool:
    """``open(path, "a", ...)``: an append, the one write a journal makes."""
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return isinstance(call.func, ast.Name) and isinstance(mode, ast.Constant) and mode.value == "a"


def test_no_module_writes_a_file_but_through_the_atomic_helper() -> None:
    """``Path.write_text`` / ``write_bytes``, ``open(..., "w")``, ``shutil.copy*`` and ``savefig(path)`` appear
    only in madrag/files/atomic.py and the scratch writers above (a writer that slipped back fails here)."""
    found = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel == "files/atomic.py" or rel in SCRATCH_WRITERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _writes(node) and not (rel in JOURNALS and _appends(node)):
                found.append(f"{rel}:{node.lineno}")
    assert found == []


def _writes(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name in ("write_text", "write_bytes"):
        return True
    if name in ("copy", "copy2", "copyfile", "move", "copyfileobj"):
        return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "shutil"
    if name == "savefig":  # to a file object (of open_atomic) or an in-memory buffer, never a path
        return bool(call.args) and not (isinstance(call.args[0], ast.Name) and call.args[0].id in ("fh", "buffer"))
    if name == "open":  # open(path, mode) or Path.open(mode); read-write ("a+b": a lock file) is no output
        at = 1 if isinstance(func, ast.Name) else 0
        mode = call.args[at] if len(call.args) > at else next((k.value for k in call.keywords if k.arg == "mode"), None)
        text = mode.value if isinstance(mode, ast.Constant) and isinstance(mode.value, str) else "r"
        return bool(set(text) & set("wax")) and "+" not in text
    return False
