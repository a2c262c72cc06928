"""Each text is embedded once, ever: the cache folder's vector store is shared by every bank, fold, run and
process; ``--fold each`` embeds each essay once for all its fold banks; the vectors shipped with the ASAP data
serve exactly the texts and the embedder they were computed for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.helpers import BagOfWordsEmbedder

from madrag.data import load_asap, split_by_fold
from madrag.data.shipped import asap_data_file, asap_rubric_file
from madrag.data.splits import fold_pools
from madrag.retrieval import MiniLMEmbedder, MiniLMWindowsEmbedder
from madrag.retrieval.embedder import FloatArray
from madrag.retrieval.folds import FoldBanks
from madrag.retrieval.vectors import CachingEmbedder, VectorStore, shipped_vectors, text_hash
from madrag.rubric import load_rubric


class NamedEmbedder(BagOfWordsEmbedder):
    """A counting embedder that claims another embedder's name (to reach that name's shipped vectors)."""

    def __init__(self, name: str) -> None:
        super().__init__(dim=384)
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def embed(self, texts: list[str]) -> FloatArray:
        return super().embed(texts)


def test_store_is_shared_by_embedders_and_processes(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    first = CachingEmbedder(BagOfWordsEmbedder(), path)
    vectors = first.embed(["one text", "two text", "one text"])
    assert first.texts_embedded == 2
    code = (
        "import sys; from tests.helpers import BagOfWordsEmbedder; from madrag.retrieval.vectors import "
        "CachingEmbedder; c = CachingEmbedder(BagOfWordsEmbedder(), sys.argv[1]); c.embed(['two text', 'three']); "
        "print(c.texts_embedded, c.from_store)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "1"]  # "two text" from the store, "three" computed and stored
    third = CachingEmbedder(BagOfWordsEmbedder(), path)
    again = third.embed(["two text", "three"])
    assert (third.texts_embedded, third.from_store) == (0, 2)
    np.testing.assert_array_equal(again[0], vectors[1])


def test_store_keys_vectors_by_embedder(tmp_path: Path) -> None:
    store = VectorStore(tmp_path / "v.sqlite")
    store.put("model-a", [(text_hash("x"), np.ones(3, dtype=np.float32))])
    assert store.get("model-b", [text_hash("x")]) == {}
    assert list(store.get("model-a", [text_hash("x")])) == [text_hash("x")]


@pytest.mark.integration
def test_fold_each_embeds_each_essay_once(tmp_path: Path) -> None:
    rubric = load_rubric(asap_rubric_file(7))
    essays = [e for e in load_asap(asap_data_file(), rubric) if e.fold is not None][:150]
    inner = BagOfWordsEmbedder()
    embedder = CachingEmbedder(inner, tmp_path / "vectors.sqlite")
    banks = FoldBanks.build_or_load(fold_pools(essays), rubric, embedder, tmp_path / "banks")
    assert len(banks.banks) == 5 and sum(b.size for b in banks.banks.values()) == 4 * len(essays)
    assert inner.texts_embedded == len({e.text for e in essays})  # not 4 times each


@pytest.mark.parametrize("name", [MiniLMEmbedder().name, MiniLMWindowsEmbedder().name])
def test_shipped_vectors_serve_their_embedder_only(name: str) -> None:
    rubric = load_rubric(asap_rubric_file(7))
    texts = [e.text for e in load_asap(asap_data_file(), rubric)[:20]]
    assert len(shipped_vectors(name)) == 2292  # every shipped essay of sets 7 and 8
    same = NamedEmbedder(name)
    served = CachingEmbedder(same).embed(texts)
    assert same.texts_embedded == 0 and served.shape == (20, 384)
    other = NamedEmbedder(name.replace("254", "128").replace("256", "128"))  # other settings: nothing shipped
    CachingEmbedder(other).embed(texts)
    assert other.texts_embedded == 20
    unshipped = NamedEmbedder(name)
    CachingEmbedder(unshipped).embed(["an essay that is not in the shipped data"])
    assert unshipped.texts_embedded == 1


def test_the_defaults_vectors_are_shipped() -> None:
    paper, windows = shipped_vectors(MiniLMEmbedder().name), shipped_vectors(MiniLMWindowsEmbedder().name)
    assert len(paper) == len(windows) == 2292 and paper.keys() == windows.keys()
    gaps = [float(paper[k] @ windows[k]) for k in paper]
    assert min(gaps) < 0.99 < max(gaps)  # long essays differ, short ones are the same vector


@pytest.mark.integration
@pytest.mark.parametrize("model", [MiniLMEmbedder(), MiniLMWindowsEmbedder()], ids=lambda m: m.name)
def test_shipped_vectors_are_minilms_vectors(model: MiniLMEmbedder | MiniLMWindowsEmbedder) -> None:
    rubric = load_rubric(asap_rubric_file(8))
    texts = [e.text for e in split_by_fold(load_asap(asap_data_file(), rubric), 0).pool[:6]]
    shipped = CachingEmbedder(NamedEmbedder(model.name)).embed(texts)
    np.testing.assert_allclose(shipped, model.embed(texts), atol=1e-4)
