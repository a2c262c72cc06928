"""``MTS[template=FILE]`` evaluated as its authors evaluate it (Lee et al. 2024; their code, github.com/sanwooo/
mts-llm-aes): their own 10% sample of ASAP, drawn over the eight prompts in order, is the min-max group and the
QWK's population, and madrag's QWK on it equals a port of their ``preprocess.py`` draw and ``postprocess.py``
(``EvaluatorMTS``: reading, mean, IQR clip, min-max, ``cal_qwk``) over the same scripted answers; every essay's
QWK is beside it, labelled. The ASAP essays and rater scores are madrag's shipped set 7; the template file is a
synthetic one of the authors' layout (tests/unit/protocols/test_mts_template.py)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import cohen_kappa_score
from tests.helpers import make_ctx
from tests.unit.protocols.test_cj_mts_papers import TEXT_ONLY
from tests.unit.protocols.test_mts_template import HOLISTIC, TRAITS, synthetic_template

from madrag.data.essay import Essay
from madrag.data.shipped import asap_data_file, shipped_essay_ids
from madrag.evaluation.agreement import all_essays, qwk_long
from madrag.evaluation.run import RunData
from madrag.pipeline.migrations import derive_scores
from madrag.protocols import get_protocol
from madrag.protocols.mts_authors import ASAP_SIZES, authors_sample
from madrag.providers.base import ChatRequest
from madrag.providers.fake import FakeProvider


def authors_test_ids(set_ids: dict[int, list[str]]) -> set[str]:
    """Ported from the authors' ``ASAP/preprocess.py`` (``sample_essay_ids_for_test_frac``, ``--sampling_frac
    0.1 --random_state 41``) over a frame of ASAP's prompts in file order: sets 1-6 (which madrag does not ship)
    as placeholder ids of their sizes, the others as given."""
    rows = [(f"set{p}-{i}", p) for p in range(1, 7) for i in range(ASAP_SIZES[p])]
    rows += [(e, p) for p, ids in sorted(set_ids.items()) for e in ids]
    temp = pd.DataFrame(rows, columns=["essay_id", "prompt_id"]).drop_duplicates(subset=["essay_id"])
    essay_ids = temp.groupby("prompt_id").sample(frac=0.1, replace=False, random_state=41)
    return set(essay_ids["essay_id"].to_numpy())


_AUTHORS_PATTERN = (
    r"[sS]core: \d+\.?\d*|score of \d+\.?\d*/?\d*\.?\d*|\d+\.?\d* out of \d+\.?\d*|as a \d+\.?\d*|at \d+\.?\d*"
    r"|Score: <score>\d+\.?\d*</score>"
)


def authors_parse(msg_assistant: str) -> float:
    """Ported from ``EvaluatorMTS.parse_msg_assistant`` with their 0..10 ``check_score``."""
    match = re.search(_AUTHORS_PATTERN, str(msg_assistant))
    if match is None:
        return np.nan
    found = re.search(r"\d+\.?\d*", match.group(0))
    assert found is not None
    score = float(found.group(0))
    return score if 0 <= score <= 10 else np.nan


def authors_qwk(df: pd.DataFrame, score_min: int, score_max: int) -> tuple[float, int]:
    """Ported from ``EvaluatorMTS.evaluate`` for one prompt: ``get_traits``, ``aggregate_traits('mean')``,
    ``map_score('minmax')`` with ``clip_outliers=True``, ``cal_qwk`` (NaN rows dropped, QWK over the score
    range, rounded to 3); (QWK, essays in it)."""
    traits = [df[f"msg_assistant_score_{i}"].map(authors_parse) for i in (1, 2, 3, 4)]
    score_agg = pd.Series([np.mean(t) for t in zip(*traits, strict=True)])
    q1, q3 = score_agg.quantile(0.25), score_agg.quantile(0.75)
    iqr, iqr_width = q3 - q1, 1.5
    score_agg = pd.Series(np.where(score_agg < (q1 - iqr * iqr_width), q1 - iqr * iqr_width, score_agg))
    score_agg = pd.Series(np.where(score_agg > (q3 + iqr * iqr_width), q3 + iqr * iqr_width, score_agg))
    scaled = (score_agg - score_agg.min()) / (score_agg.max() - score_agg.min()) * (score_max - score_min) + score_min
    pred = pd.Series([np.nan if np.isnan(x) else np.round(x).astype(int) for x in scaled])
    kept = pred.notna().to_numpy()
    y1, y2 = df["score"].to_numpy()[kept], pred.to_numpy()[kept].astype(int)
    labels = np.arange(score_min, score_max + 1)
    return round(cohen_kappa_score(y1, y2, weights="quadratic", labels=labels), 3), int(kept.sum())


def set7_holistic() -> pd.DataFrame:
    """Set 7's essays with the authors' holistic reference (``organize_dataset_and_template.py``: each rater's 2 x
    trait 1 + traits 2-4, the two raters summed: 0-30)."""
    frame = pd.read_csv(asap_data_file(), sep="\t", dtype={"essay_id": str}, keep_default_na=True)
    frame = frame[frame["essay_set"] == 7].copy()
    frame["score"] = sum(
        2 * frame[f"rater{r}_trait1"]
        + frame[f"rater{r}_trait2"]
        + frame[f"rater{r}_trait3"]
        + frame[f"rater{r}_trait4"]
        for r in (1, 2)
    ).astype(int)
    return frame[["essay_id", "score"]]


def test_the_authors_sample_is_their_draw_over_the_eight_asap_prompts() -> None:
    shipped = shipped_essay_ids()
    assert {p: len(ids) for p, ids in shipped.items()} == {7: ASAP_SIZES[7], 8: ASAP_SIZES[8]}
    theirs = authors_test_ids({7: shipped[7], 8: shipped[8]}) & set(shipped[7] + shipped[8])
    ours = authors_sample({7: shipped[7], 8: shipped[8]})
    assert ours[7] is not None and ours[8] is not None
    assert set(ours[7] | ours[8]) == theirs and (len(ours[7]), len(ours[8])) == (157, 72)
    # a fold of the run: the essays of it in their sample; prompt 3 given whole: its ids drawn in its turn
    part = authors_sample({7: shipped[7][::5]})[7]
    assert part == ours[7] & set(shipped[7][::5]) and part
    set3 = [str(100000 + i) for i in range(ASAP_SIZES[3])]
    whole = authors_sample({3: set3})[3]
    rows = [(f"x{p}-{i}", p) for p in (1, 2, 4, 5, 6, 7, 8) for i in range(ASAP_SIZES[p])] + [(e, 3) for e in set3]
    frame = pd.DataFrame(rows, columns=["essay_id", "prompt_id"])
    drawn = set(frame.groupby("prompt_id").sample(frac=0.1, random_state=41)["essay_id"])
    assert whole == {e for e in drawn if not e.startswith("x")} and len(whole) == 173
    assert authors_sample({3: set3[:100], 9: ["a"]}) == {3: None, 9: None}  # ids not known: no sample


def _answers(ids: list[str], reference: dict[str, int]) -> dict[tuple[str, str], str]:
    """Scripted score-turn answers: a 0-10 score in halves near the reference, in the authors' tag or another of
    their patterns; one unreadable and one outside 0..10 (NaN in their code)."""
    rng = np.random.default_rng(48)
    out = {}
    for e in ids:
        for t in TRAITS:
            value = float(np.clip(np.round((reference[e] / 3 + rng.normal(0, 1.5)) * 2) / 2, 0, 10)) + 0.0  # no -0
            out[(e, t)] = (
                f"Weighed.\nScore: <score>{value:g}</score>" if rng.random() < 0.8 else f"I rate it at {value:g}."
            )
    out[(ids[0], "Voice")] = "I cannot give this a number."
    out[(ids[1], "Order")] = "Score: <score>12</score>"
    return out


def test_mts_template_qwk_is_the_authors_on_their_sample(tmp_path: Path) -> None:
    frame = set7_holistic()
    reference = dict(zip(frame["essay_id"], frame["score"], strict=True))
    shipped = shipped_essay_ids()[7]
    sample = sorted(authors_test_ids({7: shipped, 8: shipped_essay_ids()[8]}) & set(shipped))
    outside = [e for e in shipped if e not in set(sample)][:40]
    ids = sample + outside
    answers = _answers(ids, reference)

    def script(request: ChatRequest) -> str:
        essay = re.search(r"ESSAY:\nEssay (\d+)", request.messages[1].content)
        trait = re.search(r'rate "(\w+)"', request.messages[0].content)
        assert essay is not None and trait is not None
        return answers[(essay.group(1), trait.group(1))] if request.round == 2 else '"a quote" - well written'

    ctx = make_ctx(tmp_path, FakeProvider(script=script, caps=TEXT_ONLY))
    protocol = get_protocol(f"MTS[template={synthetic_template(tmp_path / 'template.xlsx')}]")
    essays = [
        Essay(
            id=e,
            text=f"Essay {e}.",
            prompt="Write about patience.",
            essay_set=7,
            rater_scores={"Holistic": [reference[e]]},
        )
        for e in ids
    ]

    async def score_all() -> None:
        await asyncio.gather(*(protocol.score_essay(ctx, essay, HOLISTIC) for essay in essays))

    asyncio.run(score_all())
    scores = derive_scores(ctx.store, HOLISTIC, [protocol.name])  # type: ignore[arg-type]
    run = RunData(tmp_path, HOLISTIC, essays, scores, [protocol.name], None)
    notes: list[str] = []
    table = qwk_long(run, None, bootstrap=0, seed=0, notes=notes).set_index("protocol")

    df_test = pd.DataFrame({"essay_id": sample, "score": [reference[e] for e in sample]})
    for i, t in enumerate(TRAITS, start=1):
        df_test[f"msg_assistant_score_{i}"] = [answers[(e, t)] for e in sample]
    want, n = authors_qwk(df_test, 0, 30)
    mine = table.loc[protocol.name]
    assert 0 < want < 1 and round(float(mine["qwk"]), 3) == want and mine["n"] == n == len(sample) - 2
    assert mine["n_unusable"] == 2  # the unreadable and the out-of-range answers, counted, not imputed
    every = table.loc[all_essays(protocol.name)]
    assert every["n"] == len(ids) - 2 and every["qwk"] != mine["qwk"]
    assert any(f"{len(sample)} of the run's {len(ids)} essays" in note and protocol.name in note for note in notes)
