"""The one way madrag writes a file a person (or a later command) reads: complete or not at all.

The text goes into a temporary file beside the target (the same folder, so the same file system; a name of its
own, ``.<name>.<pid>.<random>.tmp``), is flushed and ``fsync``-ed, and is then renamed over the target with
``os.replace``, which POSIX makes atomic: a reader, or a process killed at any moment (``kill -9``, a full
disk, an exception), sees the old complete file or the new complete one, never a cut one. On an exception the
temporary file is removed; one left by a killed process is removed by the next write of the same target.

:func:`open_atomic` streams (a context manager yielding the file object, so a large export needs no memory for
the whole text); :func:`write_text_atomic` and :func:`write_bytes_atomic` write what is already in memory,
:func:`copy_atomic` copies a file.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

_SUFFIX = ".tmp"


@contextlib.contextmanager
def open_atomic(
    path: str | Path, mode: str = "w", *, encoding: str | None = "utf-8", newline: str | None = None
) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing (``mode`` ``"w"`` or ``"wb"``); when the block ends
    without an exception it is made durable and renamed over ``path``, else it is removed and ``path`` is left as
    it was.

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "out.txt"
    >>> with open_atomic(target) as fh:
    ...     _ = fh.write("whole")
    >>> target.read_text(), [p.name for p in target.parent.iterdir()]
    ('whole', ['out.txt'])
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"open_atomic writes a whole file: mode 'w' or 'wb', not {mode!r}")
    target = Path(path)
    _remove_stale(target)
    temp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}{_SUFFIX}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as to open(path, "w")
    try:
        text = mode == "w"
        with os.fdopen(fd, mode, encoding=encoding if text else None, newline=newline if text else None) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        _keep_mode(target, temp)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    _sync_folder(target.parent)


def write_text_atomic(path: str | Path, text: str, *, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` complete or not at all (see :func:`open_atomic`)."""
    with open_atomic(path, encoding=encoding) as fh:
        fh.write(text)


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` complete or not at all (see :func:`open_atomic`)."""
    with open_atomic(path, "wb") as fh:
        fh.write(data)


def copy_atomic(source: str | Path, target: str | Path) -> None:
    """Copy the file ``source`` to ``target`` complete or not at all, streamed (see :func:`open_atomic`)."""
    with open(source, "rb") as src, open_atomic(target, "wb") as fh:
        shutil.copyfileobj(src, fh)


def _keep_mode(target: Path, temp: Path) -> None:
    """A file written over keeps its permissions, as ``open(path, "w")`` keeps them."""
    with contextlib.suppress(FileNotFoundError):
        os.chmod(temp, os.stat(target).st_mode & 0o7777)


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable (where the OS lets a folder be opened and synced)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_stale(target: Path) -> None:
    """Remove the temporary files of earlier writes of ``target`` whose process has ended (killed mid-write)."""
    mine = re.compile(re.escape(f".{target.name}.") + r"(\d+)\.[0-9a-f]{8}" + re.escape(_SUFFIX))
    with contextlib.suppress(OSError):
        for entry in os.scandir(target.parent):
            found = mine.fullmatch(entry.name)
            if found and _ended(int(found.group(1))):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _ended(pid: int) -> bool:
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists, another user's
        return False
    return False
