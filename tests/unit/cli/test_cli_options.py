"""The CLI's shared option helpers: choices, counts, comma lists, the ProviderSpec the provider flags make, and
a clean stop on Ctrl-C."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer

from madrag.cli.options import ProviderFlags, at_least_one, choice, comma_list, need_run_dir, provider_spec
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


def test_provider_spec_from_flags() -> None:
    spec = provider_spec(
        ProviderFlags(
            provider="openai",
            model="m",
            model_path=Path("/models/big.gguf"),
            base_url=["http://host/v1"],
            api_key_env="KEY",
            concurrency=3,
            timeout=5.0,
            retries=1,
            slots=4,
            logprobs=False,
            fake_latency=0.5,
        )
    )
    assert (spec.kind, spec.model, spec.model_path, spec.base_url, spec.api_key_env) == (
        "openai",
        "m",
        "/models/big.gguf",
        "http://host/v1",
        "KEY",
    )
    assert (spec.concurrency, spec.timeout_s, spec.retries, spec.slots) == (3, 5.0, 1, 4)
    assert spec.logprobs is False and spec.fake_latency_s == 0.5 and spec.extra_base_urls == []
    urls = ["http://a/v1", "http://b/v1", "http://c/v1"]
    pool = provider_spec(ProviderFlags(provider="openai", model="m", model_path=None, base_url=urls, api_key_env="K",
                                       concurrency=4, timeout=5.0, retries=1, slots=1))  # fmt: skip
    assert (pool.base_url, pool.extra_base_urls) == ("http://a/v1", ["http://b/v1", "http://c/v1"])
    defaults: dict[str, Any] = {"model": None, "model_path": None, "base_url": None, "api_key_env": "K"}
    plain = provider_spec(
        ProviderFlags(provider="fake", concurrency=None, timeout=300.0, retries=4, slots=2, **defaults)
    )
    assert plain.model_path is None and plain.logprobs is True and plain.fake_latency_s == 0.0
    assert (plain.token_param, plain.sampling_params) == ("auto", "auto")
    with pytest.raises(InputError, match="--provider must be one of llamacpp, openai, fake; got 'vllm'"):
        provider_spec(ProviderFlags(provider="vllm", concurrency=None, timeout=1.0, retries=0, slots=1, **defaults))
    odd = ProviderFlags(
        provider="openai", concurrency=None, timeout=1.0, retries=0, slots=1, token_param="x", **defaults
    )
    with pytest.raises(InputError, match="--token-param must be one of"):
        provider_spec(odd)


def test_run_with_progress_returns_the_result_and_exits_130_on_ctrl_c() -> None:
    async def done() -> int:
        return 7

    async def interrupted() -> int:
        raise KeyboardInterrupt

    assert run_with_progress(progress_bar(), done(), lambda: "unused") == 7
    with pytest.raises(typer.Exit) as stopped:
        run_with_progress(progress_bar(), interrupted(), lambda: "interrupted; resume with the same command")
    assert stopped.value.exit_code == 130
