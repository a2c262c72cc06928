"""One limit on essays however they arrive, refused rows summarised, and bodies the server cannot read: a lone
surrogate in the JSON, a chunked body over the upload limit, essay ids the loader refuses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.web_helpers import FAKE, RUBRIC, client_for, essays_csv, essays_json, make_config

from madrag.server import Limits

JSON = {"content-type": "application/json"}


def _error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert "Traceback" not in response.text
    body: dict[str, Any] = response.json()["error"]
    return body


def _body(**fields: Any) -> dict[str, Any]:
    return {"rubric": RUBRIC, "protocols": ["MAD"], "backend": FAKE, "pool": "none", **fields}


def test_a_data_file_over_the_row_limit_is_refused_as_an_essay_list_is(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path, limits=Limits(max_rows=5))) as client:
        as_list = _error(client.post("/api/runs", json=_body(essays=essays_json(8))), 413)
        as_file = _error(client.post("/api/runs", json=_body(data={"content": essays_csv(8)})), 413)
        lines = "".join(json.dumps(e) + "\n" for e in essays_json(8))
        as_jsonl = _error(client.post("/api/runs", json=_body(data={"filename": "e.jsonl", "content": lines})), 413)
        for error in (as_list, as_file, as_jsonl):
            assert error["message"] == "8 essays in one request: the limit is 5 (madrag serve --max-essays)"
        assert client.get("/api/runs").json() == []  # nothing was started
        ok = client.post("/api/runs", json=_body(data={"content": essays_csv(5)}))
        assert ok.status_code == 201 and ok.json()["n_essays"] == 5


def test_refused_rows_are_counted_by_reason_and_kept_bounded(tmp_path: Path) -> None:
    empty = [{"id": f"bad{i}", "text": "", "rater1_Ideas": 1} for i in range(300)]
    out_of_range = [{"id": f"hi{i}", "text": "an essay", "rater1_Ideas": 9} for i in range(40)]
    content = essays_csv(2, folds=False, extra=empty + out_of_range)
    with client_for(make_config(tmp_path)) as client:
        created = client.post("/api/runs", json=_body(data={"content": content}))
        assert created.status_code == 201, created.text
        run = created.json()
        assert run["n_essays"] == 2 and run["n_refused"] == 340
        assert len(run["refused"]) == 20 and run["refused"][0]["where"] == "row 4"
        reasons = run["refused_reasons"]
        assert sum(reasons.values()) == 340 and len(reasons) == 2
        assert [n for r, n in reasons.items() if "empty" in r] == [300]
        stored = tmp_path / "server" / "runs" / run["id"] / "run.json"
        assert stored.stat().st_size < 12_000
        assert len(client.get("/api/runs").content) < 12_000


def test_a_description_written_with_every_refused_row_reads_as_a_summary() -> None:
    from madrag.pipeline.migrations import upgrade_run_description
    from madrag.server.runs.scheduler import RunMeta

    old = {"id": "abcdef123456", "protocols": ["MAD"], "pool": "none", "eval_fold": None, "backend": FAKE}
    rows = [{"where": f"row {i}", "reason": f"row {i}: text is empty"} for i in range(2, 60)]
    meta = RunMeta.model_validate(upgrade_run_description({**old, "n_essays": 1, "n_traits": 2, "refused": rows}))
    assert meta.n_refused == 58 and meta.refused_reasons == {"text is empty": 58} and len(meta.refused) == 20
    summarised = meta.model_dump(mode="json")
    assert upgrade_run_description(summarised) == summarised  # today's: read as written


def test_a_draft_written_with_every_refused_row_reads_as_a_summary(tmp_path: Path) -> None:
    """A ``draft.json`` written before the refused rows were summarised is read, as a run's ``run.json`` is, with
    its count, its reasons and the first rows (:func:`madrag.pipeline.migrations.upgrade_draft`)."""
    from madrag.server.drafts import Drafts

    drafts = Drafts(tmp_path)
    draft = drafts.new()
    stored = drafts.folder(draft.id) / "draft.json"
    rows = [{"where": f"row {i}", "reason": f"row {i}: text is empty"} for i in range(2, 60)]
    stored.write_text(json.dumps({"id": draft.id, "n_essays": 1, "refused": rows}), encoding="utf-8")
    read = drafts.get(draft.id)
    assert read.n_refused == 58 and read.refused_reasons == {"text is empty": 58} and read.refused == rows[:20]
    assert read.refusals().total == 58
    drafts.save(read)
    assert drafts.get(draft.id) == read


def test_a_lone_surrogate_is_a_422_naming_its_field(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        payload = _body(data={"content": "id,text\na,caf\udcff\n"})
        error = _error(client.post("/api/runs", content=json.dumps(payload), headers=JSON), 422)
        assert error["field"] == "data.content" and "surrogate" in error["message"]
        assert error["message"].startswith("data.content: ")
        text = _body(essays=[{"id": "a", "text": "fine"}, {"id": "b", "text": "x\ud800y"}])
        error = _error(client.post("/api/runs", content=json.dumps(text), headers=JSON), 422)
        assert error["field"] == "essays.1.text"
        one = {"rubric": RUBRIC, "essay": {"id": "\udcff", "text": "t"}, "backend": FAKE}
        assert _error(client.post("/api/score", content=json.dumps(one), headers=JSON), 422)["field"] == "essay.id"


def test_a_chunked_body_over_the_limit_is_a_413(tmp_path: Path) -> None:
    limits = Limits(max_upload_bytes=4096)

    def chunks() -> Iterator[bytes]:
        yield b'{"rubric_id": "x", "essays": [' + b'{"id": "a", "text": "' + b"x" * 1000
        for _ in range(20):
            yield b"y" * 1000
        yield b'"}]}'

    with client_for(make_config(tmp_path, limits=limits)) as client:
        response = client.post("/api/runs", content=chunks(), headers=JSON)
        assert "content-length" not in {k.lower() for k in response.request.headers}
        error = _error(response, 413)
        assert error["message"] == "request body over the upload limit of 4,096 bytes"
        small = client.post(
            "/api/runs", content=iter([json.dumps(_body(essays=essays_json(2))).encode()]), headers=JSON
        )
        assert small.status_code == 201, small.text  # a chunked body under the limit is read as before


def test_essay_ids_the_loader_refuses_are_reported_per_row(tmp_path: Path) -> None:
    """The loader refuses ``.`` and ``..`` as essay ids (an InputError, as its other row checks): the server
    reports them as refused rows (a 400 when nothing else is left), in every way essays arrive."""
    dots = [{"id": ".", "text": "an essay"}, {"id": "..", "text": "an essay"}]
    reason = "essay id '…' cannot be used (it names a folder in paths); give another id"
    with client_for(make_config(tmp_path)) as client:
        run = client.post("/api/runs", json=_body(essays=[*dots, *essays_json(1)])).json()
        assert run["n_essays"] == 1 and run["n_refused"] == 2
        assert run["refused_reasons"] == {reason: 2}
        error = _error(client.post("/api/runs", json=_body(essays=dots)), 400)
        assert error["message"].startswith("no usable essays (essays[0]: essay id '.' cannot be used")
        content = "id,text\n.,an essay\n..,an essay\ns1,an essay\n"
        upload = client.post("/api/runs", json=_body(data={"content": content})).json()
        assert upload["n_essays"] == 1 and [r["where"] for r in upload["refused"]] == ["row 2", "row 3"]


def test_dot_essay_ids_are_reported_not_a_server_error(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        essays = [{"id": ".", "text": "an essay"}, {"id": "..", "text": "an essay"}, *essays_json(1)]
        response = client.post("/api/runs", json=_body(essays=essays))
        assert response.status_code in (201, 400), response.text
        if response.status_code == 201:  # the loader took them: the essays must be reachable
            run = response.json()
            for essay_id in (".", ".."):
                page = client.get(f"/api/runs/{run['id']}/essays/{essay_id.replace('.', '%2E')}")
                assert page.status_code < 500, page.text
        content = "id,text\n.,an essay\n..,an essay\ns1,an essay\n"
        upload = client.post("/api/runs", json=_body(data={"content": content}))
        assert upload.status_code in (201, 400) and "Traceback" not in upload.text
