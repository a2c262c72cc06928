"""How ``tests/data/previous_release/run`` was made: a partly finished run of the previous release (commit eb6de4e).

Run with that release's code on the path (``git archive eb6de4e src | tar -x -C /tmp/old``, then
``PYTHONPATH=/tmp/old/src python tests/data/previous_release/make_run.py``): 3 in-memory ASAP set-7 essays, 2 of
them scored with MADRAG and SA on the fake backend (hashing embedder, 12 pool essays), the third left for a resume.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

import madrag
from madrag.data.loaders import load_asap
from madrag.data.shipped import find_asap_dir
from madrag.pipeline.job import ScoreJob
from madrag.rubric import load_rubric

HERE = Path(__file__).parent
RUN = HERE / "run"


def main() -> None:
    asap = find_asap_dir()
    rubric = load_rubric(asap / "rubric_set7.json")
    essays = load_asap(asap / "training_set_rel3_sets7_8.tsv", rubric)
    scored = [e for e in essays if e.fold == 0][:3]
    pool = [e for e in essays if e.fold == 1][:12]
    shutil.rmtree(RUN, ignore_errors=True)
    (RUN / "inputs").mkdir(parents=True)
    rubric_file = RUN / "inputs" / "rubric.json"
    rubric_file.write_text(rubric.model_dump_json(indent=2) + "\n", encoding="utf-8")
    job = ScoreJob(
        essays=scored,
        pool=pool,
        rubric=rubric_file,
        run_dir=RUN,
        limit=2,
        protocols=["MADRAG", "SA"],
        provider=madrag.ProviderSpec(kind="fake"),
        cache_dir=Path(tempfile.mkdtemp(prefix="madrag-fixture-cache-")),
        response_cache=False,
        embedder="hashing",
    )
    result = madrag.run_job(job, progress=False)
    conn = sqlite3.connect(RUN / "store.sqlite")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    print(f"{madrag.__file__}: {result.stats.made} calls, {len(result.essays)} essays", file=sys.stderr)


if __name__ == "__main__":
    main()
