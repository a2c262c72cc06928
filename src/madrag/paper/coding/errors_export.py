"""High-disagreement error export for qualitative coding (the MADRAG paper, 4.4 and Appendix E).

A row is one essay-trait where the two human raters (raters 1 and 2; a third rater, as on some set-8
essays, is not used) agree within 1 point but the selected protocol - MADRAG by default, as the MADRAG paper ("We focus
on rows where MADRAG is wrong (N=173)"); another one, or ``"all"`` for any protocol of the run - is off by more
than 1 point from their mean.
With one rater (data with a single score per trait) the rule is :data:`ONE_RATER_RULE`: a protocol off by more
than 1 point from that rater's score (``rater2`` is empty and ``human_mean`` is the one score).
Each row carries the essay, both raters, and for every protocol of the run its score, its error, the
Judge's rationale and (debate protocols) the debate messages, plus empty coding columns for the paper's
scheme: reasoning quality B0-B2, failure mechanism C1-C6, component attribution D1-D4, memo.

Design failure mode C6 (anonymization distortion) is pre-measured: the number of ASAP placeholders
(``@CAPS1``, ``@PERSON2`` ...) in the essay and whether each rationale mentions them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from madrag.agents.placeholders import PLACEHOLDER, placeholders
from madrag.data.essay import Essay
from madrag.errors import InputError
from madrag.evaluation.run import RunData, load_run
from madrag.evaluation.sources import Sources, debate_turns, judge_for, load_sources
from madrag.files.atomic import write_text_atomic
from madrag.files.csv_safe import dict_rows, write_csv
from madrag.metrics import TieRule, checked_ties
from madrag.paper.coding.hand_codes import KeptCodes, keep_hand_codes
from madrag.records import AgentRecord

# a rationale "mentions" placeholders when it quotes one, names a placeholder kind, or talks about them
MENTION = re.compile(
    PLACEHOLDER.pattern
    + r"|\b(?:CAPS|PERSON|NUM|DATE|LOCATION|ORGANIZATION|MONTH|TIME|MONEY|PERCENT|CITY|STATE)[0-9]+\b"
    r"|placeholder|anonymi[sz]",
    re.IGNORECASE,
)
PAPER_FOCUS = "MADRAG"
"""The MADRAG paper's 4.4 codes the rows where MADRAG is wrong."""
ANY_PROTOCOL = "all"
"""``focus`` for the rows where any protocol of the run is wrong."""
TWO_RATER_RULE = "raters 1 and 2 within 1 point, {who} off by more than 1 from their mean"
ONE_RATER_RULE = "one rater: {who} off by more than 1 from that rater's score"
CODING_COLUMNS = ["code_B_grounding (B0-B2)", "code_C_mechanism (C1-C6)", "code_D_component (D1-D4)", "memo"]
CODEBOOK = """# Coding scheme (the MADRAG paper, section 4.4)

B reasoning quality: B2 rubric-aligned and text-grounded; B1 partially grounded; B0 misaligned / ungrounded.
C primary failure mechanism: C1 trait-boundary confusion; C2 debate framing capture; C3 spurious debate claim
  accepted; C4 exemplar-induced calibration error; C5 rubric boilerplate collapse; C6 anonymization distortion.
D component attribution (compare the same row across protocols): D1 debate plausibly contributed; D2 retrieval
  plausibly contributed; D3 interaction plausible (debate + RAG); D4 not component-specific.
Direction (computed): A1 under-scoring (score below the human mean), A2 over-scoring.
Rows: two raters within 1 point of each other and {who} off by more than 1 from their mean; where an
  essay-trait has one rater, {who} off by more than 1 from that rater's score (rater2 empty).
  Reference column: the raters' mean rounded to a valid score, ties {ties}.
Treat anonymization markers (@CAPS1, @PERSON1, @DATE1 ...) as placeholders, not as the writer's errors.
Code one value per cell (e.g. C2); `madrag paper error-tables FILE` turns the coded file into the MADRAG paper's
  Tables 3, 4, 5, 10 and 11.
"""


def who_is_wrong(focus: str) -> str:
    """The rows' protocol in words: ``"MADRAG"`` or ``"any protocol"``."""
    return "any protocol" if focus == ANY_PROTOCOL else focus


def mentions_placeholders(text: str) -> bool:
    """Whether a rationale refers to anonymization placeholders (a quoted @TOKEN, a kind like CAPS1, or words)."""
    return MENTION.search(text) is not None


def format_debate(turns: Iterable[AgentRecord]) -> str:
    """A plain-text transcript: 'Advocate 1 (confidence 0.91): ...' blocks."""
    blocks = []
    for turn in turns:
        conf = "n/a" if turn.confidence is None else f"{turn.confidence:.2f}"
        blocks.append(f"{turn.role.capitalize()} {turn.round} (confidence {conf}): {turn.text.strip()}")
    return "\n\n".join(blocks)


@dataclass(frozen=True)
class ErrorExport:
    """Where the export went and what it holds."""

    path: Path
    n_rows: int
    per_protocol: dict[str, int]  # rows where each protocol is off by more than 1
    n_one_rater: int = 0  # rows of essay-traits with one rater (ONE_RATER_RULE)
    focus: str = PAPER_FOCUS  # the protocol whose errors the rows are, or ANY_PROTOCOL
    ties: TieRule = "half_up"  # how the reference column rounds a raters' mean halfway between two scores
    kept: KeptCodes = field(default_factory=KeptCodes)  # the hand codes carried over from the export written over

    @property
    def rule(self) -> str:
        """The selection rule in words, for the command's output."""
        who = who_is_wrong(self.focus)
        return f"{TWO_RATER_RULE.format(who=who)}; where an essay-trait has {ONE_RATER_RULE.format(who=who)}"


def _protocol_columns(
    protocols: list[str], sources: Sources, row: dict[str, Any], key: tuple[str, str], mean: float
) -> list[str]:
    """Fill every protocol's columns of one row; return the protocols off by more than 1 from ``mean``."""
    wrong = []
    with_debate = sources.debate_protocols
    for protocol in protocols:
        found = sources.scores.get((protocol, *key))
        score = None if found is None else found.score
        rationale = "" if found is None else found.rationale
        row[f"{protocol}_score"] = "" if score is None else score
        row[f"{protocol}_error"] = "" if score is None else f"{score - mean:+.1f}"
        row[f"{protocol}_rationale"] = rationale
        row[f"{protocol}_mentions_placeholders"] = mentions_placeholders(rationale)
        if protocol in with_debate:
            judge = judge_for(sources.judges, protocol, *key)
            row[f"{protocol}_debate"] = format_debate(debate_turns(judge, sources.debates))
        if score is not None and abs(score - mean) > 1:
            wrong.append(protocol)
    return wrong


def human_scores(essay: Essay, trait: str) -> tuple[float, float | None] | None:
    """(rater 1, rater 2) of an essay-trait when they agree within 1 point; (the one score, None) when the
    essay-trait has a single rater; None otherwise (no rater, or raters 1 and 2 more than 1 point apart)."""
    r1, r2 = essay.rater(trait, 0), essay.rater(trait, 1)
    if r1 is not None and r2 is not None:
        return (r1, r2) if abs(r1 - r2) <= 1 else None
    given = essay.rater_scores.get(trait, [])
    return (given[0], None) if len(given) == 1 else None


def error_rows(run: RunData, focus: str | None = None, sources: Sources | None = None) -> list[dict[str, Any]]:
    """Rows where raters 1 and 2 are within 1 point (or the essay-trait has one rater) and ``focus`` (or, if
    None, any protocol) is off by > 1 from the raters' mean (or the one rater's score)."""
    sources = sources or Sources(run.score_map(), {}, {})
    rows = []
    for essay in run.essays:
        found = placeholders(essay.text)
        for trait in run.rubric.traits:
            if (raters := human_scores(essay, trait.name)) is None:
                continue
            r1, r2 = raters
            mean = r1 if r2 is None else (r1 + r2) / 2
            row: dict[str, Any] = {"essay_id": essay.id, "trait": trait.name, "essay_text": essay.text}
            reference = essay.reference(trait, run.label_ties)
            row.update(rater1=r1, rater2="" if r2 is None else r2, human_mean=mean, reference=reference)
            row.update(n_placeholders=len(found), placeholder_kinds=" ".join(sorted({_kind(p) for p in found})))
            wrong = _protocol_columns(run.protocols, sources, row, (essay.id, trait.name), mean)
            if (focus is None and wrong) or (focus is not None and focus in wrong):
                row["off_by_more_than_1"] = " ".join(wrong)
                row["direction"] = _direction(row, focus or wrong[0], mean)
                rows.append({**row, **dict.fromkeys(CODING_COLUMNS, "")})
    return rows


def _kind(token: str) -> str:
    """``@CAPS12`` -> ``@CAPS``."""
    return token.rstrip("0123456789")


def _direction(row: dict[str, Any], protocol: str, mean: float) -> str:
    score = row[f"{protocol}_score"]
    return f"{protocol}: " + ("A1 under-scoring" if score < mean else "A2 over-scoring")


def resolve_focus(run: RunData, focus: str | None) -> str:
    """The protocol whose errors are exported: ``focus`` (a protocol of the run, or :data:`ANY_PROTOCOL`),
    else MADRAG (the MADRAG paper), else - a run without MADRAG - the run's first protocol."""
    if focus is None:
        return PAPER_FOCUS if PAPER_FOCUS in run.protocols or not run.protocols else run.protocols[0]
    if focus != ANY_PROTOCOL and focus not in run.protocols:
        raise InputError(
            f"protocol {focus!r} is not in this run ({', '.join(run.protocols)}); or give {ANY_PROTOCOL!r}"
        )
    return focus


def export_errors(
    run_dir: Path, out: Path | None = None, focus: str | None = None, ties: TieRule | None = None
) -> ErrorExport:
    """Write the export CSV (default ``<run>/eval/errors.csv``) and the coding scheme beside it: the rows where
    ``focus`` is wrong (default MADRAG, :func:`resolve_focus`; :data:`ANY_PROTOCOL`: any protocol), with the
    reference labels' ties rounded by ``ties`` (default: the run's own rule)."""
    loaded = load_run(run_dir)
    rule = checked_ties(ties or loaded.reference_ties)
    run = replace(loaded, label_ties=rule)
    chosen = resolve_focus(run, focus)
    sources = load_sources(run)
    rows = error_rows(run, None if chosen == ANY_PROTOCOL else chosen, sources)
    target = out or Path(run_dir) / "eval" / "errors.csv"
    target.parent.mkdir(parents=True, exist_ok=True)
    columns = _columns(run, sources.debate_protocols)
    kept = keep_hand_codes(target, rows, columns, CODING_COLUMNS)  # a coded export is merged, never lost
    write_csv(target, dict_rows(rows, columns))
    codebook = CODEBOOK.format(who=who_is_wrong(chosen), ties=rule)
    write_text_atomic(target.with_name(target.stem + "_codebook.md"), codebook)
    per_protocol = {p: sum(p in r["off_by_more_than_1"].split() for r in rows) for p in run.protocols}
    n_one = sum(r["rater2"] == "" for r in rows)
    return ErrorExport(target, len(rows), per_protocol, n_one, chosen, rule, kept)


def _columns(run: RunData, with_debate: set[str]) -> list[str]:
    head = ["essay_id", "trait", "rater1", "rater2", "human_mean", "reference", "off_by_more_than_1", "direction"]
    head += ["n_placeholders", "placeholder_kinds", "essay_text"]
    for p in run.protocols:
        head += [f"{p}_score", f"{p}_error", f"{p}_rationale", f"{p}_mentions_placeholders"]
        head += [f"{p}_debate"] if p in with_debate else []
    return head + CODING_COLUMNS
