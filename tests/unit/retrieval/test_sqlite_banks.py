"""The banks' SQLite store, every install's: a bank built once and reused, the cache commands' view of it, and a
Chroma store an older madrag left in the cache folder (not read; listed, and deleted by prune once unused)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
from tests.unit.retrieval.test_retrieval_unit import RUBRIC, STYLE, essay, make_pool

from madrag.errors import MadragError
from madrag.pipeline.migrations.chroma import CHROMA_FILE, legacy_chroma, prune_legacy_chroma
from madrag.retrieval import ExemplarBank, HashingEmbedder, bank_store
from madrag.retrieval.sqlite_banks import BANKS_FILE, SqliteBanks


def test_a_bank_is_built_once_in_sqlite_and_reused(tmp_path: Path) -> None:
    pool, embedder = make_pool(), HashingEmbedder()
    first = ExemplarBank.build_or_load(pool, RUBRIC, embedder, tmp_path, batch_size=5)
    assert first.built_now and first.size == len(pool)
    assert (tmp_path / BANKS_FILE).is_file() and not (tmp_path / CHROMA_FILE).exists()
    again = ExemplarBank.build_or_load(pool, RUBRIC, embedder, tmp_path)
    assert not again.built_now and again.fingerprint == first.fingerprint
    assert again.contents()["ids"] == [e.id for e in pool]  # in the pool's order, as built
    np.testing.assert_allclose(again.contents()["embeddings"], embedder.embed([e.text for e in pool]), atol=1e-6)


def test_cache_list_and_prune_read_the_sqlite_banks(tmp_path: Path) -> None:
    bank = ExemplarBank.build_or_load(make_pool(), RUBRIC, HashingEmbedder(), tmp_path)
    (listed,) = bank_store.list_banks(tmp_path)
    assert (listed.size, listed.embedder, listed.traits, listed.in_use) == (
        12,
        "hashing-bow[dim=256]",
        ["Ideas", "Style"],
        True,
    )
    assert bank_store.prune_banks(tmp_path) == []  # in use: kept
    assert bank.lease is not None
    bank.lease.release()
    assert [b.name for b in bank_store.prune_banks(tmp_path)] == [listed.name]
    assert bank_store.list_banks(tmp_path) == []


def old_chroma_files(folder: Path) -> list[Path]:
    """What an older madrag's Chroma store leaves in a cache folder: its SQLite file and journal, and one HNSW
    index folder named by a UUID (the files' contents do not matter: they are recognised by name)."""
    index = folder / "0b6c3a52-6d8f-4a8e-9a51-3f0d2b7c9e11"
    index.mkdir(parents=True)
    for name in ("header.bin", "data_level0.bin", "length.bin", "link_lists.bin"):
        (index / name).write_bytes(b"\0" * 1000)
    (folder / CHROMA_FILE).write_bytes(b"\0" * 4096)
    (folder / f"{CHROMA_FILE}-wal").write_bytes(b"\0" * 100)
    return [folder / CHROMA_FILE, folder / f"{CHROMA_FILE}-wal", index]


def test_an_old_chroma_store_is_not_read_and_is_pruned_once_no_bank_is_in_use(tmp_path: Path) -> None:
    old = old_chroma_files(tmp_path)
    other = tmp_path / "not-a-uuid"
    other.mkdir()
    bank = ExemplarBank.build_or_load(make_pool(), RUBRIC, HashingEmbedder(), tmp_path)
    assert bank.built_now and bank.size == 12  # built in the SQLite store beside it
    assert [b.name for b in bank_store.list_banks(tmp_path)] == [f"madrag-bank-{bank.fingerprint[:40]}"]
    found = legacy_chroma(tmp_path)
    assert found is not None and found.paths == old and found.size_bytes == 4096 + 100 + 4000
    assert prune_legacy_chroma(tmp_path) is None  # a bank of the folder is in use
    assert bank.lease is not None
    bank.lease.release()
    assert prune_legacy_chroma(tmp_path, older_than_days=1.0) is None  # written just now
    assert prune_legacy_chroma(tmp_path, dry_run=True) == found
    assert all(p.exists() for p in old)
    assert prune_legacy_chroma(tmp_path) == found
    assert not any(p.exists() for p in old) and legacy_chroma(tmp_path) is None
    assert other.is_dir() and (tmp_path / BANKS_FILE).is_file()  # nothing else is touched
    again = ExemplarBank.build_or_load(make_pool(), RUBRIC, HashingEmbedder(), tmp_path)
    assert not again.built_now and again.fingerprint == bank.fingerprint


def test_an_old_chroma_store_is_judged_by_its_newest_file(tmp_path: Path) -> None:
    old = old_chroma_files(tmp_path)
    month_ago = time.time() - 40 * 86400.0
    for path in [*old, *old[2].iterdir()]:
        os.utime(path, (month_ago, month_ago))
    found = legacy_chroma(tmp_path)
    assert found is not None and found.last_changed == pytest.approx(month_ago)
    assert prune_legacy_chroma(tmp_path, older_than_days=30.0) == found
    assert legacy_chroma(tmp_path) is None
    assert prune_legacy_chroma(tmp_path) is None  # nothing left to delete
    assert prune_legacy_chroma(tmp_path / "missing") is None


@pytest.mark.integration  # a real Chroma store, as an older madrag wrote it
def test_a_real_old_chroma_store_is_recognised_and_its_bank_built_again(tmp_path: Path) -> None:
    import chromadb
    from chromadb.config import Settings

    pool, embedder = make_pool(), HashingEmbedder()
    built = ExemplarBank.build_or_load(pool, RUBRIC, embedder, tmp_path / "elsewhere")
    name = f"madrag-bank-{built.fingerprint[:40]}"
    contents = built.contents()
    client = chromadb.PersistentClient(path=str(tmp_path / "banks"), settings=Settings(anonymized_telemetry=False))
    client.create_collection(name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None).add(
        ids=contents["ids"],
        embeddings=contents["embeddings"],
        documents=contents["documents"],
        metadatas=contents["metadatas"],
    )
    found = legacy_chroma(tmp_path / "banks")
    assert found is not None and found.paths[0].name == CHROMA_FILE and any(p.is_dir() for p in found.paths)
    bank = ExemplarBank.build_or_load(pool, RUBRIC, embedder, tmp_path / "banks")
    assert bank.built_now and bank.fingerprint == built.fingerprint  # the same bank, not read from Chroma
    query = essay("q", "river boat journey story patience", style=2)
    assert bank.per_level(query, STYLE) == built.per_level(query, STYLE)
    assert [b.name for b in bank_store.list_banks(tmp_path / "banks")] == [name]
    assert bank.lease is not None
    bank.lease.release()
    assert prune_legacy_chroma(tmp_path / "banks") == found
    assert legacy_chroma(tmp_path / "banks") is None and bank_store.list_banks(tmp_path / "banks")[0].name == name


def test_a_name_is_one_collection_and_a_missing_one_is_an_error(tmp_path: Path) -> None:
    store = SqliteBanks(tmp_path)
    store.create_collection("a", metadata={"size": 1})
    with pytest.raises(MadragError, match="already exists"):
        store.create_collection("a")
    b = store.create_collection("b")
    with pytest.raises(MadragError, match="already exists"):
        b.modify(name="a")
    b.modify(name="c")
    assert [(c.name, c.metadata) for c in store.list_collections()] == [("a", {"size": 1}), ("c", {})]
    with pytest.raises(MadragError, match="no exemplar bank 'b'"):
        store.get_collection("b")
    with pytest.raises(MadragError, match="differ in length"):
        store.get_collection("a").add(["x"], np.zeros((2, 3)), ["t"], [{}])
