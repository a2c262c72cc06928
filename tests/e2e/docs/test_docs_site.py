"""The documentation site builds: ``mkdocs build --strict`` on ``mkdocs.yml`` (a broken link, a broken anchor or a
page of ``docs/`` left out of the nav fails it), into a temporary folder, never into the repository. mkdocs comes
with the ``dev`` extra (``mkdocs-material``): where it is absent the test is skipped, saying so, except in CI
(``CI=true``), where it fails. The README is the front page: short, and every link of it leads somewhere."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
README_LIMIT = 8 * 1024  # bytes: what madrag is, the two commands, the common ones, links; the manual is the site


def nav_pages(nav: list[object]) -> list[str]:
    """Every page of a mkdocs nav, in order (sections flattened)."""
    pages: list[str] = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages += nav_pages(value) if isinstance(value, list) else [str(value)]
    return pages


def test_docs_site_builds_strict(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        reason = "mkdocs-material is not installed (the dev extra: pip install 'madrag[dev]')"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}, and CI=true requires it")
        pytest.skip(reason)
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    args = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"), "-d", str(site)]
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = nav_pages(config["nav"])
    assert {"quickstart.md", "differences.md", "dependencies.md", "reproduce.md", "architecture.md"} <= set(pages)
    for page in pages:
        built = "index.html" if page == "index.md" else page.removesuffix(".md").removesuffix("README") + "/index.html"
        assert (site / built.lstrip("/")).is_file(), f"{page} was not built ({built})"


def test_readme_is_a_short_front_page() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode("utf-8")) <= README_LIMIT, "README.md grew past 8 KB: the manual belongs in docs/"
    assert "## Two commands" in readme and "## References" in readme
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if not target.startswith(("http://", "https://")):
            assert (REPO / target).exists(), f"README.md links to {target}, which does not exist"
