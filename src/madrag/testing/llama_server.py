"""llama.cpp's own OpenAI-compatible server (the C++ ``llama-server``, from the prebuilt ``xllamacpp`` wheel) as a
process, for integration tests and benchmarks: the server many users run, with no compile.

Usage::

    python -m madrag.testing.llama_server --model PATH --port N [--n-ctx 4096] [--parallel 1] [--threads N]

It serves the real endpoints (``/v1/chat/completions``, ``/v1/completions``, ``/v1/models``, ``/health``) over
HTTP on 127.0.0.1 only, prints one line ``madrag llama-server ready at http://127.0.0.1:PORT/v1`` (``--port 0``:
a free port, named in that line) once the model is loaded, and serves until SIGTERM or SIGINT (or until its
parent process dies), then stops the server and exits 0. A missing model file or a busy port is a one-line
``madrag:`` error and exit status 2.

Two settings differ from ``llama-server``'s defaults, both for reproducible numbers: flash attention is off
(``--flash-attn on|auto`` restores it; off, its logprobs match llama-cpp-python's), and the host-memory prompt
cache (``--cache-ram``, MiB) is 0, so a request reuses only its slot's own previous prompt (the slot's KV cache
is still reused, and every answer reports ``usage.prompt_tokens_details.cached_tokens``). On an AMX CPU with a
llama.cpp build that uses AMX, the weights are loaded without llama.cpp's extra buffer types (see
:func:`madrag.providers.models.amx_rule`).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from madrag.errors import InputError, MadragError, ProviderError
from madrag.extras import require
from madrag.providers.models import amx_rule, cpu_has_amx

HOST = "127.0.0.1"
READY = "madrag llama-server ready at {url}"
"""The line printed (and flushed) once the server answers; ``{url}`` is its base URL, ending in ``/v1``."""
FLASH_ATTN = ("off", "on", "auto")
_PARENT_POLL_S = 1.0
STOP_TIMEOUT_S = 5.0
"""How long the server may take to stop before the process exits without waiting for it."""


@dataclass(frozen=True)
class ServerOptions:
    """What the server is started with (the command line's options)."""

    model: Path
    port: int = 0
    n_ctx: int = 4096
    parallel: int = 1
    threads: int | None = None
    alias: str | None = None
    flash_attn: str = "off"
    cache_ram_mib: int = 0
    verbose: bool = False


def check_options(opts: ServerOptions) -> None:
    """One-line errors for a model file that is not there and for numbers out of range."""
    if not opts.model.is_file():
        raise InputError(f"model file not found: {opts.model}")
    if not 0 <= opts.port <= 65535:
        raise InputError(f"--port must be 0..65535, got {opts.port}")
    for name, value in (("--n-ctx", opts.n_ctx), ("--parallel", opts.parallel), ("--threads", opts.threads)):
        if value is not None and value < 1:
            raise InputError(f"{name} must be >= 1, got {value}")
    if opts.flash_attn not in FLASH_ATTN:
        raise InputError(f"--flash-attn must be one of {', '.join(FLASH_ATTN)}, got {opts.flash_attn!r}")
    if opts.cache_ram_mib < -1:
        raise InputError(f"--cache-ram must be >= -1 (MiB; -1: no limit), got {opts.cache_ram_mib}")


def check_port_free(port: int) -> None:
    """A :class:`ProviderError` when ``port`` cannot be bound on 127.0.0.1 (llama.cpp only says 'failed to init')."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            raise ProviderError(f"port {port} on {HOST} is not free: {exc.strerror or exc}") from None


def build_params(opts: ServerOptions, xllamacpp: Any) -> Any:
    """The ``xllamacpp.CommonParams`` of ``opts``."""
    params = xllamacpp.CommonParams()
    params.model.path = str(opts.model)
    params.hostnames = [HOST]
    params.port = opts.port
    params.n_ctx = opts.n_ctx
    params.n_parallel = opts.parallel
    if opts.threads is not None:
        params.cpuparams.n_threads = opts.threads
        params.cpuparams_batch.n_threads = opts.threads
    if opts.alias:
        params.model_alias = {opts.alias}
    kinds = xllamacpp.llama_flash_attn_type
    params.flash_attn_type = {
        "off": kinds.LLAMA_FLASH_ATTN_TYPE_DISABLED,
        "on": kinds.LLAMA_FLASH_ATTN_TYPE_ENABLED,
        "auto": kinds.LLAMA_FLASH_ATTN_TYPE_AUTO,
    }[opts.flash_attn]
    params.cache_ram_mib = opts.cache_ram_mib
    params.verbosity = 0 if opts.verbose else -1
    if amx_rule(str(xllamacpp.get_system_info()), cpu_has_amx()):
        params.no_extra_bufts = True
    return params


def serve(opts: ServerOptions, ready: Callable[[str], None], stop: threading.Event) -> None:
    """Start the server, call ``ready`` with its base URL, serve until ``stop`` is set or the parent process
    dies, then stop it."""
    check_options(opts)
    check_port_free(opts.port)
    xllamacpp = require("embedded", "xllamacpp")
    params = build_params(opts, xllamacpp)
    try:
        held = [xllamacpp.Server(params)]
    except RuntimeError as exc:
        where = f"{opts.model.name} (port {opts.port})"
        raise ProviderError(f"llama.cpp could not serve {where}: {exc} (--verbose shows its log)") from None
    try:
        ready(f"{str(held[0].listening_address).rstrip('/')}/v1")
        parent = os.getppid()
        while not stop.wait(_PARENT_POLL_S):
            if os.getppid() != parent:  # orphaned (the test run was killed): do not outlive it
                break
    finally:
        _stop_server(held)


def _stop_server(held: list[Any]) -> None:
    """Drop the last reference to the server (its destructor stops llama.cpp's loop and joins it) in a thread;
    if that has not finished after :data:`STOP_TIMEOUT_S` (it once hung in the join), leave the process at once."""
    stopper = threading.Thread(target=held.clear, name="llama-server-stop", daemon=True)
    stopper.start()
    stopper.join(STOP_TIMEOUT_S)
    if stopper.is_alive():
        print(f"madrag: llama.cpp did not stop within {STOP_TIMEOUT_S:g}s; exiting without it", file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(0)


def parse_args(argv: Sequence[str] | None = None) -> ServerOptions:
    ap = argparse.ArgumentParser(prog="python -m madrag.testing.llama_server", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True, help="a GGUF model file")
    ap.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: a free one)")
    ap.add_argument("--n-ctx", type=int, default=4096, help="context tokens (shared by the slots)")
    ap.add_argument("--parallel", type=int, default=1, help="slots: requests decoded at once")
    ap.add_argument("--threads", type=int, default=None, help="CPU threads (default: llama.cpp's)")
    ap.add_argument("--alias", default=None, help="the model's name in /v1/models and answers (default: its path)")
    ap.add_argument("--flash-attn", choices=FLASH_ATTN, default="off")
    ap.add_argument("--cache-ram", type=int, default=0, dest="cache_ram_mib", help="host prompt cache, MiB")
    ap.add_argument("--verbose", action="store_true", help="llama.cpp's log on stderr")
    return ServerOptions(**vars(ap.parse_args(argv)))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until SIGTERM/SIGINT; 0 on a clean stop, 2 with a one-line error."""
    opts = parse_args(argv)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        serve(opts, lambda url: print(READY.format(url=url), flush=True), stop)
    except MadragError as exc:
        print(f"madrag: {exc}", file=sys.stderr, flush=True)
        return 2
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
