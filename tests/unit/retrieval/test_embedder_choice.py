"""--embedder: ``minilm`` is the MADRAG paper's embedding (truncated at 256 word pieces), ``minilm-windows`` the windows
option; a run made before the paper's embedder became the default (``minilm`` then meant windows) resumes with the
windows embedder, so with the same exemplar bank."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import BagOfWordsEmbedder

import madrag.retrieval.embedder as embedder_module
from madrag.agents.prompts import PromptLibrary
from madrag.errors import ConfigError, MadragError
from madrag.pipeline.job import ScoreJob, execute, job_config
from madrag.pipeline.migrations import stored_embedder
from madrag.protocols import get_protocol
from madrag.providers.spec import ProviderSpec
from madrag.records import AgentRecord, call_key
from madrag.retrieval import EMBEDDERS, MiniLMEmbedder, MiniLMWindowsEmbedder, make_embedder
from madrag.rubric import load_rubric
from madrag.server.config import ServerConfig
from madrag.settings import ScoringSettings
from madrag.store import RunStore

OLD_RUN = json.loads((Path(__file__).parents[2] / "data" / "old_run_windows.json").read_text(encoding="utf-8"))
"""The stored config and bank info of a run made by the previous release with the default embedder."""
PAPER = "all-MiniLM-L6-v2[truncate=256]"
WINDOWS = "all-MiniLM-L6-v2[window=254,overlap=32,mean-of-windows]"


def test_minilm_is_the_papers_embedder_and_the_names_differ() -> None:
    paper, windows = make_embedder("minilm"), make_embedder("minilm-windows")
    assert isinstance(paper, MiniLMEmbedder) and paper.name == PAPER
    assert isinstance(windows, MiniLMWindowsEmbedder) and windows.name == WINDOWS
    assert paper.name != windows.name != make_embedder("hashing").name
    assert EMBEDDERS == ("minilm", "minilm-windows", "hashing", "server")
    assert ServerConfig(embedder="minilm-windows").embedder == "minilm-windows"
    assert ServerConfig().embedder == "minilm"
    with pytest.raises(MadragError, match="unknown embedder"):
        make_embedder("minilm-truncated")


def test_stored_embedder_of_old_and_new_runs() -> None:
    assert "embedder" not in OLD_RUN["config"] and OLD_RUN["bank"]["embedder"] == WINDOWS
    assert stored_embedder(OLD_RUN["config"], OLD_RUN["bank"]) == "minilm-windows"
    assert stored_embedder(OLD_RUN["config"]) == "minilm-windows"  # no bank recorded: the config predates it
    assert stored_embedder({"embedder": "minilm"}, {"embedder": WINDOWS}) == "minilm-windows"
    assert stored_embedder({"embedder": "minilm"}, {"embedder": PAPER}) == "minilm"
    assert stored_embedder({"embedder": "minilm"}) == "minilm"
    assert stored_embedder({"embedder": "hashing"}, {"embedder": "hashing-bow[dim=256]"}) == "hashing"


class _Fake(BagOfWordsEmbedder):
    """A model-free stand-in that claims a MiniLM embedder's name (so no model is loaded)."""

    label = ""

    @property
    def name(self) -> str:
        return self.label


class _FakePaper(_Fake):
    label = PAPER


class _FakeWindows(_Fake):
    label = WINDOWS


@pytest.fixture
def fake_minilm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedder_module, "MiniLMEmbedder", _FakePaper)
    monkeypatch.setattr(embedder_module, "MiniLMWindowsEmbedder", _FakeWindows)


def _job(tmp_path: Path, **kwargs: Any) -> ScoreJob:
    data, rubric = tmp_path / "essays.csv", tmp_path / "rubric.json"
    data.write_bytes(OLD_RUN["essays_csv"].encode("utf-8"))
    rubric.write_text(OLD_RUN["rubric_json"], encoding="utf-8")
    return ScoreJob(
        data=data,
        rubric=rubric,
        run_dir=tmp_path / "run",
        limit=2,
        protocols=["MADRAG"],
        provider=ProviderSpec(kind="fake"),
        cache_dir=tmp_path / "cache",
        response_cache=False,
        settings=ScoringSettings.model_validate(OLD_RUN["config"]["settings"]),  # the old run's (placeholders none)
        **kwargs,
    )


def _current_prompt_identity(job: ScoreJob) -> dict[str, Any]:
    """The templates' part of a run's identity as this code computes it. The prompt templates changed after the
    fixture was recorded (the confidence paper's anonymization context, the debaters' turn headers), and a template
    change
    stops any older run from resuming; that is not what these tests are about, so the fixture gets today's."""
    config = job_config(job, load_rubric(job.rubric), [get_protocol("MADRAG")], PromptLibrary())
    return {k: config[k] for k in ("prompts", "prompt_texts_sha256")}


def _old_run(tmp_path: Path, job: ScoreJob) -> None:
    """The previous release's run store: its stored config (the data path is this machine's), bank info and a
    record (a run that has answered holds its settings; one with no record yet takes the settings it is given)."""
    assert job.data is not None
    store = RunStore(job.run_dir / "store.sqlite")
    try:
        stored = {**OLD_RUN["config"], "data": str(job.data.resolve()), **_current_prompt_identity(job)}
        store.set_meta("config", stored)
        store.set_meta("bank", OLD_RUN["bank"])
        old = "an essay of the old run's other data"  # no essay of this job's: its scoring is not changed
        store.put_many(
            [
                AgentRecord(
                    run_id="old",
                    key=call_key("OLD", old, "t", "judge"),
                    essay_id=old,
                    trait="t",
                    protocol="OLD",
                    role="judge",
                    model="m",
                )
            ]
        )
    finally:
        store.close()


@pytest.mark.usefixtures("fake_minilm")
async def test_an_old_run_resumes_with_the_windows_embedder(tmp_path: Path) -> None:
    job = _job(tmp_path)  # the default, --embedder minilm
    _old_run(tmp_path, job)
    result = await execute(job)
    assert result.resumed  # the stored config still matches
    assert result.bank_info["embedder"] == WINDOWS
    assert result.bank_info["fingerprint"] == OLD_RUN["bank"]["fingerprint"]  # the very bank the old run built
    store = RunStore(job.run_dir / "store.sqlite")
    try:
        assert "embedder" not in (store.get_meta("config") or {})
    finally:
        store.close()


@pytest.mark.usefixtures("fake_minilm")
async def test_an_old_run_refuses_another_embedder(tmp_path: Path) -> None:
    job = _job(tmp_path, embedder="hashing")
    _old_run(tmp_path, job)
    with pytest.raises(ConfigError, match="embedder"):
        await execute(job)


@pytest.mark.usefixtures("fake_minilm")
async def test_a_new_run_records_and_keeps_the_papers_embedder(tmp_path: Path) -> None:
    first = await execute(_job(tmp_path))
    assert not first.resumed and first.bank_info["embedder"] == PAPER
    store = RunStore(tmp_path / "run" / "store.sqlite")
    try:
        assert (store.get_meta("config") or {}).get("embedder") == "minilm"
    finally:
        store.close()
    again = await execute(_job(tmp_path))
    assert again.resumed and again.bank_info["embedder"] == PAPER


@pytest.mark.usefixtures("fake_minilm")
async def test_a_new_windows_run_resumes_with_windows(tmp_path: Path) -> None:
    first = await execute(_job(tmp_path, embedder="minilm-windows"))
    assert first.bank_info["embedder"] == WINDOWS
    again = await execute(_job(tmp_path))
    assert again.resumed and again.bank_info["embedder"] == WINDOWS


async def test_a_missing_embedder_extra_is_said_before_any_run_folder(
    asap: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default embedder (MiniLM) is the embedded extra's: without it a retrieving run is refused with the
    extra to install, with the run's other checks, before its folder exists (the same command with --embedder
    server, or after the install, works on the same --run-dir)."""
    import madrag.retrieval.choice as choice
    from madrag.extras import MissingExtra
    from madrag.providers.fake import FakeProvider

    monkeypatch.setattr(choice, "installed", lambda module: module != "sentence_transformers")
    run_dir = tmp_path / "run"
    job = ScoreJob(
        data=asap / "training_set_rel3_sets7_8.tsv",
        rubric=load_rubric(asap / "rubric_set7.json").only(["Ideas"]),
        run_dir=run_dir,
        limit=1,
        protocols=["MADRAG"],
        cache_dir=tmp_path / "cache",
    )
    with pytest.raises(
        MissingExtra, match=r"sentence-transformers is not installed .*pip install 'madrag\[embedded\]'"
    ):
        await execute(job, backend=FakeProvider())
    assert not run_dir.exists()
    done = await execute(job.model_copy(update={"protocols": ["MAD"]}), backend=FakeProvider())  # no retrieval
    assert len(done.scores) == 1
