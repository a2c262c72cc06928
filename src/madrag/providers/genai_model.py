"""The embedded model as OpenVINO GenAI runs it (``runtime="openvino-genai"``): converted once, and its tokens.

OpenVINO GenAI reads a GGUF file itself, but converts a quantised one (the embedded default's Q4_1) into its own
int4 layout with each block's minimum rounded to an integer zero point: a different model from the one llama.cpp
runs (docs/results/openvino-embedded.md: the Judge's score distribution 0.09-0.18 away in total variation). So the
GGUF is first dequantised to F16 (exact for Q4_1's values) with the ``gguf`` package, and that copy converted by
GenAI into an OpenVINO IR with its tokenizer and detokenizer. Both are made once per model file, in the cache folder
(``$MADRAG_CACHE/openvino/<model>-<hash>``: the hash is the GGUF's content, the GenAI version and this conversion's
own version), written to a temporary folder and renamed into place; nothing is downloaded.

:func:`read_token_table` reads each token's bytes and the end-of-generation ids from the GGUF's own vocabulary,
as llama.cpp's server reports a token's text (a control token as its text).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from madrag.errors import ProviderError
from madrag.extras import require
from madrag.providers.cache import default_cache_dir
from madrag.providers.embedded import read_gguf_metadata

CONVERSION = "f16-ir-1"
"""This conversion's version: part of the cached folder's name, so a changed conversion is made anew."""
_BUILD_LOCK = threading.Lock()
_FILES = ("openvino_model.xml", "openvino_model.bin", "openvino_tokenizer.xml", "openvino_detokenizer.xml")


def dequantize_gguf(src: Path, dst: Path, kind: str = "f16") -> None:
    """``src``'s tensors dequantised to F16 (exact for Q4_1's values) or, with ``kind="q8_0"``, requantised to
    Q8_0 (what bench/embedded_prompt_rate.py's ``--formats`` measures), its metadata kept, written to ``dst``."""
    gguf = require("embedded", "gguf")
    from gguf.quants import dequantize, quantize

    reader = gguf.GGUFReader(src)
    writer = gguf.GGUFWriter(dst, reader.fields["general.architecture"].contents())
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value_type = field.types[0]
        sub = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), value_type, sub_type=sub)
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
    genai = require("embedded", "openvino_genai")
    stat = gguf.stat()
    content = _content_hash(gguf.resolve(), stat.st_size, stat.st_mtime_ns)
    digest = hashlib.sha256(f"{content} {genai.__version__} {CONVERSION}".encode()).hexdigest()
    return (root or default_cache_dir() / "openvino") / f"{gguf.stem}-{digest[:16]}"


def _complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in _FILES)


def converted_model(gguf: Path, root: Path | None = None) -> Path:
    """The folder of ``gguf``'s OpenVINO IR (from its F16 copy) and tokenizer, converted here the first time
    (seconds; the F16 GGUF made on the way is removed once converted)."""
    folder = ir_folder(gguf, root)
    if _complete(folder):
        return folder
    genai = require("embedded", "openvino_genai")
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


# the end-of-generation texts llama.cpp recognises besides the GGUF's own eos/eot/eom ids (llama-vocab.cpp)
_EOG_TEXTS = frozenset(
    {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>"}
)
_CONTROL, _USER_DEFINED, _BYTE = 3, 4, 6


def _gpt2_byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the character standing for each byte in a BPE vocabulary's token texts."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


@dataclass(frozen=True)
class TokenTable:
    """Each token id's bytes (its piece, as llama.cpp's server reports it) and the end-of-generation ids."""

    pieces: list[bytes]
    eog: frozenset[int]

    def text(self, token: int) -> str:
        """The token's piece as text (bytes that are not UTF-8 on their own replaced)."""
        return self.pieces[token].decode("utf-8", "replace")


def read_token_table(path: Path) -> TokenTable:
    """The token pieces and end-of-generation ids of a GGUF file's vocabulary (a BPE ``gpt2`` vocabulary or a
    SentencePiece ``llama`` one)."""
    meta = read_gguf_metadata(path, ("tokenizer.ggml.",))
    texts, kinds = meta.get("tokenizer.ggml.tokens"), meta.get("tokenizer.ggml.token_type")
    model = meta.get("tokenizer.ggml.model")
    if not isinstance(texts, list) or not isinstance(kinds, list) or len(texts) != len(kinds):
        raise ProviderError(f"{path.name} has no token types beside its vocabulary")
    if model not in ("gpt2", "llama"):
        raise ProviderError(f"the OpenVINO runtime reads BPE (gpt2) or SentencePiece (llama) vocabularies, not {model}")
    decoder = _gpt2_byte_decoder()
    pieces: list[bytes] = []
    for text, kind in zip(texts, kinds, strict=True):
        if kind in (_CONTROL, _USER_DEFINED):
            pieces.append(str(text).encode())
        elif model == "gpt2":
            pieces.append(bytes(decoder[c] for c in text) if all(c in decoder for c in text) else text.encode())
        elif kind == _BYTE:
            pieces.append(bytes([int(str(text)[3:-1], 16)]))
        else:
            pieces.append(str(text).replace("\u2581", " ").encode())
    named = {meta.get(f"tokenizer.ggml.{key}_token_id") for key in ("eos", "eot", "eom")}
    eog = {i for i in named if isinstance(i, int)}
    eog |= {i for i, (t, k) in enumerate(zip(texts, kinds, strict=True)) if k == _CONTROL and t in _EOG_TEXTS}
    return TokenTable(pieces=pieces, eog=frozenset(eog))
