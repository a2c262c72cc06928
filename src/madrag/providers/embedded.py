"""What the embedded runtimes share: a generation's result, trimming at a stop sequence, and the GGUF chat
template rendered the way llama-cpp-python's ``Jinja2ChatFormatter`` renders it (without importing it), so that
both runtimes send a model the same prompt text."""

from __future__ import annotations

import json
import mmap
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from madrag.errors import ProviderError
from madrag.providers.base import ChatRequest, TokenLogprob


@dataclass
class Generated:
    """One completion as an engine produced it (the provider wraps it in a ChatResponse)."""

    text: str
    tokens: list[TokenLogprob]
    n_prompt: int
    finish_reason: str
    choice_logprobs: dict[str, float] | None = None
    # of the n_prompt tokens, those taken from the context's KV cache (an aligned prefix an earlier request of the
    # same context evaluated) rather than evaluated: reported as the response's cached prompt tokens; None (unknown)
    # until the engine sets it
    n_cached: int | None = None
    # what the runtime says of how it computed this generation (the response's raw fields): see genai.py
    notes: dict[str, Any] = field(default_factory=dict)


LOAD_LOCK = threading.Lock()
"""Model loads are one at a time, both runtimes' (llama-cpp-python's points file descriptors 1 and 2 at /dev/null
and back: two loads at once in two threads would leave stdout and stderr pointing at /dev/null for good)."""


class EngineContext:
    """What both embedded engines (llama-cpp-python's, xllamacpp's) are: one llama.cpp context of the model file,
    its window, threads and batch, used by one request at a time; :meth:`generate` runs the engine's own
    ``_generate_locked`` under the lock."""

    def __init__(
        self, model_path: Path, n_ctx: int, n_threads: int, n_batch: int, n_threads_batch: int | None = None
    ) -> None:
        self.model_path = model_path
        self.model = model_path.name
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.n_threads_batch = n_threads_batch or n_threads  # not every core: see LlamaCppProvider's threads
        self.n_batch = n_batch
        self.slot_count = 1  # the provider's slots (a runtime whose slots share one model runs on all their threads)
        # a timed-out await does not stop its worker thread: this lock keeps the context single-user
        self._thread_lock = threading.Lock()

    def generate(self, request: ChatRequest) -> Generated:
        """The completion of ``request`` (blocking: run it in a worker thread)."""
        with self._thread_lock:
            return self._generate_locked(request)

    def _generate_locked(self, request: ChatRequest) -> Generated:
        raise NotImplementedError

    def close(self) -> None:
        """Free the model context (waiting for a generation still running in a worker thread)."""
        raise NotImplementedError

    def render_prompt(self, request: ChatRequest) -> str:
        """The chat template applied to the messages, plus the prefill when there is one."""
        return self._render([{"role": m.role, "content": m.content} for m in request.messages]) + (
            request.prefill or ""
        )

    def _render(self, messages: list[dict[str, str]]) -> str:
        raise NotImplementedError

    def check_fits(self, n_prompt: int, request: ChatRequest) -> None:
        """A ProviderError when the prompt's ``n_prompt`` tokens and the answer's limit overflow the window."""
        if n_prompt + request.max_tokens > self.n_ctx:
            raise ProviderError(
                f"prompt of {n_prompt} tokens + max_tokens {request.max_tokens} exceeds the context "
                f"window of {self.n_ctx} tokens of {self.model}"
            )


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading token ids ``a`` and ``b`` share."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


class StopScan:
    """One generation's tokens and text as they come, cut before the first stop sequence (both runtimes')."""

    def __init__(self, stop: list[str]) -> None:
        self.stop = stop
        self.tokens: list[TokenLogprob] = []
        self.buf = b""
        self.text = ""
        self.finish = "length"

    def add(self, token: TokenLogprob, piece: bytes) -> bool:
        """Take one generated token and its bytes; True when a stop sequence was generated (cut off)."""
        self.tokens.append(token)
        self.buf += piece
        self.text = self.buf.decode("utf-8", "ignore")
        hit = min((i for s in self.stop if (i := self.text.find(s)) >= 0), default=-1)
        if hit < 0:
            return False
        self.text, self.finish = self.text[:hit], "stop"
        kept, length = [], 0
        for tok in self.tokens:
            if length >= hit:
                break
            kept.append(tok)
            length += len(tok.token)
        self.tokens = kept
        return True

    def result(self, n_prompt: int) -> Generated:
        """The generation, once it has ended."""
        return Generated(text=self.text, tokens=self.tokens, n_prompt=n_prompt, finish_reason=self.finish)


class _IgnoreGenerationTags(jinja2.ext.Extension):
    """Pass-through for HuggingFace's ``{% generation %}`` chat-template tag."""

    tags = {"generation"}  # noqa: RUF012 - as jinja2.ext.Extension declares it

    def parse(self, parser: Any) -> Any:
        parser.stream.skip(1)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


def _tojson(
    x: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _raise_exception(message: str) -> None:
    raise ValueError(message)


class ChatTemplate:
    """A model's Jinja chat template with its BOS and EOS token texts, rendered as llama-cpp-python 0.3's
    ``Jinja2ChatFormatter`` does: a sandboxed environment with ``trim_blocks`` and ``lstrip_blocks``, the
    ``generation`` tag ignored, ``loopcontrols``, Transformers' ``tojson``, ``raise_exception``,
    ``strftime_now`` and ``add_generation_prompt=True``."""

    def __init__(self, template: str, bos_token: str, eos_token: str) -> None:
        env = ImmutableSandboxedEnvironment(
            loader=jinja2.BaseLoader(),
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[_IgnoreGenerationTags, jinja2.ext.loopcontrols],
        )
        env.filters["tojson"] = _tojson
        self._template = env.from_string(template)
        self.bos_token = bos_token
        self.eos_token = eos_token

    def render(self, messages: list[dict[str, str]]) -> str:
        """The prompt text of ``messages``, ending with the assistant turn's opening."""
        try:
            return self._template.render(
                messages=messages,
                eos_token=self.eos_token,
                bos_token=self.bos_token,
                raise_exception=_raise_exception,
                add_generation_prompt=True,
                functions=None,
                function_call=None,
                tools=None,
                tool_choice=None,
                strftime_now=_strftime_now,
            )
        except (ValueError, jinja2.TemplateError) as exc:
            raise ProviderError(f"the model's chat template refused the messages: {exc}") from exc


@dataclass(frozen=True)
class GgufVocab:
    """What a runtime reads of a GGUF file's tokenizer: the chat template, the BOS/EOS texts, the vocabulary
    size."""

    template: ChatTemplate
    n_vocab: int


def read_gguf_vocab(path: Path) -> GgufVocab:
    """The chat template (with the texts of the BOS and EOS tokens) and the vocabulary size of a GGUF file."""
    try:
        meta = read_gguf_metadata(path, ("tokenizer.",))
    except (OSError, ValueError, struct.error) as exc:
        raise ProviderError(f"cannot read model {path}: {exc}") from exc
    template = meta.get("tokenizer.chat_template")
    if not template:
        raise ProviderError(f"{path.name} has no chat template in its metadata")
    tokens = meta.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens:
        raise ProviderError(f"{path.name} has no tokenizer vocabulary in its metadata")

    def text(key: str) -> str:
        token_id = meta.get(f"tokenizer.ggml.{key}_token_id")
        return str(tokens[token_id]) if isinstance(token_id, int) and 0 <= token_id < len(tokens) else ""

    return GgufVocab(template=ChatTemplate(str(template), text("bos"), text("eos")), n_vocab=len(tokens))


# GGUF value types (gguf.GGUFValueType) of fixed size: struct format per type
_FIXED = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


def read_gguf_metadata(path: Path, prefixes: tuple[str, ...]) -> dict[str, Any]:
    """The metadata values of a little-endian GGUF file (v2, v3) whose keys start with one of ``prefixes``.

    A direct scan of the header: the ``gguf`` package's ``GGUFReader`` maps every value of every array as its
    own numpy view and takes seconds on a vocabulary of 50k tokens (longer than llama.cpp's model load)."""
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        if buf[:4] != b"GGUF":
            raise ValueError("not a GGUF file")
        version, _n_tensors, n_kv = struct.unpack_from("<IQQ", buf, 4)
        if version not in (2, 3):
            raise ValueError(f"GGUF version {version} is not supported")
        pos, out = 24, {}
        for _ in range(n_kv):
            key, pos = _string(buf, pos)
            (kind,) = struct.unpack_from("<I", buf, pos)
            value, pos = _value(buf, pos + 4, kind)
            if key.startswith(prefixes):
                out[key] = value
        return out


def _string(buf: Any, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from("<Q", buf, pos)
    return bytes(buf[pos + 8 : pos + 8 + n]).decode("utf-8", "replace"), pos + 8 + n


def _value(buf: Any, pos: int, kind: int) -> tuple[Any, int]:
    if kind in _FIXED:
        fmt = "<" + _FIXED[kind]
        return struct.unpack_from(fmt, buf, pos)[0], pos + struct.calcsize(fmt)
    if kind == _STRING:
        return _string(buf, pos)
    if kind != _ARRAY:
        raise ValueError(f"unknown GGUF value type {kind}")
    item, count = struct.unpack_from("<IQ", buf, pos)
    pos += 12
    if item in _FIXED:
        fmt = f"<{count}{_FIXED[item]}"
        return list(struct.unpack_from(fmt, buf, pos)), pos + struct.calcsize(fmt)
    values = []
    for _ in range(count):
        value, pos = _value(buf, pos, item)
        values.append(value)
    return values, pos
