"""The bank answers from memory as a Chroma collection (the MADRAG paper's vector store) of the same vectors
would: procedure 2 (one exemplar per score level) and procedure 1 (top-k) on the shipped ASAP set 7 and set 8
pools, every trait, against Chroma's own queries. Chroma is only this reference now (the dev install's): madrag
keeps its banks in its SQLite store and searches them exactly in memory (docs/differences.md, ``bank-store``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


@pytest.mark.parametrize("essay_set", [7, 8])
def test_memory_answers_match_chroma_queries(essay_set: int, tmp_path: Path) -> None:
    rubric = load_rubric(asap_rubric_file(essay_set))
    split = split_by_fold(load_asap(asap_data_file(), rubric), 0)
    bank = ExemplarBank.build_or_load(split.pool, rubric, HashingEmbedder(), tmp_path / "banks")
    chroma = chroma_copy(bank, tmp_path / "chroma")
    assert chroma.count() == bank.size == len(split.pool)
    compared = differing = 0
    for essay in split.eval[:25]:
        vector = [float(x) for x in bank.query_vector(essay)]
        for trait, levels in bank.per_level_all(essay).items():
            for level in levels:
                where = {"$and": [{score_key(trait): {"$eq": level.score}}, {"essay_id": {"$ne": essay.id}}]}
                got = chroma.query(query_embeddings=[vector], n_results=1, where=where, include=["distances"])
                theirs = got["ids"][0][0] if got["ids"][0] else None
                ours = level.exemplar.essay_id if level.exemplar else None
                compared += 1
                if ours != theirs:  # only where both are equally near (a tie to 1e-6)
                    differing += 1
                    assert level.exemplar is not None and got["distances"][0]
                    assert level.exemplar.distance == pytest.approx(got["distances"][0][0], abs=1e-6)
        top = chroma.query(query_embeddings=[vector], n_results=5, where={"essay_id": {"$ne": essay.id}})
        assert [x.essay_id for x in bank.similar(essay, 5)] == top["ids"][0]
    assert compared == 25 * sum(len(t.scores) for t in rubric.traits)
    assert differing == 0, f"{differing} of {compared} level exemplars differ from Chroma's (ties)"
