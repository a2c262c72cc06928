"""How ``tests/data/release_b8ea291/`` was made: a run of the release at commit b8ea291, made before runs kept a copy
of their prompt templates, and that release's texts of the templates the run used, recovered from git at build time.

Run with that release's code on the path, from a folder outside the repository::

    mkdir /tmp/b8ea291 && git archive b8ea291 src | tar -x -C /tmp/b8ea291
    PYTHONPATH=/tmp/b8ea291/src python tests/data/release_b8ea291/make_run.py

``run/``: 2 in-memory ASAP set-7 essays, the first scored with MADRAG and SA on the fake backend (hashing embedder,
8 pool essays), the second left unselected (``limit=1``), so the run is finished: resuming it makes 0 calls.
``prompts/``: the texts of the templates the run recorded, as that release shipped them (madrag never reads git
at run time: these files are what a user of an old run passes as ``--prompts-dir``).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

import madrag
from madrag.data.loaders import load_asap
from madrag.pipeline.job import ScoreJob
from madrag.rubric import load_rubric

HERE = Path(__file__).parent
ASAP = HERE.parents[2] / "src" / "madrag" / "datasets" / "asap"  # this repository's copy (that release shipped none)
RUN = HERE / "run"
PROMPTS = HERE / "prompts"


def main() -> None:
    asap = ASAP
    rubric = load_rubric(asap / "rubric_set7.json")
    essays = load_asap(asap / "training_set_rel3_sets7_8.tsv", rubric)
    scored = [e for e in essays if e.fold == 0][:2]
    pool = [e for e in essays if e.fold == 1][:8]
    shutil.rmtree(RUN, ignore_errors=True)
    shutil.rmtree(PROMPTS, ignore_errors=True)
    (RUN / "inputs").mkdir(parents=True)
    rubric_file = RUN / "inputs" / "rubric.json"
    rubric_file.write_text(rubric.model_dump_json(indent=2) + "\n", encoding="utf-8")
    job = ScoreJob(
        essays=scored,
        pool=pool,
        rubric=rubric_file,
        run_dir=RUN,
        limit=1,
        protocols=["MADRAG", "SA"],
        provider=madrag.ProviderSpec(kind="fake"),
        cache_dir=Path(tempfile.mkdtemp(prefix="madrag-fixture-cache-")),
        response_cache=False,
        embedder="hashing",
    )
    result = madrag.run_job(job, progress=False)
    conn = sqlite3.connect(RUN / "store.sqlite")
    names = sorted(json.loads(conn.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()[0])["prompts"])
    conn.close()
    packaged = Path(madrag.__file__).parent / "prompts"
    PROMPTS.mkdir()
    for name in names:
        shutil.copyfile(packaged / f"{name}.txt", PROMPTS / f"{name}.txt")
    conn = sqlite3.connect(RUN / "store.sqlite")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("VACUUM")
    conn.close()
    print(f"{madrag.__file__}: {result.stats.made} calls, {len(names)} templates", file=sys.stderr)


if __name__ == "__main__":
    main()
