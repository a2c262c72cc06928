"""Evaluation tables, error export and HTML report on a small scripted run (6 essays x MAD, MADRAG)."""

from __future__ import annotations

import asyncio
import csv
import json
import math
import re
from pathlib import Path

import pytest
from click.testing import Result
from sklearn.metrics import cohen_kappa_score
from tests.helpers import StubBank, make_ctx

from madrag.agents.placeholders import placeholders
from madrag.data.essay import Essay
from madrag.errors import InputError
from madrag.evaluation.agreement import HH_EVAL, HH_FULL, evaluate, wide
from madrag.evaluation.report import write_report
from madrag.evaluation.tables import render_text, save
from madrag.paper.coding.errors_export import export_errors, mentions_placeholders
from madrag.pipeline.runner import run_scoring
from madrag.protocols import get_protocol
from madrag.providers.base import Capabilities, ChatRequest
from madrag.providers.fake import FakeProvider, FakeReply, request_role
from madrag.rubric import Rubric

TEXT_ONLY = Capabilities(logprobs=True, max_top_logprobs=20, seed=True)
TRAITS = ["Ideas", "Organization", "Style", "Conventions"]
# rater 1 / rater 2 per trait (set 7 scale 0-3), in TRAITS order
RATERS = {
    "e1": [(0, 0), (1, 2), (2, 2), (3, 2)],
    "e2": [(3, 3), (0, 3), (1, 1), (1, 2)],
    "e3": [(1, 2), (2, 2), (0, 1), (2, 2)],
    "e4": [(2, 2), (1, 1), (2, 3), (1, 1)],
    "e5": [(1, 1), (3, 2), (1, 2), (0, 1)],
    "e6": [(2, 3), (1, 2), (2, 2), (2, 3)],
}
SCRIPT_TAG = "<script>alert('x')</script>"
TEXTS = {
    "e1": "I waited in line at the store for an hour and kept calm.",
    "e2": "My brother learned patience fixing a bike with @PERSON1 in @LOCATION1.",
    "e3": "Patience is waiting without complaining, like at the doctor.",
    "e4": "When @CAPS1 and I fished all day we caught nothing but stayed patient.",
    "e5": f"The test was hard {SCRIPT_TAG} and @CAPS1 @CAPS2 told me to wait for @NUM1 minutes.",
    "e6": "Planting a garden taught me that good things take time to grow.",
}
# scores per protocol, essay, trait (None: the judge never gives a usable score)
PLAN: dict[str, dict[str, list[int | None]]] = {
    "MAD": {
        "e1": [1, 1, 2, 2],
        "e2": [2, 1, 1, 1],
        "e3": [None, 2, 1, 2],
        "e4": [2, 2, 2, 1],
        "e5": [1, 2, 1, 3],
        "e6": [2, 2, 1, 2],
    },
    "MADRAG": {
        "e1": [0, 0, 2, 3],
        "e2": [3, 2, 1, 1],
        "e3": [1, 2, 1, 2],
        "e4": [2, 1, 3, 3],
        "e5": [1, 3, 1, 0],
        "e6": [3, 1, 2, None],
    },
}


def _essay(eid: str) -> Essay:
    scores = {t: [float(a), float(b)] for t, (a, b) in zip(TRAITS, RATERS[eid], strict=True)}
    return Essay(id=eid, text=TEXTS[eid], essay_set=7, rater_scores=scores, rater_ids={t: [0, 1] for t in TRAITS})


def _pool() -> list[Essay]:
    return [
        Essay(id=f"p{s}", text=f"Pool essay number {s} about patience.", rater_scores={t: [s, s] for t in TRAITS})
        for s in range(4)
    ]


def _script(essays: list[Essay]) -> object:
    def script(request: ChatRequest) -> FakeReply:
        system, user = request.messages[0].content, request.messages[1].content
        role = request_role(request)
        if role == "advocate":
            return FakeReply(f"Advocate says: strong <b>voice</b>. {SCRIPT_TAG}")
        if role == "skeptic":
            return FakeReply("Skeptic says: thin details.")
        trait = re.search(r'trait "([^"]+)"', system + user)
        assert trait is not None
        essay = next(e for e in essays if e.text in user)
        protocol = "MADRAG" if "Scored example essays" in user else "MAD"
        score = PLAN[protocol][essay.id][TRAITS.index(trait.group(1))]
        if score is None:
            return FakeReply("I cannot decide.")
        return FakeReply(f"The @CAPS1 tokens look like errors {SCRIPT_TAG}.\nFinal score: {score}")

    return script


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, asap: Path, rubric7: Rubric) -> Path:
    folder = tmp_path_factory.mktemp("run")
    essays = [_essay(e) for e in RATERS]
    ctx = make_ctx(folder, FakeProvider(script=_script(essays), caps=TEXT_ONLY), StubBank(_pool()))  # type: ignore[arg-type]
    protocols = [get_protocol("MAD"), get_protocol("MADRAG")]
    ctx.store.add_essays(essays)
    config = {
        "data": str(asap / "training_set_rel3_sets7_8.tsv"),
        "rubric": rubric7.model_dump(mode="json"),
        "protocols": [p.describe() for p in protocols],
    }
    ctx.store.set_meta("config", config)
    asyncio.run(run_scoring(ctx, essays, rubric7, protocols))
    ctx.store.close()
    return folder


def _reference(eid: str, t: int) -> int:
    a, b = RATERS[eid][t]
    return math.floor((a + b) / 2 + 0.5)


def test_qwk_table_matches_sklearn_and_counts_unusable(run_dir: Path) -> None:
    ev = evaluate(run_dir, bootstrap=200, seed=1)
    table = wide(ev.qwk)
    assert list(table.index) == ["MAD", "MADRAG", HH_FULL, HH_EVAL]
    assert list(table.columns) == ["Idea", "Org.", "Sty.", "Cnv."]
    for protocol in ("MAD", "MADRAG"):
        for t, trait in enumerate(TRAITS):
            pairs = [(_reference(e, t), PLAN[protocol][e][t]) for e in RATERS if PLAN[protocol][e][t] is not None]
            ref, pred = zip(*pairs, strict=True)
            expected = cohen_kappa_score(ref, pred, weights="quadratic", labels=[0, 1, 2, 3])
            row = ev.qwk[(ev.qwk.protocol == protocol) & (ev.qwk.trait == trait)].iloc[0]
            assert row.qwk == pytest.approx(expected)
            assert row.n == len(pairs) and row.n_unusable == 6 - len(pairs) and row.n_missing == 0
            assert row.valid_rate == pytest.approx(len(pairs) / 6)
            assert row.ci_low <= row.ci_high
    hh = ev.qwk[(ev.qwk.protocol == HH_EVAL) & (ev.qwk.trait == "Ideas")].iloc[0]
    a, b = zip(*(RATERS[e][0] for e in RATERS), strict=True)
    assert hh.qwk == pytest.approx(cohen_kappa_score(a, b, weights="quadratic", labels=[0, 1, 2, 3]))
    full = ev.qwk[(ev.qwk.protocol == HH_FULL)].set_index("label").qwk
    assert round(float(round(full["Idea"], 3)), 2) == 0.69 and full["Org."] == pytest.approx(0.5763, abs=1e-4)
    assert ev.meta["n_essays_full_data"] == 1569


def test_extreme_subset_selects_min_or_max_instances(run_dir: Path) -> None:
    ev = evaluate(run_dir, bootstrap=0)
    ex = ev.extreme.set_index(["protocol", "trait"])
    # Ideas: e1 (0,0), e2 (3,3), e6 (2,3); Organization: e2 (0,3) conflict and e5 (3,2); Style: e3 (0,1),
    # e4 (2,3); Conventions: e1 (3,2), e5 (0,1), e6 (2,3)
    ideas = ex.loc[("MADRAG", "Ideas")]
    assert ideas.n == 3 and ideas.agree_at_1 == 1.0 and ideas.mae == 0.0
    org = ex.loc[("MAD", "Organization")]
    # MAD: e2 -> 1 against nearer extreme 0 (err 1), e5 -> 2 against 3 (err 1)
    assert org.n == 2 and org.n_conflict == 1 and org.mae == pytest.approx(1.0) and org.agree_at_1 == 1.0
    conv = ex.loc[("MADRAG", "Conventions")]
    # e1: 3 vs 3 (0); e5: 0 vs 0 (0); e6 unusable
    assert conv.n == 3 and conv.n_scored == 2 and conv.n_unusable == 1 and conv.mae == 0.0
    mad_ideas = ex.loc[("MAD", "Ideas")]
    # e1: 1 vs 0 (1); e2: 2 vs 3 (1); e6: 2 vs 3 (1)
    assert mad_ideas.n_scored == 3 and mad_ideas.mae == pytest.approx(1.0) and mad_ideas.agree_at_1 == 1.0
    pooled = ex.loc[("MADRAG", "all")]
    assert pooled.n == 3 + 2 + 2 + 3 and pooled.n_unusable == 1


def test_comparisons_and_saved_files(run_dir: Path, tmp_path: Path) -> None:
    ev = evaluate(run_dir, bootstrap=100, seed=3)
    cmp = ev.comparisons
    assert set(cmp.protocol) == {"MAD"} and set(cmp.baseline) == {"MADRAG"} and len(cmp) == 4
    row = cmp[cmp.trait == "Ideas"].iloc[0]
    assert row.n == 5 and row["diff"] == pytest.approx(row.qwk - row.qwk_baseline)
    paths = save(ev, tmp_path / "eval")
    names = {p.name for p in paths}
    assert {"qwk.csv", "qwk_table.csv", "extreme.csv", "comparisons.csv", "evaluation.json", "evaluation.md"} <= names
    payload = json.loads((tmp_path / "eval" / "evaluation.json").read_text())
    assert payload["meta"]["bootstrap"] == 100 and len(payload["qwk"]) == 4 * 4
    text = render_text(ev)
    assert "Idea" in text and "MADRAG" in text and "Agree@1" in text
    ev.qwk.loc[ev.qwk.protocol == "MAD", "protocol"] = "MADRAG[both_r1]"  # a name rich must not read as markup
    assert "MADRAG[both_r1]" in render_text(ev)
    assert "| MAD |" in (tmp_path / "eval" / "evaluation.md").read_text()
    with pytest.raises(InputError, match="baseline"):
        evaluate(run_dir, bootstrap=0, baseline="SA")


def test_missing_run_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no run"):
        evaluate(tmp_path / "nothing")
    assert not (tmp_path / "nothing").exists()


def _wrong_rows() -> set[tuple[str, str, str]]:
    """(essay, trait, protocols off by more than 1) of every essay-trait whose raters are within 1 point."""
    expected = set()
    for e in RATERS:
        for t, trait in enumerate(TRAITS):
            a, b = RATERS[e][t]
            if abs(a - b) > 1:
                continue
            off = [p for p in PLAN if PLAN[p][e][t] is not None and abs(PLAN[p][e][t] - (a + b) / 2) > 1]  # type: ignore[operator]
            if off:
                expected.add((e, trait, " ".join(off)))
    return expected


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_error_export_defaults_to_madrag_errors_as_seed_000(run_dir: Path, tmp_path: Path) -> None:
    # the MADRAG paper's 4.4: "We focus on rows where MADRAG is wrong (N=173)"
    result = export_errors(run_dir, tmp_path / "errors.csv")
    rows = _read(result.path)
    expected = {row for row in _wrong_rows() if "MADRAG" in row[2].split()}
    assert {(r["essay_id"], r["trait"], r["off_by_more_than_1"]) for r in rows} == expected
    assert result.focus == "MADRAG" and result.n_rows == len(expected) == 2
    assert {r["direction"] for r in rows} == {"MADRAG: A1 under-scoring", "MADRAG: A2 over-scoring"}
    assert "MADRAG off by more than 1" in result.rule and "any protocol" not in result.rule
    codebook = (tmp_path / "errors_codebook.md").read_text(encoding="utf-8")
    assert "MADRAG off by more than 1" in codebook and "ties half_up" in codebook
    for col in ("code_B_grounding (B0-B2)", "code_C_mechanism (C1-C6)", "code_D_component (D1-D4)", "memo"):
        assert all(r[col] == "" for r in rows)


def test_error_export_of_any_protocol_or_another_is_an_option(run_dir: Path, tmp_path: Path) -> None:
    result = export_errors(run_dir, tmp_path / "all.csv", focus="all")
    rows = _read(result.path)
    expected = _wrong_rows()
    assert {(r["essay_id"], r["trait"], r["off_by_more_than_1"]) for r in rows} == expected
    assert result.n_rows == len(expected) == 3 and result.focus == "all" and "any protocol" in result.rule
    row = next(r for r in rows if r["essay_id"] == "e5")
    assert row["n_placeholders"] == "3" and row["placeholder_kinds"] == "'@CAPS @NUM"  # @ starts a formula: as text
    assert row["MADRAG_mentions_placeholders"] == "True" and SCRIPT_TAG in row["essay_text"]
    assert "Advocate 1 (confidence 0.90)" in row["MADRAG_debate"] and "Skeptic 1" in row["MADRAG_debate"]
    mad = export_errors(run_dir, tmp_path / "mad.csv", focus="MAD")
    assert mad.n_rows == sum("MAD" in e[2].split() for e in expected) == 1
    with pytest.raises(InputError, match="'SA' is not in this run"):
        export_errors(run_dir, tmp_path / "sa.csv", focus="SA")


def _said(result: Result) -> str:
    """A command's output with the console's line wrapping undone."""
    return " ".join(result.output.split())


def test_errors_and_eval_commands_say_which_rows_and_which_tie_rule(run_dir: Path, tmp_path: Path) -> None:
    from typer import Typer
    from typer.testing import CliRunner

    from madrag.cli.evaluate import errors_command, eval_command

    app = Typer()
    app.command("errors")(errors_command)
    app.command("eval")(eval_command)
    runner = CliRunner()
    done = runner.invoke(app, ["errors", str(run_dir), "--out", str(tmp_path / "e.csv")])
    assert done.exit_code == 0, done.output
    assert "wrote 2 rows" in _said(done) and "MADRAG off by more than 1" in _said(done)
    assert "ties rounded half_up" in _said(done)
    done = runner.invoke(app, ["errors", str(run_dir), "--out", str(tmp_path / "a.csv"), "--protocol", "all"])
    assert done.exit_code == 0 and "wrote 3 rows" in _said(done) and "any protocol off by more than 1" in _said(done)
    args = ["errors", str(run_dir), "--out", str(tmp_path / "d.csv"), "--reference-ties", "half_down"]
    done = runner.invoke(app, args)
    assert done.exit_code == 0 and "ties rounded half_down" in _said(done)
    up = {r["essay_id"]: r["reference"] for r in _read(tmp_path / "e.csv")}
    down = {r["essay_id"]: r["reference"] for r in _read(tmp_path / "d.csv")}
    assert up == {"e1": "2", "e4": "1"} and down == {"e1": "1", "e4": "1"}  # e1 Organization: raters 1 and 2
    failed = runner.invoke(app, ["errors", str(run_dir), "--reference-ties", "nearest"])
    assert isinstance(failed.exception, InputError) and "half_even" in str(failed.exception)
    args = ["eval", str(run_dir), "--bootstrap", "0", "--out", str(tmp_path / "ev"), "--reference-ties", "half_even"]
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    assert "halves to the even score" in _said(done) and "exemplar labels were made with half_up" in _said(done)
    saved = json.loads((tmp_path / "ev" / "evaluation.json").read_text())
    assert saved["meta"]["reference_ties"] == "half_even"


def test_reference_ties_change_the_evaluated_references(run_dir: Path) -> None:
    for rule, rounded in (("half_up", lambda m: math.floor(m + 0.5)), ("half_down", lambda m: math.ceil(m - 0.5))):
        ev = evaluate(run_dir, bootstrap=0, ties=rule)  # type: ignore[arg-type]
        pairs = [(rounded(sum(RATERS[e][1]) / 2), PLAN["MAD"][e][1]) for e in RATERS]
        ref, pred = zip(*pairs, strict=True)
        row = ev.qwk[(ev.qwk.protocol == "MAD") & (ev.qwk.trait == "Organization")].iloc[0]
        assert row.qwk == pytest.approx(cohen_kappa_score(ref, pred, weights="quadratic", labels=[0, 1, 2, 3]))
    assert ev.meta["reference_ties"] == "half_down"


def test_placeholder_helpers() -> None:
    assert placeholders("Hi @CAPS1, meet @PERSON12 at @NUM3.") == ["@CAPS1", "@PERSON12", "@NUM3"]
    assert mentions_placeholders("The CAPS1 token is capitalised wrongly")
    assert mentions_placeholders("ignores the anonymization markers")
    assert not mentions_placeholders("Clear ideas, few errors.")


def test_report_is_self_contained_and_escaped(run_dir: Path) -> None:
    path = write_report(run_dir, bootstrap=50)
    html = path.read_text(encoding="utf-8")
    assert path == run_dir / "report.html"
    assert html.count("data:image/png;base64,") >= 4
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "&lt;b&gt;voice&lt;/b&gt;" in html
    assert html.count("<details") >= 6 and "Pool essay number 3" in html
    assert "Advocate" in html and "Skeptic" in html and "confidence 0.90" in html


def test_command_functions_register_in_typer(run_dir: Path, asap: Path, tmp_path: Path) -> None:
    from typer import Typer
    from typer.testing import CliRunner

    from madrag.cli.evaluate import errors_command, eval_command, report_command

    app = Typer()
    app.command("eval")(eval_command)
    app.command("errors")(errors_command)
    app.command("report")(report_command)
    runner = CliRunner()
    done = runner.invoke(app, ["eval", "--run-dir", str(run_dir), "--bootstrap", "20", "--out", str(tmp_path / "ev")])
    assert done.exit_code == 0, done.output
    assert "MADRAG" in done.output and "Agree@1" in done.output and (tmp_path / "ev" / "qwk.csv").is_file()
    tsv, rubric8 = asap / "training_set_rel3_sets7_8.tsv", asap / "rubric_set8.json"
    done = runner.invoke(app, ["eval", "--data", str(tsv), "--rubric", str(rubric8), "--bootstrap", "0"])
    assert done.exit_code == 0, done.output
    assert "0.531" in done.output and "Voc." in done.output
    done = runner.invoke(app, ["errors", "--run-dir", str(run_dir), "--out", str(tmp_path / "e.csv")])
    assert done.exit_code == 0 and (tmp_path / "e.csv").is_file()
    done = runner.invoke(
        app, ["report", "--run-dir", str(run_dir), "--bootstrap", "0", "--out", str(tmp_path / "r.html")]
    )
    assert done.exit_code == 0 and (tmp_path / "r.html").is_file()
    for args in (["report", "--run-dir", str(tmp_path / "none")], ["eval"], ["errors"]):
        failed = runner.invoke(app, args)
        assert isinstance(failed.exception, InputError), args
    failed = runner.invoke(app, ["eval", "--run-dir", str(run_dir), "--rubric", str(rubric8)])
    assert isinstance(failed.exception, InputError)


def test_wide_layout_keeps_order_and_never_merges_traits() -> None:
    import pandas as pd

    long = pd.DataFrame(
        {"protocol": ["B", "B", "A", "A"], "trait": ["Ideas", "Ideas and Content"] * 2, "qwk": [0.1, 0.2, 0.3, 0.4]}
    )
    table = wide(long)
    assert list(table.index) == ["B", "A"] and list(table.columns) == ["Ideas", "Ideas and Content"]
    assert table.loc["A", "Ideas and Content"] == 0.4
    assert list(wide(long[long.trait == "Ideas"]).columns) == ["Idea"]


def test_table_cells_never_show_negative_zero() -> None:
    from madrag.evaluation.tables import fmt

    assert fmt(-1e-17, 3) == "0.000" and fmt(-0.25, 3) == "-0.250" and fmt(float("nan")) == "—" and fmt(None) == "—"
