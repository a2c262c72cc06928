"""The figures the three papers report, as data: what ``madrag eval --paper`` shows beside madrag's own.

Each paper's figures are one CSV beside this module (package data), transcribed from the papers' texts; a row is
one number with where it stands:

* ``table``, ``section``: the table (or figure) and the section that holds it. The texts madrag was written from
  carry no page numbers, so the section stands for the page.
* ``set``: the data the number is about (ASAP essay set 7 or 8, "7+8" when pooled, the consensus paper's
  "Korean Essay" or "SummEval").
* ``row``: the paper's own row label; ``protocol``: madrag's name for it (empty for a published system madrag
  does not implement: ProTACT, ZS-LLM, CSR-J, shown as reported only).
* ``model``: the backbone the paper names for the row ("" when none applies); ``metric`` and ``trait`` (the
  paper's short column label, "all" when pooled), ``value``, and a ``note`` (e.g. a model the table does not name
  but the paper's other tables imply).

The MADRAG paper: Tables 1, 2, 6 (sets 7 and 8), 7, 8 and 9, and the coded Tables 3, 4, 5, 10 and 11, every
cell as printed (Table 11's C4 row sums to 13 where Table 3 counts 12: the paper's own slip, kept). The
confidence paper prints Tables 1-4 as images, so only the figures its text states are here (4.2, 4.4): AUROCs
and a Spearman rho (``row`` = "role: feature", "best feature" where the text names none), the features it
calls the top one (``metric`` ``rank``, value 1), Figure 3's shares and pass rates; ``set`` "7 or 8" where the
text does not say which. None of its Table 2 (the ASAP subsets) is in its text; ``madrag paper confidence sets``
computes that table from the runs' data (``table2.csv``). The consensus paper's tables are images too: the
six-model averages its text states (4.1, 4.2, G.1) and the per-model round-wise figures of E.1 (Figures 3-4;
there ``trait`` names the round).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

Paper = Literal["madrag", "confidence", "consensus"]

PAPERS: dict[Paper, str] = {
    "madrag": "the MADRAG paper (Keramati, Zhou, Mehrotra, Warschauer: MADRAG: Multi-Agent Debate with "
    "Retrieval-Augmented Generation for Training-Free Analytic Essay Scoring)",
    "confidence": "the confidence paper (Keramati, Cheok, Horne, Warschauer: Early-Token Confidence Predicts "
    "Reasoning Quality in Multi-Agent LLM Debate, arXiv 2606.10307)",
    "consensus": "the consensus paper (Beyond Consensus: Downward Bias and Role Asymmetry in Multi-Agent LLM "
    "Judges for Subjective Evaluation)",
}
"""Each paper's short name (the key) and its citation in words (docs/references.md has the full list)."""

FILES: dict[Paper, str] = {
    "madrag": "madrag_paper.csv",
    "confidence": "confidence_paper.csv",
    "consensus": "consensus_paper.csv",
}


@dataclass(frozen=True)
class Reported:
    """One number a paper reports (see the module docstring for the fields)."""

    paper: Paper
    table: str
    section: str
    set: str
    row: str
    protocol: str
    model: str
    metric: str
    trait: str
    value: float
    note: str

    @property
    def where(self) -> str:
        """``"the MADRAG paper, Table 1 (4.2)"``: what a display cites."""
        name = "MADRAG" if self.paper == "madrag" else self.paper
        return f"the {name} paper, {self.table} ({self.section})"


@cache
def reported(paper: Paper) -> tuple[Reported, ...]:
    """Every figure ``paper`` reports, in the paper's order."""
    text = resources.files(__name__).joinpath(FILES[paper]).read_text(encoding="utf-8")
    return tuple(
        Reported(
            paper=paper,
            table=row["table"],
            section=row["section"],
            set=row["set"],
            row=row["row"],
            protocol=row["protocol"],
            model=row["model"],
            metric=row["metric"],
            trait=row["trait"],
            value=float(row["value"]),
            note=row["note"],
        )
        for row in csv.DictReader(text.splitlines())
    )


def figures(paper: Paper, *, table: str | None = None, set_: str | None = None) -> list[Reported]:
    """``paper``'s figures, optionally of one table and one set."""
    return [r for r in reported(paper) if (table is None or r.table == table) and (set_ is None or r.set == set_)]
