"""The dashboard's safety rules, in process: only loopback host names, changes only
as same-origin JSON, a token on every request and event stream (and required to
bind beyond loopback), and no secret or environment variable in any page."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from starlette.testclient import TestClient
from tests.dashboard.conftest import demo

from aimegraph.cli import main
from aimegraph.dashboard import create_app
from aimegraph.dashboard.runs import RunManager
from aimegraph.dashboard.server import serve, serve_in_background


def test_only_loopback_host_names_are_served(client: TestClient) -> None:
    assert client.get("/api/threads").status_code == 200
    rebound = client.get("/api/threads", headers={"host": "attacker.example"})
    assert rebound.status_code == 400


def test_changes_need_same_origin_json(client: TestClient) -> None:
    form = client.post("/api/demo", data={"approve_plan": "1"})
    assert form.status_code == 415
    foreign = client.post("/api/demo", json={}, headers={"origin": "http://attacker.example"})
    assert foreign.status_code == 403
    assert (
        client.get("/api/threads")
        .headers["content-security-policy"]
        .startswith("default-src 'self'; script-src 'self'")
    )


def test_a_token_guards_every_request_and_stream(
    saver: BaseCheckpointSaver[Any], runs: RunManager, hostile_thread: str
) -> None:
    app = create_app(saver, runs=runs, token="s3cret", allowed_hosts=("*",))
    client = TestClient(app, base_url="http://192.0.2.10:8765")
    for path in ("/", f"/threads/{hostile_thread}", "/api/threads", "/api/events",
                 f"/api/threads/{hostile_thread}/events", f"/api/threads/{hostile_thread}/plan.svg",
                 "/static/run.js"):  # fmt: skip
        assert client.get(path).status_code == 401, path
    # No token is told one is needed; a wrong one (a header, a stale cookie, an address's
    # ?token=) that it is wrong.
    missing = client.get("/api/threads")
    assert missing.status_code == 401 and "a token is required" in missing.json()["error"]
    wrong = [
        client.get("/api/threads", headers={"authorization": "Bearer wrong"}),
        client.get("/api/threads?token=s3cre"),
    ]
    client.cookies.set("aimegraph_token", "stale")
    wrong.append(client.get("/api/threads"))
    client.cookies.clear()
    assert [(r.status_code, r.json()["error"]) for r in wrong] == [
        (401, "the token is wrong: it is not the one the dashboard was started with")
    ] * 3
    assert client.post("/api/demo", json={}).status_code == 401
    ok = client.get("/api/threads", headers={"authorization": "Bearer s3cret"})
    assert ok.status_code == 200

    # Opening a page with ?token= trades it for a cookie and drops it from the address.
    opened = client.get(f"/threads/{hostile_thread}?token=s3cret&x=1", follow_redirects=False)
    assert (
        opened.status_code == 303 and opened.headers["location"] == f"/threads/{hostile_thread}?x=1"
    )
    assert (
        "HttpOnly" in opened.headers["set-cookie"]
        and "SameSite=strict" in opened.headers["set-cookie"]
    )
    assert client.get("/api/threads").status_code == 200  # the cookie now rides along


def test_binding_beyond_loopback_needs_a_token(
    saver: BaseCheckpointSaver[Any], store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--checkpoints", store_url, "dashboard", "--host", "0.0.0.0"]) == 2
    assert "--token" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--token"):
        serve(saver, host="0.0.0.0", port=0)
    with pytest.raises(ValueError, match="token"):
        create_app(saver, allowed_hosts=("*",))


def test_no_secret_or_environment_is_shown(
    client: TestClient, runs: RunManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-shown")
    monkeypatch.setenv("AIMEGRAPH_DASHBOARD_TOKEN", "never-shown-either")
    thread_id = demo(client, runs)
    bodies = [
        client.get(path).text
        for path in ("/", f"/threads/{thread_id}", "/api/threads", f"/api/threads/{thread_id}")
    ]
    assert not any("never-shown" in body for body in bodies)


def test_a_token_guards_the_live_server(saver: BaseCheckpointSaver[Any], runs: RunManager) -> None:
    app = create_app(saver, runs=runs, token="s3cret")
    with serve_in_background(app) as url:
        assert httpx.get(url + "/api/events", timeout=5).status_code == 401
        with httpx.stream("GET", url + "/api/events", timeout=5,
                          headers={"authorization": "Bearer s3cret"}) as response:  # fmt: skip
            assert response.status_code == 200
