"""The confidence paper's Table 2, "Summary of the ASAP subsets used in this work": one row per essay set.

The paper prints the table as an image, and its caption says what it compares: "These two sets differ in both
rubric complexity and score ranges"; Appendix A.3 gives each set's prompt. madrag's table holds, per set, what
those words name and what can be counted from the data: the essays of the set in the data file and in the run,
the rubric's traits and their score ranges, the raters per essay-trait, the mean essay length in words, and the
prompt's first sentence. Its cells are computed from the runs' data, never copied from the paper (whose figures
are not in its text).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from madrag.data.essay import Essay
from madrag.errors import MadragError
from madrag.evaluation.agreement import load_full_data
from madrag.evaluation.run import load_run
from madrag.rubric import Rubric

TABLE2_COLUMNS = [
    "set", "essay_set", "essays", "essays_in_run", "traits", "trait_names", "score_ranges", "raters",
    "mean_words", "prompt", "note",
]  # fmt: skip


def _ranges(rubric: Rubric) -> str:
    """``0-3`` when every trait shares a range, else each trait's ``name min-max``."""
    spans = [f"{t.min}-{t.max}" for t in rubric.traits]
    if len(set(spans)) == 1:
        return spans[0]
    return "; ".join(f"{t.name} {span}" for t, span in zip(rubric.traits, spans, strict=True))


def _raters(essays: list[Essay], rubric: Rubric) -> str:
    """How many raters scored each essay-trait: ``2`` or e.g. ``2 (3 on 128 essays)``."""
    per_essay = Counter(max((len(e.rater_scores.get(t.name, [])) for t in rubric.traits), default=0) for e in essays)
    if not per_essay:
        return "—"
    common = per_essay.most_common(1)[0][0]
    others = [f"{n} on {count} essays" for n, count in sorted(per_essay.items()) if n != common]
    return f"{common} ({', '.join(others)})" if others else str(common)


def _first_sentence(text: str) -> str:
    head = text.strip().split(". ")[0]
    return head if head.endswith((".", "?", "!")) or not head else head + "."


def subset_row(label: str, run_dir: Path) -> dict[str, Any]:
    """Table 2's row of one run's essay set: the whole set in the run's data file (the run's essays when the
    file is gone, said in ``note``) and the essays the run holds. A run without a stored rubric gives a row of
    missing cells and a note, never zeros."""
    try:
        run = load_run(run_dir)
    except MadragError as error:
        return {"set": label, "note": f"not read: {error}"}
    full, missing = load_full_data(run.data_path, run.rubric)
    essays = full if full is not None else run.essays
    words = [len(e.text.split()) for e in essays]
    return {
        "set": label,
        "essay_set": run.rubric.essay_set,
        "essays": len(essays),
        "essays_in_run": len(run.essays),
        "traits": len(run.rubric.traits),
        "trait_names": ", ".join(t.name for t in run.rubric.traits),
        "score_ranges": _ranges(run.rubric),
        "raters": _raters(essays, run.rubric),
        "mean_words": round(sum(words) / len(words), 1) if words else None,
        "prompt": _first_sentence(run.rubric.prompt),
        "note": missing or "",
    }


def subsets_table(runs: dict[str, Path]) -> pd.DataFrame:
    """Table 2 over the runs (one per essay set, by label)."""
    return pd.DataFrame([subset_row(label, run) for label, run in runs.items()], columns=TABLE2_COLUMNS)


def subsets_markdown(table: pd.DataFrame) -> str:
    """table2.md: the table, then what its columns mean."""
    lines = [
        "# The confidence paper's Table 2: the ASAP subsets used",
        "",
        "| " + " | ".join(TABLE2_COLUMNS) + " |",
        "|" + "---|" * len(TABLE2_COLUMNS),
    ]
    for row in table.itertuples(index=False):
        cells = ["—" if v is None or (isinstance(v, float) and pd.isna(v)) else str(v) for v in row]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines += [
        "",
        "essays: the set's essays in the run's data file; essays_in_run: those the run scored; raters: raters "
        "per essay (the most common count, then the others); mean_words: whitespace-separated words per essay. "
        "Computed from the data (the paper's own cells are not in its text).",
        "",
    ]
    return "\n".join(lines)
