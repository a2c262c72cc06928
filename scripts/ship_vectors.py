"""Compute the MiniLM vectors of the shipped ASAP essays (sets 7 and 8) and write them beside the data, so the
demo and the web app's shipped exemplars need no embedding on first use.

    .venv/bin/python scripts/ship_vectors.py

Run it again whenever the shipped data or the default embedder's settings change: the file is named by and holds
the embedder's full name (model, window, overlap, pooling), and madrag uses a shipped vector only for the exact text
and embedder it was computed for (:mod:`madrag.retrieval.vectors`), so a stale file is ignored, never misused.
"""

from __future__ import annotations

import time

import numpy as np

from madrag.data import load_asap
from madrag.data.shipped import asap_data_file, asap_rubric_file, shipped_asap_dir
from madrag.retrieval import MiniLMEmbedder
from madrag.retrieval.vectors import SHIPPED_PREFIX, embedder_slug, text_hash
from madrag.rubric import load_rubric


def main() -> None:
    started = time.perf_counter()
    texts = sorted({e.text for s in (7, 8) for e in load_asap(asap_data_file(), load_rubric(asap_rubric_file(s)))})
    embedder = MiniLMEmbedder()
    vectors = embedder.embed(texts)
    out = shipped_asap_dir() / f"{SHIPPED_PREFIX}{embedder_slug(embedder.name)}.npz"
    np.savez_compressed(
        out,
        embedder=np.array(embedder.name),
        hashes=np.array([text_hash(t) for t in texts]),
        vectors=vectors.astype(np.float32),
    )
    print(
        f"{len(texts)} texts, {embedder.name}: {out} ({out.stat().st_size / 1e6:.1f} MB) "
        f"in {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
