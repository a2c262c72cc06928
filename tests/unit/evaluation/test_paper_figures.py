"""The papers' reported figures shipped as data (``madrag.paper.reported``), checked against the papers'
own numbers, and ``madrag eval RUN --paper`` / ``madrag report --paper`` showing them beside the measured ones."""

from __future__ import annotations

import asyncio
import csv
from pathlib import Path

import pytest

from madrag.cli.evaluate import eval_command, report_command
from madrag.errors import InputError
from madrag.evaluation.agreement import HH_FULL
from madrag.paper.beside_paper import paper_model, qwk_index
from madrag.paper.reported import Paper, figures, reported
from madrag.pipeline.job import ScoreJob, execute
from madrag.providers import ProviderSpec


def _values(paper: Paper, table: str, set_: str, row: str, model: str = "") -> dict[str, float]:
    picked = [f for f in figures(paper, table=table, set_=set_) if f.row == row and (not model or f.model == model)]
    return {f.trait if f.metric == "qwk" else f.metric: f.value for f in picked}


def test_known_figures_of_the_madrag_paper() -> None:
    # Table 1's Human-Human rows, as printed in the paper (sets 7 and 8)
    assert _values("madrag", "Table 1", "7", "Human-Human") == {"Idea": 0.69, "Org.": 0.58, "Sty.": 0.54, "Cnv.": 0.57}
    assert _values("madrag", "Table 1", "8", "Human-Human") == {
        "Idea": 0.53, "Org.": 0.54, "Voc.": 0.47, "Word": 0.48, "Sent": 0.51, "Cnv.": 0.55,
    }  # fmt: skip
    # the text of 4.2 quotes Table 1: GPT-5 MADRAG Ideas 0.75 (set 7) and 0.67 (set 8), ProTACT 0.50 and 0.57
    assert _values("madrag", "Table 1", "7", "MADRAG", "gpt-5")["Idea"] == 0.75
    assert _values("madrag", "Table 1", "8", "MADRAG", "gpt-5")["Idea"] == 0.67
    assert _values("madrag", "Table 1", "7", "ProTACT")["Idea"] == 0.50
    assert _values("madrag", "Table 1", "7", "FeatEng-RF")["Cnv."] == 0.62  # "0.19-0.28 vs. 0.62" (4.2)
    assert "Idea" not in _values("madrag", "Table 1", "8", "CSR-J")  # "—": not reported, not 0
    # Table 2, and the text of 4.3 (MARAG 75.3% and 85.5% Agree@1)
    assert _values("madrag", "Table 2", "7", "MADRAG") == {"n": 2474, "agree_at_1": 0.795, "mae": 1.001}
    assert _values("madrag", "Table 2", "7", "MARAG")["agree_at_1"] == 0.753
    assert _values("madrag", "Table 2", "8", "MARAG")["agree_at_1"] == 0.855
    # Appendix D's text: MARAG vs MADRAG on set 7's Conventions, 0.35 vs 0.26
    assert _values("madrag", "Table 9", "7", "MARAG")["Cnv."] == 0.35
    assert _values("madrag", "Table 9", "7", "MADRAG")["Cnv."] == 0.26
    assert _values("madrag", "Table 6", "8", "ASAP") == {"essays": 723}


def test_the_madrag_papers_tables_agree_where_they_repeat_a_row() -> None:
    """Table 9's MADRAG rows are Table 1's GPT-4o-mini rows, and so are Tables 7-8's Adv. (R1) rows except set 7's
    Style (0.45 there): a transcription slip in any of those cells would break this."""
    for essay_set in ("7", "8"):
        table1 = _values("madrag", "Table 1", essay_set, "MADRAG", "gpt-4o-mini")
        assert _values("madrag", "Table 9", essay_set, "MADRAG") == table1
        variants = _values("madrag", "Table 7" if essay_set == "7" else "Table 8", essay_set, "Adv. (R1)")
        differing = {t for t in table1 if variants[t] != table1[t]}
        assert differing == ({"Sty."} if essay_set == "7" else set())
    counts = {t: sum(f.table == t for f in reported("madrag")) for t in ("Table 1", "Table 7", "Table 8", "Table 9")}
    assert counts == {"Table 1": 102, "Table 7": 24, "Table 8": 36, "Table 9": 60}  # every printed cell, no "—"


def test_known_figures_of_the_other_papers() -> None:
    assert _values("consensus", "Table 1", "Korean Essay", "Consensus-based MAD") == {"rmse": 0.935, "spearman": 0.424}
    assert _values("consensus", "Table 2", "SummEval", "human reference") == {"mean_pred": 4.285}
    assert _values("consensus", "Table 8", "Korean Essay", "Strict Role Judge") == {"shift_ref": -0.754}
    assert _values("confidence", "Table 1", "7", "Advocate: max of first 3 tokens") == {"auroc": 0.849, "rank": 1}
    assert {f.trait: f.value for f in figures("confidence", table="Figure 3") if f.metric == "share_at_max"} == {
        "instruction_following": 0.765, "justification_quality": 0.793, "evidence_grounding": 0.931,
    }  # fmt: skip


def test_paper_model_of_a_run() -> None:
    assert paper_model("gpt-4o") == ("gpt-4o", None)
    assert paper_model("openai/GPT-5-mini") == ("gpt-5-mini", None)
    model, note = paper_model("SmolLM2-135M")
    assert model == "gpt-4o-mini" and note is not None and "SmolLM2-135M" in note


def _fake_run(asap: Path, tmp_path: Path, essay_set: int, protocols: list[str]) -> Path:
    job = ScoreJob(
        data=asap / "training_set_rel3_sets7_8.tsv",
        rubric=asap / f"rubric_set{essay_set}.json",
        run_dir=tmp_path / f"set{essay_set}",
        limit=6,
        protocols=protocols,
        provider=ProviderSpec(kind="fake"),
        cache_dir=tmp_path / "cache",
        response_cache=False,
    )
    asyncio.run(execute(job))
    return job.run_dir


def test_eval_paper_prints_table_1_beside_the_measured(
    asap: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _fake_run(asap, tmp_path, 7, ["MA", "MADRAG"])
    eval_command([run], bootstrap=0, paper=True)
    printed = capsys.readouterr().out
    rows = list(csv.DictReader((run / "eval" / "paper.csv").open(encoding="utf-8")))
    got = {(r["protocol"], r["trait"], r["metric"]): r for r in rows}
    measured = {
        (r["protocol"], r["label"]): r["qwk"] for r in csv.DictReader((run / "eval" / "qwk.csv").open(encoding="utf-8"))
    }
    # the fake backend is not one of the paper's models: MADRAG beside Table 1's GPT-4o-mini row (0.43 0.64 0.47 0.26)
    for trait, paper in {"Idea": 0.43, "Org.": 0.64, "Sty.": 0.47, "Cnv.": 0.26}.items():
        row = got["MADRAG", trait, "qwk"]
        assert float(row["reported"]) == paper and "Table 1" in row["where"] and row["model"] == "gpt-4o-mini"
        if measured["MADRAG", trait]:
            assert float(row["diff"]) == pytest.approx(float(measured["MADRAG", trait]) - paper)
        else:  # an undefined QWK stays undefined, and so does its difference
            assert row["measured"] == "" and row["diff"] == ""
    assert float(got["MA", "Idea", "qwk"]["reported"]) == 0.31 and "Table 9" in got["MA", "Idea", "qwk"]["where"]
    assert float(got[HH_FULL, "Cnv.", "qwk"]["reported"]) == 0.57
    assert float(got["MADRAG", "all", "agree_at_1"]["reported"]) == 0.795
    assert got["MADRAG", "all", "n"]["reported"] == "2474.0"
    assert "the MADRAG paper" in printed and "ProTACT" in printed and "CSR-J (gpt-4)" in printed
    assert "FeatEng-RF" in printed and "MADRAG (gpt-5)" in printed and "MADRAG (gpt-4o-mini)" not in printed
    assert "0.43" in printed and "not one of the paper's" in printed
    assert "Table 1 (not run here)" in (run / "eval" / "paper.md").read_text(encoding="utf-8")
    report_command(run, bootstrap=0, paper=True)
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "Beside the MADRAG paper" in page and "ProTACT" in page


def test_eval_paper_needs_a_run(asap: Path) -> None:
    with pytest.raises(InputError, match="--paper"):
        eval_command(data=asap / "training_set_rel3_sets7_8.tsv", rubric=asap / "rubric_set7.json", paper=True)


def test_each_protocol_is_matched_with_its_table() -> None:
    set7 = qwk_index("7", "gpt-4o-mini")
    assert set7["MADRAG", "Sty."].value == 0.47 and set7["MADRAG", "Sty."].table == "Table 1"
    assert set7["MADRAG[adv_r1]", "Sty."].value == 0.45 and set7["MADRAG[adv_r1]", "Sty."].table == "Table 7"
    assert set7["MADRAG[skp_r2]", "Cnv."].value == 0.01 and set7["SARAG", "Cnv."].table == "Table 9"
    assert set7["FeatEng-RF", "Sty."].value == 0.65 and set7[HH_FULL, "Idea"].value == 0.69
    set8 = qwk_index("8", "gpt-5")
    assert set8["MADRAG", "Word"].value == 0.32 and set8["MADRAG[both_r2]", "Word"].table == "Table 8"
    assert set8["MA", "Idea"].value == 0.47 and ("MADRAG[skponly_r1]", "Idea") not in set8  # no paper row


def test_the_coded_tables_agree_with_each_other() -> None:
    """Tables 3, 4, 10 and 11 count the same coded cases (4.4): each mechanism's total in Table 3 is its row sum in
    Tables 10 (C x D) and 11 (B x C) and its column sum in Table 4 (A x C); a transcription slip in any cell
    breaks this (the paper's one inconsistency is kept as printed)."""

    def counts(table: str) -> dict[tuple[str, str], float]:
        return {(f.row, f.trait): f.value for f in figures("madrag", table=table) if f.metric == "count"}

    table3, table4, table10, table11 = (counts(t) for t in ("Table 3", "Table 4", "Table 10", "Table 11"))
    for code in ("C1", "C2", "C3", "C4", "C5", "C6"):
        total = table3[code, "all"]
        assert sum(v for (r, _), v in table10.items() if r == code) == total
        # the paper's own slip, kept as printed: Table 11's C4 row (0, 7, 6; E.2's "46.2% within C4" is 6/13)
        # sums to 13 where Table 3 counts 12
        assert sum(v for (r, _), v in table11.items() if r == code) == total + (code == "C4")
        assert sum(v for (_, c), v in table4.items() if c == code) == total
    assert table3["C2", "all"] == 56 and table10["C6", "D3"] == 29 and table4["A1", "C6"] == 46
    percent = {(f.table, f.row, f.trait): f.value for f in figures("madrag") if f.metric == "percent"}
    assert percent["Table 3", "C6", "all"] == 26.9 and percent["Table 10", "C6", "D3"] == 63.0
    conventions = {(f.metric, f.trait): f.value for f in figures("madrag", table="Table 5") if f.row == "Conventions"}
    assert conventions == {("n", "all"): 49, ("count", "B0"): 6, ("count", "B1"): 41, ("count", "B2"): 2}
