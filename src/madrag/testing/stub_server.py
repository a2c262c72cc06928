"""A local OpenAI-compatible chat server for load tests and benchmarks (no model: canned, role-aware answers).

Every ``POST /v1/chat/completions`` waits for one of ``capacity`` slots (the rest wait in a queue), holds it
``latency_s`` seconds, then answers as the role the prompt asks for: an Advocate or Skeptic argument of
``debater_tokens`` words, or a Judge rationale ending in ``Final score: N`` within the prompt's last "between A
and B"; with ``logprobs``, per-token logprobs and ``top_logprobs`` (the other valid scores at the score token);
``/v1/embeddings`` a hashed bag-of-words vector; with ``props``, ``/props`` and ``/tokenize`` as llama.cpp's.
With ``reasoning_model`` it refuses, as OpenAI's reasoning models do, ``max_tokens``, a non-default
``temperature`` or ``top_p`` and ``logprobs`` with an HTTP 400 (see :mod:`madrag.testing.reasoning`).
With ``torn_rate`` that share of the Judge's scores come with the next score's logprob close behind (a torn Judge,
which the review desk flags); with ``latency_spread`` each latency varies by up to that share of ``latency_s``.
With ``cpu_bound`` its slots share one compute, as a CPU-bound server's do: each answer takes ``latency_s`` of it,
one at a time, so more requests in flight are answered no faster. With ``fault_rate`` it answers that share of the
chat requests with ``fault_status`` (default 503) at once, as an overloaded server does; ``answer_prefix`` and
``fingerprint`` make two stubs different servers under one model name; the answers and the configuration
(:class:`~madrag.testing.stub_answers.StubConfig`) are :mod:`madrag.testing.stub_answers`.

It listens on 127.0.0.1 only, and exits by itself when its parent process dies or after ``max_lifetime_s``.

From Python::

    with StubServer(capacity=32, latency_s=0.25) as server:
        provider = OpenAICompatProvider("stub-model", base_url=server.base_url, max_concurrency=32)
        ...
        print(server.stats().max_in_flight)
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import selectors
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web

from madrag.testing.reasoning import refusal
from madrag.testing.stub_answers import MODEL, StubConfig, classify, completion, embeddings, over_context

_LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Requests to the stub's own port on loopback: no proxy of the environment in between."""

HOST = "127.0.0.1"


@dataclass
class StubStats:
    """What the stub has seen since it started (or was reset)."""

    requests: int = 0
    http_requests: int = 0  # every HTTP request but the stats' own (chat, models, embeddings, props, malformed)
    watched: int = 0  # requests whose address, headers or body held ``watch`` (a key that must never arrive)
    completed: int = 0
    refused: int = 0  # requests answered 400 for a parameter the emulated model refuses
    faults: int = 0  # requests answered ``fault_status`` (``fault_rate``)
    embedding_requests: int = 0  # POST /v1/embeddings answered
    embedded: int = 0  # texts they embedded
    in_flight: int = 0
    max_in_flight: int = 0
    waiting: int = 0
    max_waiting: int = 0
    by_role: dict[str, int] = field(default_factory=dict)
    peak_rss_kb: int = 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StubStats:
        """The stats from ``GET /stats``'s JSON (unknown keys ignored)."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


# -- the server ---------------------------------------------------------------------------------------------


def _peak_rss_kb() -> int:
    """VmHWM of this process from /proc (0 where /proc is missing)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class StubApp:
    """The request handlers, the slot semaphore and the counters."""

    def __init__(self, config: StubConfig) -> None:
        self.config = config
        self.stats = StubStats()
        self.roles: Counter[str] = Counter()
        self._slots = asyncio.Semaphore(config.capacity)
        self._latency = random.Random(0)
        self._compute = asyncio.Lock()  # a CPU-bound server's one compute its slots share (``cpu_bound``)
        self._sent: Counter[str] = Counter()  # times each request body was sent (for the fault draws)

    def build(self) -> web.Application:
        """The aiohttp application with the stub's routes."""
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[self.seen])
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/embeddings", self.embeddings)
        app.router.add_get("/stats", self.get_stats)
        if self.config.props:
            app.router.add_get("/props", self.props)
            app.router.add_post("/tokenize", self.tokenize)
        app.router.add_post("/stats/reset", self.reset)
        return app

    @web.middleware
    async def seen(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Count every request but ``/stats``'s, and those that carry ``watch`` anywhere."""
        if not request.path.startswith("/stats"):
            self.stats.http_requests += 1
            watch = self.config.watch
            if watch:
                headers = "\n".join(f"{k}: {v}" for k, v in request.headers.items())
                if watch in request.path_qs or watch in headers or watch.encode() in await request.read():
                    self.stats.watched += 1
        response: web.StreamResponse = await handler(request)
        return response

    async def chat(self, request: web.Request) -> web.Response:
        """``POST /v1/chat/completions``: a 400 for a malformed body (or, as a reasoning model, a refused
        parameter), else the canned answer after the latency."""
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "request body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return _error(400, "'messages' must be a non-empty list")
        role = classify(body["messages"])
        self.stats.requests += 1
        self.roles[role] += 1
        if self.config.reasoning_model and (refused := refusal(body)) is not None:
            self.stats.refused += 1
            return web.json_response(refused, status=400)
        if over_context(body, self.config.context_limit):
            self.stats.refused += 1
            return _error(
                400, "the request exceeds the available context size, try increasing it", "exceed_context_size_error"
            )
        if self._fault(body):
            self.stats.faults += 1
            return _error(self.config.fault_status, "stub fault: the server is overloaded", "server_error")
        answer = await self._hold_slot(body, role)
        self.stats.completed += 1
        return web.Response(body=answer, content_type="application/json")

    def _fault(self, body: dict[str, Any]) -> bool:
        """Whether this attempt fails: a draw from the seed, the body and the times it was sent before."""
        if self.config.fault_rate <= 0:
            return False
        digest = hashlib.blake2b(json.dumps(body, sort_keys=True).encode("utf-8"), digest_size=16).hexdigest()
        attempt = self._sent[digest]
        self._sent[digest] += 1
        draw = hashlib.blake2b(f"{self.config.fault_seed}:{digest}:{attempt}".encode(), digest_size=8).digest()
        return int.from_bytes(draw, "big") / 2**64 < self.config.fault_rate

    async def _hold_slot(self, body: dict[str, Any], role: str) -> bytes:
        """Wait for a slot (counted as waiting), then hold it for the latency (counted as in flight) and answer.

        The answer is composed and serialised while the slot is held, inside the latency, as a real server
        generates its answer in the time it takes: the reply leaves ``latency_s`` after the slot was taken (or
        later, if composing took longer), not ``latency_s`` plus this process's own work."""
        self.stats.waiting += 1
        self.stats.max_waiting = max(self.stats.max_waiting, self.stats.waiting)
        try:
            await self._slots.acquire()
        finally:
            self.stats.waiting -= 1
        try:
            start = time.monotonic()
            self.stats.in_flight += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
            answer = json.dumps(completion(body, self.config, role)).encode("utf-8")
            if self.config.cpu_bound:  # its slots share one compute: one answer at a time, each latency_s of it
                async with self._compute:
                    await asyncio.sleep(self.config.latency_s)
                return answer
            latency = self.config.latency_s * (1.0 + self.config.latency_spread * self._latency.uniform(-1.0, 1.0))
            await asyncio.sleep(max(0.0, latency - (time.monotonic() - start)))
            return answer
        finally:
            self.stats.in_flight -= 1
            self._slots.release()

    async def embeddings(self, request: web.Request) -> web.Response:
        """``POST /v1/embeddings``: a deterministic vector per text (:func:`~madrag.testing.stub_answers.embeddings`),
        at once; a 400 for a malformed body."""
        try:
            answer = embeddings(await request.json(), self.config)
        except ValueError:
            return _error(400, "request body is not JSON")
        if isinstance(answer, str):
            return _error(400, answer)
        self.stats.embedding_requests += 1
        self.stats.embedded += len(answer["data"])
        return web.json_response(answer)

    async def models(self, _request: web.Request) -> web.Response:
        """``GET /v1/models``: the one model (with the ``fingerprint`` as its ``root``, when set)."""
        c = self.config
        model = {"id": c.model, "object": "model", "created": 0, "owned_by": c.owned_by}
        extra = {"root": c.fingerprint, "max_model_len": c.max_model_len}
        return web.json_response(
            {"object": "list", "data": [model | {k: v for k, v in extra.items() if v is not None}]}
        )

    async def props(self, _request: web.Request) -> web.Response:
        """``GET /props`` as llama.cpp's server answers it: its slots, each slot's context, its model file and
        build."""
        c = self.config
        body = {"total_slots": c.capacity, "default_generation_settings": {"n_ctx": c.n_ctx, "params": {}}}
        return web.json_response(body | {"model_path": f"/models/{c.model}.gguf", "build_info": c.build_info})

    async def tokenize(self, request: web.Request) -> web.Response:
        """``POST /tokenize``: one token per word of ``content``."""
        body = await request.json()
        content = body.get("content", "") if isinstance(body, dict) else ""
        return web.json_response({"tokens": list(range(len(str(content).split())))})

    async def get_stats(self, _request: web.Request) -> web.Response:
        """``GET /stats``: the counters, requests by role and this process's peak memory."""
        self.stats.by_role = dict(self.roles)
        self.stats.peak_rss_kb = _peak_rss_kb()
        return web.json_response(asdict(self.stats))

    async def reset(self, _request: web.Request) -> web.Response:
        """``POST /stats/reset``: zero the counters (requests still waiting or in flight stay counted)."""
        in_flight, waiting = self.stats.in_flight, self.stats.waiting
        self.stats = StubStats(in_flight=in_flight, waiting=waiting)
        self.roles.clear()
        return web.json_response({"reset": True})


def _error(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind}}, status=status)


async def serve(config: StubConfig, port: int = 0, max_lifetime_s: float = 3600.0) -> None:
    """Serve on 127.0.0.1:``port`` (0: any free port), print ``READY <port>``, and run until the parent
    process dies or ``max_lifetime_s`` passes."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, port))
    runner = web.AppRunner(StubApp(config).build(), access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock, backlog=1024).start()
    print(f"READY {sock.getsockname()[1]}", flush=True)
    parent = os.getppid()
    deadline = time.monotonic() + max_lifetime_s
    try:
        while time.monotonic() < deadline and os.getppid() == parent:
            await asyncio.sleep(0.5)
    finally:
        await runner.cleanup()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="A local OpenAI-compatible stub server (127.0.0.1 only).")
    parser.add_argument("--port", type=int, default=0, help="port (0: any free port, printed as READY <port>)")
    parser.add_argument("--capacity", type=int, default=32, help="requests served in parallel; more wait")
    parser.add_argument("--latency", type=float, default=0.25, help="seconds each request holds a slot")
    parser.add_argument("--model", default=MODEL, help="model name in answers and /v1/models")
    parser.add_argument("--debater-tokens", type=int, default=150, help="words in an Advocate/Skeptic answer")
    parser.add_argument("--judge-tokens", type=int, default=60, help="words in a Judge rationale")
    parser.add_argument("--no-usage", action="store_true", help="answers report no token usage")
    parser.add_argument("--no-logprobs", action="store_true", help="answers carry no logprobs, even when asked")
    parser.add_argument("--reasoning-model", action="store_true", help="refuse max_tokens, temperature, logprobs")
    parser.add_argument("--answer-prefix", default="", help="text every answer starts with")
    parser.add_argument("--fingerprint", default=None, help="system_fingerprint of answers, root at /v1/models")
    parser.add_argument("--fault-rate", type=float, default=0.0, help="share of chat requests that fail")
    parser.add_argument("--fault-status", type=int, default=503, help="HTTP status of a failed request")
    parser.add_argument("--fault-seed", type=int, default=0, help="seed of the fault draws")
    parser.add_argument("--props", action="store_true", help="answer /props and /tokenize as llama.cpp's server")
    parser.add_argument("--cpu-bound", action="store_true", help="slots share one compute: no faster when fuller")
    parser.add_argument("--n-ctx", type=int, default=4096, help="the per-slot context /props says")
    parser.add_argument("--max-model-len", type=int, default=None, help="the context /v1/models says, as vLLM")
    parser.add_argument("--owned-by", default="madrag-stub", help="owned_by in /v1/models (vllm: as vLLM says it)")
    parser.add_argument("--latency-spread", type=float, default=0.0, help="each latency varies by up to this share")
    parser.add_argument("--torn-rate", type=float, default=0.0, help="share of Judge scores torn between two")
    parser.add_argument("--context-limit", type=int, default=None, help="400 for a prompt of this many words or more")
    parser.add_argument("--watch", default="", help="count the requests that carry this text (stats: watched)")
    parser.add_argument("--max-lifetime", type=float, default=3600.0, help="exit after this many seconds")
    return parser


_NEGATED = ("no_usage", "no_logprobs")
"""The options that switch a :class:`StubConfig` field off (``usage``, ``logprobs``)."""


def _field(dest: str) -> str:
    """The :class:`StubConfig` field option ``dest`` sets (empty for ``--port`` and ``--max-lifetime``)."""
    if dest in ("port", "max_lifetime"):
        return ""
    return {"latency": "latency_s", "no_usage": "usage", "no_logprobs": "logprobs"}.get(dest, dest)


def main(argv: list[str] | None = None) -> None:
    """``python -m madrag.testing.stub_server``: parse the options and serve until the parent process dies."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.capacity < 1 or args.latency < 0:
        parser.error("--capacity must be >= 1 and --latency >= 0")
    if not 0.0 <= args.fault_rate <= 1.0 or not 400 <= args.fault_status <= 599:
        parser.error("--fault-rate must be in [0, 1] and --fault-status an HTTP error status")
    fields: dict[str, Any] = {_field(d): not v if d in _NEGATED else v for d, v in vars(args).items() if _field(d)}
    config = StubConfig(**fields)
    asyncio.run(serve(config, args.port, args.max_lifetime))


# -- running it from Python -----------------------------------------------------------------------------------


class StubServer:
    """Run the stub in a subprocess (its own interpreter, so it does not compete for the caller's GIL) on
    ``port`` (0: any free port; give a stopped stub's port to start another server at the same URL)."""

    def __init__(
        self, config: StubConfig | None = None, *, start_timeout_s: float = 30.0, port: int = 0, **kwargs: Any
    ) -> None:
        self.config = config or StubConfig(**kwargs)
        self.start_timeout_s = start_timeout_s
        self.port = port
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (``http://127.0.0.1:<port>/v1``) once started."""
        return f"http://{HOST}:{self.port}/v1"

    def command(self) -> list[str]:
        """The command line that runs the stub with this configuration: each option whose value differs from
        its default."""
        options = []
        for dest, default in vars(_parser().parse_args([])).items():
            value = getattr(self.config, _field(dest)) if _field(dest) else default
            value = not value if dest in _NEGATED else value
            flag = "--" + dest.replace("_", "-")
            if value != default:
                options.append(flag if isinstance(default, bool) else f"{flag}={value}")
        return [sys.executable, "-m", "madrag.testing.stub_server", *options, f"--port={self.port}"]

    def start(self) -> StubServer:
        """Start the subprocess and wait until it says which port it listens on (RuntimeError if it does not)."""
        self._log = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=self._log)
        try:
            self.port = self._read_port(self._proc)
        except BaseException:
            self.stop()
            raise
        return self

    def _read_port(self, proc: subprocess.Popen[bytes]) -> int:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(self.start_timeout_s):
                raise RuntimeError(f"stub server not ready after {self.start_timeout_s:.0f}s: {self._tail()}")
        line = proc.stdout.readline().decode("ascii", errors="replace").split()
        if len(line) != 2 or line[0] != "READY":
            raise RuntimeError(f"stub server failed to start: {self._tail()}")
        return int(line[1])

    def _tail(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        text: str = self._log.read().decode("utf-8", errors="replace")
        return text[-2000:]

    def stats(self) -> StubStats:
        """What the stub has seen so far (``GET /stats``)."""
        with _LOCAL.open(f"http://{HOST}:{self.port}/stats", timeout=10.0) as response:
            return StubStats.from_json(json.loads(response.read()))

    def reset_stats(self) -> None:
        """Zero the stub's counters (``POST /stats/reset``)."""
        reset = urllib.request.Request(f"http://{HOST}:{self.port}/stats/reset", data=b"", method="POST")
        with _LOCAL.open(reset, timeout=10.0):  # an error answer raises HTTPError
            pass

    def stop(self) -> None:
        """Terminate the subprocess (killing it if it lingers) and drop its log; safe to call twice."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


if __name__ == "__main__":
    main()
