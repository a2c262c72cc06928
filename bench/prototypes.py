"""Prototypes of two proposed changes, used only by the bench to size what they would gain.

Neither is part of madrag; both are measured in a row labelled as a prototype.

* :class:`FastParseProvider`: ``OpenAICompatProvider`` reading the raw JSON of the answer instead of letting
  the ``openai`` package build (and validate) its pydantic models and then building madrag's own
  ``TokenLogprob`` models with validation: the per-token logprob parsing is most of the client's CPU per call.
* :class:`WriterThreadStore`: the run store committing in a writer thread, so the fsync of each record's
  commit (``synchronous=FULL``) does not block the event loop. Prototype shortcut: ``put`` returns once the
  record is queued; the real change would make ``put`` awaitable and resolve it after the commit (same
  durability as now: a call counts as finished only once its record is on disk).
"""

from __future__ import annotations

import json
import queue
import threading
import time
from pathlib import Path
from typing import Any

import openai

from madrag.providers.base import ChatRequest, ChatResponse, TokenLogprob, TopLogprob, Usage
from madrag.providers.openai_compat import OpenAICompatProvider
from madrag.records import AgentRecord
from madrag.store import RunStore


def _tokens(content: list[dict[str, Any]], top_n: int) -> list[TokenLogprob]:
    return [
        TokenLogprob.model_construct(
            token=str(item["token"]),
            logprob=float(item["logprob"]),
            top=[
                TopLogprob.model_construct(token=str(alt["token"]), logprob=float(alt["logprob"]))
                for alt in (item.get("top_logprobs") or [])[:top_n]
            ],
        )
        for item in content
    ]


def response_from_json(data: dict[str, Any], request: ChatRequest, latency: float, model: str) -> ChatResponse:
    """A ChatResponse straight from the chat.completion JSON (prototype: no garbage checks)."""
    choice = data["choices"][0]
    text = choice["message"].get("content") or ""
    tokens = None
    if request.logprobs:
        tokens = _tokens((choice.get("logprobs") or {}).get("content") or [], request.top_logprobs)
    usage = data.get("usage") or {}
    return ChatResponse.model_construct(
        text=text,
        tokens=tokens,
        choice_logprobs=None,
        finish_reason=choice.get("finish_reason"),
        usage=Usage(prompt_tokens=usage.get("prompt_tokens", 0), completion_tokens=usage.get("completion_tokens", 0)),
        latency_s=latency,
        model=data.get("model") or model,
        cached=False,
        raw=data,
    )


class FastParseProvider(OpenAICompatProvider):
    """OpenAICompatProvider that parses the answer's JSON itself (see the module docstring)."""

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        kwargs = self.request_kwargs(request)
        async with self._semaphore:
            start = time.monotonic()
            try:
                raw = await self._client.chat.completions.with_raw_response.create(**kwargs)
            except openai.APIError as exc:
                raise self._map_error(exc) from None
            latency = time.monotonic() - start
        return response_from_json(json.loads(raw.content), request, latency, self.model)


class WriterThreadStore(RunStore):
    """RunStore whose ``put`` hands the record to a writer thread (its own connection, same pragmas)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.put_times: list[float] = []
        self._queue: queue.Queue[AgentRecord | None] = queue.Queue()
        self._thread = threading.Thread(target=self._write_loop, name="store-writer", daemon=True)
        self._thread.start()

    def _write_loop(self) -> None:
        writer = RunStore(self.path)
        try:
            while (record := self._queue.get()) is not None:
                writer.put(record)
                self._queue.task_done()
        finally:
            writer.close()
            self._queue.task_done()

    def put(self, record: AgentRecord) -> bool:
        start = time.perf_counter()
        self._queue.put(record)
        self.put_times.append(time.perf_counter() - start)
        return True

    def flush(self) -> None:
        """Wait until every queued record is committed."""
        self._queue.join()

    def keys(self) -> set[str]:
        self.flush()
        return super().keys()

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout=60)
        super().close()
