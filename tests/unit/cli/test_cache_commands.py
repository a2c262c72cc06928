"""``madrag cache list`` and ``madrag cache prune`` on a cache folder that also holds the Chroma store an older
madrag kept its banks in: the store's banks are listed, the old store is named (not read), and prune deletes it
with the unused banks."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from tests.unit.retrieval.test_retrieval_unit import RUBRIC, make_pool
from tests.unit.retrieval.test_sqlite_banks import old_chroma_files
from typer.testing import CliRunner

from madrag.cli.cache import cache_app
from madrag.cli.output import console
from madrag.retrieval import ExemplarBank, HashingEmbedder


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """A console wide enough for the table's bank names and paths."""
    monkeypatch.setattr(console, "width", 400)


def said(cache_dir: Path, *args: str) -> str:
    """The command's output, its whitespace folded (rich wraps long lines)."""
    result = CliRunner().invoke(cache_app, [*args, "--cache-dir", str(cache_dir)])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_list_and_prune_with_an_old_chroma_store_beside_the_banks(tmp_path: Path) -> None:
    banks = tmp_path / "banks"
    old = old_chroma_files(banks)
    bank = ExemplarBank.build_or_load(make_pool(), RUBRIC, HashingEmbedder(), banks)
    name = f"madrag-bank-{bank.fingerprint[:40]}"
    listed = said(tmp_path, "list")
    assert name in listed and "in use" in listed
    assert "an older madrag's Chroma store (0.0 MiB" in listed and "madrag cache prune deletes it" in listed
    assert bank.lease is not None
    bank.lease.release()
    assert "would delete 1 bank(s)" in said(tmp_path, "prune", "--older-than", "0", "--dry-run")
    assert all(p.exists() for p in old)
    assert "Chroma store" not in said(tmp_path, "prune")  # written just now: kept for --older-than's 30 days
    month_ago = time.time() - 40 * 86400.0
    for path in [*old, *old[2].iterdir()]:
        os.utime(path, (month_ago, month_ago))
    pruned = said(tmp_path, "prune", "--older-than", "0")
    assert "deleted 1 bank(s); 0 kept" in pruned and "deleted an older madrag's Chroma store" in pruned
    assert not any(p.exists() for p in old)
    assert said(tmp_path, "list") == f"no exemplar banks in {banks}"


def test_list_names_an_old_chroma_store_in_a_folder_without_banks(tmp_path: Path) -> None:
    old_chroma_files(tmp_path / "banks")
    listed = said(tmp_path, "list")
    assert listed.startswith("no exemplar banks in") and "an older madrag's Chroma store" in listed
    assert "no longer read" in listed
