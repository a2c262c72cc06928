"""The "Python API" page's examples (docs/python-api.md), executed as they are (fake provider, no network), so
they cannot rot.

The blocks run in order in one namespace, as cells of a notebook, in a temporary working directory. The one
substitution: the exemplar bank embeds with a fast bag-of-words embedder instead of MiniLM (the real embedder
is exercised by the integration tests and docs/python_api_example.py).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from tests.helpers import BagOfWordsEmbedder

import madrag.retrieval

PAGE = Path(__file__).resolve().parents[3] / "docs" / "python-api.md"


def python_api_blocks() -> list[str]:
    """Every fenced ```python block of the "Python API" page (its title up to its next section)."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("# Python API\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```python\n(.*?)^```$", section, flags=re.DOTALL | re.MULTILINE)


def test_the_section_has_examples() -> None:
    blocks = python_api_blocks()
    assert len(blocks) >= 3 and all("madrag." in b or "asyncio" in b for b in blocks)


def test_readme_python_api_examples_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MADRAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the examples' temporary run directories
    monkeypatch.setattr(madrag.retrieval.embedder, "MiniLMEmbedder", BagOfWordsEmbedder)
    namespace: dict[str, object] = {"__name__": "readme"}
    for number, block in enumerate(python_api_blocks(), start=1):
        exec(compile(block, f"docs/python-api.md block {number}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "essay" in out and "rationale" in out and "MADRAG" in out  # the printed tables
    assert (tmp_path / "runs" / "nb" / "store.sqlite").is_file()
