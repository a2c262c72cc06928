"""CITATION.cff: the software and the papers it implements, valid Citation File Format 1.2.0 (checked by
cffconvert, the format's own validator, when it is installed: it is in the dev extra)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
CFF = REPO / "CITATION.cff"
_CLI = "import sys; from cffconvert.cli.cli import cli; sys.argv[0] = 'cffconvert'; cli()"


def test_citation_names_the_three_papers_and_the_peers() -> None:
    cff = yaml.safe_load(CFF.read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software" and cff["authors"]
    titles = {ref["title"] for ref in cff["references"]}
    assert (
        "MADRAG: Multi-Agent Debate with Retrieval-Augmented Generation for Training-Free Analytic Essay Scoring"
        in titles
    )
    assert "Early-Token Confidence Predicts Reasoning Quality in Multi-Agent LLM Debate" in titles
    assert any(t.startswith("Beyond Consensus: Downward Bias and Role Asymmetry") for t in titles)
    ids = {i["value"] for ref in cff["references"] for i in ref.get("identifiers", [])}
    assert {"arXiv:2606.10307", "arXiv:2407.05733", "arXiv:2404.04941", "arXiv:2303.16634"} <= ids
    madrag = next(r for r in cff["references"] if r["title"].startswith("MADRAG"))
    assert [a["family-names"] for a in madrag["authors"]] == ["Keramati", "Zhou", "Mehrotra", "Warschauer"]
    assert "version" in cff and cff["version"] == _project_version()


def _project_version() -> str:
    import tomllib

    return str(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])


@pytest.mark.skipif(
    importlib.util.find_spec("cffconvert") is None,
    reason="cffconvert (the Citation File Format validator, in the dev extra) is not installed",
)
def test_citation_validates_with_cffconvert() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CLI, "--validate", "--infile", str(CFF)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
