"""``madrag cache``: the exemplar banks kept in the cache folder, and their explicit clean-up.

Banks are never deleted behind a run's back (see :mod:`madrag.retrieval.bank_store`): ``madrag cache prune`` is
the one way, and it leaves every bank some process is using. A Chroma store an older madrag left in the folder is
not read any more (:mod:`madrag.pipeline.migrations.chroma`): ``list`` says it is there, ``prune`` deletes it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from madrag.cli.output import console
from madrag.pipeline.job import default_cache_dir
from madrag.pipeline.migrations.chroma import LegacyChroma, legacy_chroma, prune_legacy_chroma
from madrag.retrieval.bank_store import BankInfo, list_banks, prune_banks

cache_app = typer.Typer(help="The exemplar banks in the cache folder ($MADRAG_CACHE, else ~/.cache/madrag).")

CacheDir = Annotated[
    Path | None, typer.Option("--cache-dir", help="Cache folder (default: $MADRAG_CACHE, else ~/.cache/madrag).")
]


def _banks_dir(cache_dir: Path | None) -> Path:
    return (cache_dir if cache_dir is not None else default_cache_dir()) / "banks"


def _age(stamp: float | None) -> str:
    if stamp is None:
        return "never recorded"
    days = (time.time() - stamp) / 86400.0
    return f"{days:.1f} days ago" if days >= 1 else f"{days * 24:.1f} hours ago"


def _table(rows: list[BankInfo], title: str) -> Table:
    table = Table(title=title)
    for col in ("bank", "essays", "embedder", "traits", "state", "last used"):
        table.add_column(col)
    for r in rows:
        state = "in use" if r.in_use else ("unfinished build" if r.building else "idle")
        table.add_row(r.name, str(r.size), r.embedder or "-", ", ".join(r.traits), state, _age(r.last_used))
    return table


def _legacy_line(found: LegacyChroma) -> str:
    mib = found.size_bytes / 2**20
    return f"an older madrag's Chroma store ({mib:.1f} MiB, last written {_age(found.last_changed)}) in the folder"


@cache_app.command("list")
def list_command(cache_dir: CacheDir = None) -> None:
    """List the exemplar banks: size, embedder, traits, whether a process uses one now, when it was last used."""
    folder = _banks_dir(cache_dir)
    rows = list_banks(folder)
    if not rows:
        console.print(f"no exemplar banks in {folder}")
    else:
        console.print(_table(rows, f"exemplar banks in {folder}"))
    old = legacy_chroma(folder) if folder.is_dir() else None
    if old is not None:
        console.print(
            f"{_legacy_line(old)}: no longer read (its banks are rebuilt when needed); madrag cache prune deletes it"
        )


@cache_app.command("prune")
def prune_command(
    older_than: Annotated[
        float, typer.Option(min=0.0, help="Only banks not used for this many days (0: every unused bank).")
    ] = 30.0,
    dry_run: Annotated[bool, typer.Option(help="Only say what would be deleted.")] = False,
    cache_dir: CacheDir = None,
) -> None:
    """Delete exemplar banks no process is using and not used for --older-than days (and unfinished builds of
    processes that ended, and an older madrag's Chroma store not written for as long, once no bank is in use). A
    bank in use is always kept; a deleted bank is rebuilt when a run needs it again."""
    folder = _banks_dir(cache_dir)
    gone = prune_banks(folder, older_than_days=older_than, dry_run=dry_run)
    remaining = len(list_banks(folder))
    kept = remaining - len(gone) if dry_run else remaining
    verb = "would delete" if dry_run else "deleted"
    if gone:
        console.print(_table(gone, f"{verb} {len(gone)} bank(s) in {folder}"))
    console.print(f"{verb} {len(gone)} bank(s); {kept} kept in {folder}")
    old = prune_legacy_chroma(folder, older_than_days=older_than, dry_run=dry_run)
    if old is not None:
        console.print(f"{verb} {_legacy_line(old)}")
