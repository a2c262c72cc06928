"""The Classroom client's retries and refusals on the Classroom double, what the double refuses of a request the
discovery documents do not describe, the kept OAuth token, and a pull's refused submissions."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.classroom_double import GOOGLE_DOC, PROJECT_DENIED, ClassroomDouble, class_of

from madrag.errors import ConfigError
from madrag.lms.calls import Backoff, LmsError, LmsTransient
from madrag.lms.classroom_client import NOT_MADRAGS, ClassroomClient, NotMadragsCoursework, _refusal, _transient
from madrag.lms.classroom_pull import pull_classroom
from madrag.lms.google_auth import SCOPES, authorize, load_token, save_token, token_path
from madrag.rubric import Rubric, Trait

pytest.importorskip("googleapiclient")
TOKEN = "ya29.unit-token"


def _creds(token: str = TOKEN, expires_in: timedelta = timedelta(hours=1)) -> Any:
    from google.oauth2.credentials import Credentials

    return Credentials(
        token=token,
        refresh_token="1//refresh",
        token_uri="https://oauth2.googleapis.com/token",
        client_id="id.apps.googleusercontent.com",
        client_secret="secret",
        expiry=datetime.now(UTC).replace(tzinfo=None) + expires_in,
    )


def _client(double: ClassroomDouble, token: str = TOKEN, tries: int = 3) -> tuple[ClassroomClient, list[float]]:
    waits: list[float] = []
    client = ClassroomClient.signed_in(_creds(token), transport=double)
    client.backoff, client.sleep = Backoff(tries=tries, first_s=0.5, max_s=1.0), waits.append
    return client, waits


def _http_error(status: int, body: dict[str, Any]) -> Exception:
    import httplib2
    from googleapiclient.errors import HttpError

    return HttpError(httplib2.Response({"status": str(status)}), json.dumps(body).encode())


def test_a_busy_google_is_retried_with_backoff() -> None:
    double = ClassroomDouble(class_of(TOKEN, n=3))
    client, waits = _client(double)
    double.data.fail_next = [503, 429]
    assert [c["name"] for c in client.courses()] == ["English 9"]
    assert waits == [0.5, 1.0] and double.violations == []


def test_retries_run_out_in_one_line() -> None:
    double = ClassroomDouble(class_of(TOKEN, n=3))
    client, waits = _client(double, tries=2)
    double.data.fail_next = [502, 502]
    with pytest.raises(LmsTransient, match="Google Classroom did not answer while listing courses after 2 tries"):
        client.courses()
    assert waits == [0.5]


def test_a_token_google_refuses_is_one_sentence_without_it() -> None:
    double = ClassroomDouble(class_of(TOKEN, n=3))
    client, waits = _client(double, token="ya29.not-the-token")
    with pytest.raises(LmsError, match=r"^Google refused the kept sign-in while listing courses") as caught:
        client.courses()
    assert "ya29" not in str(caught.value) and waits == [] and double.refreshes == 1  # google-auth tried to renew it


def test_googles_403s_read_as_they_mean() -> None:
    denied = _http_error(403, {"error": {"code": 403, "message": PROJECT_DENIED, "status": "PERMISSION_DENIED"}})
    assert not _transient(denied)
    refused = _refusal(denied, "sending a grade")
    assert isinstance(refused, NotMadragsCoursework) and str(refused) == NOT_MADRAGS
    disabled = _http_error(
        403,
        {
            "error": {
                "code": 403,
                "message": "@ClassroomApiDisabled The user is not permitted to access the Classroom API.",
                "status": "PERMISSION_DENIED",
            }
        },
    )
    assert "@ClassroomApiDisabled" in str(_refusal(disabled, "listing courses"))
    limited = _http_error(
        403,
        {"error": {"code": 403, "message": "Rate Limit Exceeded", "errors": [{"reason": "rateLimitExceeded"}]}},
    )
    assert _transient(limited) and _refusal(limited, "x") is None
    assert _transient(ConnectionResetError("reset by peer"))


def test_the_double_refuses_what_the_discovery_document_does_not_describe() -> None:
    """A body property StudentSubmission lacks, a grade that is not a number, a query parameter no method takes:
    each a 400 and a violation (the round trip's tests assert none)."""
    from googleapiclient.errors import HttpError

    double = ClassroomDouble(class_of(TOKEN, n=3))
    client, _ = _client(double)
    subs = client._classroom.courses().courseWork().studentSubmissions()
    ids = {"courseId": "61", "courseWorkId": "71", "id": "Cg1", "updateMask": "assignedGrade"}
    for body in ({"assignedGrade": 3, "privateComment": "Good"}, {"assignedGrade": "three"}):
        with pytest.raises(HttpError) as caught:
            subs.patch(**ids, body=body).execute()
        assert caught.value.resp.status == 400
    assert double.violations == [
        "classroom.courses.courseWork.studentSubmissions.patch: 'privateComment' is not a property of "
        "StudentSubmission",
        "classroom.courses.courseWork.studentSubmissions.patch.assignedGrade: 'three' is not a number",
    ]
    headers = {"authorization": f"Bearer {TOKEN}"}
    answer, _ = double.request("https://classroom.googleapis.com/v1/courses?teacher=me", "GET", headers=headers)
    assert answer.status == 400 and double.violations[-1] == "classroom.courses.list: no query parameter 'teacher'"


def test_the_token_is_kept_readable_by_its_owner_only(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no Google Classroom connection"):
        load_token(tmp_path)
    path = save_token(_creds(), tmp_path)
    assert path == token_path(tmp_path) and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_token(tmp_path).token == TOKEN
    path.chmod(0o644)
    with pytest.raises(ConfigError, match="can be read by other users"):
        load_token(tmp_path)


def test_a_sign_in_google_no_longer_accepts_says_connect_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from google.auth.exceptions import RefreshError
    from google.oauth2.credentials import Credentials

    def refused(self: Any, request: Any) -> None:
        raise RefreshError("invalid_grant: Token has been expired or revoked.")

    monkeypatch.setattr(Credentials, "refresh", refused)
    save_token(_creds(expires_in=timedelta(hours=-1)), tmp_path)
    with pytest.raises(ConfigError, match=r"no longer accepts the kept sign-in.*classroom connect"):
        load_token(tmp_path)


def test_the_client_file_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no OAuth client file"):
        authorize(tmp_path / "missing.json")
    wrong = tmp_path / "service-account.json"
    wrong.write_text(json.dumps({"type": "service_account", "client_email": "x@y"}))
    with pytest.raises(ConfigError, match="not an OAuth client file of a desktop app"):
        authorize(wrong)
    assert all(scope.startswith("https://www.googleapis.com/auth/") for scope in SCOPES) and len(SCOPES) == 5


def test_a_pull_lists_what_it_could_not_read(tmp_path: Path) -> None:
    data = class_of(TOKEN, n=4)
    data.subs["Cg2"].state = "CREATED"  # never turned in
    data.files["file3"] = ("Marks", "application/vnd.google-apps.spreadsheet", b"")
    data.files["file4"] = ("Empty", GOOGLE_DOC, b"\xef\xbb\xbf\r\n")
    double = ClassroomDouble(data)
    client, _ = _client(double)
    rubric = Rubric(traits=[Trait(name="Ideas", min=0, max=4, levels={i: f"level {i}" for i in range(5)})])
    pulled = pull_classroom(client, "61", "71", tmp_path, rubric)
    assert pulled.essays == 1 and pulled.manifest.submissions[0].source.endswith("(Google Doc)")
    reasons = {r.user_id: r.reason for r in pulled.manifest.refused}
    assert reasons == {
        "2002": "not turned in (CREATED)",
        "2003": "Marks: madrag reads Google Docs and .docx, .pdf or .txt files",
        "2004": "file4 holds no text",
    }
    assert "\r" not in (tmp_path / "essays.jsonl").read_text() and double.violations == []
