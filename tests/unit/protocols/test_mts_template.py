"""``MTS[template=FILE]`` and the MTS authors' procedure around the model (their reading of a score, their essay
cleanup, their 10% sample, their min-max), on a SYNTHETIC template file of the authors' layout built here with
openpyxl (its wording is this test's own) and on scripted answers, checked against pandas doing what the
authors' code does with it (``groupby(...).sample``, ``quantile``)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from openpyxl import Workbook
from tests.helpers import make_ctx
from tests.unit.protocols.test_cj_mts_papers import TEXT_ONLY, authors_minmax

from madrag.data.essay import Essay
from madrag.data.shipped import shipped_essay_ids
from madrag.errors import ConfigError
from madrag.extras import MissingExtra
from madrag.pipeline.migrations import derive_scores
from madrag.protocols import get_protocol
from madrag.protocols.mts_authors import authors_sample, bands, clean_essay, read_score, sample_positions
from madrag.protocols.mts_template import COLUMNS, MTSTemplateProtocol, read_template
from madrag.providers.base import ChatRequest
from madrag.providers.fake import FakeProvider
from madrag.rubric import Rubric, Trait

HOLISTIC = Rubric(traits=[Trait(name="Holistic", min=0, max=30, levels={s: f"{s} points" for s in range(31)})])
TRAITS = ("Focus", "Detail", "Order", "Voice")


def synthetic_template(path: Path, prompt_8: str = "Tell a story about laughter.") -> Path:
    """A template file of the authors' layout (columns, placeholders, one row per prompt), invented wording."""
    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(list(COLUMNS))
    for prompt_id, prompt in ((7, None), (8, prompt_8)):
        sheet.append(
            [
                prompt_id,
                'SYSTEM: rate "@trait" only. @description',
                "PROMPT:\n@prompt\nESSAY:\n@essay\nQ. Quote what bears on @trait; is each quote well written?",
                "RUBRIC for **@trait**:\n@rubric\nQ. Rate @trait from 0 to 10 as Score: <score>N</score>",
                prompt,
                *TRAITS,
                *(f"How well the essay does {t.lower()}." for t in TRAITS),
                *(f"- 0-2: no {t.lower()}\n- 9-10: superb {t.lower()}" for t in TRAITS),
            ]
        )
    book.save(path)
    return path


# -- the authors' procedure around the model ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Quotes...\nScore: <score>7.5</score>", 7.5),  # their format, decimals kept
        ("The essay merits a score of 6/10.\nScore: <score>8</score>", 6.0),  # the first match counts
        ("I rate it at 4 overall. Score: <score>9</score>", 4.0),
        ("Score: 10", 10.0),
        ("7 out of 10", 7.0),
        ("Score: <score>11</score>", None),  # outside 0..10
        ("<score>8</score>", None),  # not one of their patterns
        ("No number here.", None),
    ],
)
def test_a_score_is_read_as_the_authors_read_it(text: str, want: float | None) -> None:
    value, why = read_score(text)
    assert value == want
    assert (why is None) == (want is not None)


def test_the_essay_is_cleaned_as_the_authors_clean_it() -> None:
    essay = "  Dear @PERSON1 of @CAPS12, see www.example.com or http://site.org... really.... ..... Why??? ?? Yes!!!!  "
    assert clean_essay(essay) == "Dear {PERSON} of {CAPS}, see <url> or <url>... really... Why? Yes!"
    assert clean_essay("@UNKNOWN1 stays; one . and ! stay!") == "@UNKNOWN1 stays; one . and ! stay!"


def test_four_levels_get_the_authors_bands_and_six_split_the_scale_in_order() -> None:
    assert bands([0, 1, 2, 3]) == {0: (0, 2), 1: (3, 5), 2: (6, 8), 3: (9, 10)}
    assert bands(range(1, 7)) == {1: (0, 1), 2: (2, 3), 3: (4, 5), 4: (6, 7), 5: (8, 9), 6: (10, 10)}


def test_the_sample_is_pandas_groupby_sample_with_random_state_41() -> None:
    groups = {
        1: [str(i) for i in range(100, 137)],
        7: [str(i) for i in range(500, 523)],
        8: [f"e{i}" for i in range(15)],
    }
    frame = pd.DataFrame([(e, p) for p, ids in groups.items() for e in ids], columns=["essay_id", "prompt_id"])
    want = set(frame.groupby("prompt_id").sample(frac=0.1, replace=False, random_state=41)["essay_id"])
    drawn = sample_positions({prompt: len(ids) for prompt, ids in groups.items()})
    mine = {groups[prompt][i] for prompt, positions in drawn.items() for i in positions}
    assert mine == want and len(want) == 4 + 2 + 2  # round(3.7), round(2.3), round(1.5)


# -- MTS[template=FILE] ---------------------------------------------------------------------------------------


def _scripted(scores: dict[tuple[str, str], float]) -> FakeProvider:
    def script(request: ChatRequest) -> str:
        essay = re.search(r"ESSAY:\nEssay (\d+)", request.messages[1].content)
        trait = re.search(r'rate "(\w+)"', request.messages[0].content)
        assert essay is not None and trait is not None
        if request.round == 2:
            return f"Weighed.\nScore: <score>{scores[(essay.group(1), trait.group(1))]}</score>"
        return '"a quote" - well written'

    return FakeProvider(script=script, caps=TEXT_ONLY)


def test_mts_template_runs_the_authors_traits_turns_and_sampling_on_their_file(tmp_path: Path) -> None:
    shipped = shipped_essay_ids()[7]
    theirs = authors_sample({7: shipped})[7]
    assert theirs is not None
    ids = sorted(theirs)[:6] + [e for e in shipped if e not in theirs][:15]  # 6 of the authors' sample, 15 not
    rng = np.random.default_rng(3)
    scores = {(e, t): float(rng.integers(0, 21)) / 2 for e in ids for t in TRAITS}  # 0..10 in halves
    scores[(ids[10], "Voice")] = 0.0  # an outlier for the IQR clip
    provider = _scripted(scores)
    ctx = make_ctx(tmp_path, provider)
    file = synthetic_template(tmp_path / "template.xlsx")
    protocol = get_protocol(f"MTS[template={file}]")
    assert isinstance(protocol, MTSTemplateProtocol) and protocol.describe()["traits"] == "template"
    for e in ids:
        essay = Essay(id=e, text=f"Essay {e} by @PERSON1!!", prompt="Write about patience.", essay_set=7)
        (provisional,) = asyncio.run(protocol.score_essay(ctx, essay, HOLISTIC))
        assert provisional.score is None and provisional.trait == "Holistic"
    assert len(provider.calls) == len(ids) * 4 * 2  # four trait conversations of two turns each
    quotes, score = (
        next(c for c in provider.calls if c.round == r and '"Focus"' in c.messages[0].content) for r in (1, 2)
    )
    assert quotes.messages[0].content == 'SYSTEM: rate "Focus" only. How well the essay does focus.'
    # the essay cleaned, the essay's prompt where the template's is empty
    assert quotes.messages[1].content.startswith(
        f"PROMPT:\nWrite about patience.\nESSAY:\nEssay {ids[0]} by {{PERSON}}!\n"
    )
    assert [m.role for m in score.messages] == ["system", "user", "assistant", "user"]
    assert score.messages[-1].content.startswith("RUBRIC for **Focus**:\n- 0-2: no focus\n- 9-10: superb focus\n")
    assert {c.temperature for c in provider.calls} == {0.1} and {c.max_tokens for c in provider.calls} == {1024}
    means = {e: float(np.mean([scores[(e, t)] for t in TRAITS])) for e in ids}
    read = {s.essay_id: s for s in derive_scores(ctx.store, HOLISTIC, [protocol.name])}  # type: ignore[arg-type]
    assert set(read) == set(ids)
    sample = ids[:6]  # the min-max group: the essays of the authors' own sample, not a draw over the run's
    want = authors_minmax([means[e] for e in sample], 0, 30)  # the authors' post-processing on their sample
    assert [read[e].score for e in sample] == want and min(want) == 0 and max(want) == 30
    assert all(0 <= (read[e].score or 0) <= 30 for e in ids)
    whole = get_protocol(f"MTS[template={file},group=run]")
    assert isinstance(whole, MTSTemplateProtocol)
    ctx2 = make_ctx(tmp_path / "run", _scripted(scores))
    for e in ids:
        asyncio.run(whole.score_essay(ctx2, Essay(id=e, text=f"Essay {e}.", prompt="P.", essay_set=7), HOLISTIC))
    over_run = {s.essay_id: s.score for s in derive_scores(ctx2.store, HOLISTIC, [whole.name])}  # type: ignore[arg-type]
    assert [over_run[e] for e in ids] == authors_minmax([means[e] for e in ids], 0, 30)


def test_essays_outside_asap_have_no_authors_sample_and_say_so(tmp_path: Path) -> None:
    ids = [str(900000 + i) for i in range(5)]  # not ASAP's ids
    scores = {(e, t): float(i) for i, e in enumerate(ids) for t in TRAITS}
    ctx = make_ctx(tmp_path, _scripted(scores))
    protocol = get_protocol(f"MTS[template={synthetic_template(tmp_path / 'template.xlsx')}]")
    essays = [Essay(id=e, text=f"Essay {e}.", prompt="P.", essay_set=7) for e in ids]
    for essay in essays:
        asyncio.run(protocol.score_essay(ctx, essay, HOLISTIC))
    read = derive_scores(ctx.store, HOLISTIC, [protocol.name])  # type: ignore[arg-type]
    assert [s.score for s in read] == [None] * 5
    assert all(
        "none of the run's essays of prompt 7 is in the MTS authors' sample" in (s.result.invalid_raw or "")
        for s in read
        if s.result
    )
    population = protocol.needs.population(essays, HOLISTIC)
    assert population is not None and population.ids == frozenset() and "0 of the run's 5 essays" in population.label


def test_an_unreadable_trait_score_leaves_the_essay_missing(tmp_path: Path) -> None:
    ids = [str(i) for i in range(100, 104)]
    scores = {(e, t): float(i) for i, e in enumerate(ids) for t in TRAITS}
    provider = _scripted(scores)
    ctx = make_ctx(tmp_path, provider)
    file = synthetic_template(tmp_path / "template.xlsx")
    protocol = get_protocol(f"MTS[template={file},group=run]")
    scores[("101", "Order")] = 12.0  # outside 0..10: NaN in the authors' code, so the essay's mean is too
    for e in ids:
        asyncio.run(protocol.score_essay(ctx, Essay(id=e, text=f"Essay {e}.", prompt="P.", essay_set=7), HOLISTIC))
    read = {s.essay_id: s for s in derive_scores(ctx.store, HOLISTIC, [protocol.name])}  # type: ignore[arg-type]
    assert read["101"].score is None and read["101"].n_usable == 3
    assert [read[e].score for e in ("100", "102", "103")] == [0, 20, 30]  # (0, 2, 3) over the three usable


def test_the_template_file_and_the_rubric_are_checked(tmp_path: Path) -> None:
    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append([c for c in COLUMNS if c != "rubric_3"])
    book.save(tmp_path / "bad.xlsx")
    with pytest.raises(ConfigError, match="missing column\\(s\\) rubric_3"):
        read_template(str(tmp_path / "bad.xlsx"))
    with pytest.raises(ConfigError, match="cannot be read"):
        read_template(str(tmp_path / "none.xlsx"))
    with pytest.raises(ConfigError, match="unknown MTS group"):
        get_protocol(f"MTS[template={tmp_path / 'x.xlsx'},group=all]")
    file = synthetic_template(tmp_path / "template.xlsx")
    protocol = get_protocol(f"MTS[template={file}]")
    ctx = make_ctx(tmp_path, FakeProvider(caps=TEXT_ONLY))
    two = Rubric(traits=[*HOLISTIC.traits, Trait(name="Other", min=0, max=1, levels={0: "a", 1: "b"})])
    with pytest.raises(ConfigError, match="give a rubric of one trait"):
        asyncio.run(protocol.score_essay(ctx, Essay(id="1", text="Essay 1.", essay_set=7), two))
    with pytest.raises(ConfigError, match="no row of the template"):
        asyncio.run(protocol.score_essay(ctx, Essay(id="1", text="Essay 1.", essay_set=3), HOLISTIC))
    assert read_template(str(file)).rows[8].prompt == "Tell a story about laughter."
    # checked before a run writes anything (pipeline._plan calls needs.check)
    with pytest.raises(ConfigError, match="give a rubric of one trait"):
        protocol.needs.check(two, [])
    with pytest.raises(ConfigError, match="no row of the template"):
        protocol.needs.check(HOLISTIC, [Essay(id="1", text="Essay 1.", prompt="P.", essay_set=3)])


def test_an_empty_prompt_cell_and_an_essay_without_prompt_are_refused_before_any_call(tmp_path: Path) -> None:
    file = synthetic_template(tmp_path / "template.xlsx")  # prompt 7's cell is empty, prompt 8's filled
    protocol = get_protocol(f"MTS[template={file}]")
    bare = Essay(id="1", text="Essay 1.", essay_set=7)  # no prompt column, a rubric without prompt
    with pytest.raises(ConfigError, match="prompt cell of prompt 7 is empty and essay '1' has no prompt"):
        protocol.needs.check(HOLISTIC, [bare])
    provider = FakeProvider(caps=TEXT_ONLY)
    with pytest.raises(ConfigError, match="fill the template's prompt column"):
        asyncio.run(protocol.score_essay(make_ctx(tmp_path, provider), bare, HOLISTIC))
    assert provider.calls == []
    protocol.needs.check(HOLISTIC, [Essay(id="2", text="Essay 2.", essay_set=8)])  # prompt 8's cell is filled


def test_without_openpyxl_the_template_names_the_documents_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import madrag.extras

    monkeypatch.setattr(madrag.extras, "installed", lambda module: module != "openpyxl")
    read_template.cache_clear()
    with pytest.raises(MissingExtra, match=re.escape("openpyxl is not installed (the documents extra")) as caught:
        read_template(str(tmp_path / "template.xlsx"))
    assert "pip install 'madrag[documents]'" in str(caught.value)
