"""Compute the vectors of the shipped ASAP essays (sets 7 and 8) and write them beside the data, one file per
embedder, so the demo and the web app's shipped exemplars need no embedding on first use.

    .venv/bin/python scripts/ship_vectors.py                          # both: minilm and minilm-windows
    .venv/bin/python scripts/ship_vectors.py --embedder minilm        # the default (the MADRAG paper's) only

Run it again whenever the shipped data or an embedder's settings change: each file is named by and holds the
embedder's full name (model and every setting: ``all-MiniLM-L6-v2[truncate=256]``, or the windows embedder's
window, overlap and pooling), and madrag uses a shipped vector only for the exact text and embedder it was computed
for (:mod:`madrag.retrieval.vectors`), so a stale file is ignored, never misused.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from madrag.data import load_asap
from madrag.data.shipped import asap_data_file, asap_rubric_file, shipped_asap_dir
from madrag.retrieval import make_embedder
from madrag.retrieval.vectors import SHIPPED_PREFIX, embedder_slug, text_hash
from madrag.rubric import load_rubric

SHIPPED = ("minilm", "minilm-windows")


def ship(kind: str, texts: list[str]) -> None:
    """Embed ``texts`` with the embedder ``--embedder kind`` names and write its shipped vector file."""
    started = time.perf_counter()
    embedder = make_embedder(kind)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--embedder", action="append", choices=SHIPPED, help="an embedder to ship (repeatable; default: both)"
    )
    kinds = parser.parse_args().embedder or list(SHIPPED)
    texts = sorted({e.text for s in (7, 8) for e in load_asap(asap_data_file(), load_rubric(asap_rubric_file(s)))})
    for kind in kinds:
        ship(kind, texts)


if __name__ == "__main__":
    main()
