"""CJ (Bradley-Terry over comparisons in both orders) and MTS (the authors' post-processing) on scripted answers,
checked against the outside definitions: the ``choix`` package's Bradley-Terry fit and the MTS authors' own
post-processing code."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import numpy as np
import pytest
from tests.helpers import StubBank, earlier_derived_record, make_ctx

from madrag.data.essay import Essay
from madrag.pipeline.migrations import derive_scores
from madrag.protocols import get_protocol
from madrag.protocols.bradley_terry import fit_strengths, score_at
from madrag.protocols.cj import CJProtocol, parse_choice
from madrag.protocols.mts import MTSProtocol
from madrag.protocols.mts_authors import numpy_round, scale_over_essays
from madrag.providers.base import Capabilities, ChatRequest
from madrag.providers.fake import FakeProvider
from madrag.retrieval.bank import Exemplar
from madrag.rubric import Rubric, Trait
from madrag.store import RunStore

IDEAS = Trait(
    name="Ideas",
    min=0,
    max=3,
    levels={0: "Ideas are not focused.", 1: "Ideas are minimal.", 2: "Ideas are developed.", 3: "Ideas are rich."},
)
RUBRIC = Rubric(traits=[IDEAS])
POOL = [Essay(id=f"p{s}", text=f"Anchor essay of level {s}.", rater_scores={"Ideas": [float(s)]}) for s in range(4)]
TEXT_ONLY = Capabilities(logprobs=False, prefill=False, choices=False, seed=True)


# -- Bradley-Terry -------------------------------------------------------------------------------------------


def test_the_fit_is_choix_opt_pairwise_on_the_same_data_and_prior() -> None:
    choix = pytest.importorskip("choix")
    data = [(0, 1), (0, 1), (1, 0), (1, 2), (2, 1), (1, 2), (0, 2), (3, 0), (2, 3), (3, 1)]
    ours = fit_strengths(4, data, alpha=0.05)
    theirs = choix.opt_pairwise(4, data, alpha=0.05, method="BFGS")
    assert np.allclose(ours, theirs, atol=1e-4)


def test_the_fit_recovers_the_probabilities_it_was_given() -> None:
    # item 0 beats item 1 in 3 of 4 comparisons: P = e^(l0-l1)/(1+e^(l0-l1)) = 0.75 at the (almost unpenalised) MLE
    found = fit_strengths(2, [(0, 1)] * 300 + [(1, 0)] * 100, alpha=1e-6)
    assert 1.0 / (1.0 + np.exp(found[1] - found[0])) == pytest.approx(0.75, abs=1e-3)
    assert score_at(0.5, [0.0, 1.0], [1.0, 3.0]) == pytest.approx(2.0)
    assert score_at(0.5, [1.0, 1.0], [1.0, 3.0]) is None  # anchors of one strength: no line


def test_a_choice_is_read_from_the_last_answer_line_and_a_tie_is_not_a_choice() -> None:
    assert parse_choice("A is vivid.\nAnswer: A") == "A"
    assert parse_choice("**Answer:** B") == "B"
    assert parse_choice("Answer: B\nOn reflection...\nAnswer: A") == "A"
    assert parse_choice("Answer: tie") is None
    assert parse_choice("Essay A is better.") is None


# -- CJ on scripted comparisons ------------------------------------------------------------------------------

ESSAYS = [Essay(id=f"q{n}", text=f"Query essay of true level {n}.", prompt="Write about patience.") for n in range(4)]


def _level(text: str, which: str) -> int:
    found = re.search(rf"Essay {which}:\n<<<\n(?:Query|Anchor) essay of (?:true )?level (\d)", text)
    assert found is not None
    return int(found.group(1))


def _biased(request: ChatRequest) -> str:
    """A judge that sees the true levels but prefers whichever essay is shown first unless the other is at
    least two levels better (a strong position bias)."""
    text = request.messages[-1].content
    a, b = _level(text, "A"), _level(text, "B")
    return f"Weighed.\nAnswer: {'B' if b - a >= 2 else 'A'}"


def _score_all(tmp_path: Path, script: object, protocol: CJProtocol) -> tuple[list[int | None], RunStore]:
    ctx = make_ctx(tmp_path, FakeProvider(script=script), bank=StubBank(POOL))  # type: ignore[arg-type]
    for essay in ESSAYS:
        asyncio.run(protocol.score_essay(ctx, essay, RUBRIC))
    store = ctx.store
    assert isinstance(store, RunStore)
    read = {s.essay_id: s.score for s in derive_scores(store, RUBRIC, [protocol.name])}
    return [read[e.id] for e in ESSAYS], store


def test_cj_asks_each_pair_in_both_orders_and_the_swap_cancels_a_position_bias(tmp_path: Path) -> None:
    scores, store = _score_all(tmp_path, _biased, CJProtocol())
    compares = list(store.records(role="compare"))
    assert len(compares) == 4 * 4 * 2  # 4 essays x 4 anchors x both orders
    assert {(r.round, r.context["essay_position"]) for r in compares} == {(1, "A"), (2, "B")}
    # the bias is measured: q0 (vs p0..p3) chose the first essay in 6 of its 8 comparisons (not when p2/p3 was B)
    (q0,) = [r for r in store.records(role="compared") if r.essay_id == "q0"]
    assert q0.context["chose_first"] == 6 and q0.context["n_usable"] == 8
    # Every essay-anchor pair one level apart or equal is split 1-1 by the bias (each wins when shown first),
    # two or more apart the better one wins both: essay q_n has exactly anchor p_n's record, so the fit gives
    # them one strength (the fit is unique) and the essay is read at its own level's anchor on the line.
    assert scores == [0, 1, 2, 3]
    fine = {s.essay_id: s.mean_score for s in derive_scores(store, RUBRIC, ["CJ"])}
    assert all(abs(fine[f"q{n}"] - n) < 0.5 for n in range(4))  # type: ignore[operator]
    store.close()


def test_the_order_swap_is_what_cancels_the_bias(tmp_path: Path) -> None:
    """The same judge asked only with the essay first (as madrag's earlier CJ did) ranks every essay alike
    against its near anchors: its comparisons alone place the essays differently."""
    from madrag.protocols.bradley_terry import fit_strengths as fit

    ids = ["q0", "q1", "q2", "q3", "p0", "p1", "p2", "p3"]
    pairs = []
    for n in range(4):
        for s in range(4):
            win = f"q{n}" if not (s - n >= 2) else f"p{s}"  # the essay always shown as A
            pairs.append((ids.index(win), ids.index(f"p{s}" if win.startswith("q") else f"q{n}")))
    one_order = fit(8, pairs)
    anchors = [float(one_order[4 + s]) for s in range(4)]
    biased = [score_at(float(one_order[n]), anchors, [0, 1, 2, 3]) for n in range(4)]
    assert biased[0] is not None and biased[0] > 1.0  # the weakest essay is read above level 1 without the swap


def test_cj_resumes_an_interrupted_run(tmp_path: Path) -> None:
    """Issue 32: a CJ run stopped mid-trait then run again finished, instead of failing on every rerun. A resumed
    CJ job has work left until its fit over the run is kept as its rows, and then none."""
    from madrag.pipeline.final_scores import keep_over_run
    from madrag.pipeline.resume import stored_scores

    ctx = make_ctx(tmp_path, FakeProvider(script=_biased), bank=StubBank(POOL))
    asyncio.run(CJProtocol().score_essay(ctx, ESSAYS[0], RUBRIC))
    store = ctx.store
    assert isinstance(store, RunStore)
    # interrupted mid-trait on essay q1: two of its comparisons stored, no "compared" record
    partial = make_ctx(tmp_path / "partial", FakeProvider(script=_biased), bank=StubBank(POOL))
    asyncio.run(CJProtocol().score_essay(partial, ESSAYS[1], RUBRIC))
    for record in list(partial.store.records(role="compare"))[:2]:  # type: ignore[union-attr]
        store.put(record)

    def check() -> object:
        return stored_scores(store, ESSAYS[:2], RUBRIC, [CJProtocol()], ctx.settings)

    assert check() is None  # work left: the rerun goes on to score
    again = make_ctx(tmp_path / "again", FakeProvider(script=_biased), bank=StubBank(POOL))
    again.store = store
    asyncio.run(CJProtocol().score_essay(again, ESSAYS[1], RUBRIC))
    assert again.stats.made == 8 - 2  # only the comparisons not stored yet
    assert check() is None  # the fit over the run is kept when the job ends
    keep_over_run([], store, [CJProtocol()], RUBRIC, {e.id for e in ESSAYS[:2]})
    assert check() is not None  # finished: nothing left
    store.close()


def test_cj_options_and_cj_f() -> None:
    from madrag.errors import ConfigError

    assert get_protocol("CJ").describe()["orders"] == "both" and get_protocol("CJ").describe()["ties"] is False
    assert get_protocol("CJ").describe()["comparisons"] == 1
    assert get_protocol("CJ_F").describe()["rubric"] == "elaborated"
    assert get_protocol("CJ[anchors=medoid]").describe()["anchors"] == "medoid"
    both = get_protocol("CJ_F[comparisons=3,anchors=similar]").describe()
    assert (both["comparisons"], both["anchors"], both["rubric"]) == (3, "similar", "elaborated")
    for bad, message in [
        ("CJ[anchors=best]", "unknown CJ anchors 'best'"),
        ("CJ[rule=count]", "unknown CJ option 'rule'"),
        ("CJ[comparisons=0]", "CJ comparisons must be a whole number"),
        ("CJ[comparisons=2,anchors=medoid]", "needs anchors=similar"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            get_protocol(bad)


class RankedBank(StubBank):
    """A bank whose ``similar`` gives the whole pool, nearest first, with each essay's trait score."""

    def similar(self, essay: Essay, k: int) -> list[Exemplar]:
        """The pool (never ``essay``) in its order, with its Ideas scores."""
        return [
            Exemplar(
                essay_id=e.id, text=e.text, scores={"Ideas": int(e.reference(IDEAS) or 0)}, distance=0.1, similarity=0.9
            )
            for e in self.pool[:k]
            if e.id != essay.id
        ]


def test_cj_comparisons_n_compares_with_the_n_nearest_of_each_level(tmp_path: Path) -> None:
    pool = [
        *POOL,
        *(Essay(id=f"r{s}", text=f"Anchor essay of level {s}.", rater_scores={"Ideas": [float(s)]}) for s in range(4)),
    ]
    provider = FakeProvider(script=_biased)
    ctx = make_ctx(tmp_path, provider, bank=RankedBank(pool))
    protocol = get_protocol("CJ[comparisons=2]")
    for essay in ESSAYS:
        asyncio.run(protocol.score_essay(ctx, essay, RUBRIC))
    store = ctx.store
    assert isinstance(store, RunStore)
    q0 = [r for r in store.records(role="compare") if r.essay_id == "q0"]
    assert len(q0) == 4 * 2 * 2  # 4 levels x 2 anchors x both orders
    assert {(r.index, r.context["anchor"]) for r in q0 if r.round == 1} == {
        *((s, f"p{s}") for s in range(4)),
        *((s + 1000, f"r{s}") for s in range(4)),
    }
    read = {s.essay_id: s.score for s in derive_scores(store, RUBRIC, ["CJ[comparisons=2]"])}
    assert [read[e.id] for e in ESSAYS] == [0, 1, 2, 3]  # each level's two anchors share its record: same line
    store.close()


def test_cj_prompts_carry_the_anonymization_note_and_cj_f_the_elaborated_rubric(tmp_path: Path) -> None:
    provider = FakeProvider(script=_biased)
    ctx = make_ctx(tmp_path, provider, bank=StubBank(POOL))
    asyncio.run(CJProtocol("CJ_F", fine=True).score_essay(ctx, ESSAYS[0], RUBRIC))
    assert all(r.messages[0].content.rstrip().endswith(_anon_note_tail()) for r in provider.calls)
    assert "Ideas are minimal." in provider.calls[0].messages[-1].content  # every level's description
    basic = FakeProvider(script=_biased)
    ctx = make_ctx(tmp_path / "b", basic, bank=StubBank(POOL))
    asyncio.run(CJProtocol().score_essay(ctx, ESSAYS[0], RUBRIC))
    assert "Ideas are minimal." not in basic.calls[0].messages[-1].content  # the basic rubric: the top level


def _anon_note_tail() -> str:
    from madrag.agents.prompts import PromptLibrary

    return PromptLibrary().render("anon_note").rstrip()[-60:]


# -- MTS: the authors' post-processing -----------------------------------------------------------------------


def authors_minmax(score_agg: list[float], score_min: int, score_max: int) -> list[float]:
    """Ported from the MTS authors' code, github.com/sanwooo/mts-llm-aes, ``ASAP/postprocess.py``,
    ``Evaluator.map_score`` (mode ``minmax``, ``clip_outliers=True``) on one prompt's group, then
    ``score_pred`` (``np.round(x).astype(int)``). pandas as they use it."""
    import pandas as pd

    agg = pd.Series(score_agg)
    q1 = agg.quantile(0.25)
    q3 = agg.quantile(0.75)
    iqr = q3 - q1
    iqr_width = 1.5
    agg = pd.Series(np.where(agg < (q1 - iqr * iqr_width), q1 - iqr * iqr_width, agg))
    agg = pd.Series(np.where(agg > (q3 + iqr * iqr_width), q3 + iqr * iqr_width, agg))
    scaled_0_1 = (agg - agg.min()) / (agg.max() - agg.min())
    target = scaled_0_1 * (score_max - score_min) + score_min
    return [float(np.round(x).astype(int)) for x in target]


def test_scale_over_essays_is_the_authors_post_processing() -> None:
    raw = [7.0, 8.0, 6.0, 7.0, 0.0, 9.0, 8.0, 5.0, 10.0, 7.0]  # 0 is an outlier below Q1 - 1.5 IQR
    ours = [numpy_round(v) for v in scale_over_essays(raw, 0, 3) if v is not None]
    assert ours == authors_minmax(raw, 0, 3)
    # by hand: Q1 = 6.25, Q3 = 8 (linear interpolation), IQR 1.75, so 0 is clipped to the fence 3.625, the
    # minimum; 10 the maximum; 5 -> (5 - 3.625) / 6.375 * 3 = 0.65 -> 1, 9 -> 2.53 -> 3
    assert ours == [2, 2, 1, 2, 0, 3, 2, 1, 3, 2]
    assert scale_over_essays([5.0, None, 5.0], 0, 3) == [None, None, None]  # no range: all missing
    assert scale_over_essays([2.0, None, 8.0], 0, 3) == [0.0, None, 3.0]  # an unread score stays missing


def test_mts_scores_quotes_then_0_to_10_and_scales_over_the_run(tmp_path: Path) -> None:
    """The authors' turns on a rubric trait: quotations judged well written or not, then a 0-10 score in their
    ``Score: <score>...</score>`` format read with its decimals, sampled at 0.1; the scores scaled over the run
    exactly as their post-processing does."""
    raw = {"q0": 2.5, "q1": 9.0, "q2": 5.0, "q3": 6.5}
    essays = [Essay(id=k, text=f"Essay {k} about waiting.", prompt="Write about patience.") for k in raw]

    def script(request: ChatRequest) -> str:
        if request.role == "mts" and request.round == 2:
            essay = re.search(r"Essay (q\d) about", request.messages[1].content)
            assert essay is not None
            return f"Fits the criteria partly.\nScore: <score>{raw[essay.group(1)]}</score>"
        return '"Essay about waiting." - well written: yes'

    provider = FakeProvider(script=script, caps=TEXT_ONLY)
    ctx = make_ctx(tmp_path, provider)
    for essay in essays:
        (provisional,) = asyncio.run(MTSProtocol().score_essay(ctx, essay, RUBRIC))
        assert provisional.score is None  # final only over the run
    first, second = provider.calls[0], provider.calls[1]
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "user"]
    assert "List the quotations" in first.messages[-1].content
    assert "evaluate whether each quotation is well written or not" in first.messages[-1].content
    assert "from 0 to 10" in second.messages[-1].content and "Score: <score>" in second.messages[-1].content
    assert first.temperature == second.temperature == 0.1  # the authors' sampling
    assert first.messages[0].content.rstrip().endswith(_anon_note_tail())
    # the rubric's criteria, highest first, each in its band of the 0-10 scale asked for (the authors' bands)
    assert "- 9-10: Ideas are rich.\n- 6-8: Ideas are developed.\n- 3-5: Ideas are minimal.\n- 0-2: Ideas are not" in (
        first.messages[0].content
    )
    read = {s.essay_id: s for s in derive_scores(ctx.store, RUBRIC, ["MTS"])}  # type: ignore[arg-type]
    want = authors_minmax(list(raw.values()), 0, 3)
    assert [read[k].score for k in raw] == want == [0, 3, 1, 2]
    assert read["q0"].mean_score == 0.0 and read["q3"].mean_score == pytest.approx((6.5 - 2.5) / 6.5 * 3)


def test_mts_reading_integer_keeps_madrags_final_score_line_at_the_judges_temperature(tmp_path: Path) -> None:
    answers = {"q0": "Final score: 3", "q1": "Final score: 8"}

    def script(request: ChatRequest) -> str:
        if request.round == 2:
            found = re.search(r"Essay (q\d)", request.messages[1].content)
            assert found is not None
            return "Partly.\n" + answers[found.group(1)]
        return '"quote"'

    provider = FakeProvider(script=script, caps=TEXT_ONLY)
    ctx = make_ctx(tmp_path, provider)
    protocol = get_protocol("MTS[reading=integer]")
    for key in answers:
        asyncio.run(protocol.score_essay(ctx, Essay(id=key, text=f"Essay {key}."), RUBRIC))
    score_turn = provider.calls[1]
    assert "Final score: N" in score_turn.messages[-1].content and "<score>" not in score_turn.messages[-1].content
    assert score_turn.temperature == 0.0  # the Judge's, as madrag sampled MTS before
    assert protocol.describe()["reading"] == "integer_as_judge" and get_protocol("MTS").describe()["reading"] == (
        "first_match_decimal"
    )
    read = {s.essay_id: s.score for s in derive_scores(ctx.store, RUBRIC, ["MTS[reading=integer]"])}  # type: ignore[arg-type]
    assert read == {"q0": 0, "q1": 3}


def test_mts_variant_madrag_v1_is_kept_and_named() -> None:
    old = get_protocol("MTS[variant=madrag-v1]")
    assert old.describe()["variant"] == "madrag-v1" and get_protocol("MTS").describe()["variant"] == "authors"


def test_runs_of_the_earlier_cj_and_mts_are_read_as_they_were(tmp_path: Path) -> None:
    """A run made by madrag's earlier CJ or MTS stored a derived Judge record per score under the name ``CJ`` /
    ``MTS``: it is read from there, unchanged (by madrag.pipeline.migrations.scores)."""
    from madrag.protocols.mts_v1 import MTSv1Protocol
    from madrag.records import AgentRecord, ScoreResult

    answers = iter(["Final score: 7", "Final score: 10", "Final score: 4"])
    ctx = make_ctx(tmp_path, FakeProvider(script=lambda r: next(answers), caps=TEXT_ONLY))
    (old,) = asyncio.run(MTSv1Protocol("MTS").score_essay(ctx, ESSAYS[0], RUBRIC))
    store = ctx.store
    assert isinstance(store, RunStore)
    turns = list(store.records(protocol="MTS", role="mts"))  # the earlier MTS kept its score as a derived record
    store.put(earlier_derived_record(ctx, "MTS", "q0", "Ideas", old.result, old.rationale, {"n_usable": 3}, turns))
    old_cj = ScoreResult(parsed=1, reported=1, mode="parsed_text")
    store.put(
        AgentRecord(run_id="r", key="cj", essay_id="q0", trait="Ideas", protocol="CJ", role="judge", score=old_cj)
    )
    read = {s.protocol: s.score for s in derive_scores(store, RUBRIC, ["MTS", "CJ"])}
    assert read == {"MTS": old.score, "CJ": 1} and old.score == 2
    # read by the migrations, also at a resumed job's end (keep_over_run): the protocols know only today's records
    from madrag.pipeline.migrations.scores import protocol_scores

    for name, score in (("MTS", 2), ("CJ", 1)):
        assert [s.score for s in protocol_scores(get_protocol(name), store, RUBRIC)] == [score]
    assert get_protocol("CJ").read_scores(store, RUBRIC) == []
    store.close()
