"""The banks' SQLite store of the core install (no chromadb): the same banks, retrievals and cache commands as
with Chroma. Chroma is taken away by making :func:`madrag.retrieval.bank_store.installed` say it is missing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.unit.retrieval.test_retrieval_unit import RUBRIC, STYLE, essay, make_pool

from madrag.errors import MadragError
from madrag.retrieval import ExemplarBank, HashingEmbedder, bank_store
from madrag.retrieval.sqlite_banks import BANKS_FILE, SqliteBanks


@pytest.fixture()
def no_chroma(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store chosen as in an install without chromadb."""
    monkeypatch.setattr(bank_store, "installed", lambda module: module != "chromadb")


@pytest.mark.usefixtures("no_chroma")
def test_a_bank_is_built_once_in_sqlite_and_reused(tmp_path: Path) -> None:
    pool, embedder = make_pool(), HashingEmbedder()
    first = ExemplarBank.build_or_load(pool, RUBRIC, embedder, tmp_path, batch_size=5)
    assert first.built_now and first.size == len(pool)
    assert (tmp_path / BANKS_FILE).is_file() and not (tmp_path / "chroma.sqlite3").exists()
    again = ExemplarBank.build_or_load(pool, RUBRIC, embedder, tmp_path)
    assert not again.built_now and again.fingerprint == first.fingerprint
    assert again.contents()["ids"] == [e.id for e in pool]  # in the pool's order, as built
    np.testing.assert_allclose(again.contents()["embeddings"], embedder.embed([e.text for e in pool]), atol=1e-6)


@pytest.mark.integration  # real Chroma beside the SQLite store
def test_retrievals_are_those_of_a_chroma_bank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pool, embedder = make_pool(), HashingEmbedder()
    chroma = ExemplarBank.build_or_load(pool, RUBRIC, embedder, tmp_path / "chroma")
    monkeypatch.setattr(bank_store, "installed", lambda module: module != "chromadb")
    sqlite = ExemplarBank.build_or_load(pool, RUBRIC, embedder, tmp_path / "sqlite")
    assert chroma.fingerprint == sqlite.fingerprint
    query = essay("q", "river boat journey story patience", style=2)
    assert sqlite.per_level(query, STYLE) == chroma.per_level(query, STYLE)
    assert sqlite.similar(query, 5) == chroma.similar(query, 5)


@pytest.mark.usefixtures("no_chroma")
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
