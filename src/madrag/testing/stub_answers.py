"""The stub server's configuration and its canned, role-aware answers (no model, no network).

A request's role is read from its prompt (:func:`classify`, by the markers the fake provider also keys on) and
its score range from the last "between A and B" (:func:`score_range`); :func:`completion` builds the whole
``chat.completion`` JSON, with per-token logprobs when asked, whose alternatives at a Judge's score token are
the other valid scores. Answers are deterministic: a function of the request's messages.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from typing import Any

from madrag.providers.fake import ROLE_MARKERS, meta_judgment_json
from madrag.retrieval.embedder import HashingEmbedder

MODEL = "stub-model"
"""The model name the stub answers as (and lists at ``/v1/models``) unless told another."""
_RANGE = re.compile(r"between\s+(-?\d+)\s+and\s+(-?\d+)", re.IGNORECASE)
_PIECE = re.compile(r"\s*\S+")
_WORDS = (
    "the essay develops its idea with a concrete example of waiting and the details stay on the topic "
    "while the ending resolves the story although some sentences repeat and the voice could be stronger"
).split()
_FILLER = (" the", " a", " and", " of", " to", " it", " is", " in")


@dataclass(frozen=True)
class StubConfig:
    """How the stub behaves: requests served at once (``capacity``; more wait), seconds each holds its slot,
        the model name it answers as, the words in a debater's answer and in a Judge's rationale, whether it
        refuses parameters as an OpenAI reasoning model does (``reasoning_model``: see :mod:`madrag.testing.reasoning`),
        whether its answers report token usage (``usage=False``: a server that reports none) and whether they carry
        the logprobs a request asks for (``logprobs=False``: a server that returns none, silently).

        Two stubs can play different servers under one model name: ``answer_prefix`` starts every answer's text,
        ``fingerprint`` is reported as each answer's ``system_fingerprint`` and as the model's ``root`` at
        ``/v1/models`` (as vLLM reports the weights behind a served name). ``fault_rate`` of the chat requests are
        answered ``fault_status`` (503: a transient failure) at once; whether an attempt fails is drawn from
        ``fault_seed``, the request's body and how many times that body was sent before, so the same requests fail
        the same way whatever order they arrive in. With ``props`` it says its slots and context as llama.cpp's
    server does (``/props``, ``/tokenize``), with its model file and ``build_info``, and its answers name its own
    model whatever name a request asks for (as llama.cpp's server does)."""

    capacity: int = 32
    latency_s: float = 0.25
    model: str = MODEL
    debater_tokens: int = 150
    judge_tokens: int = 60
    reasoning_model: bool = False
    usage: bool = True
    logprobs: bool = True
    answer_prefix: str = ""
    fingerprint: str | None = None
    fault_rate: float = 0.0
    fault_status: int = 503
    fault_seed: int = 0
    # as llama.cpp's server: GET /props says its slots (``capacity``) and per-slot context (``n_ctx``), and
    # POST /tokenize counts a text's tokens (one per word); without ``props`` both answer 404, as vLLM's do
    props: bool = False
    n_ctx: int = 4096
    build_info: str = "b0000-stub"  # what /props says of the build (with ``props``)
    # as a CPU-bound llama.cpp server: the slots share one compute, so its throughput does not grow with them
    cpu_bound: bool = False
    # as vLLM's server: GET /v1/models says the model's context (``max_model_len``); None: not said
    max_model_len: int | None = None
    owned_by: str = "madrag-stub"  # the model list's owned_by ("vllm": a server that refuses unlisted models)
    # that share of the Judge's scores (drawn from the prompt) is torn: the next score's logprob close behind the
    # winner's, so the score distribution is split and the review desk flags it ("the Judge was torn")
    torn_rate: float = 0.0
    # each request holds its slot latency_s times a factor drawn from 1 - latency_spread to 1 + latency_spread (a
    # server whose answers take varying times; seeded, in the order requests take their slot)
    latency_spread: float = 0.0
    # as llama.cpp's server: a chat request whose prompt (one token per word) is this long or longer is answered
    # HTTP 400 "the request exceeds the available context size"; None: any prompt is answered
    context_limit: int | None = None
    watch: str = ""  # a text the stub counts the requests carrying (in address, headers or body): a key's sentinel


def classify(messages: list[dict[str, Any]]) -> str:
    """The role a request plays: advocate, skeptic, judge, followup (a judge asked for its score),
    meta_evaluator or other."""
    last = str(messages[-1].get("content", "")) if messages else ""
    if last.startswith("State your final score now"):
        return "followup"
    text = "\n".join(str(m.get("content", "")) for m in messages)
    found = [(text.find(marker), role) for role, marker in ROLE_MARKERS if marker in text]
    return min(found)[1] if found else "other"


def score_range(messages: list[dict[str, Any]]) -> tuple[int, int]:
    """The last "between A and B" of the last user message (else of any message); (0, 3) if none."""
    users = [str(m.get("content", "")) for m in messages if m.get("role") == "user"]
    for text in [*users[-1:], *(str(m.get("content", "")) for m in reversed(messages))]:
        found = _RANGE.findall(text)
        if found:
            lo, hi = int(found[-1][0]), int(found[-1][1])
            return min(lo, hi), max(lo, hi)
    return 0, 3


def _digest(messages: list[dict[str, Any]]) -> int:
    blob = "\x00".join(str(m.get("content", "")) for m in messages).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "big")


def _words(n: int, seed: int) -> str:
    return " ".join(_WORDS[(seed + i) % len(_WORDS)] for i in range(max(1, n)))


def compose(role: str, messages: list[dict[str, Any]], config: StubConfig) -> tuple[str, int | None]:
    """(answer text, the score it states or None)."""
    seed = _digest(messages)
    if role == "meta_evaluator":  # the confidence paper's meta-evaluator: its JSON judgment
        return meta_judgment_json(seed, _words(20, seed)), None
    if role in ("judge", "followup", "other"):
        lo, hi = score_range(messages)
        score = lo + seed % (hi - lo + 1)
        if role == "followup":
            return f"Final score: {score}", score
        return f"{_words(config.judge_tokens, seed).capitalize()}.\nFinal score: {score}", score
    opening = "Strength:" if role == "advocate" else "Weakness:"
    text = f"{opening} {_words(config.debater_tokens - 1, seed)}."
    if "Confidence: X" in "".join(str(m.get("content", "")) for m in messages):
        text += f"\nConfidence: {0.5 + (seed % 50) / 100:.2f}"
    return text, None


def token_logprobs(
    text: str, top_n: int, score: int | None, lo: int, hi: int, seed: int, torn: bool = False
) -> list[dict[str, Any]]:
    """OpenAI ``logprobs.content``: one entry per whitespace-led piece; the last piece of a judge answer is the
    score, whose alternatives are the other valid scores (``torn``: the next one close behind)."""
    pieces = _PIECE.findall(text)
    content = []
    runner_up = None if score is None else (score + 1 if score < hi else score - 1)
    for i, piece in enumerate(pieces):
        logprob = -0.05 - ((seed >> (i % 32)) % 60) / 100 if i == 0 else -0.1
        if score is not None and i == len(pieces) - 1:
            alts = [
                (
                    f" {s}" if s != score else piece,
                    -0.1 if s == score else -0.3 if torn and s == runner_up else -2.0 - abs(s - score),
                )
                for s in range(lo, hi + 1)
            ]
            alts.sort(key=lambda a: -a[1])
        else:
            alts = [(piece, logprob), *((f, -3.0 - k) for k, f in enumerate(_FILLER))]
        top = [{"token": t, "logprob": lp, "bytes": None} for t, lp in alts[:top_n]]
        content.append({"token": piece, "logprob": logprob, "bytes": None, "top_logprobs": top})
    return content


def completion(body: dict[str, Any], config: StubConfig, role: str) -> dict[str, Any]:
    """The chat.completion JSON for one request body."""
    messages = body.get("messages") or []
    text, score = compose(role, messages, config)
    text = config.answer_prefix + text
    text, finish = _cut(text, body.get("max_completion_tokens") or body.get("max_tokens"))
    lo, hi = score_range(messages)
    logprobs = None
    if body.get("logprobs") and config.logprobs:
        top_n = int(body.get("top_logprobs") or 0)
        seed = _digest(messages)
        torn = (seed >> 16) % 1000 < config.torn_rate * 1000
        logprobs = {"content": token_logprobs(text, top_n, score, lo, hi, seed, torn)}
    prompt_tokens = sum(len(str(m.get("content", ""))) for m in messages) // 4
    completion_tokens = len(_PIECE.findall(text))
    answer: dict[str, Any] = {
        "id": f"chatcmpl-stub-{_digest(messages):x}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": config.model if config.props else body.get("model") or config.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": logprobs,
                "finish_reason": finish,
            }
        ],
    }
    if config.fingerprint is not None:
        answer["system_fingerprint"] = config.fingerprint
    if config.usage:
        answer["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    return answer


def _cut(text: str, limit: Any) -> tuple[str, str]:
    """The answer cut to ``limit`` tokens (whitespace pieces) as a server cuts at ``max_tokens``, and the finish
    reason: ``"length"`` when it was cut, else ``"stop"``."""
    pieces = _PIECE.findall(text)
    if isinstance(limit, int) and 0 < limit < len(pieces):
        return "".join(pieces[:limit]), "length"
    return text, "stop"


EMBEDDING_DIM = 64
"""The length of the stub's embeddings."""


def embeddings(body: Any, config: StubConfig) -> dict[str, Any] | str:
    """The ``POST /v1/embeddings`` answer to ``body``: one deterministic vector per input text, the hashing test
    embedder's bag of words (texts that share words are near), in OpenAI's layout; a string says why the body is
    refused (a 400)."""
    texts = body.get("input") if isinstance(body, dict) else None
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        return "'input' must be a string or a non-empty list of strings"
    vectors = HashingEmbedder(EMBEDDING_DIM).embed(texts)
    words = sum(len(t.split()) for t in texts)
    return {
        "object": "list",
        "model": body.get("model") or config.model,
        "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)],
        "usage": {"prompt_tokens": words, "total_tokens": words},
    }


def over_context(body: dict[str, Any], limit: int | None) -> bool:
    """Whether a chat request's prompt (one token per word of its messages) fills ``limit``, llama.cpp's check
    (None: no limit)."""
    if limit is None:
        return False
    return sum(len(str(m.get("content", "")).split()) for m in body["messages"] if isinstance(m, dict)) >= limit
