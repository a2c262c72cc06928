"""The embedded model on OpenVINO: the model it runs, converted once, and every step's logits.

OpenVINO GenAI reads a GGUF file itself, but converts a quantised one (the embedded default's Q4_1) into its own
quantised layout, a different model from the one llama.cpp runs (docs/results/openvino-embedded.md: the Judge's
score distribution 0.09-0.18 away in total variation). So the GGUF is first dequantised to F16 (exact for Q4_1's
values), and that copy converted by GenAI into an OpenVINO IR (``openvino_model.xml``, with GenAI's tokenizer and
detokenizer beside it). Both are made once per model file, in the cache folder
(``$MADRAG_CACHE/openvino/<model>-<hash>``: the hash is the GGUF's content with the OpenVINO GenAI version and this
conversion's own version), written to a temporary folder and renamed into place; nothing is downloaded.

:class:`StatefulLogits` runs that IR on the OpenVINO runtime itself, not through GenAI's pipeline (which reports the
chosen token's log-probability only, never the alternatives): one input is added, ``keep``, which slices the last
positions' hidden states before the vocabulary projection, so each call returns the full-vocabulary logits of the
positions asked for. The KV cache is the model's state; it is cut back to a prefix by slicing the state tensors.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from madrag.errors import ProviderError
from madrag.extras import require
from madrag.providers.cache import default_cache_dir

CONVERSION = "f16-ir-1"
"""This conversion's version: part of the cached folder's name, so a changed conversion is made anew."""
_BUILD_LOCK = threading.Lock()


def dequantize_gguf(src: Path, dst: Path, kind: str = "f16") -> None:
    """``src``'s tensors dequantised to F16 (exact for Q4_1's values) or requantised to Q8_0 (``kind="q8_0"``),
    its metadata kept, written to ``dst``."""
    gguf = require("openvino", "gguf")
    from gguf.quants import dequantize, quantize

    reader = gguf.GGUFReader(src)
    writer = gguf.GGUFWriter(dst, reader.fields["general.architecture"].contents())
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        kind_of = field.types[0]
        sub = field.types[-1] if kind_of == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), kind_of, sub_type=sub)
    plain = (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16)
    for t in reader.tensors:
        if t.tensor_type in plain:
            writer.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
            continue
        values = dequantize(t.data, t.tensor_type).reshape([int(x) for x in reversed(t.shape.tolist())])
        if kind == "f16":
            writer.add_tensor(t.name, values.astype(np.float16))
        else:
            q8 = quantize(values.astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(t.name, q8, raw_shape=q8.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@lru_cache(maxsize=8)
def _content_hash(path: Path, size: int, mtime_ns: int) -> str:
    """The SHA-256 of a file's content (cached per path, size and modification time)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def ir_folder(gguf: Path, root: Path | None = None) -> Path:
    """Where the converted model of ``gguf`` is kept: named by the file's content, the OpenVINO GenAI version and
    :data:`CONVERSION` (a changed file, runtime or conversion is another folder)."""
    genai = require("openvino", "openvino_genai")
    stat = gguf.stat()
    digest = hashlib.sha256(
        f"{_content_hash(gguf.resolve(), stat.st_size, stat.st_mtime_ns)} {genai.__version__} {CONVERSION}".encode()
    ).hexdigest()
    return (root or default_cache_dir() / "openvino") / f"{gguf.stem}-{digest[:16]}"


def _complete(folder: Path) -> bool:
    names = ("openvino_model.xml", "openvino_model.bin", "openvino_tokenizer.xml", "openvino_detokenizer.xml")
    return all((folder / name).is_file() for name in names)


def converted_model(gguf: Path, root: Path | None = None) -> Path:
    """The folder of ``gguf``'s OpenVINO IR (F16) and tokenizer, converted here the first time (seconds; the F16
    GGUF made on the way is removed once converted)."""
    folder = ir_folder(gguf, root)
    if _complete(folder):
        return folder
    genai = require("openvino", "openvino_genai")
    with _BUILD_LOCK:
        if _complete(folder):
            return folder
        folder.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".converting-", dir=folder.parent))
        try:
            f16 = work / f"{gguf.stem}-f16.gguf"
            dequantize_gguf(gguf, f16)
            genai.LLMPipeline(str(f16), "CPU", enable_save_ov_model=True)  # saves the IR beside the file it reads
            f16.unlink()
            if not _complete(work):
                raise ProviderError(f"OpenVINO GenAI did not convert {gguf.name}: {sorted(os.listdir(work))}")
            try:
                work.rename(folder)
            except OSError:  # another process put it there first
                if not _complete(folder):
                    raise
        except (OSError, RuntimeError, ValueError) as exc:
            raise ProviderError(f"cannot convert {gguf.name} for OpenVINO: {exc}") from exc
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return folder


def compile_properties(threads: int) -> dict[str, Any]:
    """The CPU plugin's settings: ``threads`` threads in one stream, computing in f32 (OpenVINO's default on a CPU
    with bf16 would be bf16: another model's numbers) with the KV cache in f16 (its default u8 would change them
    too)."""
    return {
        "INFERENCE_NUM_THREADS": threads,
        "NUM_STREAMS": 1,
        "INFERENCE_PRECISION_HINT": "f32",
        "KV_CACHE_PRECISION": "f16",
    }


class StatefulLogits:
    """The converted model on the OpenVINO runtime with every step's logits: one context (its KV cache is the
    model's state), fed token ids after what it holds."""

    def __init__(self, xml: Path, threads: int) -> None:
        ov = require("openvino", "openvino")
        ops = require("openvino", "openvino.opset13")
        core = ov.Core()
        try:
            model = core.read_model(str(xml))
            projection = model.get_results()[0].input_value(0).get_node()  # hidden states @ output embedding
            keep = ops.parameter([1], ov.Type.i64, name="keep")
            keep.output(0).get_tensor().set_names({"keep"})
            one = ops.constant(np.array([1], dtype=np.int64))
            end = ops.constant(np.array([2**62], dtype=np.int64))
            last = ops.slice(projection.input_value(0), ops.negative(keep), end, one, one)
            projection.input(0).replace_source_output(last.output(0))
            model.add_parameters([keep])
            model.validate_nodes_and_infer_types()
            self._compiled = core.compile_model(model, "CPU", compile_properties(threads))
        except RuntimeError as exc:
            raise ProviderError(f"OpenVINO cannot load {xml}: {exc}") from exc
        self._ov = ov
        self._request = self._compiled.create_infer_request()
        self.position = 0  # tokens the state holds

    def feed(self, ids: list[int], keep: int = 1) -> np.ndarray:
        """Evaluate ``ids`` after what the state holds; the logits of the last ``keep`` positions, shape (keep,
        vocabulary)."""
        n = len(ids)
        self._request.infer(
            {
                "input_ids": np.array([ids], dtype=np.int64),
                "attention_mask": np.ones((1, self.position + n), dtype=np.int64),
                "position_ids": np.arange(self.position, self.position + n, dtype=np.int64)[None],
                "beam_idx": np.zeros(1, dtype=np.int32),
                "keep": np.array([keep], dtype=np.int64),
            }
        )
        self.position += n
        return np.array(self._request.get_tensor("logits").data[0])

    def cut(self, n: int) -> None:
        """Keep the first ``n`` positions of the state (all of it dropped when 0)."""
        if n <= 0:
            self._request.reset_state()
        elif n < self.position:
            for state in self._request.query_state():
                held = np.asarray(state.state.data)  # [batch, kv heads, positions, head size]
                state.state = self._ov.Tensor(np.ascontiguousarray(held[:, :, :n, :]))
        self.position = min(max(n, 0), self.position)
