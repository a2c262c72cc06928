"""The HTTP API of ``madrag serve`` on the fake provider: every endpoint, its error cases and the token rule."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from tests.synthetic_runs import rubric_of, synthesize_run
from tests.web_helpers import FAKE, RUBRIC, client_for, essays_csv, essays_json, make_config, wait_status

from madrag.evaluation.run import open_store, stored_config
from madrag.server import Limits
from madrag.server.runs import scoring
from madrag.server.runs.repo import RunMeta
from madrag.settings import ScoringSettings


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with client_for(make_config(tmp_path)) as c:
        yield c


def start(client: TestClient, **body: Any) -> dict[str, Any]:
    payload = {"rubric": RUBRIC, "essays": essays_json(), "protocols": ["MAD"], "backend": FAKE, **body}
    response = client.post("/api/runs", json=payload)
    assert response.status_code == 201, response.text
    return response.json()


def finished(client: TestClient, timeout: float = 30.0, **body: Any) -> dict[str, Any]:
    run = start(client, **body)
    done = wait_status(client, run["id"], timeout=timeout)
    assert done["status"] == "finished", done
    return done


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()["error"]
    assert body["status"] == status and body["message"]
    assert "Traceback" not in response.text
    return body


# -- service endpoints ---------------------------------------------------------------------------------------


def test_health_protocols_and_openapi_docs(client: TestClient) -> None:
    assert client.get("/api/health").json()["status"] == "ok"
    protocols = {p["name"]: p["retrieval"] for p in client.get("/api/protocols").json()}
    assert protocols["MADRAG"] is True and protocols["MAD"] is False
    spec = client.get("/openapi.json").json()
    for path in ("/api/runs", "/api/runs/{run_id}/overrides", "/api/runs/{run_id}/cancel", "/api/score"):
        assert path in spec["paths"]
    docs = client.get("/docs")
    assert docs.status_code == 200 and "/static/swagger-ui-bundle.js" in docs.text and "cdn" not in docs.text.lower()
    assert client.get("/static/swagger-ui-bundle.js").status_code == 200


def test_unknown_endpoint_is_a_json_404(client: TestClient) -> None:
    error_of(client.get("/api/nothing-here"), 404)


# -- rubrics -------------------------------------------------------------------------------------------------


def test_create_and_get_a_rubric(client: TestClient) -> None:
    created = client.post("/api/rubrics", json=RUBRIC)
    assert created.status_code == 201
    rid = created.json()["id"]
    assert client.get(f"/api/rubrics/{rid}").json()["rubric"]["traits"][1]["name"] == "Style"
    assert rid in {r["id"] for r in client.get("/api/rubrics").json()}


def test_rubric_errors(client: TestClient) -> None:
    missing_level = json.loads(json.dumps(RUBRIC))
    del missing_level["traits"][0]["levels"]["2"]
    body = error_of(client.post("/api/rubrics", json=missing_level), 400)
    assert "level" in body["message"] and "traits.0" in body["message"]
    error_of(client.post("/api/rubrics", json={"prompt": "no traits"}), 422)
    error_of(client.get("/api/rubrics/r-doesnotexist"), 404)
    error_of(client.get("/api/rubrics/..%2F..%2Fetc"), 404)


# -- runs ----------------------------------------------------------------------------------------------------


def test_run_to_the_end_with_progress_scores_and_essay_records(client: TestClient) -> None:
    run = finished(client)
    assert run["progress"]["done"] == run["progress"]["total"] == 3 * 2
    rows = client.get(f"/api/runs/{run['id']}/scores").json()["rows"]
    assert len(rows) == 6 and all(r["score"] is not None for r in rows)
    # the essays came with human scores (the teacher's own): the grade, and final_score with it, is that score
    assert all(r["final_score"] == r["grade"] == r["reference"] and r["graded_by"] == "teacher" for r in rows)
    detail = client.get(f"/api/runs/{run['id']}/essays/e1").json()
    ideas = detail["traits"][0]["protocols"][0]
    assert ideas["protocol"] == "MAD" and ideas["rationale"]
    assert [t["role"] for t in ideas["debate"]] == ["advocate", "skeptic"]
    assert all(t["confidence"] is not None for t in ideas["debate"])
    assert detail["traits"][0]["reference"] == 0
    assert run["id"] in {r["id"] for r in client.get("/api/runs").json()}


def _stored_settings(run_dir: Path) -> dict[str, Any]:
    """The scoring settings the library recorded in the run's store when it started."""
    store = open_store(run_dir)
    try:
        config, _rubric, _names = stored_config(store, run_dir)
    finally:
        store.close()
    found: dict[str, Any] = config["settings"]
    return found


def test_a_run_takes_scoring_settings_and_records_them(tmp_path: Path) -> None:
    """``settings`` is madrag score's settings: the run records them in run.json and the library's stored
    configuration, what it leaves out is the library's default, and a resume scores with the same ones."""
    config = make_config(tmp_path)
    with client_for(config) as client:
        given = {"report": "expected", "judge_max_tokens": 300, "debater_temperature": 0.2}
        run = finished(client, settings=given)
        stored = _stored_settings(config.runs_dir / run["id"])
        assert {k: stored[k] for k in given} == given and run["settings"] == stored
        defaults = ScoringSettings().model_dump(mode="json")
        assert stored["debater_max_tokens"] == defaults["debater_max_tokens"]
        assert {k: v for k, v in stored.items() if k not in given} == {
            k: v for k, v in defaults.items() if k not in given
        }
        # no settings: madrag score's defaults (not the web app's former 400-token limit)
        plain = finished(client)
        assert _stored_settings(config.runs_dir / plain["id"]) == defaults
        # the backend's one token limit (the backend page's field) sets both limits
        page_like = finished(client, backend={**FAKE, "max_tokens": 64})
        assert {k: page_like["settings"][k] for k in ("debater_max_tokens", "judge_max_tokens")} == {
            "debater_max_tokens": 64,
            "judge_max_tokens": 64,
        }


def test_a_run_recorded_before_settings_resumes_with_its_token_limit() -> None:
    """run.json written before the web app took settings has none: the run resumes as it began, its backend's
    max_tokens (400, then the web app's own default) as both token limits, the library's defaults for the rest."""
    from madrag.pipeline.migrations import upgrade_run_description

    old = {"id": "abcdef123456", "protocols": ["MAD"], "pool": "none", "eval_fold": None, "n_essays": 1}
    for backend in ({"kind": "fake", "max_tokens": 400}, {"kind": "fake"}):  # 400: also what it recorded by default
        meta = RunMeta.model_validate(upgrade_run_description({**old, "n_traits": 2, "backend": backend}))
        found = scoring.of_run(meta).model_dump()
        assert found == {**ScoringSettings().model_dump(), "debater_max_tokens": 400, "judge_max_tokens": 400}
    none = {**old, "n_traits": 2, "backend": {"kind": "fake", "max_tokens": None}, "settings": None}
    assert scoring.of_run(RunMeta.model_validate(upgrade_run_description(none))) == ScoringSettings()


def test_a_bad_scoring_setting_is_one_line_422(client: TestClient) -> None:
    for settings, field in (
        ({"report": "median"}, "settings.report"),
        ({"judge_max_tokens": 0}, "settings.judge_max_tokens"),
        ({"max_tokens": 300}, "settings.max_tokens"),
    ):
        body = error_of(
            client.post("/api/runs", json={"rubric": RUBRIC, "essays": essays_json(), "settings": settings}), 422
        )
        assert body["field"] == field and "\n" not in body["message"], body
    clash = {"backend": {**FAKE, "max_tokens": 64}, "settings": {"judge_max_tokens": 300}}
    body = error_of(client.post("/api/runs", json={"rubric": RUBRIC, "essays": essays_json(), **clash}), 422)
    assert "give the token limits once" in body["message"] and "\n" not in body["message"]
    assert client.get("/api/runs").json() == []


def test_essay_ids_with_slashes_and_markup_are_reachable_and_unusable_ids_refused(client: TestClient) -> None:
    for unusable, needle in [("..", "cannot be used"), ("a\x07b", "control character")]:
        payload = {"rubric": RUBRIC, "essays": [{"id": unusable, "text": "An essay."}], "protocols": ["MAD"]}
        body = error_of(client.post("/api/runs", json={**payload, "backend": FAKE}), 400)
        assert needle in body["message"]
    odd = [{"id": "class 7/anna", "text": "An essay."}, {"id": "<b>bold</b>?x=1#y", "text": "Another essay."}]
    run = finished(client, essays=odd)
    for essay in odd:
        quoted = quote(essay["id"], safe="")
        assert client.get(f"/api/runs/{run['id']}/essays/{quoted}").json()["essay"]["id"] == essay["id"]
        page = client.get(f"/runs/{run['id']}/essays/{quoted}", headers={"Accept": "text/html"})
        assert page.status_code == 200 and "<b>bold</b>" not in page.text


def test_run_from_a_csv_upload_reports_refused_rows(client: TestClient) -> None:
    bad = [{"id": "s9", "text": "", "rater1_Ideas": 1}, {"id": "s10", "text": "fine essay", "rater1_Ideas": 7}]
    run = start(client, essays=None, data={"filename": "class.csv", "content": essays_csv(4, extra=bad)}, pool="none")
    assert run["n_essays"] == 4
    reasons = {r["where"]: r["reason"] for r in run["refused"]}
    assert set(reasons) == {"row 6", "row 7"} and "empty" in reasons["row 6"] and "outside" in reasons["row 7"]


def test_run_errors(client: TestClient, tmp_path: Path) -> None:
    base = {"rubric": RUBRIC, "essays": essays_json(), "protocols": ["MAD"], "backend": FAKE}
    error_of(client.post("/api/runs", json={**base, "rubric": None, "rubric_id": "r-nope"}), 404)
    error_of(client.post("/api/runs", json={**base, "protocols": ["NOPE"]}), 422)
    body = error_of(client.post("/api/runs", json={**base, "protocols": ["MADRAG"], "pool": "none"}), 400)
    assert body["field"] == "protocols"
    error_of(client.post("/api/runs", json={**base, "essays": [{"id": "x", "text": "t", "Ideas": 9}]}), 400)
    error_of(client.post("/api/runs", json={**base, "pool": "folds"}), 400)
    error_of(client.post("/api/runs", json={**base, "backend": {"kind": "openai", "base_url": "file:///etc"}}), 422)
    error_of(client.post("/api/runs", json={**base, "surprise": 1}), 422)
    error_of(client.post("/api/runs", json={**base, "backend": {"kind": "openai"}}), 422)
    error_of(
        client.post("/api/runs", content="rubric=x", headers={"content-type": "application/x-www-form-urlencoded"}), 415
    )
    error_of(client.post("/api/runs", content="{not json", headers={"content-type": "application/json"}), 422)
    error_of(client.get("/api/runs/000000000000"), 404)


def test_upload_limits(tmp_path: Path) -> None:
    config = make_config(tmp_path, limits=Limits(max_upload_bytes=4096, max_rows=2, max_essay_chars=100))
    with client_for(config) as client:
        huge = {"rubric": RUBRIC, "essays": [{"id": "a", "text": "x" * 5000}], "backend": FAKE}
        error_of(client.post("/api/runs", json=huge), 413)
        many = {"rubric": RUBRIC, "essays": essays_json(3), "protocols": ["MAD"], "backend": FAKE}
        error_of(client.post("/api/runs", json=many), 413)
        long = {**many, "essays": [*essays_json(1), {"id": "long", "text": "word " * 30}]}
        run = client.post("/api/runs", json=long).json()
        assert run["n_essays"] == 1 and "longer than 100" in run["refused"][0]["reason"]


def test_runs_at_once_share_one_backend_and_its_limit(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path, backend_concurrency=2)) as client:
        slow = {"kind": "fake", "fake_latency_s": 0.1}
        runs = [start(client, essays=essays_json(3), backend=slow) for _ in range(2)]
        assert all(wait_status(client, r["id"])["status"] == "finished" for r in runs)
        shared = client.app.state.madrag.runs.backends.all()  # type: ignore[attr-defined]
    assert len(shared) == 1 and shared[0].peak == 2  # 2 runs x 3 essays x 2 traits wanted more at once


def test_cancel_and_resume(client: TestClient) -> None:
    run = start(client, essays=essays_json(4), backend={"kind": "fake", "fake_latency_s": 0.3})
    cancelled = client.post(f"/api/runs/{run['id']}/cancel", json={})
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    error_of(client.post(f"/api/runs/{run['id']}/cancel", json={}), 409)
    resumed = client.post(f"/api/runs/{run['id']}/resume", json={})
    assert resumed.status_code == 202
    assert wait_status(client, run["id"])["status"] == "finished"
    error_of(client.post(f"/api/runs/{run['id']}/resume", json={}), 409)
    error_of(client.post("/api/runs/000000000000/cancel", json={}), 404)


def test_overrides_are_their_own_records_and_exported(client: TestClient) -> None:
    run = finished(client)
    rid = run["id"]
    before = client.get(f"/api/runs/{rid}/essays/e2").json()["traits"][1]["protocols"][0]
    made = client.post(
        f"/api/runs/{rid}/overrides",
        json={"essay_id": "e2", "trait": "Style", "score": 4, "comment": "clear voice", "reviewer": "Ms. K"},
    )
    assert made.status_code == 201
    review = made.json()
    assert review["agent_score"] == before["score"] and review["new_score"] == 4 and review["reviewer"] == "Ms. K"
    after = client.get(f"/api/runs/{rid}/essays/e2").json()["traits"][1]["protocols"][0]
    assert after["score"] == before["score"] and after["rationale"] == before["rationale"]  # agent record unchanged
    assert after["review"]["new_score"] == 4
    assert len(client.get(f"/api/runs/{rid}/overrides").json()) == 1
    csv_text = client.get(f"/api/runs/{rid}/export?format=csv").text
    header, *lines = csv_text.strip().splitlines()
    assert "override_score" in header and "final_score" in header
    row = next(line for line in lines if line.startswith("e2,MAD,Style"))
    assert ",override,4,4,clear voice,Ms. K," in row
    jsonl = [json.loads(x) for x in client.get(f"/api/runs/{rid}/export?format=jsonl").text.splitlines()]
    assert next(r for r in jsonl if r["essay_id"] == "e2" and r["trait"] == "Style")["final_score"] == 4


def test_unreadable_scores_stay_missing(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    run_id = synthesize_run(config.runs_dir, 3, rubric_of(2, 0, 3), failed_every=2)
    with client_for(config) as client:
        rows = client.get(f"/api/runs/{run_id}/scores").json()["rows"]
        missing = [r for r in rows if r["score_mode"] == "failed"]
        assert len(rows) == 6 and len(missing) == 3
        assert all(r["score"] is None and r["final_score"] == r["grade"] == r["reference"] for r in missing)
        page = client.get(f"/runs/{run_id}/results", headers={"Accept": "text/html"}).text
        assert page.count('<td class="cell missing') == 3  # madrag's suggestion is missing; the human's grade shows
        error_of(
            client.post(f"/api/runs/{run_id}/overrides", json={"essay_id": "e00001", "trait": "Trait 1", "score": 9}),
            422,
        )
        accepted = client.post(
            f"/api/runs/{run_id}/overrides", json={"essay_id": "e00000", "trait": "Trait 2", "action": "accept"}
        )
        assert (
            accepted.status_code == 201 and accepted.json()["new_score"] is None
        )  # accepting missing keeps it missing


def test_override_errors(client: TestClient) -> None:
    rid = finished(client)["id"]
    url = f"/api/runs/{rid}/overrides"
    error_of(client.post(url, json={"essay_id": "zz", "trait": "Style", "score": 2}), 404)
    error_of(client.post(url, json={"essay_id": "e1", "trait": "Voice", "score": 2}), 404)
    error_of(client.post(url, json={"essay_id": "e1", "trait": "Style", "protocol": "SA", "score": 2}), 404)
    error_of(client.post(url, json={"essay_id": "e1", "trait": "Style", "score": 9}), 422)
    error_of(client.post(url, json={"essay_id": "e1", "trait": "Style"}), 422)
    error_of(client.get(f"/api/runs/{rid}/essays/zz"), 404)
    error_of(client.get(f"/api/runs/{rid}/export?format=xml"), 422)


def test_evaluation_needs_human_scores(client: TestClient) -> None:
    rid = finished(client)["id"]
    tables = client.get(f"/api/runs/{rid}/evaluation").json()["tables"]
    assert any("QWK" in title for title in tables)
    plain = finished(client, essays=[{"id": "a", "text": "An essay."}, {"id": "b", "text": "Another one."}])
    error_of(client.get(f"/api/runs/{plain['id']}/evaluation"), 409)


def test_dry_run_estimate(client: TestClient) -> None:
    run = finished(client, essays=essays_json(4), dry_run=True, sample=1, price={"prompt": 1.0, "completion": 2.0})
    estimate = run["estimate"]
    assert run["kind"] == "estimate" and run["n_essays"] == 1 and estimate["n_essays"] == 4
    assert estimate["total"]["calls"] == pytest.approx(4 * 2 * 3)  # 4 essays x 2 traits x (Adv, Skp, Judge)
    assert estimate["total"]["gross_spend"] > 0 and estimate["time_s"] >= 0


def test_events_stream_progress(client: TestClient) -> None:
    run = start(client, backend={"kind": "fake", "fake_latency_s": 0.05})
    with client.stream("GET", f"/api/runs/{run['id']}/events") as stream:
        events = [json.loads(line[6:]) for line in stream.iter_lines() if line.startswith("data: ")]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "snapshot" and kinds[-1] == "end" and "record" in kinds
    assert events[-1]["progress"]["status"] == "finished" and events[-1]["progress"]["done"] == 6
    records = [e for e in events if e["type"] == "record"]
    assert all(e["at"] >= e["stored_at"] for e in records)
    assert [e["seq"] for e in records] == sorted(e["seq"] for e in records)


def test_score_one_essay_synchronously(client: TestClient) -> None:
    response = client.post(
        "/api/score", json={"rubric": RUBRIC, "essay": {"id": "q1", "text": "A short essay."}, "backend": FAKE}
    )
    assert response.status_code == 200, response.text
    scores = {s["trait"]: s for s in response.json()["scores"]}
    assert set(scores) == {"Ideas", "Style"} and all(s["rationale"] and s["score"] is not None for s in scores.values())


def test_score_one_essay_time_limit_is_503(client: TestClient) -> None:
    slow = {"kind": "fake", "fake_latency_s": 2.0}
    body = {"rubric": RUBRIC, "essay": {"id": "q1", "text": "A short essay."}, "backend": slow, "time_limit_s": 0.3}
    error = error_of(client.post("/api/score", json=body), 503)
    assert "time limit" in error["message"]


# -- the token rule and cross-site requests --------------------------------------------------------------------


def test_token_required_off_loopback(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        client_for(make_config(tmp_path, host="0.0.0.0")).__enter__()
    config = make_config(tmp_path, host="0.0.0.0", token="s3cret-token-for-tests")
    with client_for(config, base_url="http://192.0.2.10:8000") as client:
        for path in ("/api/health", "/api/runs", "/", "/docs", "/static/app.css"):
            error_of(client.get(path), 401)
        error_of(client.get("/api/health", headers={"Authorization": "Bearer wrong"}), 401)
        assert client.get("/api/health", headers={"Authorization": "Bearer s3cret-token-for-tests"}).status_code == 200
        assert client.get("/api/health", headers={"X-Madrag-Token": "s3cret-token-for-tests"}).status_code == 200
        first = client.get("/api/health?token=s3cret-token-for-tests")
        assert first.status_code == 200 and "madrag_token=" in first.headers["set-cookie"]
        assert client.get("/api/runs").status_code == 200  # the cookie now carries it


def test_loopback_server_refuses_other_host_names_and_cross_site_writes(client: TestClient) -> None:
    error_of(client.get("/api/health", headers={"Host": "evil.example:8000"}), 400)
    cross = client.post("/api/rubrics", json=RUBRIC, headers={"Origin": "http://evil.example"})
    error_of(cross, 403)
    assert client.post("/api/rubrics", json=RUBRIC, headers={"Origin": "http://127.0.0.1:8000"}).status_code == 201


def test_api_key_is_never_written(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    config = make_config(tmp_path)
    secret = "sk-test-DO-NOT-STORE-0123456789"
    with client_for(config) as client:
        backend = {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key": secret}
        payload = {"rubric": RUBRIC, "essays": essays_json(1), "protocols": ["MAD"], "backend": backend}
        run = client.post("/api/runs", json=payload).json()
        client.post(f"/api/runs/{run['id']}/cancel", json={})  # the backend is not there; stop retrying it
        assert secret not in json.dumps(client.get(f"/api/runs/{run['id']}").json())
        assert secret not in client.get("/api/runs").text
        assert run["backend"]["key_source"] == "memory"
        name = f"MADRAG_SERVE_KEY_{run['id'].upper()}"  # in this process's key store only, not its environment
        assert client.app.state.madrag.runs.keys.get(name).get_secret_value() == secret  # type: ignore[attr-defined]
        assert name not in os.environ and secret not in os.environ.values()
    assert secret not in caplog.text
    for path in config.data_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_serve_command_generates_and_prints_a_token_off_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn
    from typer.testing import CliRunner

    from madrag.cli.app import app

    started: list[tuple[Any, str, int]] = []
    monkeypatch.setattr(uvicorn, "run", lambda web, host, port, **_kw: started.append((web, host, port)))
    monkeypatch.delenv("MADRAG_SERVER_TOKEN", raising=False)
    args = ["serve", "--host", "0.0.0.0", "--port", "8123", "--data-dir", str(tmp_path / "d")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    token = result.output.split("?token=")[1].split()[0]
    assert len(token) >= 24 and result.output.count(token) == 1
    web, host, port = started[0]
    assert (host, port) == ("0.0.0.0", 8123)
    with TestClient(web, base_url="http://192.0.2.1:8123") as client:
        error_of(client.get("/api/health"), 401)
        assert client.get("/api/health", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    local = CliRunner().invoke(app, ["serve", "--data-dir", str(tmp_path / "d")])
    assert local.exit_code == 0 and "token" not in local.output and started[1][1] == "127.0.0.1"


def test_serve_command_passes_the_runtime_to_embedded_runs_and_refuses_an_unknown_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    import uvicorn
    from typer.testing import CliRunner

    import madrag.server
    from madrag.cli.app import app
    from madrag.server.runs.repo import RunBackend
    from madrag.server.runs.scheduler import RunManager

    configs: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda web, **_kw: None)
    monkeypatch.setattr(madrag.server, "create_app", lambda config, **_kw: configs.append(config))
    base = ["serve", "--data-dir", str(tmp_path / "d")]
    bad = CliRunner().invoke(app, [*base, "--runtime", "llama.cpp"])
    one_of = "--runtime must be one of openvino-genai, xllamacpp, llama-cpp-python"
    assert bad.exit_code != 0 and one_of in str(bad.exception)
    assert not configs
    for runtime in ("llama-cpp-python", None):
        ok = CliRunner().invoke(app, base + (["--runtime", runtime] if runtime else []))
        assert ok.exit_code == 0, ok.output
    assert [c.runtime for c in configs] == ["llama-cpp-python", "openvino-genai"]
    backend = RunBackend(kind="llamacpp")
    spec = RunManager._spec(SimpleNamespace(config=configs[0]), SimpleNamespace(backend=backend, key_env=None))  # type: ignore[arg-type]
    assert spec.kind == "llamacpp" and spec.runtime == "llama-cpp-python"


@pytest.mark.parametrize("embedder", ["hashing", pytest.param("minilm", marks=pytest.mark.integration)])
def test_madrag_run_shows_the_exemplars_the_judge_saw(tmp_path: Path, embedder: str) -> None:
    """MADRAG with the scored essays themselves as the pool: the index is built (with progress) and each Judge's
    exemplars are on the essay's record."""
    with client_for(make_config(tmp_path, embedder=embedder)) as client:
        run = start(client, essays=essays_json(4), protocols=["MADRAG"], pool="same")
        with client.stream("GET", f"/api/runs/{run['id']}/events") as stream:
            events = [json.loads(line[6:]) for line in stream.iter_lines() if line.startswith("data: ")]
        detail = client.get(f"/api/runs/{run['id']}/essays/e1").json()
    bank = [e for e in events if e["type"] == "bank"]
    assert bank and bank[-1]["done"] == bank[-1]["total"] == 4 and events[-1]["progress"]["status"] == "finished"
    ideas = detail["traits"][0]["protocols"][0]
    levels = {lvl["score"]: lvl["exemplar"] for lvl in ideas["exemplars"]}
    assert sorted(levels) == [0, 1, 2, 3]
    shown = [ex["essay_id"] for ex in levels.values() if ex is not None]
    assert shown and "e1" not in shown  # the essay being scored is never its own exemplar
    assert [t["role"] for t in ideas["debate"]] == ["advocate", "skeptic"]


async def test_shared_backend_limits_requests_of_every_run_together() -> None:
    from madrag.providers import ChatRequest, FakeProvider, Message
    from madrag.server.runs.backends import SharedBackend

    shared = SharedBackend(FakeProvider(latency_s=0.05), limit=2)
    request = ChatRequest(messages=[Message(role="user", content="You are an Advocate Agent.")])

    async def one_run() -> list[str]:
        return [r.text for r in await asyncio.gather(*(shared.complete(request) for _ in range(4)))]

    first, second = await asyncio.gather(one_run(), one_run())
    assert len(first) == len(second) == 4 and all(first + second)
    assert shared.peak == 2 and shared.in_flight == 0 and shared.max_concurrency == 2
