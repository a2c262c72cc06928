"""The teacher's list of runs: runs made through the API do not clutter it, a run can be archived (hidden,
its files kept), brought back and renamed, and "show them" lists every run."""

from __future__ import annotations

import json
from pathlib import Path

from tests.web_helpers import (
    FAKE,
    HTML,
    RUBRIC,
    client_for,
    csrf,
    essays_csv,
    essays_json,
    form_post,
    make_config,
    wait_status,
)


def test_api_runs_and_archived_runs_stay_out_of_the_list(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        api_run = client.post(
            "/api/runs", json={"rubric": RUBRIC, "essays": essays_json(1), "protocols": ["MAD"], "backend": FAKE}
        ).json()
        token = csrf(client)

        def post(path: str, files: object = None, **data: str) -> object:
            return form_post(client, path, token, files, **data)

        draft = post("/new").headers["location"].split("/")[2]  # type: ignore[attr-defined]
        post(
            f"/drafts/{draft}/rubric",
            {"file": ("r.json", json.dumps(RUBRIC).encode(), "application/json")},
            mode="upload",
        )
        post(f"/drafts/{draft}/essays", {"file": ("c.csv", essays_csv(2).encode(), "text/csv")}, mode="upload")
        post(f"/drafts/{draft}/exemplars", pool="none")
        started = post(f"/drafts/{draft}/backend", kind="fake", protocols="MAD", action="start", name="Period 3")
        mine = started.headers["location"].split("/")[2]  # type: ignore[attr-defined]
        wait_status(client, mine)
        wait_status(client, api_run["id"])
        home = client.get("/", headers=HTML).text
        assert f'href="/runs/{mine}"' in home and f'href="/runs/{api_run["id"]}"' not in home
        assert "1 made through the API" in home
        assert f'href="/runs/{api_run["id"]}"' in client.get("/?show=all", headers=HTML).text
        assert post(f"/runs/{mine}/archive", archived="yes").status_code == 303  # type: ignore[attr-defined]
        home = client.get("/", headers=HTML).text
        assert f'href="/runs/{mine}"' not in home and "1 archived" in home
        assert client.get(f"/runs/{mine}/results", headers=HTML).status_code == 200  # its files all stay
        post(f"/runs/{mine}/archive", archived="no")
        assert f'href="/runs/{mine}"' in client.get("/", headers=HTML).text
        assert post(f"/runs/{mine}/rename", name="Period 3, final").status_code == 303  # type: ignore[attr-defined]
        assert client.get(f"/api/runs/{mine}").json()["name"] == "Period 3, final"
        assert ">Period 3, final</a>" in client.get("/", headers=HTML).text
