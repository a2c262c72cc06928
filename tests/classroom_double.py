"""A Google Classroom and Drive of their own, for tests: an HTTP object (httplib2's ``request`` interface, under
google-api-python-client's services) that checks every request madrag's client makes against the discovery
documents google-api-python-client ships (``classroom.v1.json``, ``drive.v3.json``): the method found by its HTTP
method and path, its path parameters, each query parameter one the method or the API declares (repeated only where
declared, an enum's value one of its values, its required ones there; ``alt=media`` only where it downloads media),
and the body against the method's request schema, property by property through each ``$ref`` (no property the
schema lacks, each of its type and enum). A request that breaks them is answered 400 and listed in ``violations``:
a test asserts there are none.

It answers with Classroom's rules as Google documents them: ``studentSubmissions.patch`` takes only the fields of its
``updateMask`` (``draftGrade``, ``assignedGrade``, and the rubric grades); ``patch`` and ``return`` of a coursework
that madrag's project did not make (``associatedWithDeveloper`` false) are answered 403 with Google's body
``@ProjectPermissionDenied The Developer Console project is not permitted to make this request.`` (the Classroom
API's "Access Errors" reference); ``courseWork.create`` makes a coursework associated with the caller's project;
lists come in pages (``nextPageToken``); a Drive ``export`` is for Google Docs only; a request without the
expected bearer token is a 401, and google-auth's renewal of the sign-in that follows is refused (``invalid_grant``,
as Google's token endpoint answers for a revoked refresh token). ``fail_next`` answers the next requests with the
statuses it holds."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import googleapiclient
import httplib2

DOCS = os.path.join(os.path.dirname(googleapiclient.__file__), "discovery_cache", "documents")
PROJECT_DENIED = "@ProjectPermissionDenied The Developer Console project is not permitted to make this request."
STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND"}
STATUS |= {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
MASKABLE = {"draftGrade", "assignedGrade", "draftRubricGrades", "assignedRubricGrades"}
PAGE = 10
GOOGLE_DOC = "application/vnd.google-apps.document"
TOKEN_URI = "https://oauth2.googleapis.com/token"


def load_doc(name: str) -> dict[str, Any]:
    with open(os.path.join(DOCS, name), encoding="utf-8") as fh:
        found: dict[str, Any] = json.load(fh)
    return found


def _methods(resources: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for resource in resources.values():
        out.extend(resource.get("methods", {}).values())
        out.extend(_methods(resource.get("resources", {})))
    return out


def _pattern(path: str) -> re.Pattern[str]:
    regex = re.sub(r"\{\+(\w+)\}", r"(?P<\1>.+)", re.escape(path).replace(r"\{", "{").replace(r"\}", "}"))
    return re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/:]+)", regex) + "$")


class Api:
    """One discovery document: its methods by HTTP method and path, and the checks of a request against them."""

    def __init__(self, name: str) -> None:
        self.doc = load_doc(name)
        self.base = self.doc["rootUrl"] + self.doc["servicePath"]
        self.routes = [(m["httpMethod"], _pattern(m["path"]), m) for m in _methods(self.doc["resources"])]

    def method(self, verb: str, path: str) -> tuple[dict[str, Any], dict[str, str]] | None:
        for method, pattern, found in self.routes:
            match = pattern.match(path)
            if method == verb and match:
                return found, match.groupdict()
        return None

    def check_query(self, method: dict[str, Any], query: dict[str, list[str]]) -> list[str]:
        params, errors = {**self.doc["parameters"], **method.get("parameters", {})}, []
        for name, values in query.items():
            spec = params.get(name)
            if spec is None or spec.get("location") != "query":
                errors.append(f"{method['id']}: no query parameter {name!r}")
                continue
            if len(values) > 1 and not spec.get("repeated"):
                errors.append(f"{method['id']}: {name!r} given {len(values)} times, not repeated")
            for value in values:
                if "enum" in spec and value not in spec["enum"]:
                    errors.append(f"{method['id']}: {name}={value!r} not one of {spec['enum']}")
                if spec.get("type") == "integer" and not value.lstrip("-").isdigit():
                    errors.append(f"{method['id']}: {name}={value!r} not an integer")
        for name, spec in method.get("parameters", {}).items():
            if spec.get("required") and spec.get("location") == "query" and name not in query:
                errors.append(f"{method['id']}: required {name!r} missing")
        return errors

    def check_value(self, schema: dict[str, Any], value: Any, where: str) -> list[str]:
        if "$ref" in schema:
            schema = self.doc["schemas"][schema["$ref"]]
        kind = schema.get("type")
        if kind == "object":
            if not isinstance(value, dict):
                return [f"{where}: not an object"]
            props, extra, errors = schema.get("properties", {}), schema.get("additionalProperties"), []
            for key, item in value.items():
                inner = props.get(key) or extra
                if inner is None:
                    errors.append(f"{where}: {key!r} is not a property of {schema.get('id', 'the object')}")
                else:
                    errors.extend(self.check_value(inner, item, f"{where}.{key}"))
            return errors
        if kind == "array":
            if not isinstance(value, list):
                return [f"{where}: not an array"]
            return [e for i, v in enumerate(value) for e in self.check_value(schema["items"], v, f"{where}[{i}]")]
        types: dict[str, tuple[type, ...]] = {"string": (str,), "number": (int, float), "integer": (int,)}
        types["boolean"] = (bool,)
        if kind in types and (not isinstance(value, types[kind]) or (kind != "boolean" and isinstance(value, bool))):
            return [f"{where}: {value!r} is not a {kind}"]
        if "enum" in schema and value not in schema["enum"]:
            return [f"{where}: {value!r} not one of {schema['enum']}"]
        return []


@dataclass
class Submission:
    id: str
    user_id: str
    coursework_id: str
    state: str = "TURNED_IN"
    files: list[str] = field(default_factory=list)
    assigned: float | None = None
    draft: float | None = None
    patches: int = 0
    returns: int = 0

    def json(self, course_id: str, ours: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "courseId": course_id,
            "courseWorkId": self.coursework_id,
            "id": self.id,
            "userId": self.user_id,
            "state": self.state,
            "courseWorkType": "ASSIGNMENT",
            "associatedWithDeveloper": ours,
            "assignmentSubmission": {"attachments": [{"driveFile": {"id": f, "title": f}} for f in self.files]},
        }
        if self.assigned is not None:
            out["assignedGrade"] = self.assigned
        if self.draft is not None:
            out["draftGrade"] = self.draft
        return out


@dataclass
class Classroom:
    """What the double holds: one course, its students, coursework, submissions, and the Drive files."""

    token: str
    course: dict[str, Any]
    students: list[dict[str, Any]]
    courseworks: dict[str, dict[str, Any]]
    subs: dict[str, Submission]
    files: dict[str, tuple[str, str, bytes]]
    fail_next: list[int] = field(default_factory=list)
    created: int = 0


def _answer(status: int, body: Any, content_type: str = "application/json") -> tuple[httplib2.Response, bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httplib2.Response({"status": str(status), "content-type": content_type}), data


def error(status: int, message: str) -> tuple[httplib2.Response, bytes]:
    """Google's error body (code, message, status), as its APIs answer."""
    return _answer(status, {"error": {"code": status, "message": message, "status": STATUS.get(status, "UNKNOWN")}})


class ClassroomDouble:
    """The HTTP object the services are built over (see the module)."""

    def __init__(self, data: Classroom) -> None:
        self.data = data
        self.apis = [Api("classroom.v1.json"), Api("drive.v3.json")]
        self.violations: list[str] = []
        self.calls: list[str] = []
        self.refreshes = 0

    def request(
        self, uri: str, method: str = "GET", body: Any = None, headers: dict[str, str] | None = None, **_: Any
    ) -> tuple[httplib2.Response, bytes]:
        headers = {k.lower(): v for k, v in (headers or {}).items()}
        if uri == TOKEN_URI and method == "POST":  # google-auth renewing the sign-in after a 401: refused
            self.refreshes += 1
            return _answer(400, {"error": "invalid_grant", "error_description": "Token has been expired or revoked."})
        if headers.get("authorization") != f"Bearer {self.data.token}":
            return error(401, "Request had invalid authentication credentials.")
        found = self._method(uri, method)
        if found is None:
            return error(404, f"no method {method} {uri}")
        api, spec, params, query = found
        payload = json.loads(body) if body else None
        problems = api.check_query(spec, query)
        if query.get("alt") == ["media"] and not spec.get("supportsMediaDownload"):
            problems.append(f"{spec['id']}: downloads no media (alt=media)")
        if "request" in spec:
            problems += api.check_value(spec["request"], payload, spec["id"])
        elif payload is not None:
            problems.append(f"{spec['id']}: takes no body")
        if problems:
            self.violations.extend(problems)
            return error(400, "; ".join(problems))
        self.calls.append(spec["id"])
        if self.data.fail_next:
            status = self.data.fail_next.pop(0)
            return error(status, "The service is currently unavailable." if status >= 500 else "Quota exceeded.")
        return self.answer(spec["id"], params, {k: v[0] for k, v in query.items()}, payload)

    def _method(self, uri: str, verb: str) -> tuple[Api, dict[str, Any], dict[str, str], dict[str, list[str]]] | None:
        parts = urlsplit(uri)
        base = f"{parts.scheme}://{parts.netloc}{parts.path}"
        for api in self.apis:
            if base.startswith(api.base):
                found = api.method(verb, base[len(api.base) :])
                if found is not None:
                    return api, found[0], found[1], parse_qs(parts.query, keep_blank_values=True)
        self.violations.append(f"no method of the discovery documents answers {verb} {uri}")
        return None

    def _page(self, items: list[dict[str, Any]], key: str, query: dict[str, str]) -> tuple[httplib2.Response, bytes]:
        start = int(query.get("pageToken") or 0)
        body: dict[str, Any] = {key: items[start : start + PAGE]}
        if start + PAGE < len(items):
            body["nextPageToken"] = str(start + PAGE)
        return _answer(200, body)

    def answer(
        self, method: str, params: dict[str, str], query: dict[str, str], body: Any
    ) -> tuple[httplib2.Response, bytes]:
        d = self.data
        course_id = str(d.course["id"])
        if params.get("courseId", course_id) != course_id:
            return error(404, "Requested entity was not found.")
        if method.startswith("drive."):
            return self._drive(method, params, query)
        if method == "classroom.courses.list":
            return self._page([d.course], "courses", query)
        if method == "classroom.courses.get":
            return (
                _answer(200, d.course) if params["id"] == course_id else error(404, "Requested entity was not found.")
            )
        if method == "classroom.courses.students.list":
            return self._page(d.students, "students", query)
        if method == "classroom.courses.courseWork.list":
            return self._page(list(d.courseworks.values()), "courseWork", query)
        if method == "classroom.courses.courseWork.create":
            d.created += 1
            made = {**body, "id": f"9{d.created:03d}", "courseId": course_id, "associatedWithDeveloper": True}
            d.courseworks[made["id"]] = made
            return _answer(200, made)
        work = d.courseworks.get(params.get("courseWorkId", params.get("id", "")))
        if work is None:
            return error(404, "Requested entity was not found.")
        if method == "classroom.courses.courseWork.get":
            return _answer(200, work)
        return self._submissions(method, work, params, query, body)

    def _submissions(
        self, method: str, work: dict[str, Any], params: dict[str, str], query: dict[str, str], body: Any
    ) -> tuple[httplib2.Response, bytes]:
        course_id, ours = str(self.data.course["id"]), bool(work.get("associatedWithDeveloper"))
        mine = [s for s in self.data.subs.values() if s.coursework_id == work["id"]]
        if method.endswith("studentSubmissions.list"):
            return self._page([s.json(course_id, ours) for s in mine], "studentSubmissions", query)
        sub = next((s for s in mine if s.id == params["id"]), None)
        if sub is None:
            return error(404, "Requested entity was not found.")
        if method.endswith("studentSubmissions.get"):
            return _answer(200, sub.json(course_id, ours))
        if not work.get("associatedWithDeveloper"):
            return error(403, PROJECT_DENIED)
        if method.endswith("studentSubmissions.patch"):
            mask = [f.strip() for f in query.get("updateMask", "").split(",") if f.strip()]
            if not mask or set(mask) - MASKABLE:
                return error(400, f"updateMask: {mask} (only {sorted(MASKABLE)} may be updated)")
            sub.patches += 1
            sub.assigned = body.get("assignedGrade") if "assignedGrade" in mask else sub.assigned
            sub.draft = body.get("draftGrade") if "draftGrade" in mask else sub.draft
            return _answer(200, sub.json(course_id, ours))
        if method.endswith("studentSubmissions.return"):
            sub.returns += 1
            sub.state = "RETURNED"
            return _answer(200, {})
        return error(400, f"the double does not answer {method}")

    def _drive(self, method: str, params: dict[str, str], query: dict[str, str]) -> tuple[httplib2.Response, bytes]:
        found = self.data.files.get(params["fileId"])
        if found is None:
            return error(404, f"File not found: {params['fileId']}.")
        name, mime, data = found
        if method == "drive.files.export":
            if mime != GOOGLE_DOC:
                return error(403, "Export only supports Docs Editors files.")
            return _answer(200, data, query.get("mimeType", "text/plain"))
        if query.get("alt") == "media":
            if mime.startswith("application/vnd.google-apps."):
                return error(
                    403, "Only files with binary content can be downloaded. Use Export with Docs Editors files."
                )
            return _answer(200, data, mime)
        meta = {"id": params["fileId"], "name": name, "mimeType": mime}
        wanted = [f for f in query.get("fields", "").split(",") if f]
        return _answer(200, {k: v for k, v in meta.items() if not wanted or k in wanted})


def class_of(token: str, n: int = 25, made_by_madrag: bool = True) -> Classroom:
    """A course (id ``61``) with one coursework (``71``; made by madrag's project or in Classroom's own pages) and
    ``n`` students, each handing in a Google Doc, a .docx or a .pdf of the same essays as the Canvas double's."""
    from tests.canvas_double import essay_words
    from tests.class_file_makers import docx_bytes, pdf_bytes

    students, subs, files = [], {}, {}
    for i in range(1, n + 1):
        uid = str(2000 + i)
        name = {"givenName": f"Pupil{i}", "familyName": f"Family{i}", "fullName": f"Pupil{i} Family{i}"}
        students.append(
            {
                "courseId": "61",
                "userId": uid,
                "profile": {"id": uid, "name": name, "emailAddress": f"pupil{i}@school.example"},
            }
        )
        fid = f"file{i}"
        if i % 3 == 1:
            files[fid] = (f"Pupil{i} Family{i} - River essay", GOOGLE_DOC, "\ufeff" + "\r\n".join(essay_words(i)))
        elif i % 3 == 2:
            files[fid] = (
                f"essay{i}.docx",
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                docx_bytes(essay_words(i)),
            )
        else:
            files[fid] = (f"essay{i}.pdf", "application/pdf", pdf_bytes(essay_words(i)))
        subs[f"Cg{i}"] = Submission(id=f"Cg{i}", user_id=uid, coursework_id="71", files=[fid])
    work = {
        "id": "71",
        "courseId": "61",
        "title": "River essay",
        "description": "Write about the river.",
        "maxPoints": 7,
        "workType": "ASSIGNMENT",
        "state": "PUBLISHED",
        "associatedWithDeveloper": made_by_madrag,
    }
    course = {"id": "61", "name": "English 9", "courseState": "ACTIVE"}
    encoded = {k: (n_, m, d if isinstance(d, bytes) else d.encode()) for k, (n_, m, d) in files.items()}
    return Classroom(token, course, students, {"71": work}, subs, encoded)


class GoogleSignIn:
    """Google's side of the installed-app sign-in, on this machine: a token endpoint (``POST /token`` on
    ``127.0.0.1``, answering an authorization code, with its PKCE verifier, by a token as Google's does) and a
    "browser" that, shown the consent page's address, follows the redirect back to madrag's one-time server with a
    code, as Google's page does once the teacher agrees. ``client_file`` writes a desktop app's client file whose
    token address is this endpoint (oauthlib must be told that plain http is fine: ``OAUTHLIB_INSECURE_TRANSPORT``)."""

    CODE = "4/0-one-time-code"

    def __init__(self, token: str, refresh: str) -> None:
        self.token, self.refresh = token, refresh
        self.opened: list[str] = []
        self.exchanged: list[dict[str, list[str]]] = []
        self.server: Any = None
        self.scopes: tuple[str, ...] = ()

    def start(self) -> str:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                outer.exchanged.append(form)
                ok = form.get("code") == [outer.CODE] and form.get("code_verifier") and form.get("redirect_uri")
                body = {
                    "access_token": outer.token,
                    "refresh_token": outer.refresh,
                    "expires_in": 3599,
                    "token_type": "Bearer",
                    "scope": " ".join(outer.scopes),  # the scopes asked for, granted
                }
                data = json.dumps(body if ok else {"error": "invalid_grant"}).encode()
                self.send_response(200 if ok else 400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_port}/token"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def client_file(self, path: Any, token_uri: str, scopes: tuple[str, ...]) -> Any:
        self.scopes = scopes
        installed = {
            "client_id": "school-client.apps.googleusercontent.com",
            "client_secret": "school-client-secret",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": token_uri,
            "redirect_uris": ["http://localhost"],
        }
        path.write_text(json.dumps({"installed": installed}), encoding="utf-8")
        return path

    def open(self, url: str, new: int = 0, autoraise: bool = True) -> bool:
        """The browser: Google's consent page agreed to at once, its redirect followed (in a thread: madrag's
        one-time server answers once this returns)."""
        import threading
        import urllib.request
        from urllib.parse import urlencode

        self.opened.append(url)
        asked = parse_qs(urlsplit(url).query)
        back = (
            asked["redirect_uri"][0]
            + "?"
            + urlencode({"state": asked["state"][0], "code": self.CODE, "scope": asked["scope"][0]})
        )
        threading.Thread(target=lambda: urllib.request.urlopen(back, timeout=10).read(), daemon=True).start()
        return True
