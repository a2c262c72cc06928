"""The bank answers from memory as a Chroma collection (the MADRAG paper's vector store) of the same vectors
would: procedure 2 (one exemplar per score level) and procedure 1 (top-k) on the shipped ASAP set 7 and set 8
pools, every trait, against Chroma's own queries. Chroma is only this reference now (the dev install's): madrag
keeps its banks in its SQLite store and searches them exactly in memory (docs/differences.md, ``bank-store``).

madrag's search is exact, and checked so against every distance computed here; Chroma's is HNSW, approximate,
and its index is built on several threads, so now and then a filtered query (one score level) misses the nearest
essay. Where the two answers differ, madrag's must be at least as near as Chroma's (a tie, or Chroma's miss), and
Chroma's misses must stay rare."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from madrag.data import load_asap, split_by_fold
from madrag.data.shipped import asap_data_file, asap_rubric_file
from madrag.retrieval import ExemplarBank, HashingEmbedder, score_key
from madrag.retrieval.bank_store import bank_name
from madrag.rubric import load_rubric

pytestmark = [pytest.mark.integration]


def chroma_copy(bank: ExemplarBank, folder: Path) -> Any:
    """The bank's contents (ids, texts, metadata, vectors) as a Chroma collection in cosine space, as madrag kept
    its banks before."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(folder), settings=Settings(anonymized_telemetry=False))
    collection = client.create_collection(
        bank_name(bank.fingerprint), configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    got = bank.contents()
    collection.add(ids=got["ids"], embeddings=got["embeddings"], documents=got["documents"], metadatas=got["metadatas"])
    return collection


def cosine_distances(bank: ExemplarBank, vector: list[float]) -> dict[str, float]:
    """Every pool essay's cosine distance to ``vector``, computed here (Chroma's "cosine" space: 1 - cos)."""
    got = bank.contents()
    matrix = np.asarray(got["embeddings"], dtype=np.float64)
    query = np.asarray(vector, dtype=np.float64)
    cos = matrix @ query / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
    return dict(zip(got["ids"], (1.0 - cos).tolist(), strict=True))


@pytest.mark.parametrize("essay_set", [7, 8])
def test_memory_answers_match_chroma_queries(essay_set: int, tmp_path: Path) -> None:
    rubric = load_rubric(asap_rubric_file(essay_set))
    split = split_by_fold(load_asap(asap_data_file(), rubric), 0)
    bank = ExemplarBank.build_or_load(split.pool, rubric, HashingEmbedder(), tmp_path / "banks")
    chroma = chroma_copy(bank, tmp_path / "chroma")
    assert chroma.count() == bank.size == len(split.pool)
    contents = bank.contents()
    labels = dict(zip(contents["ids"], contents["metadatas"], strict=True))  # each pool essay's score levels
    compared = missed = 0
    for essay in split.eval[:25]:
        vector = [float(x) for x in bank.query_vector(essay)]
        exact = {k: d for k, d in cosine_distances(bank, vector).items() if k != essay.id}
        for trait, levels in bank.per_level_all(essay).items():
            for level in levels:
                nearest = min(
                    (d for k, d in exact.items() if labels[k].get(score_key(trait)) == level.score), default=None
                )
                assert level.exemplar is not None and nearest is not None
                assert level.exemplar.distance == pytest.approx(nearest, abs=1e-6)  # madrag's: the nearest
                where = {"$and": [{score_key(trait): {"$eq": level.score}}, {"essay_id": {"$ne": essay.id}}]}
                got = chroma.query(query_embeddings=[vector], n_results=1, where=where, include=["distances"])
                compared += 1
                if not got["ids"][0]:  # Chroma's filtered HNSW search found no essay at all: a miss (1 run in ~3)
                    missed += 1
                elif got["ids"][0][0] != level.exemplar.essay_id:  # a tie, or Chroma's approximate search missed
                    assert level.exemplar.distance <= got["distances"][0][0] + 1e-6
                    missed += got["distances"][0][0] > level.exemplar.distance + 1e-6
        ours = [x.distance for x in bank.similar(essay, 5)]
        assert ours == pytest.approx(sorted(exact.values())[:5], abs=1e-6)  # the five nearest, nearest first
        top = chroma.query(query_embeddings=[vector], n_results=5, where={"essay_id": {"$ne": essay.id}})
        assert all(a <= b + 1e-6 for a, b in zip(ours, top["distances"][0], strict=True))
    assert compared == 25 * sum(len(t.scores) for t in rubric.traits)
    assert missed <= compared // 50, f"Chroma missed the nearest essay in {missed} of {compared} level queries"
