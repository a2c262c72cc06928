"""``python -m madrag.testing.llama_server``: llama.cpp's C++ server as a process (its options, errors, AMX
workaround, ready line, endpoints and clean stop)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from madrag.errors import InputError
from madrag.providers.models import amx_rule
from madrag.testing import llama_server as ls

try:
    from tests.servers import SERVED_MODEL, llama_server_command, skip_unless_cpp_server_available, wait_ready_line
except ImportError:  # tests/ itself on sys.path
    from servers import (  # type: ignore[no-redef,import-not-found,unused-ignore]
        SERVED_MODEL,
        llama_server_command,
        skip_unless_cpp_server_available,
        wait_ready_line,
    )

AMX_INFO = "CPU : SSE3 = 1 | AVX512 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
PLAIN_INFO = "CPU : SSE3 = 1 | AVX2 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "


@pytest.mark.parametrize(
    ("info", "cpu_amx", "expected"),
    [(AMX_INFO, True, True), (PLAIN_INFO, True, False), (AMX_INFO, False, False), (PLAIN_INFO, False, False)],
)
def test_amx_workaround_only_where_cpu_and_build_both_have_amx(info: str, cpu_amx: bool, expected: bool) -> None:
    assert amx_rule(info, cpu_amx) is expected


@pytest.mark.parametrize("amx", [True, False])
def test_params_carry_the_options_and_the_workaround(
    amx: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    xllamacpp = pytest.importorskip("xllamacpp")
    monkeypatch.setattr(ls, "cpu_has_amx", lambda: amx)
    monkeypatch.setattr(xllamacpp, "get_system_info", lambda: AMX_INFO)
    opts = ls.ServerOptions(model=tmp_path / "m.gguf", port=8123, n_ctx=1024, parallel=3, threads=2, alias="m")
    params = ls.build_params(opts, xllamacpp)
    assert params.no_extra_bufts is amx
    assert (params.port, params.n_ctx, params.n_parallel) == (8123, 1024, 3)
    assert params.hostnames == ["127.0.0.1"] and params.model.path == str(tmp_path / "m.gguf")
    assert params.cpuparams.n_threads == 2 and params.cpuparams_batch.n_threads == 2
    assert params.model_alias == {"m"} and params.cache_ram_mib == 0
    assert params.flash_attn_type == xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED


def test_bad_options_are_one_line_errors(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    with pytest.raises(InputError, match="model file not found"):
        ls.check_options(ls.ServerOptions(model=model))
    model.write_bytes(b"GGUF")
    with pytest.raises(InputError, match="--parallel must be >= 1"):
        ls.check_options(ls.ServerOptions(model=model, parallel=0))
    with pytest.raises(InputError, match="--port must be"):
        ls.check_options(ls.ServerOptions(model=model, port=70000))


def test_missing_model_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ls.main(["--model", str(tmp_path / "none.gguf"), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"madrag: model file not found: {tmp_path / 'none.gguf'}"


def test_busy_port_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert ls.main(["--model", str(model), "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"madrag: port {port} on 127.0.0.1 is not free") and "\n" not in err


@pytest.mark.integration
@pytest.mark.timeout(180)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serves_the_openai_endpoints_and_stops_cleanly_on_a_signal(sig: signal.Signals) -> None:
    model = skip_unless_cpp_server_available()
    with tempfile.TemporaryFile(mode="a+b") as log:
        proc = subprocess.Popen(
            llama_server_command(model, threads=1), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        try:
            url = wait_ready_line(proc, log, 120.0)
            assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
            models = httpx.get(f"{url}/models", timeout=10).json()
            assert [m["id"] for m in models["data"]] == [SERVED_MODEL]
            body: dict[str, Any] = {"prompt": "The sky is", "max_tokens": 3, "temperature": 0}
            done = httpx.post(f"{url}/completions", json=body, timeout=60).json()
            assert done["choices"][0]["text"] and done["usage"]["completion_tokens"] >= 1
            chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0}
            answer = httpx.post(f"{url}/chat/completions", json=chat, timeout=60).json()
            assert answer["object"] == "chat.completion" and answer["choices"][0]["message"]["role"] == "assistant"
        finally:
            proc.send_signal(sig)
            code = proc.wait(timeout=20)
    assert code == 0


def test_module_runs_as_a_script_with_help() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "madrag.testing.llama_server", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "--parallel" in done.stdout and "--model" in done.stdout
