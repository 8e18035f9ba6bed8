"""The evals pane: the evals ``aimegraph eval`` wrote, newest first with each
system's pass@1, and their self-contained reports, served with no script allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from starlette.testclient import TestClient
from tests.dashboard.conftest import HOSTILE, LOCAL
from tests.eval.helpers import THREE_TASKS, write_suite

from aimegraph.dashboard import create_app
from aimegraph.dashboard.panes import REPORT_POLICY
from aimegraph.dashboard.runs import RunManager
from aimegraph.eval import OracleModels, evaluate
from aimegraph.eval.listing import eval_report

pytest.importorskip("langchain.agents", reason="create_agent needs the [eval] extra")


@pytest.fixture
def evals(tmp_path: Path) -> Path:
    """Two evals: one complete (aimegraph and create_agent, every task solved), one
    with a task the oracle gets wrong and markup in its answer."""
    folder = tmp_path / "evals"
    suite = write_suite(tmp_path / "suite", THREE_TASKS)
    evaluate(suite, model="oracle", out=folder / "first", tasks=["one"])
    hostile = [
        dict(
            THREE_TASKS[0],
            oracle={**THREE_TASKS[0]["oracle"], "answer": HOSTILE},
            check={"contains": "7"},  # not there: the failure quotes the answer
        )
    ]
    evaluate(
        write_suite(tmp_path / "hostile", hostile),
        model=OracleModels(),
        systems=["create_agent"],
        out=folder / "second",
    )
    (folder / "not-an-eval").mkdir()
    return folder


@pytest.fixture
def client(saver: BaseCheckpointSaver[Any], runs: RunManager, evals: Path) -> TestClient:
    return TestClient(create_app(saver, runs=runs, evals=evals), base_url=LOCAL)


def test_evals_are_listed_newest_first_with_their_scores(client: TestClient, evals: Path) -> None:
    data = client.get("/api/evals").json()
    assert data["folder"] == str(evals)
    assert [e["name"] for e in data["evals"]] == ["second", "first"]
    first = data["evals"][1]
    assert first["suite"] == "tiny" and first["complete"] and first["has_report"]
    assert [(s["name"], s["pass_at_1"]) for s in first["systems"]] == [
        ("aimegraph", 1.0),
        ("create_agent", 1.0),
    ]
    assert data["evals"][0]["systems"][0]["pass_at_1"] == 0.0


def test_a_report_opens_with_no_script_allowed(client: TestClient, evals: Path) -> None:
    response = client.get("/evals/first")
    assert response.status_code == 200
    assert response.headers["content-security-policy"] == REPORT_POLICY
    assert "script-src" not in REPORT_POLICY and "default-src 'none'" in REPORT_POLICY
    assert "<svg" in response.text and "Eval of tiny" in response.text
    hostile = client.get("/evals/second").text
    assert "<script>" not in hostile and "&lt;script&gt;" in hostile
    for name in ("not-an-eval", "nope", "first%2F..%2Fsecond", "%2E%2E"):
        assert client.get(f"/evals/{name}").status_code == 404
    assert eval_report(evals, "..") is None and eval_report(evals, "first/../second") is None


def test_evals_are_token_protected(
    saver: BaseCheckpointSaver[Any], runs: RunManager, evals: Path
) -> None:
    guarded = TestClient(create_app(saver, runs=runs, evals=evals, token="s3cret"), base_url=LOCAL)
    assert guarded.get("/api/evals").status_code == 401
    assert guarded.get("/evals/first").status_code == 401


def test_evals_pane_in_the_browser(
    saver: BaseCheckpointSaver[Any], runs: RunManager, evals: Path, page: Any, screenshots: Path
) -> None:
    from playwright.sync_api import expect

    from aimegraph.dashboard.server import serve_in_background

    with serve_in_background(create_app(saver, runs=runs, evals=evals)) as url:
        page.goto(url + "/prompts")
        page.get_by_role("link", name="evals").click()
        rows = page.locator("#evals tbody tr")
        expect(rows).to_have_count(2)
        expect(page.locator("tr[data-eval='first']")).to_contain_text("aimegraph 1.00")
        page.screenshot(path=screenshots / "evals-pane.png", full_page=True)
        page.locator("tr[data-eval='first'] td").nth(1).click()
        expect(page).to_have_url(url + "/evals/first")
        expect(page.locator("h1")).to_contain_text("Eval of tiny")
        assert page.locator("svg").count() == 2
        page.screenshot(path=screenshots / "eval-report.png", full_page=True)
