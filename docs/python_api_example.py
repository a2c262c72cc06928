"""The Python API on real data: score 3 ASAP set-7 fold-0 essays with MADRAG on the embedded model, then
evaluate them - what a researcher would type in a notebook.

    MADRAG_CACHE=~/.cache/madrag python docs/python_api_example.py [RUN_DIR]

The ASAP data is found as ``madrag demo`` finds it ($MADRAG_ASAP_DIR, else the copy shipped in the package).
The exemplar pool is the other folds (1256 essays); its MiniLM index is built once and cached under
$MADRAG_CACHE. The embedded SmolLM2-135M model only shows the pipeline working: its scores are not valid.
A recorded run is in docs/results/python-api-set7-3-smollm2.txt.
"""

from __future__ import annotations

import sys
import time

import madrag
from madrag.data.shipped import find_asap_dir


def main() -> None:
    started = time.monotonic()
    asap = find_asap_dir()
    rubric = madrag.load_rubric(asap / "rubric_set7.json")
    essays = madrag.load_asap(asap / "training_set_rel3_sets7_8.tsv", rubric)
    split = madrag.split_by_fold(essays, 0)  # fold 0 is scored, folds 1-4 are the exemplar pool

    result = madrag.score(
        split.eval[:3],
        rubric,
        pool=split.pool,
        protocol="MADRAG",
        provider="llamacpp",  # the embedded model; e.g. "openai:gpt-4o-mini" for real scoring
        settings={"debater_max_tokens": 160, "judge_max_tokens": 160},  # as `madrag demo`
        run_dir=sys.argv[1] if len(sys.argv) > 1 else None,
        progress=False,
    )
    print(result)
    print(result.scores.drop(columns="rationale").to_string(index=False))
    judge = next(r for r in result.records if r.role == "judge")
    print(f"\n{len(result.records)} agent calls recorded; the first Judge ({judge.essay_id}, {judge.trait}) said:")
    print(judge.text.strip())

    evaluation = result.evaluate(bootstrap=1000, data=asap / "training_set_rel3_sets7_8.tsv")
    print("\nQWK per trait (3 essays: far too few for a meaningful QWK; the Human-Human rows are the ceiling):")
    print(madrag.wide(evaluation.qwk).round(3).to_string())
    print("\nExtreme-score subset (Agree@1, MAE):")
    print(evaluation.extreme[["protocol", "label", "n", "agree_at_1", "mae"]].to_string(index=False))
    for note in evaluation.notes:
        print(f"note: {note}")
    print(f"\nelapsed {time.monotonic() - started:.0f}s; run directory {result.run_dir}")


if __name__ == "__main__":
    main()
