"""The words a teacher sees: the three protocols a class is scored with, named by what they do (the debate
without examples is what a class without scored example essays gets: MADRAG less its retrieval), and how a
Judge's score was read; the research names stay in the "advanced" fold, the evaluation page and the report."""

from __future__ import annotations

TEACHER_PROTOCOLS = {
    "MADRAG": "Recommended (debate + examples)",
    "MAD": "Debate without examples (when you have no scored example essays)",
    "MA": "Quick (one judge per trait)",
}
SCORE_READ = {
    "constrained_distribution": "from the Judge's score probabilities",
    "constrained_schema": "from the score the Judge gave, limited to the valid scores",
    "parsed_text": "from the score the Judge wrote",
    "parsed_followup": "from the score the Judge gave when asked again",
    "baseline": "by a baseline without a language model",
    "failed": "could not be read",
}


def protocol_label(name: str) -> str:
    """A protocol as the teacher's pages name it (a research protocol keeps its name)."""
    return TEACHER_PROTOCOLS.get(name, name)


def score_read(mode: str | None) -> str:
    """How the Judge's score was read, in words."""
    return "" if mode is None else SCORE_READ.get(mode, mode.replace("_", " "))
