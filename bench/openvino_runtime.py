"""OpenVINO beside xllamacpp on the embedded model's GGUF: the pieces ``bench.embedded_prompt_rate --openvino``
measures (needs ``pip install openvino-genai``; it is not one of madrag's dependencies).

Two ways to run the same GGUF through OpenVINO:

* ``GenAI``: ``openvino_genai.LLMPipeline(gguf, "CPU")`` as the library ships it (its own tokenizer, sampler and KV
  cache; per token it reports the chosen token's log-probability only, see docs/results/openvino-embedded.md);
* ``Logits``: the OpenVINO IR GenAI converts the GGUF to (saved once with ``enable_save_ov_model``), compiled by the
  OpenVINO runtime itself with one change, a ``keep`` input that slices the last positions' hidden states before
  the vocabulary projection: every step's full logits are in hand (so top-k alternatives and any token's
  log-probability), at the cost of running the generation loop in Python.

Both take token ids (the bench's random ids, or a prompt tokenized by xllamacpp), so every runtime evaluates the
same tokens.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def _genai() -> Any:
    try:
        import openvino_genai
    except ImportError as exc:
        raise SystemExit("--openvino needs openvino-genai: pip install openvino-genai") from exc
    return openvino_genai


def _properties(threads: int, kv_precision: str) -> dict[str, Any]:
    return {"INFERENCE_NUM_THREADS": threads, "KV_CACHE_PRECISION": kv_precision}


def convert_ir(gguf: Path, into: Path) -> Path:
    """The OpenVINO IR (``openvino_model.xml``) GenAI builds from ``gguf``, saved in ``into`` (GenAI writes it next to
    the GGUF it reads: a link to it in ``into``)."""
    genai = _genai()
    link = into / gguf.name
    if not link.exists():
        link.symlink_to(gguf.resolve())
    genai.LLMPipeline(str(link), "CPU", enable_save_ov_model=True)
    xml = into / "openvino_model.xml"
    if not xml.exists():
        raise SystemExit(f"OpenVINO GenAI did not save the converted model of {gguf.name} in {into}")
    return xml


class GenAI:
    """``openvino_genai.LLMPipeline`` on the GGUF, fed token ids."""

    def __init__(self, gguf: Path, threads: int, kv_precision: str) -> None:
        genai = _genai()
        self._genai = genai
        self.pipe = genai.LLMPipeline(str(gguf), "CPU", **_properties(threads, kv_precision))

    def _inputs(self, ids: list[int]) -> Any:
        import openvino as ov

        a = np.array([ids], dtype=np.int64)
        return self._genai.TokenizedInputs(ov.Tensor(a), ov.Tensor(np.ones_like(a)))

    def complete(self, ids: list[int], max_new: int) -> Any:
        config = self._genai.GenerationConfig()
        config.max_new_tokens = max_new
        config.min_new_tokens = max_new
        config.ignore_eos = True
        return self.pipe.generate(self._inputs(ids), config)

    def prompt_seconds(self, ids: list[int], clock: Any = time.perf_counter) -> float:
        start = clock()
        self.complete(ids, 1)
        return float(clock() - start)

    def generation_rate(self, ids: list[int], n: int) -> float:
        """Generated tokens per second, by GenAI's own metrics (the prompt's time left out)."""
        metrics = self.complete(ids, n).perf_metrics
        return float(metrics.get_throughput().mean)


class Batched:
    """``openvino_genai.ContinuousBatchingPipeline``: several requests scheduled together on one model."""

    def __init__(self, gguf: Path, threads: int, kv_precision: str) -> None:
        genai = _genai()
        self._genai = genai
        scheduler = genai.SchedulerConfig()
        scheduler.cache_size = 1  # GiB of KV blocks
        scheduler.enable_prefix_caching = False
        self.pipe = genai.ContinuousBatchingPipeline(str(gguf), scheduler, "CPU", _properties(threads, kv_precision))

    def seconds(self, prompts: list[list[int]], max_new: int) -> float:
        import openvino as ov

        config = self._genai.GenerationConfig()
        config.max_new_tokens = config.min_new_tokens = max_new
        config.ignore_eos = True
        inputs = [ov.Tensor(np.array([p], dtype=np.int64)) for p in prompts]
        start = time.perf_counter()
        self.pipe.generate(inputs, [config] * len(prompts))
        return time.perf_counter() - start


class Logits:
    """The converted IR on the OpenVINO runtime, with every step's logits: what a madrag runtime would run."""

    def __init__(
        self,
        xml: Path,
        threads: int,
        kv_precision: str,
        properties: dict[str, Any] | None = None,
        transform: Any = None,
    ) -> None:
        """``properties``: further CPU plugin settings; ``transform``: a function applied to the read model
        (``bench.openvino_q41.exact_zero_points``, say) before it is compiled."""
        import openvino as ov
        import openvino.opset13 as ops

        core = ov.Core()
        model = core.read_model(str(xml))
        if transform is not None:
            transform(model)
        projection = model.get_results()[0].input_value(0).get_node()  # hidden states @ output embedding
        keep = ops.parameter([1], ov.Type.i64, name="keep")
        keep.output(0).get_tensor().set_names({"keep"})
        one = ops.constant(np.array([1], dtype=np.int64))
        end = ops.constant(np.array([2**62], dtype=np.int64))
        last = ops.slice(projection.input_value(0), ops.negative(keep), end, one, one)
        projection.input(0).replace_source_output(last.output(0))
        model.add_parameters([keep])
        model.validate_nodes_and_infer_types()
        self.compiled = core.compile_model(model, "CPU", {**_properties(threads, kv_precision), **(properties or {})})
        self.request = self.compiled.create_infer_request()
        self.position = 0

    def feed(self, ids: list[int], keep: int = 1, reset: bool = False) -> np.ndarray:
        """Evaluate ``ids`` after what the context holds (all of it dropped when ``reset``); the logits of the last
        ``keep`` positions, shape (keep, vocabulary)."""
        if reset:
            self.request.reset_state()
            self.position = 0
        a = np.array([ids], dtype=np.int64)
        n = len(ids)
        self.request.infer(
            {
                "input_ids": a,
                "attention_mask": np.ones((1, self.position + n), dtype=np.int64),
                "position_ids": np.arange(self.position, self.position + n, dtype=np.int64)[None],
                "beam_idx": np.zeros(1, dtype=np.int32),
                "keep": np.array([keep], dtype=np.int64),
            }
        )
        self.position += n
        return np.array(self.request.get_tensor("logits").data[0])

    def prompt_seconds(self, ids: list[int], clock: Any = time.perf_counter) -> float:
        start = clock()
        self.feed(ids, reset=True)
        return float(clock() - start)

    def greedy(self, ids: list[int], n: int, top_k: int = 5) -> None:
        """Evaluate ``ids`` and generate ``n`` tokens greedily, each step's log-softmax and top ``top_k`` computed
        as madrag records them."""
        logits = self.feed(ids, reset=True)[-1]
        for i in range(n):
            lps = log_softmax(logits)
            top = np.argpartition(-lps, top_k)[:top_k]
            if i + 1 < n:
                logits = self.feed([int(top[np.argmax(lps[top])])])[-1]

    def generation_rate(self, ids: list[int], n: int) -> float:
        """Greedy tokens per second (see :meth:`greedy`), the prompt's time left out."""
        start = time.perf_counter()
        self.greedy(ids, 1)
        prompt = time.perf_counter() - start
        start = time.perf_counter()
        self.greedy(ids, n + 1)
        return n / (time.perf_counter() - start - prompt)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - float(np.max(logits))
    return np.asarray(shifted - np.log(np.exp(shifted).sum()))


class Workdir:
    """A temporary folder for the converted IR, removed at the end."""

    def __enter__(self) -> Path:
        self.path = Path(tempfile.mkdtemp(prefix="ov-ir-"))
        return self.path

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


# -- the side-by-side measurement ----------------------------------------------------------------------------------
def median(values: list[float]) -> float:
    return float(np.median(values))


Samples = dict[int, list[float]]


def alternate(runners: dict[str, Any], lengths: tuple[int, ...], reps: int, rng: Any) -> dict[str, Samples]:
    """Prompt tokens/s of every runner at every length, A B C A B C: one fresh random prompt per rep and length,
    the same for every runner. A runner is a function of the ids returning seconds."""
    out: dict[str, dict[int, list[float]]] = {name: {n: [] for n in lengths} for name in runners}
    for _ in range(reps):
        for n in lengths:
            ids = [rng.randrange(1000, 40000) for _ in range(n)]
            for name, seconds in runners.items():
                out[name][n].append(n / seconds(ids))
    return out


def show(label: str, samples: dict[int, list[float]], unit: str) -> None:
    shown = ", ".join(f"{n}: {median(v):.0f} [{' '.join(f'{x:.0f}' for x in v)}]" for n, v in samples.items())
    print(f"{label:<34} median {unit} by length (each rep) {{{shown}}}", flush=True)


def show_ratios(label: str, samples: dict[int, list[float]], base: dict[int, list[float]]) -> None:
    """The median of the per-rep ratios (each rep's pair measured back to back)."""
    paired = {n: [a / b for a, b in zip(v, base[n], strict=True)] for n, v in samples.items()}
    shown = ", ".join(f"{n}: {median(r):.2f}" for n, r in paired.items())
    print(f"  {label:<32} / xllamacpp's, median of paired ratios {{{shown}}}", flush=True)
