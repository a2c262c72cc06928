"""The embedded model's OpenVINO runtime, without running the model: the token table read from the GGUF, the
aligned prompt reuse, the converted model's cache folder, and the runtime option and its errors."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from madrag.cli.backend_options import spec_from_options
from madrag.errors import InputError, ProviderError
from madrag.extras import MissingExtra
from madrag.providers.embedded import read_gguf_metadata
from madrag.providers.llamacpp import LlamaCppProvider
from madrag.providers.models import smollm2_gguf_path
from madrag.providers.ov_engine import _gpt2_byte_decoder, aligned_reuse, read_token_table

HAS_OPENVINO = importlib.util.find_spec("openvino_genai") is not None


def test_the_byte_level_alphabet_stands_for_every_byte_once() -> None:
    decoder = _gpt2_byte_decoder()
    assert sorted(decoder.values()) == list(range(256))
    assert decoder["Ġ"] == ord(" ") and decoder["Ċ"] == ord("\n") and decoder["a"] == ord("a")


def test_the_token_table_gives_the_pieces_and_end_tokens_of_the_shipped_model() -> None:
    path = smollm2_gguf_path()
    table = read_token_table(path)
    texts = read_gguf_metadata(path, ("tokenizer.ggml.tokens",))["tokenizer.ggml.tokens"]
    assert len(table.pieces) == len(texts) == 49152
    by_text = dict(zip(texts, table.pieces, strict=True))
    assert by_text["Ġthe"] == b" the" and by_text["ĊĊ"] == b"\n\n" and by_text["Final"] == b"Final"
    assert by_text["<|im_end|>"] == b"<|im_end|>"  # a control token as its text, as llama.cpp's server reports it
    assert table.eog == {texts.index("<|endoftext|>"), texts.index("<|im_end|>")}
    # a multi-byte character split over tokens: the pieces are bytes, joined before decoding
    assert any(len(p.decode("utf-8", "replace")) < len(p) for p in table.pieces)


@pytest.mark.parametrize(
    ("held", "ids", "aligned", "expected"),
    [
        ([], list(range(1200)), 0, 0),  # nothing held
        (list(range(1200)), list(range(1200)), 1024, 1024),  # the same prompt: its whole chunks, never all of it
        (list(range(1024)), list(range(1024)), 1024, 512),  # the last position is evaluated again: one chunk less
        (list(range(700)), [*range(600), 9, 9], 512, 512),  # common prefix 600: one whole chunk
        (list(range(1200)), [*range(300), 9], 1024, 0),  # common prefix under a chunk
        ([*range(1100), 5, 5], list(range(1300)), 512, 512),  # only what was evaluated aligned, whatever is common
    ],
)
def test_only_whole_chunks_an_earlier_prompt_evaluated_are_reused(
    held: list[int], ids: list[int], aligned: int, expected: int
) -> None:
    assert aligned_reuse(held, ids, aligned, 512) == expected


@pytest.mark.skipif(not HAS_OPENVINO, reason="openvino-genai is not installed")
def test_the_converted_model_is_kept_per_file_content(tmp_path: Path) -> None:
    from madrag.providers.ov_model import CONVERSION, ir_folder

    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.write_bytes(b"GGUF one")
    b.write_bytes(b"GGUF one")
    root = tmp_path / "cache"
    assert ir_folder(a, root).parent == root and ir_folder(a, root).name.startswith("a-")
    assert ir_folder(a, root).name[2:] == ir_folder(b, root).name[2:]  # the same content: the same hash
    b.write_bytes(b"GGUF two")
    assert ir_folder(a, root).name[2:] != ir_folder(b, root).name[2:]
    assert CONVERSION  # part of the hashed text, with the OpenVINO GenAI version


def test_the_openvino_runtime_option_and_its_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    assert spec_from_options(runtime="openvino").runtime == "openvino"
    with pytest.raises(InputError, match="--runtime must be one of xllamacpp, llama-cpp-python, openvino; got 'vllm'"):
        spec_from_options(runtime="vllm")
    unknown = "unknown embedded runtime 'vllm'; choose xllamacpp, llama-cpp-python, openvino"
    with pytest.raises(ProviderError, match=unknown):
        LlamaCppProvider(runtime="vllm")  # type: ignore[arg-type]
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "openvino_genai" else real(name, *a)
    )
    with pytest.raises(MissingExtra) as missing:
        LlamaCppProvider(runtime="openvino")
    assert str(missing.value) == (
        "openvino-genai is not installed (the openvino extra: the embedded model's OpenVINO runtime (--runtime "
        "openvino)): pip install 'madrag[openvino]'"
    )
