"""The backend page's model-server fields follow each kind's traits and options model (server/pages/backend_form.py),
shown on a toy model server registered here alone: remote, needs a model, takes no key, and its options have no
``base_url`` and no ``logprobs`` - so the page offers it neither a Server URL, a Confidence choice, an API key nor
the connection test, says it is not tested before the run, offers its own option, and a post's values for the
fields it does not take are dropped before they reach its run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from pydantic import SecretStr
from tests.web_helpers import (
    HTML,
    RUBRIC,
    client_for,
    csrf,
    draft_at_backend,
    essays_json,
    form_post,
    make_config,
    wait_status,
)

from madrag.providers import backends
from madrag.providers.backends import (
    BackendOptions,
    BackendTraits,
    CallLimits,
    option,
    register_backend,
    unregister_backend,
)
from madrag.providers.fake import FakeProvider

TOY = "toyserver"


class ToyServerOptions(BackendOptions):
    """A model server with one setting of its own and no address or logprobs setting."""

    toy_region: str = option("north", "toyserver: the region its answers come from.", web=True)


def build_toy(model: str | None, options: ToyServerOptions, limits: CallLimits, key: SecretStr | None) -> FakeProvider:
    return FakeProvider(model_name=f"{model}-{options.toy_region}", concurrency=limits.concurrency or 4)


def register_toy() -> None:
    traits = BackendTraits(label="a toy model server", remote=True, needs_model=True)
    register_backend(TOY, ToyServerOptions, build_toy, traits)


@pytest.fixture
def toy() -> Iterator[None]:
    register_toy()
    yield
    unregister_backend(TOY)


class Fields(HTMLParser):
    """Each form control of the page (by name, or id for a button without one) with the kinds its innermost
    ``data-kinds`` part lists (None: a part for every kind)."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.stack: list[str | None] = []
        self.found: dict[str, set[str] | None] = {}
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag in ("input", "select", "button"):
            kinds = next((k for k in reversed(self.stack) if k is not None), None)
            key = str(a.get("name") if a.get("name") not in (None, "action", "kind") else a.get("id") or a.get("value"))
            self.found[key] = None if kinds is None else set(kinds.split())
        if tag not in ("input", "br", "meta", "link", "img"):
            self.stack.append(a.get("data-kinds"))

    def handle_endtag(self, tag: str) -> None:
        if tag not in ("input", "br", "meta", "link", "img") and self.stack:
            self.stack.pop()


def test_the_page_offers_a_server_only_the_fields_its_traits_and_options_have(toy: None, tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        draft = draft_at_backend(client, token)
        page = client.get(f"/drafts/{draft}/backend", headers=HTML).text
    fields = Fields(page).found
    assert 'name="kind" value="toyserver"' in page and "A model server (a toy model server)" in page
    assert fields["model"] is not None and TOY in fields["model"]  # needs_model
    assert fields["concurrency"] is not None and TOY in fields["concurrency"]
    for name in ("base_url", "logprobs", "api_key", "test-connection", "preset-ollama"):
        assert fields[name] is not None and TOY not in fields[name], name  # offered, but never for the toy
        assert {"openai"} <= fields[name], name  # madrag's OpenAI-compatible server takes each of them
    assert fields["option-toyserver-toy_region"] == {TOY}  # its own option, for it alone
    assert "toyserver: the region its answers come from." in page
    assert 'id="not-tested-toyserver"' in page and "a toy model server: not tested before the run" in page
    assert 'Server URL <span class="muted">(not for a toy model server)</span>' in page  # said without a script


def test_with_the_toy_the_only_server_the_page_has_no_url_confidence_or_test(
    toy: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    only = {kind: b for kind, b in backends._BACKENDS.items() if not b.traits.remote or kind == TOY}
    monkeypatch.setattr(backends, "_BACKENDS", only)  # madrag's own model servers left out for this test
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        draft = draft_at_backend(client, token)
        page = client.get(f"/drafts/{draft}/backend", headers=HTML).text
    fields = Fields(page).found
    assert 'value="toyserver"' in page and fields["model"] == {TOY} and fields["option-toyserver-toy_region"] == {TOY}
    for absent in ("base_url", "logprobs", "api_key", "test-connection", "presets", "preset-ollama"):
        assert absent not in fields and f'id="{absent}"' not in page and f'name="{absent}"' not in page, absent


def test_a_posted_field_the_kind_does_not_take_is_dropped(toy: None, tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        draft = draft_at_backend(client, token)
        form = {"kind": TOY, "model": "m", "option-toyserver-toy_region": "south", "protocols": "MA"}
        others = {"base_url": "http://127.0.0.1:9/v1", "logprobs": "yes", "api_key": "sk-not-the-toys"}
        started = form_post(client, f"/drafts/{draft}/backend", token, **form, **others, action="start")
        assert started.status_code == 303, started.text
        run = wait_status(client, started.headers["location"].rsplit("/", 1)[-1], timeout=60)
        assert run["status"] == "finished", run
    recorded = json.loads((tmp_path / "server" / "runs" / run["id"] / "run.json").read_text(encoding="utf-8"))
    backend = recorded["backend"]
    assert (backend["kind"], backend["model"], backend["options"]) == (TOY, "m", {"toy_region": "south"})
    assert backend["base_url"] is None and backend["logprobs"] is None and backend["key_source"] == "none"
    assert recorded["key_env"] is None


@pytest.mark.parametrize(
    ("backend", "refused"),
    [
        ({"kind": "fake", "base_url": "http://127.0.0.1:9/v1"}, "the fake backend takes no base_url"),
        ({"kind": "fake", "api_key": "sk-not-for-the-fake"}, "the fake backend takes no api_key"),
        ({"kind": "anthropic", "model": "m", "logprobs": True}, "the anthropic backend takes no logprobs"),
        ({"kind": "llamacpp", "fake_latency_s": 0.5}, "the llamacpp backend takes no fake_latency_s"),
    ],
)
def test_the_json_api_refuses_a_setting_the_kind_would_not_use(
    tmp_path: Path, backend: dict[str, object], refused: str
) -> None:
    """A program's request is refused (422, naming the setting), not run without it: the page drops such fields
    (a form sends every field it shows), a program sent this one on purpose."""
    with client_for(make_config(tmp_path)) as client:
        body = {"rubric": RUBRIC, "essays": essays_json(), "protocols": ["MA"], "backend": backend}
        answer = client.post("/api/runs", json=body)
    assert answer.status_code == 422 and refused in answer.text, answer.text
    assert not (tmp_path / "server" / "runs").exists() or not any((tmp_path / "server" / "runs").iterdir())
