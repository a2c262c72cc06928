"""One writer per folder: an exclusive OS lock on a run directory (or a server's data directory) held for as long
as a process writes it.

The lock is ``flock`` on :data:`LOCK_FILE` in the folder, taken without waiting; the file holds the holder's
process id, so a second writer is refused at once with one line naming it (:class:`~madrag.errors.WriterBusy`).
The operating system releases the lock when its process ends, however it ends (``kill -9`` included), so a lock is
never stale; the file itself stays (deleting a lock file races with the next writer opening it). Readers take no
lock: ``madrag eval``, ``report``, ``runs list`` and ``costs`` read a run while it is being written.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from pathlib import Path
from types import TracebackType

from madrag.errors import WriterBusy
from madrag.files.disk_errors import storage_error

LOCK_FILE = ".writer.lock"
"""The lock file a writer holds in the folder it writes."""

_RETRY_S = 0.05
"""How long a writer retries before it is refused (a reader checking who holds the lock holds it a moment)."""

_HELD: set[Path] = set()
_HELD_LOCK = threading.Lock()


def _holder(path: Path) -> str:
    """Who holds the lock at ``path``, as the lock file says."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(path.read_text(encoding="ascii").split()[0])
        return "this process" if pid == os.getpid() else f"process {pid}"
    return "another process"


class WriterLock:
    """The exclusive writer's lock of ``folder`` (created if missing); ``what`` names the folder in the refusal
    ("run directory", "data directory"); ``hint``: what the refused user can do instead.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> with WriterLock(folder):
    ...     held_by(folder) == "this process"
    True
    >>> held_by(folder) is None
    True
    """

    def __init__(self, folder: Path, what: str = "run directory", hint: str = "") -> None:
        self.folder = Path(folder)
        self.what = what
        self.hint = hint or "wait for it to finish or stop it, then run the same command again"
        self._fd: int | None = None

    def acquire(self) -> WriterLock:
        """Take the lock, or raise :class:`WriterBusy` naming its holder (or a
        :class:`~madrag.errors.StorageError` when the folder cannot hold a lock file)."""
        key = self.folder.resolve()
        with _HELD_LOCK:
            if key in _HELD:  # flock would refuse it too (another open file); say who
                raise self._busy("this process")
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise storage_error(exc, f"{self.what} {self.folder}") from exc
            if not _try_lock(fd):
                os.close(fd)
                raise self._busy(_holder(self.folder / LOCK_FILE))
            with contextlib.suppress(OSError):  # a full disk: the lock holds, its holder is then unnamed
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode("ascii"))
            self._fd = fd
            _HELD.add(key)
        return self

    def _busy(self, holder: str) -> WriterBusy:
        return WriterBusy(f"{self.what} {self.folder} is being written by {holder}; {self.hint}")

    def release(self) -> None:
        """Give the lock back (the process's end does the same)."""
        if self._fd is None:
            return
        with _HELD_LOCK:
            _HELD.discard(self.folder.resolve())
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


def _try_lock(fd: int) -> bool:
    """Take the exclusive lock of ``fd`` without blocking, retrying for :data:`_RETRY_S`."""
    deadline = time.monotonic() + _RETRY_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


def held_by(folder: Path) -> str | None:
    """Who is writing ``folder`` ("this process", "process N"), or None when nobody is. Takes no lock a writer
    could wait on beyond a moment (a shared lock, released at once); creates nothing."""
    path = Path(folder) / LOCK_FILE
    if Path(folder).resolve() in _HELD:
        return "this process"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _holder(path)
    finally:
        os.close(fd)  # closing releases a shared lock taken
    return None
