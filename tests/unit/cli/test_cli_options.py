"""The CLI's shared option helpers: choices, counts, comma lists, the ProviderSpec the provider flags make, and
a clean stop on Ctrl-C."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from madrag.cli.backend_options import spec_from_options
from madrag.cli.options import at_least_one, choice, comma_list, need_run_dir
from madrag.cli.output import progress_bar, run_with_progress
from madrag.errors import InputError


def test_choice_returns_the_value_or_names_the_flag_and_options() -> None:
    assert choice("--report", "argmax", ("parsed", "argmax", "expected")) == "argmax"
    with pytest.raises(InputError, match=r"^--report must be one of parsed, argmax, expected; got 'best'$"):
        choice("--report", "best", ("parsed", "argmax", "expected"))


def test_at_least_one_accepts_missing_and_positive_counts() -> None:
    at_least_one("--sample", None)
    at_least_one("--sample", 1)
    with pytest.raises(InputError, match=r"^--sample must be >= 1, got 0$"):
        at_least_one("--sample", 0)


def test_comma_list_drops_blanks_and_spaces() -> None:
    assert comma_list(" advocate, ,skeptic,") == ["advocate", "skeptic"]
    assert comma_list("") == []


def test_need_run_dir() -> None:
    assert need_run_dir(Path("runs/x")) == Path("runs/x")
    assert need_run_dir(None, Path("runs/y")) == Path("runs/y")
    assert need_run_dir(Path("runs/x"), Path("runs/x")) == Path("runs/x")
    with pytest.raises(InputError, match="RUN_DIR or --run-dir"):
        need_run_dir(None)
    with pytest.raises(InputError, match="give the run folder once"):
        need_run_dir(Path("runs/x"), Path("runs/y"))


def test_provider_spec_from_the_generated_backend_options() -> None:
    spec = spec_from_options(
        provider="openai", model="m", model_path="/models/big.gguf", base_url=["http://host/v1"], api_key_env="KEY",
        concurrency=3, timeout=5.0, retries=1, slots=4, logprobs=False, fake_latency=0.5,
    )  # fmt: skip
    assert (spec.kind, spec.model, spec.options.base_url, spec.options.api_key_env) == (  # type: ignore[attr-defined]
        "openai",
        "m",
        "http://host/v1",
        "KEY",
    )
    assert (spec.concurrency, spec.timeout_s, spec.retries) == (3, 5.0, 1)
    assert spec.logprobs is False and spec.extra_base_urls == []
    assert "model_path" not in spec.flat() and "slots" not in spec.flat()  # the embedded model's, not openai's
    local = spec_from_options(model_path="/models/big.gguf", slots=4, fake_latency=0.5)
    assert (local.kind, local.model_path, local.slots) == ("llamacpp", "/models/big.gguf", 4)
    slow = spec_from_options(provider="fake", fake_latency=0.5)
    assert slow.fake_latency_s == 0.5
    urls = ["http://a/v1", "http://b/v1", "http://c/v1"]
    pool = spec_from_options(provider="openai", model="m", base_url=urls, concurrency=4)
    assert (pool.base_url, pool.extra_base_urls) == ("http://a/v1", ["http://b/v1", "http://c/v1"])
    plain = spec_from_options(provider="openai", model="m")
    assert plain.base_url is None and plain.logprobs is True and plain.api_key_env == "OPENAI_API_KEY"
    assert (plain.token_param, plain.sampling_params) == ("auto", "auto")
    with pytest.raises(InputError, match="--provider must be one of llamacpp, openai, fake, anthropic; got 'vllm'"):
        spec_from_options(provider="vllm")
    with pytest.raises(InputError, match="--token-param must be one of"):
        spec_from_options(provider="openai", token_param="x")


def test_run_with_progress_returns_the_result_and_exits_130_on_ctrl_c() -> None:
    async def done() -> int:
        return 7

    async def interrupted() -> int:
        raise KeyboardInterrupt

    assert run_with_progress(progress_bar(), done(), lambda: "unused") == 7
    with pytest.raises(typer.Exit) as stopped:
        run_with_progress(progress_bar(), interrupted(), lambda: "interrupted; resume with the same command")
    assert stopped.value.exit_code == 130
