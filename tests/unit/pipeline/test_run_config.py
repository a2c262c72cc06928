"""The run configuration's version and upgrades (:mod:`madrag.store.run_config`): prompt templates are identified by
their names and texts (where a text came from is provenance), a changed template is named when a run is
refused, and a configuration newer than this code is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from madrag.agents.prompts import PromptLibrary
from madrag.api.scoring import run_job
from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.pipeline.job import ScoreJob
from madrag.pipeline.migrations import CONFIG_VERSION, identity, upgrade
from madrag.providers.spec import ProviderSpec
from madrag.rubric import Rubric, Trait
from madrag.store import RunStore
from madrag.store.run_config import VERSION_KEY

RUBRIC = Rubric(name="r", traits=[Trait(name="Ideas", min=0, max=3, levels=dict.fromkeys(range(4), "..."))])


def _job(tmp_path: Path, prompts_dir: Path | None = None) -> ScoreJob:
    return ScoreJob(
        essays=[Essay(id="a", text="An essay.")],
        rubric=RUBRIC,
        run_dir=tmp_path / "run",
        eval_fold=None,
        protocols=["MA"],
        provider=ProviderSpec(kind="fake"),
        cache_dir=tmp_path / "cache",
        prompts_dir=prompts_dir,
    )


def _copy(tmp_path: Path, name: str, change: str = "") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    text = PromptLibrary().text("judge_system")
    (folder / "judge_system.txt").write_text(text + change + "\n", encoding="utf-8")
    return folder


def test_a_run_records_the_current_version_and_where_each_template_came_from(tmp_path: Path) -> None:
    run_job(_job(tmp_path), progress=False)
    store = RunStore(tmp_path / "run" / "store.sqlite", read_only=True)
    try:
        config = store.get_meta("config")
    finally:
        store.close()
    assert config[VERSION_KEY] == CONFIG_VERSION and upgrade(config) == config
    assert config["prompts"] == sorted(config["prompts"]) and "judge_system" in config["prompts"]
    assert config["prompt_sources"]["judge_system"] == "package:madrag/prompts/judge_system.txt"
    assert set(config["prompt_sha256"]) == set(config["prompts"])
    assert "prompt_sources" not in identity(config) and "prompt_sha256" not in identity(config)


def test_the_same_texts_from_a_prompts_dir_resume_and_a_changed_text_is_named(tmp_path: Path) -> None:
    two = [Essay(id="a", text="An essay."), Essay(id="b", text="Another essay.")]

    def job(prompts_dir: Path | None = None, limit: int | None = 1) -> ScoreJob:
        return _job(tmp_path, prompts_dir).model_copy(update={"essays": two, "limit": limit})

    run_job(job(), progress=False)
    same = run_job(job(_copy(tmp_path, "same")), progress=False)
    assert same.resumed and same.stats.made == 0  # the texts are the run's; their folder is provenance
    changed = _copy(tmp_path, "changed", " Be brief.")
    finished = run_job(job(changed), progress=False)  # nothing left to do: its scores are read, no prompt used
    assert finished.resumed and finished.stats.made == 0
    with pytest.raises(ConfigError, match=r"other prompt templates; prompt templates differ from the run.s: judge_sys"):
        run_job(job(changed, limit=None), progress=False)  # calls left: refused, naming the template


def test_a_configuration_newer_than_this_code_is_refused(tmp_path: Path) -> None:
    run_job(_job(tmp_path), progress=False)
    store = RunStore(tmp_path / "run" / "store.sqlite")
    try:
        store.set_meta("config", {**(store.get_meta("config") or {}), VERSION_KEY: CONFIG_VERSION + 1})
    finally:
        store.close()
    with pytest.raises(ConfigError, match=rf"newer madrag \(run configuration version {CONFIG_VERSION + 1}"):
        run_job(_job(tmp_path), progress=False)


def test_version_2_flat_backend_records_read_as_the_kinds_own_fields() -> None:
    """Version 2 recorded every kind's fields for any backend (what ``ProviderSpec`` was then, dumped); version
    3 records the kind's own options. Upgraded, an old record is the identity this release computes."""
    from madrag.providers.spec import spec_identity

    flat = {"kind": "fake", "model": None, "model_path": None, "base_url": None, "api_key_env": "OPENAI_API_KEY",
            "logprobs": True, "n_ctx": 8192}  # fmt: skip
    local = {**flat, "kind": "llamacpp", "model_path": "/m.gguf"}
    server = {**flat, "kind": "openai", "model": "m", "base_url": "http://h/v1", "token_param": "max_tokens"}
    old = {VERSION_KEY: 2, "provider": flat, "role_providers": {"strict": local, "lenient": server}}
    new = upgrade(old)
    assert new[VERSION_KEY] == CONFIG_VERSION == 4
    assert new["provider"] == {"kind": "fake", "model": None} == spec_identity(ProviderSpec(kind="fake"))
    assert new["role_providers"]["strict"] == {"kind": "llamacpp", "model": None, "model_path": "/m.gguf",
                                               "n_ctx": 8192, "runtime": "llama-cpp-python"}  # fmt: skip
    read = identity(old)["role_providers"]  # each recorded before the options added since: read with their values
    assert read["strict"] == spec_identity(ProviderSpec(model_path="/m.gguf", runtime="llama-cpp-python"))
    assert read["lenient"] == spec_identity(
        ProviderSpec(kind="openai", model="m", base_url="http://h/v1", token_param="max_tokens")
    )
    instance = {VERSION_KEY: 2, "provider": {"instance": {"provider": "mine"}}, "role_providers": {}}
    assert upgrade(instance)["provider"] == {"instance": {"provider": "mine"}}  # a ready provider: as recorded


def test_an_identity_recorded_without_an_option_added_since_reads_with_the_value_of_the_runs_before_it() -> None:
    """A backend identity left out an option added later (recorded before it existed, or by a release that left
    it out at that value): the embedded model's runtime llama-cpp-python, the openai backend's token_param and
    sampling_params auto. Read, it is the identity of a backend with those values, not of today's default
    runtime; an option it recorded is kept. Version 4 records every option; a version 4 identity without one (an
    option added after version 4) is read the same way."""
    from madrag.providers.spec import spec_identity

    local = {"kind": "llamacpp", "model": None, "model_path": "/m.gguf", "n_ctx": 8192}
    server = {"kind": "openai", "model": "m", "base_url": "http://h/v1", "token_param": "max_tokens"}
    upgraded = upgrade({VERSION_KEY: 3, "provider": local, "role_providers": {"lenient": server}})
    assert upgraded[VERSION_KEY] == 4 and upgraded["provider"]["runtime"] == "llama-cpp-python"  # version 4: all
    read = identity({VERSION_KEY: 3, "provider": local, "role_providers": {"lenient": server}})
    assert read["provider"] == spec_identity(ProviderSpec(model_path="/m.gguf", runtime="llama-cpp-python"))
    assert read["provider"] != spec_identity(ProviderSpec(model_path="/m.gguf"))
    assert read["role_providers"]["lenient"] == {**server, "sampling_params": "auto"}
    xl = {**local, "runtime": "xllamacpp"}
    assert identity({VERSION_KEY: 3, "provider": xl, "role_providers": {}})["provider"] == xl
    later = identity({VERSION_KEY: 4, "provider": local})  # as if the runtime were added after version 4
    assert later["provider"]["runtime"] == "llama-cpp-python"
    assert identity({VERSION_KEY: 3, "provider": {"instance": {"provider": "mine"}}})["provider"] == {
        "instance": {"provider": "mine"}
    }


def test_a_backends_retired_option_is_set_aside_where_stored_options_are_read() -> None:
    """The openai backend's ``client`` (the HTTP client, until madrag kept one) is retired: a recorded identity or
    a web run's options holding it read as today's, which the options model then accepts; a kind that never had
    it keeps an option of that name (refused by its model as any unknown option)."""
    from madrag.pipeline.migrations import upgrade_identity
    from madrag.pipeline.migrations.config import upgrade_options

    old = {"kind": "openai", "model": "m", "base_url": "http://h/v1", "client": "httpx"}
    auto = {"token_param": "auto", "sampling_params": "auto"}  # added later: the value of the runs before them
    assert upgrade_identity(old) == {"kind": "openai", "model": "m", "base_url": "http://h/v1", **auto}
    assert ProviderSpec.model_validate(upgrade_identity(old)) == ProviderSpec(
        kind="openai", model="m", base_url="http://h/v1"
    )
    assert upgrade_options("openai", {"client": "openai", "logprobs": False}) == {"logprobs": False}
    assert upgrade_options("fake", {"client": "x"}) == {"client": "x"}


def test_a_web_runs_description_written_before_the_logprobs_setting_reads_as_its_run_ran() -> None:
    """A ``run.json`` written before its backend recorded ``logprobs``: an OpenAI-compatible server's run ran
    with them (True); a kind the web app does not test (the fake) stays unknown (None); a recorded value is
    kept; the retired ``client`` option is set aside; the server reads the result (``RunMeta``)."""
    from madrag.pipeline.migrations import upgrade_run_description
    from madrag.server.runs.repo import RunMeta

    base = {"id": "abcdef", "protocols": ["MA"], "pool": "p", "eval_fold": None, "n_essays": 1, "n_traits": 1}
    old = {**base, "backend": {"kind": "openai", "model": "m", "options": {"client": "httpx"}}}
    meta = RunMeta.model_validate(upgrade_run_description(old))
    assert meta.backend.logprobs is True and meta.backend.options == {}
    assert "logprobs" not in old["backend"]  # the stored description is not changed by reading it
    fake = RunMeta.model_validate(upgrade_run_description({**base, "backend": {"kind": "fake"}}))
    assert fake.backend.logprobs is None
    told = {**base, "backend": {"kind": "openai", "model": "m", "logprobs": False}}
    assert RunMeta.model_validate(upgrade_run_description(told)).backend.logprobs is False
