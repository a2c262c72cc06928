"""Reference labels of raters' means halfway between two scores (the MADRAG paper's B.5 names no tie rule): half up by
default, half_even and half_down as the run's ``reference_ties`` setting or an evaluation's option, applied to
the exemplar labels of a run and to every reference its evaluation computes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import madrag
from madrag.data import load_asap
from madrag.data.essay import Essay, reference_label
from madrag.data.shipped import asap_data_file, asap_rubric_file
from madrag.errors import InputError
from madrag.evaluation.agreement import evaluate
from madrag.evaluation.run import load_run, open_store, recorded_ties, run_config
from madrag.metrics import TIE_RULES, checked_ties, is_tie, round_ties, round_to_scale
from madrag.pipeline.job import ScoreJob, execute
from madrag.providers.spec import ProviderSpec
from madrag.retrieval.bank import pool_fingerprint
from madrag.rubric import Rubric, Trait
from madrag.settings import ScoringSettings, stored_settings

TRAIT = Trait(name="A", min=1, max=4, levels={s: f"A {s}" for s in range(1, 5)})


def test_tie_rules_round_only_halves_differently() -> None:
    halves = [0.5, 1.5, 2.5, 3.5]
    assert [round_ties(v, "half_up") for v in halves] == [1, 2, 3, 4]
    assert [round_ties(v, "half_even") for v in halves] == [0, 2, 2, 4]
    assert [round_ties(v, "half_down") for v in halves] == [0, 1, 2, 3]
    for rule in TIE_RULES:  # not a tie: the nearest integer under every rule
        assert [round_ties(v, rule) for v in (2.4, 2.6, 7 / 3, 8 / 3, 3.0)] == [2, 3, 2, 3, 3]
    assert is_tie(5 / 2) and is_tie(10 / 4) and not is_tie(8 / 3) and not is_tie(3.0)
    assert round_to_scale(0.5, 1, 4, "half_down") == 1 and round_to_scale(4.5, 1, 4, "half_up") == 4  # clamped
    with pytest.raises(ValueError, match="tie rule"):
        round_ties(2.5, "nearest")  # type: ignore[arg-type]


def test_reference_label_follows_the_rule_it_is_given() -> None:
    essay = Essay(id="e", text="t", rater_scores={"A": [2.0, 3.0], "B": [1.0, 2.0]})
    assert essay.reference(TRAIT) == 3 and essay.references_by_name() == {"A": 3, "B": 2}  # half up by default
    assert essay.reference(TRAIT, "half_down") == 2 and essay.references_by_name("half_down") == {"A": 2, "B": 1}
    assert essay.reference(TRAIT, "half_even") == 2 and reference_label([1.0, 2.0], TRAIT, "half_even") == 2
    assert essay.reference(TRAIT, "half_up") == 3
    with pytest.raises(ValueError, match="tie rule"):
        checked_ties("banker")  # type: ignore[arg-type]


def test_shipped_asap_has_the_published_share_of_half_point_means() -> None:
    # "36% set 7, 32% set 8" of the essay-trait labels are .5 means of the raters
    share = {}
    for essay_set in (7, 8):
        rubric = madrag.load_rubric(asap_rubric_file(essay_set))
        essays = load_asap(asap_data_file(), rubric)
        means = [sum(v) / len(v) for e in essays for v in e.rater_scores.values() if v]
        ties = [m for m in means if is_tie(m)]
        share[essay_set] = len(ties) / len(means)
        # the rules give different labels exactly on those essay-traits
        changed = sum(e.reference(t, "half_up") != e.reference(t, "half_down") for e in essays for t in rubric.traits)
        assert changed == len(ties)
    assert share[7] == pytest.approx(0.36, abs=0.005)  # measured 2264 / 6276 = 36.1%
    assert share[8] == pytest.approx(0.32, abs=0.01)  # measured 1368 / 4338 = 31.5%


def test_the_setting_is_recorded_and_a_run_without_it_reads_as_half_up() -> None:
    assert ScoringSettings().reference_ties == "half_up"
    # a run recorded without it (made before it existed, or by a release that left the default out) reads as
    # half_up, so it still resumes (madrag.store.run_config)
    assert stored_settings({})["reference_ties"] == "half_up"
    chosen = ScoringSettings(reference_ties="half_even").model_dump(mode="json")
    assert chosen["reference_ties"] == "half_even"
    assert ScoringSettings.model_validate(chosen).reference_ties == "half_even"
    assert recorded_ties({"settings": chosen}) == "half_even"
    assert recorded_ties({"settings": ScoringSettings().model_dump(mode="json")}) == "half_up"
    assert recorded_ties({}) == "half_up"
    with pytest.raises(InputError, match="reference_ties"):
        recorded_ties({"settings": {"reference_ties": "up"}})


def test_the_exemplar_bank_labels_follow_the_rule() -> None:
    rubric = Rubric(name="r", traits=[TRAIT])
    pool = [Essay(id="p", text="a pool essay", rater_scores={"A": [1.0, 2.0]})]
    fingerprints = set()
    for rule in TIE_RULES:
        fingerprints.add(pool_fingerprint(pool, rubric, "hashing", rule))
    assert len(fingerprints) == 2  # half_even and half_down both label 1.5 as 1: the same bank


# -- a run that chose half_down, end to end ------------------------------------------------------------


def _files(tmp_path: Path) -> tuple[Path, Path]:
    rubric = {"name": "letters", "prompt": "Write a letter.", "traits": [TRAIT.model_dump(mode="json")]}
    rubric_path = tmp_path / "rubric.json"
    rubric_path.write_text(json.dumps(rubric), encoding="utf-8")
    data = tmp_path / "essays.csv"
    rows = [("e0", 0, 2, 3), ("e1", 0, 3, 4), ("p1", 1, 1, 2), ("p2", 1, 3, 3), ("p3", 1, 4, 4)]
    with data.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "text", "fold", "rater1_A", "rater2_A"])
        for eid, fold, r1, r2 in rows:
            writer.writerow([eid, f"Essay {eid} about a park and its benches.", fold, r1, r2])
    return data, rubric_path


def _run(tmp_path: Path, name: str, settings: ScoringSettings) -> Path:
    data, rubric = _files(tmp_path)
    job = ScoreJob(
        data=data,
        rubric=rubric,
        run_dir=tmp_path / name,
        protocols=["MARAG"],
        provider=ProviderSpec(kind="fake"),
        settings=settings,
        cache_dir=tmp_path / "cache",
        response_cache=False,
        embedder="hashing",
    )
    import asyncio

    asyncio.run(execute(job))
    return job.run_dir


def _exemplar_scores(run_dir: Path) -> dict[str, int]:
    """Pool essay id -> the score level it was shown for, in the run's Judge records."""
    shown = {}
    for judge in load_run(run_dir).judges:
        for level in judge.context["exemplars"]:
            if level["exemplar"] is not None:
                shown[level["exemplar"]["essay_id"]] = level["score"]
    return shown


def test_a_run_applies_and_records_its_tie_rule(tmp_path: Path) -> None:
    default = _run(tmp_path, "up", ScoringSettings())
    down = _run(tmp_path, "down", ScoringSettings(reference_ties="half_down"))
    assert _exemplar_scores(default)["p1"] == 2 and _exemplar_scores(down)["p1"] == 1  # raters 1 and 2
    assert load_run(default).reference_ties == "half_up" and load_run(down).reference_ties == "half_down"
    ev = evaluate(down, bootstrap=0)
    assert ev.meta["reference_ties"] == "half_down" and "halves down" in ev.meta["reference"]
    assert not any("reference labels round ties" in n for n in ev.notes)
    # the evaluation's own choice wins, and says it differs from the run's exemplar labels
    other = evaluate(down, bootstrap=0, ties="half_up")
    assert other.meta["reference_ties"] == "half_up"
    assert any("exemplar labels were made with half_down" in n for n in other.notes)
    assert evaluate(default, bootstrap=0).meta["reference_ties"] == "half_up"


def test_score_command_records_the_tie_rule(tmp_path: Path) -> None:
    import subprocess
    import sys

    data = tmp_path / "essays.csv"
    data.write_text("id,text,fold,Ideas\na,One essay.,0,2\nb,Another essay.,1,1\nc,A third.,1,3\n", encoding="utf-8")
    rubric = tmp_path / "rubric.json"
    rubric.write_text(
        json.dumps({"traits": [{"name": "Ideas", "min": 0, "max": 3, "levels": {str(i): "x" for i in range(4)}}]}),
        encoding="utf-8",
    )
    base = [sys.executable, "-m", "madrag.cli", "score", "--data", str(data), "--rubric", str(rubric), "-p", "MAD"]
    base += ["--provider", "fake", "--embedder", "hashing", "--cache-dir", str(tmp_path / "cache")]
    run = tmp_path / "run"
    done = subprocess.run(
        [*base, "--run-dir", str(run), "--reference-ties", "half_down"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    store = open_store(run)
    try:
        assert recorded_ties(run_config(store)[0]) == "half_down"
    finally:
        store.close()
    bad = subprocess.run(
        [*base, "--run-dir", str(tmp_path / "r2"), "--reference-ties", "up"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "half_even" in bad.stderr
