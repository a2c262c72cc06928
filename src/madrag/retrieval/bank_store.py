"""The persistent store of exemplar banks in a cache folder: one collection per bank in madrag's SQLite store
(:mod:`madrag.retrieval.sqlite_banks`), shared by every run, process and the web app that use the folder.

The rules that keep a bank from disappearing under a run that uses it:

* nothing deletes a bank implicitly: a newer pool of the same essay set gets a bank of its own beside the old
  one; only :func:`prune_banks` (``madrag cache prune``) deletes banks, and never one that is in use;
* a process that uses a bank holds a :class:`BankLease` on it (a shared ``flock`` on a file of the cache folder,
  released by the kernel when the process ends, however it ends); a build holds one on its temporary
  collection, so a half-built bank of a live process is not a leftover;
* a bank is built under a temporary name and renamed when complete; a damaged bank is never overwritten in place:
  its replacement gets a name of its own;
* writes (create, add, rename, delete) take the folder's write lock, reads its shared lock, so two processes
  never write the folder's SQLite at once.

Banks were kept in Chroma before (the MADRAG paper's vector store; docs/differences.md, ``bank-store``). A cache
folder that still holds such a Chroma store is not read any more (its banks are built again in the SQLite store
when a run needs them): :mod:`madrag.pipeline.migrations.chroma`, with every older format, describes it for
``madrag cache list`` and deletes it once no process holds a lease on any bank of the folder (:func:`any_in_use`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel

from madrag.retrieval.sqlite_banks import SqliteBanks, SqliteCollection

NAME_PREFIX = "madrag-bank-"
BUILDING = "-building-"
_LEASES = "leases"
_LOCK = ".write.lock"


def bank_name(fingerprint: str) -> str:
    """The collection name of the bank with this fingerprint."""
    return NAME_PREFIX + fingerprint[:40]


def lease_name(collection: str) -> str:
    """The name a collection's users lease: a finished bank's replacement (``<name>-r…``) is leased under the
    bank's name, since a run looks the bank up by it; a build under its own temporary name."""
    if BUILDING in collection or not collection.startswith(NAME_PREFIX):
        return collection
    return collection[: len(NAME_PREFIX) + 40]


def open_client(cache_dir: Path) -> SqliteBanks:
    """The store of the banks in ``cache_dir`` (:class:`~madrag.retrieval.sqlite_banks.SqliteBanks`).

    Opening it creates the folder's SQLite tables when they are not there yet, so it is a write: it takes the
    folder's write lock (two processes opening a fresh folder at once would otherwise both create them, and one
    fails with "table collections already exists"). Call it outside :func:`folder_lock`."""
    with folder_lock(cache_dir, write=True):
        return SqliteBanks(cache_dir)


@contextlib.contextmanager
def folder_lock(cache_dir: Path, *, write: bool) -> Iterator[None]:
    """The cache folder's lock: exclusive for writes, shared for reads (across processes)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    with (cache_dir / _LOCK).open("a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX if write else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _lease_file(cache_dir: Path, name: str, make: bool = False) -> Path:
    """The file whose lock is the lease on bank ``name`` (``make``: its folder made)."""
    if make:
        (cache_dir / _LEASES).mkdir(parents=True, exist_ok=True)
    return cache_dir / _LEASES / f"{name}.lock"


class BankLease:
    """A shared lock on one bank of a cache folder, held while a process uses it; prune skips leased banks.

    Taking a lease also marks the bank as used now (the lease file's modification time), which
    ``madrag cache prune --older-than`` reads.
    """

    def __init__(self, cache_dir: Path, name: str) -> None:
        self.path = _lease_file(cache_dir, name, make=True)
        self._fh: BinaryIO | None = self.path.open("a+b")
        fcntl.flock(self._fh, fcntl.LOCK_SH)
        os.utime(self.path)

    def release(self) -> None:
        """Let go of the bank (also done when the process ends)."""
        if self._fh is not None:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()


@contextlib.contextmanager
def unused(cache_dir: Path, name: str) -> Iterator[bool]:
    """Whether no process holds a lease on bank ``name``; while the block runs, none can take one (an
    exclusive lock tried without waiting, held to the end of the block)."""
    with _lease_file(cache_dir, name, make=True).open("a+b") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def in_use(cache_dir: Path, name: str) -> bool:
    """Whether some process holds a lease on bank ``name`` now."""
    if not _lease_file(cache_dir, name).is_file():
        return False
    with unused(cache_dir, name) as free:
        return not free


def last_used(cache_dir: Path, name: str) -> float | None:
    """When bank ``name`` was last opened (a Unix time), None when no run recorded it."""
    path = _lease_file(cache_dir, name)
    return path.stat().st_mtime if path.is_file() else None


def find_finished(client: SqliteBanks, name: str, fingerprint: str, expected: int) -> SqliteCollection | None:
    """A finished collection of this fingerprint holding every essay (``name`` or a replacement of it); None
    when there is none. Nothing is deleted: a damaged collection is left for :func:`prune_banks`."""
    names = sorted(c.name for c in client.list_collections() if c.name == name or c.name.startswith(name + "-r"))
    for cname in names:
        collection = client.get_collection(cname)
        if collection.metadata.get("fingerprint") == fingerprint and collection.count() == expected:
            return collection
    return None


def temporary_name(name: str) -> str:
    """A fresh temporary name for a bank being built by this process."""
    return f"{name}{BUILDING}{os.getpid()}-{uuid.uuid4().hex[:8]}"


def finish_build(client: SqliteBanks, temp: str, name: str, fingerprint: str, expected: int) -> SqliteCollection:
    """Rename the complete collection ``temp`` to ``name`` (or to a fresh ``name-r…`` when ``name`` holds a
    damaged bank); when another process finished the same bank first, drop ``temp`` and use theirs."""
    theirs = find_finished(client, name, fingerprint, expected)
    if theirs is not None:
        client.delete_collection(temp)
        return theirs
    taken = name in {c.name for c in client.list_collections()}
    final = f"{name}-r{uuid.uuid4().hex[:8]}" if taken else name
    client.get_collection(temp).modify(name=final)
    return client.get_collection(final)


class BankInfo(BaseModel):
    """One collection of a cache folder, as ``madrag cache list`` shows it."""

    name: str
    size: int
    embedder: str | None
    traits: list[str]
    building: bool
    in_use: bool
    last_used: float | None


def list_banks(cache_dir: Path) -> list[BankInfo]:
    """Every madrag collection in ``cache_dir`` (finished banks and builds), with whether it is in use."""
    if not cache_dir.is_dir():
        return []
    client = open_client(cache_dir)
    with folder_lock(cache_dir, write=False):
        rows = [
            BankInfo(
                name=c.name,
                size=c.count(),
                embedder=str(c.metadata["embedder"]) if "embedder" in c.metadata else None,
                traits=json.loads(str(c.metadata["traits"])) if "traits" in c.metadata else [],
                building=BUILDING in c.name,
                in_use=in_use(cache_dir, lease_name(c.name)),
                last_used=last_used(cache_dir, lease_name(c.name)),
            )
            for c in client.list_collections()
            if c.name.startswith(NAME_PREFIX)
        ]
    return sorted(rows, key=lambda r: r.name)


def prune_banks(cache_dir: Path, older_than_days: float = 0.0, dry_run: bool = False) -> list[BankInfo]:
    """Delete the banks of ``cache_dir`` that no process uses and that were not opened in the last
    ``older_than_days`` days (builds left by processes that ended count as unused); returns what was (or, with
    ``dry_run``, would be) deleted."""
    cutoff = time.time() - older_than_days * 86400.0
    doomed = [b for b in list_banks(cache_dir) if not b.in_use and (b.last_used is None or b.last_used <= cutoff)]
    if dry_run or not doomed:
        return doomed
    deleted = []
    client = open_client(cache_dir)
    with folder_lock(cache_dir, write=True):
        for bank in doomed:
            with unused(cache_dir, lease_name(bank.name)) as free:
                if free:  # no lease can be taken while it is deleted
                    client.delete_collection(bank.name)
                    deleted.append(bank)
    return deleted


def any_in_use(cache_dir: Path) -> bool:
    """Whether some process holds a lease on any bank of ``cache_dir``."""
    folder = cache_dir / _LEASES
    return folder.is_dir() and any(in_use(cache_dir, p.stem) for p in folder.glob("*.lock"))
