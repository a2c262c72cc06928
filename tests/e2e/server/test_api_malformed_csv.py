"""A CSV sent to the JSON API as ``data`` that the CSV reader cannot get through answers a 4xx with one line, as
the page upload of the same file does, never a 500 (issue: the row-by-row fallback of server/library.py let the
reader's ``_csv.Error`` through)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from tests.web_helpers import FAKE, RUBRIC, make_config

from madrag.data.reading import MAX_FIELD_CHARS
from madrag.server.app import create_app

LONG = "x" * (MAX_FIELD_CHARS + 10)
ROWS = "".join(f"r{i},an essay of row {i} that goes on for a while\n" for i in range(30_000))  # > the field limit

# (CSV text, what the one line must say)
SHAPES = {
    "a field over the size limit": (f'id,text\na,"{LONG}"\n', "longer than 1,000,000 characters"),
    "a field over the limit after good rows": (f"id,text\na,fine\nb,{LONG}\n", "longer than 1,000,000 characters"),
    "an unclosed quote": ('id,text\na,fine\nb,"never closed\n' + ROWS, "longer than 1,000,000 characters"),
    "NUL bytes": ("id,text,Ideas\na,hel\x00lo,9\nb,wor\x00ld,1\n", ""),
    "NUL bytes in a field over the limit": (f'id,text\na,"\x00{LONG}"\n', "longer than 1,000,000 characters"),
}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    app = create_app(make_config(tmp_path_factory.mktemp("server")))
    with TestClient(app, base_url="http://127.0.0.1:8000", raise_server_exceptions=False) as c:
        yield c


def _post(client: TestClient, content: str | bytes) -> tuple[int, str]:
    body = {"rubric": RUBRIC, "protocols": ["MAD"], "backend": FAKE, "dry_run": True}
    if isinstance(content, bytes):  # a body no JSON encoder would make: the bytes sent as they are
        raw = b'{"data": {"filename": "class.csv", "content": "' + content + b'"}, ' + _json(body)[1:]
        answer = client.post("/api/runs", content=raw, headers={"content-type": "application/json"})
    else:
        answer = client.post("/api/runs", json={**body, "data": {"filename": "class.csv", "content": content}})
    message = answer.json().get("error", {}).get("message", "") if answer.status_code >= 400 else ""
    return answer.status_code, message


def _json(body: dict[str, object]) -> bytes:
    return json.dumps(body).encode("utf-8")


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_malformed_csv_is_a_4xx_with_one_line(client: TestClient, shape: str) -> None:
    text, says = SHAPES[shape]
    status, message = _post(client, text)
    assert status < 500, (shape, status, message)
    if says:
        assert 400 <= status < 500 and says in message and "\n" not in message, (shape, message)


@pytest.mark.parametrize(
    "content",
    [
        b"id,text\\na,caf\xe9 latin-1\\nb,caf\xc3\xa9 utf-8\\n",  # raw latin-1 and UTF-8 bytes in one body
        b"id,text\\na,caf\\u00e9\\nb,caf\\udce9 a lone surrogate\\n",  # an escape that is no character
    ],
    ids=["latin-1 bytes beside UTF-8", "a lone surrogate"],
)
def test_mixed_encodings_are_a_4xx_with_one_line(client: TestClient, content: bytes) -> None:
    status, message = _post(client, content)
    assert 400 <= status < 500 and message and "\n" not in message, (status, message)
