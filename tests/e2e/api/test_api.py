"""The Python API (madrag.score / madrag.ascore): in-memory inputs, provider arguments, the result object, runs
recorded and resumed exactly as the CLI's, and the synchronous call inside a running event loop (Jupyter)."""

from __future__ import annotations

import _thread
import asyncio
import doctest
import json
import math
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from tests.helpers import BagOfWordsEmbedder

import madrag
import madrag.api.backend
import madrag.api.inputs
import madrag.api.progress
import madrag.api.scoring
from madrag import ConfigError, Essay, FakeProvider, InputError, ProviderSpec, Rubric, RubricError, Trait
from madrag.providers.base import ChatRequest
from madrag.providers.fake import FakeReply, default_script, request_role
from madrag.store import RunStore

LEVELS = {0: "none", 1: "weak", 2: "clear", 3: "rich"}
RUBRIC = Rubric(
    traits=[Trait(name="Ideas", min=0, max=3, levels=LEVELS), Trait(name="Style", min=0, max=3, levels=LEVELS)]
)
TEXTS = ["The garden grew slowly.", "A boat crossed the river at dawn.", "Snow covered the mountain path."]
POOL = [
    {"id": f"p{i}", "text": f"Exemplar essay {i} about {topic}.", "Ideas": i % 4, "Style": (i + 1) % 4}
    for i, topic in enumerate(["gardens", "rivers", "mountains", "markets", "trains", "forests"])
]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exemplar banks, the response cache and temporary run directories under tmp_path, never the user's."""
    monkeypatch.setenv("MADRAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def stored_config(run_dir: Path) -> dict[str, object]:
    store = RunStore(run_dir / "store.sqlite")
    try:
        config = store.get_meta("config")
    finally:
        store.close()
    assert isinstance(config, dict)
    return config


def record_count(run_dir: Path) -> int:
    store = RunStore(run_dir / "store.sqlite")
    try:
        return store.count()
    finally:
        store.close()


# -- inputs --------------------------------------------------------------------------------------------------


def test_essays_from_texts_dicts_dataframes_and_essays() -> None:
    from_texts = madrag.to_essays(TEXTS, RUBRIC)
    assert [e.id for e in from_texts] == ["1", "2", "3"] and from_texts[1].text == TEXTS[1]
    assert from_texts[0].prompt == RUBRIC.prompt and from_texts[0].rater_scores == {}
    frame = pd.DataFrame(
        {
            "id": [10, 11, 12],
            "text": TEXTS,
            "Ideas": [2, None, 3],
            "rater1_style": [1.0, 2.0, math.nan],
            "rater2_style": [2.0, 2.0, 1.0],
            "fold": [0, 1, None],
            "essay_set": [7, 7, 7],
            "school": ["a", "b", "c"],
        }
    )
    essays = madrag.to_essays(frame, RUBRIC)
    assert [e.id for e in essays] == ["10", "11", "12"]
    assert essays[0].rater_scores == {"Ideas": [2.0], "Style": [1.0, 2.0]}
    assert essays[1].rater_scores == {"Style": [2.0, 2.0]}  # a missing cell is no score
    assert essays[2].rater_scores == {"Ideas": [3.0], "Style": [1.0]} and essays[2].rater_ids["Style"] == [1]
    assert [e.fold for e in essays] == [0, 1, None] and {e.essay_set for e in essays} == {7}
    assert essays[0].metadata == {"school": "a"}
    from_dicts = madrag.to_essays(frame.to_dict(orient="records"), RUBRIC)
    assert from_dicts == essays
    assert madrag.to_essays(essays, RUBRIC) == essays


@pytest.mark.parametrize(
    ("essays", "needle"),
    [
        ([], "no essays"),
        ("just one essay", "expected a list"),
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], "duplicate essay id 'a'"),
        ([{"id": "a", "text": "x", "Ideas": 7}], "outside [0, 3]"),
        ([{"text": "no id"}], "needs 'id' and 'text'"),
        ([3.5], "expected a text, a dict or an Essay"),
    ],
)
def test_bad_essays_are_one_line_input_errors(essays: object, needle: str) -> None:
    with pytest.raises(InputError, match=None) as err:
        madrag.to_essays(essays, RUBRIC)  # type: ignore[arg-type]
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_rubric_from_rubric_dict_or_path(tmp_path: Path) -> None:
    as_dict = RUBRIC.model_dump(mode="json")
    path = tmp_path / "rubric.json"
    path.write_text(json.dumps(as_dict), encoding="utf-8")
    assert madrag.to_rubric(RUBRIC) is RUBRIC
    assert madrag.to_rubric(as_dict) == RUBRIC
    assert madrag.to_rubric(path).traits == RUBRIC.traits and madrag.to_rubric(str(path)).traits == RUBRIC.traits
    with pytest.raises(RubricError, match="traits"):
        madrag.to_rubric({"traits": []})


# -- providers -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("llamacpp", {"kind": "llamacpp", "model": None, "model_path": None}),  # no server address: not its option
        ("llamacpp:/models/big.gguf", {"kind": "llamacpp", "model_path": "/models/big.gguf"}),
        ("fake", {"kind": "fake"}),
        ("openai:gpt-4o-mini", {"kind": "openai", "model": "gpt-4o-mini", "base_url": None}),
        ("openai:m@http://localhost:8000/v1", {"kind": "openai", "model": "m", "base_url": "http://localhost:8000/v1"}),
    ],
)
def test_provider_strings(text: str, expected: dict[str, object]) -> None:
    spec = madrag.parse_provider(text)
    assert {k: getattr(spec, k) for k in expected} == expected


@pytest.mark.parametrize("text", ["openai", "vllm:model", "", "openai:@http://x"])
def test_bad_provider_strings_say_the_syntax(text: str) -> None:
    with pytest.raises(ConfigError, match=r"openai:MODEL\[@BASE_URL\]"):
        madrag.parse_provider(text)


def test_provider_arguments_resolve_to_spec_or_instance() -> None:
    resolve = madrag.api.backend.resolve_provider
    spec = ProviderSpec(kind="fake", retries=0)
    assert resolve(spec) == (spec, None)
    fake = FakeProvider()
    assert resolve(fake)[1] is fake
    with pytest.raises(ConfigError, match="expected a string"):
        resolve(42)  # type: ignore[arg-type]
    roles = madrag.api.backend.resolve_role_providers({"lenient": "openai:g@http://h/v1", "strict": spec}, spec)
    assert roles["lenient"].model == "g" and roles["lenient"].retries == 0 and roles["strict"] is spec
    with pytest.raises(ConfigError, match="role must be one of"):
        madrag.api.backend.resolve_role_providers({"advocate": "fake"}, spec)


# -- scoring -------------------------------------------------------------------------------------------------


def test_score_in_memory_into_a_temporary_run(capsys: pytest.CaptureFixture[str]) -> None:
    result = madrag.score(TEXTS, RUBRIC, protocol="MAD", provider="fake", progress=False)
    assert result.temporary and (result.run_dir / "store.sqlite").is_file() and "temporary" in repr(result)
    assert capsys.readouterr().err == ""  # progress=False prints nothing
    scores = result.scores
    assert list(scores.columns) == ["essay", "trait", "protocol", "score", "reference", "mode", "rationale"]
    assert scores[["essay", "trait"]].values.tolist() == [[e, t] for e in ["1", "2", "3"] for t in ["Ideas", "Style"]]
    assert scores["score"].between(0, 3).all() and scores["reference"].isna().all()
    assert set(scores["mode"]) == {"constrained_distribution"} and scores["rationale"].str.len().gt(0).all()
    records = result.records
    assert len(records) == 3 * 2 * 3 and {r.role for r in records} == {"advocate", "skeptic", "judge"}
    assert result.stats.made == 18 and not result.resumed
    config = stored_config(result.run_dir)
    stored = [
        Essay.model_validate_json(line) for line in (result.run_dir / "inputs/essays.jsonl").read_text().splitlines()
    ]
    assert stored == madrag.to_essays(TEXTS, RUBRIC)
    assert config["data"] is None and config["data_source"] == "in-memory" and config["data_essays"] == 3
    assert config["data_sha256"] == madrag.pipeline.job.essays_fingerprint(stored)
    assert madrag.load_rubric(result.run_dir / "inputs/rubric.json") == RUBRIC


def test_resume_with_the_same_inputs_and_refuse_others(tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = madrag.score(TEXTS, RUBRIC, protocol="MA", provider="fake", run_dir=run, progress=False)
    assert not first.temporary and first.run_dir == run and first.stats.made == 6
    again = madrag.score(TEXTS, RUBRIC.model_dump(), protocol="MA", provider="fake", run_dir=run, progress=False)
    assert again.resumed and again.stats.made == 0 and again.stats.reused == 6
    pd.testing.assert_frame_equal(again.scores, first.scores)
    with pytest.raises(ConfigError, match="different settings"):
        madrag.score([*TEXTS, "A fourth essay."], RUBRIC, protocol="MA", provider="fake", run_dir=run, progress=False)
    other = Rubric(traits=[RUBRIC.traits[0]])
    with pytest.raises(ConfigError, match=r"different settings \(.*rubric"):
        madrag.score(TEXTS, other, protocol="MA", provider="fake", run_dir=run, progress=False)
    assert madrag.load_rubric(run / "inputs/rubric.json") == RUBRIC  # the refused call overwrote nothing


async def test_sync_score_inside_a_running_event_loop() -> None:
    """As in Jupyter: this test's body runs inside an event loop, and the plain call still works."""
    loop = asyncio.get_running_loop()
    seen: list[str] = []

    def script(request: ChatRequest) -> FakeReply:
        seen.append(threading.current_thread().name)
        return default_script(request)

    result = madrag.score(TEXTS[:1], RUBRIC, protocol="MA", provider=FakeProvider(script=script), progress=False)
    assert asyncio.get_running_loop() is loop and result.scores["score"].notna().all()
    assert seen and set(seen) == {"madrag-score"}  # ran in the worker thread's loop


async def test_interrupting_the_sync_call_in_a_running_loop_stops_the_run_and_keeps_its_calls(tmp_path: Path) -> None:
    """Jupyter's stop button during madrag.score: the worker thread's run is cancelled, what finished is kept,
    and the same call resumes it."""
    run = tmp_path / "run"
    slow = ProviderSpec(kind="fake", fake_latency_s=0.3)
    # an interrupt raises KeyboardInterrupt in the main thread, as in a Jupyter kernel (the test's own loop
    # runner would otherwise turn it into a cancellation of the test)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            madrag.score(POOL, RUBRIC, protocol="MAD", provider=slow, run_dir=run, essay_concurrency=1, progress=False)
    finally:
        signal.signal(signal.SIGINT, previous)
    kept = record_count(run)
    time.sleep(1.0)
    assert record_count(run) == kept and 0 < kept < len(POOL) * 2 * 3  # stopped, not still running behind
    resumed = madrag.score(POOL, RUBRIC, protocol="MAD", provider="fake", run_dir=run, progress=False)
    assert resumed.resumed and resumed.stats.reused == kept and resumed.stats.made == len(POOL) * 2 * 3 - kept


async def test_ascore_is_the_async_twin(tmp_path: Path) -> None:
    result = await madrag.ascore(
        TEXTS[:2], RUBRIC, protocol="MA", provider="fake", run_dir=tmp_path / "r", progress=False
    )
    synced = madrag.score(TEXTS[:2], RUBRIC, protocol="MA", provider="fake", run_dir=tmp_path / "r", progress=False)
    assert synced.resumed and synced.stats.made == 0
    pd.testing.assert_frame_equal(result.scores, synced.scores)


def test_a_provider_instance_is_used_and_recorded() -> None:
    fake = FakeProvider(script=lambda r: "Final score: 3" if request_role(r) == "judge" else "An argument.")
    fake.capabilities = fake.capabilities.model_copy(update={"choices": False, "prefill": False})
    result = madrag.score(TEXTS[:2], RUBRIC, protocol="MAD", provider=fake, progress=False)
    assert len(fake.calls) == 2 * 2 * 3 and result.scores["score"].tolist() == [3, 3, 3, 3]
    assert set(result.scores["mode"]) == {"parsed_text"}
    provider = stored_config(result.run_dir)["provider"]
    assert isinstance(provider, dict) and provider["instance"]["provider"] == "fake"
    assert not (result.run_dir.parent / "cache" / "responses.sqlite").exists()


def test_madrag_with_an_in_memory_pool(tmp_path: Path) -> None:
    embedder = BagOfWordsEmbedder()
    result = madrag.score(
        TEXTS[:2], RUBRIC, pool=POOL, provider="fake", embedder=embedder, cache_dir=tmp_path / "c", progress=False
    )
    assert list(result.scores["protocol"].unique()) == ["MADRAG"] and embedder.texts_embedded >= len(POOL)
    judges = [r for r in result.records if r.role == "judge"]
    shown = {lvl["exemplar"]["essay_id"] for r in judges for lvl in r.context["exemplars"] if lvl["exemplar"]}
    assert shown and shown <= {p["id"] for p in POOL}
    config = stored_config(result.run_dir)
    pool = config["pool"]
    assert isinstance(pool, dict) and pool["essays"] == len(POOL) and pool["source"] == "in-memory"
    assert len((result.run_dir / "inputs/pool.jsonl").read_text().splitlines()) == len(POOL)


def test_fold_split_without_a_pool(tmp_path: Path) -> None:
    rows = [{**p, "fold": 0 if i < 2 else 1} for i, p in enumerate(POOL)]
    result = madrag.score(
        rows, RUBRIC, provider="fake", embedder=BagOfWordsEmbedder(), cache_dir=tmp_path, progress=False
    )
    assert list(result.scores["essay"].unique()) == ["p0", "p1"]  # fold 0 scored, fold 1 retrieved
    assert result.scores["reference"].notna().all()
    judges = [r for r in result.records if r.role == "judge"]
    shown = {lvl["exemplar"]["essay_id"] for r in judges for lvl in r.context["exemplars"] if lvl["exemplar"]}
    assert shown and shown <= {"p2", "p3", "p4", "p5"}
    assert stored_config(result.run_dir)["eval_fold"] == 0
    everything = madrag.score(rows, RUBRIC, protocol="MA", fold="all", provider="fake", progress=False)
    assert everything.scores["essay"].nunique() == len(POOL)


def test_fold_each_scores_every_fold_from_the_other_folds(tmp_path: Path) -> None:
    rows = [{**p, "fold": 0 if i < 3 else 1} for i, p in enumerate(POOL)]
    result = madrag.score(
        rows, RUBRIC, fold="each", provider="fake", embedder=BagOfWordsEmbedder(), cache_dir=tmp_path, progress=False
    )
    assert result.scores["essay"].nunique() == len(POOL)  # every essay scored, in one run
    fold_of = {r["id"]: r["fold"] for r in rows}
    for record in (r for r in result.records if r.role == "judge"):
        shown = {lvl["exemplar"]["essay_id"] for lvl in record.context["exemplars"] if lvl["exemplar"]}
        assert shown and all(fold_of[s] != fold_of[record.essay_id] for s in shown)  # never its own fold
    assert stored_config(result.run_dir)["eval_fold"] == "each"


def test_retrieval_needs_scored_exemplars_and_fold_needs_no_pool(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no scored essays"):
        madrag.score(TEXTS, RUBRIC, provider="fake", run_dir=tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "store.sqlite").exists() or record_count(tmp_path / "run") == 0
    fixed = madrag.score(
        TEXTS,
        RUBRIC,
        pool=POOL,
        provider="fake",
        run_dir=tmp_path / "run",
        progress=False,
        embedder=BagOfWordsEmbedder(),
    )
    assert not fixed.resumed  # the refused call left no configuration behind to clash with
    with pytest.raises(InputError, match="with pool= every essay given is scored"):
        madrag.score(TEXTS, RUBRIC, pool=POOL, fold=1, provider="fake", progress=False)
    with pytest.raises(InputError, match="to score one essay text, pass a list"):
        madrag.score("An essay, not a path.", RUBRIC, provider="fake", progress=False)


def test_evaluate_gives_the_eval_tables(tmp_path: Path) -> None:
    rows = [{**p, "Ideas": p["Ideas"], "fold": 0} for p in POOL]
    result = madrag.score(rows, RUBRIC, protocol=["MA", "MAD"], provider="fake", progress=False)
    evaluation = result.evaluate(bootstrap=50, baseline="MAD")
    assert set(evaluation.qwk["protocol"]) >= {"MA", "MAD"} and evaluation.qwk["n"].max() == len(POOL)
    assert list(madrag.wide(evaluation.qwk).columns) == ["Idea", "Sty."]
    assert set(evaluation.comparisons["protocol"]) == {"MA"} and not evaluation.extreme.empty
    assert any("no data file recorded" in note for note in evaluation.notes)  # in-memory essays have none
    assert (result.run_dir / "eval" / "qwk.csv").is_file() and (result.run_dir / "eval" / "evaluation.md").is_file()


def test_progress_bar_and_notes_go_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    madrag.score(TEXTS[:1], RUBRIC, protocol="MA", provider="fake", progress=True)
    err = capsys.readouterr().err
    assert "run directory (temporary)" in err and "scoring 1 essays x 2 traits with MA" in err
    assert "2/2" in err  # the bar counted every trait score


def test_a_data_file_run_is_the_cli_run(asap: Path, tmp_path: Path) -> None:
    """madrag.score on a data file stores the configuration madrag score stores: the CLI resumes the run."""
    data, rubric = asap / "training_set_rel3_sets7_8.tsv", asap / "rubric_set7.json"
    cache = tmp_path / "cache"
    result = madrag.score(
        data,
        rubric,
        protocol="MAD",
        provider="fake",
        run_dir=tmp_path / "run",
        limit=1,
        cache_dir=cache,
        progress=False,
    )
    assert stored_config(result.run_dir)["eval_fold"] == 0 and len(result.scores) == 4
    args = ["--data", str(data), "--rubric", str(rubric), "--run-dir", str(tmp_path / "run"), "--limit", "1"]
    cli = [sys.executable, "-m", "madrag.cli", "score", *args, "--protocol", "MAD", "--provider", "fake"]
    proc = subprocess.run([*cli, "--cache-dir", str(cache)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "0 agent calls made, 12 reused" in proc.stdout.replace("\n", " ")


def test_run_job_runs_a_prepared_job_with_essay_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What the CLI, the web app and workers call with a ScoreJob they built."""
    rubric_file = tmp_path / "rubric.json"
    rubric_file.write_text(RUBRIC.model_dump_json(), encoding="utf-8")
    job = madrag.ScoreJob(
        essays=madrag.to_essays(TEXTS[:2], RUBRIC),
        rubric=rubric_file,
        run_dir=tmp_path / "run",
        eval_fold=None,
        protocols=["MA"],
        provider=ProviderSpec(kind="fake"),
        cache_dir=tmp_path / "cache",
    )
    result = madrag.run_job(job, progress=madrag.api.ScoreProgress(essay_lines=True))
    assert not result.temporary and result.stats.made == 4 and len(result.scores) == 4
    err = capsys.readouterr().err
    assert "essay 1: Ideas=2, Style=2" in err and "essay 2: Ideas=2, Style=2" in err
    with pytest.raises(ValueError, match="exactly one of data"):
        madrag.ScoreJob(rubric=rubric_file, run_dir=tmp_path / "x")


@pytest.mark.parametrize(
    "module", [madrag.api.inputs, madrag.api.backend, madrag.api.progress, madrag.api.scoring], ids=lambda m: m.__name__
)
def test_docstring_examples_run(module: object) -> None:
    failures, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)  # type: ignore[arg-type]
    assert tried > 0 and failures == 0
