"""What the MTS authors' code does around the model (Lee et al. 2024, "Unleashing Large Language Models'
Proficiency in Zero-shot Essay Scoring"; their repository sanwooo/mts-llm-aes), written for madrag from a reading
of it, shared by madrag's MTS per rubric trait (:mod:`madrag.protocols.mts`) and the authors' own traits
(:mod:`madrag.protocols.mts_template`):

* their sampling (:data:`TEMPERATURE`, :data:`REPETITION_PENALTY`, :data:`MAX_NEW_TOKENS`);
* their reading of a 0-10 trait score (:func:`read_score`): the first of their answer patterns found in the
  answer, the number in it kept as a decimal, missing outside 0..10;
* their essay cleanup (:func:`clean_essay`);
* their test sample (:func:`authors_sample`): per prompt, 10% of its essays drawn by one numpy
  ``RandomState(41)`` over ASAP's eight prompts in order, as pandas' ``groupby("prompt_id").sample(frac=0.1,
  random_state=41)`` draws them (:func:`sample_positions`), so the very essays they scored;
* the score turn's two output formats (:data:`TAG_FORMAT`, theirs; :data:`LINE_FORMAT`, madrag's
  ``Final score: N``) and the 0-10 bands their criteria are written in (:func:`bands`).

A score turn's record keeps the decimal score in ``context["score_0_10"]`` (None when unreadable, with the
record's ``error`` saying why): the run's integer ``ScoreResult`` cannot hold 7.5.

Attribution: the steps above are ported from the authors' ``ASAP/preprocess.py`` (``sample_essay_ids_for_test_frac``),
``ASAP/organize_dataset_and_template.py`` (``reformat_essay``) and ``ASAP/postprocess.py`` (``EvaluatorMTS``,
``Evaluator.map_score``), reimplemented rather than copied: their repository states no licence.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from madrag.agents.calls import AgentCall, CallContext
from madrag.data.shipped import shipped_essay_ids
from madrag.protocols.per_trait import read_answer
from madrag.protocols.scores import TraitScore
from madrag.records import AgentRecord, ScoreResult

TEMPERATURE = 0.1
"""The authors' sampling temperature (``GenerationConfig(do_sample=True, temperature=0.1)``)."""
REPETITION_PENALTY = 1.1
"""The authors' repetition penalty; no madrag backend takes one today, so it is recorded as not sent."""
MAX_NEW_TOKENS = 1024
"""The authors' ``max_new_tokens`` (madrag's ``--judge-max-tokens`` default is the same)."""
SCALE = (0, 10)
"""The scale of a trait score (the authors' ``check_score``)."""
IQR_WIDTH = 1.5
"""The authors' ``iqr_width``: values beyond 1.5 IQR outside the quartiles are clipped to the fence."""
SAMPLE_FRACTION = 0.1
"""The share of each prompt's essays the authors score (``preprocess.py --sampling_frac``)."""
SAMPLE_SEED = 41
"""The authors' ``--random_state``."""
ASAP_SIZES: dict[int, int] = {1: 1783, 2: 1800, 3: 1726, 4: 1770, 5: 1805, 6: 1800, 7: 1569, 8: 723}
"""Essays per prompt of ASAP's ``training_set_rel3`` (12,976), the file the authors' ``dataset.xlsx`` is made of, a
row per essay in essay-id order: the group sizes their draw runs over. Sets 7 and 8 are counted in madrag's
shipped copy (checked by the tests); sets 1-6, which madrag does not ship, as the ASAP literature counts them
(e.g. Taghipour and Ng 2016, Table 1)."""
SHIPPED_SETS = (7, 8)
"""The ASAP prompts whose essay ids madrag ships (:func:`madrag.data.shipped.shipped_essay_ids`)."""

TAG_FORMAT = (
    "[Output Format]\nScore: <score>insert ONLY the numeric score (from 0 to 10) here</score>\n(End of [Output Format])"
)
"""The score turn's output format the authors ask for."""
LINE_FORMAT = (
    "End your answer with one final line of the form:\nFinal score: N\nwhere N is an integer between 0 and 10."
)
"""madrag's integer line (``MTS[reading=integer]``), read as the Judge's score is."""

_NUMBER = r"\d+\.?\d*"
_ANSWER = re.compile(
    "|".join(
        (
            rf"[sS]core: {_NUMBER}",  # Score: 7
            rf"score of {_NUMBER}/?\d*\.?\d*",  # a score of 7/10
            rf"{_NUMBER} out of {_NUMBER}",  # 7 out of 10
            rf"as a {_NUMBER}",
            rf"at {_NUMBER}",
            rf"Score: <score>{_NUMBER}</score>",  # the format asked for
        )
    )
)
_FIRST_NUMBER = re.compile(_NUMBER)

_ENTITY = re.compile(r"@(PERSON|ORGANIZATION|LOCATION|DATE|TIME|MONEY|PERCENT|MONTH|EMAIL|NUM|CAPS|DR|CITY|STATE)\d+")
_URL = re.compile(r"(?:https?://)?(?:www\.)?[a-zA-Z0-9]+\.(?:com(?:\.cn)?|org)")
_RUNS = ((re.compile(r"\.{3,}(?:\s+\.{3,})*"), "..."), (re.compile(r"\?{2,}(?:\s+\?{2,})*"), "?"))
_BANGS = (re.compile(r"!{2,}(?:\s+!{2,})*"), "!")


def read_score(text: str) -> tuple[float | None, str | None]:
    """(the 0-10 score, None) the authors read from an answer, or (None, why): the leftmost place where one of
    their patterns matches (``Score: 7``, ``score of 7/10``, ``7 out of 10``, ``as a 7``, ``at 7``, ``Score:
    <score>7</score>``), its first number as a decimal, missing when it is outside 0..10."""
    found = _ANSWER.search(text)
    if found is None:
        return None, "unusable score: no 0-10 score in the answer"
    number = _FIRST_NUMBER.search(found.group(0))
    assert number is not None  # every pattern holds a number
    value = float(number.group(0))
    if not SCALE[0] <= value <= SCALE[1]:
        return None, f"unusable score: score {value:g} outside 0..10 (got {found.group(0)!r})"
    return value, None


def clean_essay(text: str) -> str:
    """The essay as the authors show it: stripped, ``@PERSON1``-style placeholders as ``{PERSON}``, web
    addresses as ``<url>``, runs of ``...`` as one ``...`` and of ``??`` / ``!!`` as one mark."""
    out = _ENTITY.sub(lambda m: "{" + m.group(1) + "}", text.strip())
    out = _URL.sub("<url>", out)
    for pattern, repl in (*_RUNS, _BANGS):
        out = pattern.sub(repl, out)
    return out


def bands(levels: Sequence[int], scale: tuple[int, int] = SCALE) -> dict[int, tuple[int, int]]:
    """Each level of a trait (lowest first) -> its band of the 0-10 scale: the scale's integers split in order
    into as many runs as levels, the longer runs first (four levels: 0-2, 3-5, 6-8, 9-10, the authors' bands)."""
    ordered = sorted(levels)
    points = list(range(scale[0], scale[1] + 1))
    size, extra = divmod(len(points), len(ordered))
    out: dict[int, tuple[int, int]] = {}
    start = 0
    for i, level in enumerate(ordered):
        width = size + (1 if i < extra else 0)
        out[level] = (points[start], points[start + width - 1])
        start += width
    return out


@dataclass(frozen=True)
class MinMax:
    """The authors' min-max fitted on a group's mean scores: the IQR fences and the clipped values' extremes."""

    low: float
    high: float
    least: float
    most: float

    def scale(self, value: float, lo: int, hi: int) -> float:
        """``value`` clipped to the fences, min-max scaled to ``lo..hi`` (clamped there: a value of an essay outside
        the group can fall beyond the group's extremes)."""
        clipped = min(max(value, self.low), self.high)
        return min(max((clipped - self.least) / (self.most - self.least) * (hi - lo) + lo, lo), hi)


def fit_minmax(means: Iterable[float | None]) -> MinMax | None:
    """The authors' ``map_score(mode='minmax')`` with ``clip_outliers=True`` fitted on a group's mean trait scores
    (quartiles interpolated linearly, as pandas' ``quantile``; None left out, as pandas leaves out NaN); None
    when the clipped values do not vary (the authors' 0/0)."""
    usable = np.array([m for m in means if m is not None], dtype=np.float64)
    if usable.size == 0:
        return None
    q1, q3 = float(np.quantile(usable, 0.25)), float(np.quantile(usable, 0.75))
    low, high = q1 - (q3 - q1) * IQR_WIDTH, q3 + (q3 - q1) * IQR_WIDTH
    clipped = np.clip(usable, low, high)
    least, most = float(clipped.min()), float(clipped.max())
    return None if most == least else MinMax(low, high, least, most)


def scale_over_essays(means: Sequence[float | None], lo: int, hi: int) -> list[float | None]:
    """The authors' post-processing of one group (:func:`fit_minmax` over ``means``, applied to each); None
    stays None, and every value is None when the clipped values do not vary."""
    fit = fit_minmax(means)
    return [None if m is None or fit is None else fit.scale(m, lo, hi) for m in means]


def numpy_round(value: float) -> int:
    """``np.round(x).astype(int)``: to the nearest integer, halves to even (the authors' rounding)."""
    return int(np.round(value))


def sample_positions(
    sizes: Mapping[int, int], frac: float = SAMPLE_FRACTION, seed: int = SAMPLE_SEED
) -> dict[int, list[int]]:
    """The rows pandas' ``groupby("prompt_id").sample(frac=frac, random_state=seed)`` draws from groups of these
    sizes: for each prompt in ascending order, ``round(frac * n)`` of its ``n`` rows (0-based positions in the
    group's order, in the order drawn), without replacement, by one ``numpy.random.RandomState(seed)`` shared
    across prompts (``RandomState.choice``, as pandas' ``sample`` calls it): a prompt's draw depends on the sizes
    of every prompt before it."""
    state = np.random.RandomState(seed)
    return {
        prompt: [int(i) for i in state.choice(sizes[prompt], size=round(frac * sizes[prompt]), replace=False)]
        for prompt in sorted(sizes)
    }


def authors_sample(groups: Mapping[int, Sequence[str]]) -> dict[int, frozenset[str] | None]:
    """Per prompt of ``groups`` (prompt -> essay ids of a run), those in the authors' own test sample: their draw
    (:func:`sample_positions`) over ASAP's eight prompts of :data:`ASAP_SIZES` in order, each prompt's essays in
    essay-id order, as their ``preprocess.py`` draws from their ``dataset.xlsx``. A prompt's ids are ASAP's:
    sets 7 and 8 from madrag's shipped copy, sets 1-6 from ``groups`` when it holds every essay of the prompt.
    None for a prompt whose ids are not known (not an ASAP prompt, or a prompt of sets 1-6 not given whole)."""
    drawn = sample_positions(ASAP_SIZES)
    out: dict[int, frozenset[str] | None] = {}
    for prompt, ids in groups.items():
        every = asap_ids(prompt, ids)
        out[prompt] = None if every is None else frozenset(every[i] for i in drawn[prompt]) & frozenset(ids)
    return out


def asap_ids(prompt: int, given: Sequence[str]) -> list[str] | None:
    """ASAP prompt ``prompt``'s essay ids in essay-id order: sets 7 and 8 from madrag's shipped copy, others from
    ``given`` when it holds the prompt's every essay (:data:`ASAP_SIZES`); None when not known."""
    if prompt in SHIPPED_SETS:
        ids = shipped_essay_ids()[prompt]
    elif prompt in ASAP_SIZES and len(set(given)) == ASAP_SIZES[prompt]:
        ids = list(dict.fromkeys(given))
    else:
        return None
    return sorted(ids, key=id_order)


def id_order(essay_id: str) -> tuple[int, int | str]:
    """The order of essays in the authors' data file (ASAP's, by essay id): numeric ids by number, then others."""
    return (0, int(essay_id)) if essay_id.isdigit() else (1, essay_id)


def sampling(max_tokens: int) -> dict[str, Any]:
    """The sampling a run of the authors' procedure records (what is sent, and the penalty that is not)."""
    return {
        "temperature": TEMPERATURE,
        "max_tokens": max_tokens,
        "repetition_penalty": {"authors": REPETITION_PENALTY, "sent": False},
    }


async def score_turn(ctx: CallContext, call: AgentCall) -> AgentRecord:
    """The record of a score turn read the authors' way (from the store, or made now): the decimal score in
    ``context["score_0_10"]``, None with an ``error`` when it cannot be read."""

    def read(text: str) -> tuple[dict[str, Any], str | None]:
        value, why = read_score(text)
        return {"score_0_10": value}, why

    return await read_answer(ctx, call, read)


def final_score(
    raw: TraitScore, value: float | None, means: Sequence[float | None], no_group: str | None = None
) -> TraitScore:
    """The final TraitScore of a raw one (``mean_score``: its 0-10 mean) and its scaled value, rounded as numpy
    rounds; missing, with the reason, when the value is None (``no_group``: why there is no min-max group)."""
    if value is None or math.isnan(value):
        usable = sum(1 for m in means if m is not None)
        why = "unreadable 0-10 score" if raw.mean_score is None else f"min-max over {usable} essays has no range"
        why = no_group if raw.mean_score is not None and no_group else why
        return raw.model_copy(update={"result": ScoreResult(mode="failed", invalid_raw=why), "mean_score": None})
    final = numpy_round(value)
    result = ScoreResult(parsed=final, reported=final, mode="parsed_text")
    return raw.model_copy(update={"score": final, "result": result, "mean_score": value})


def stored_score(record: AgentRecord) -> float | None:
    """The 0-10 score of a score turn's record: the decimal read the authors' way, else (``MTS[reading=integer]``
    and runs made before the decimal reading) the integer read as the Judge's score is."""
    if "score_0_10" in record.context:
        value = record.context["score_0_10"]
        return None if value is None else float(value)
    return None if record.score is None or record.score.reported is None else float(record.score.reported)
