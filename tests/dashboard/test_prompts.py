"""The prompts pane: the prompt store's versions (newest first) with parent,
scores, source, date and the active one; a version's component texts; "use"
switches the active version in the store file; hostile text stays text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from starlette.testclient import TestClient
from tests.dashboard.conftest import HOSTILE, LOCAL

from aimegraph.dashboard import create_app
from aimegraph.dashboard.runs import RunManager
from aimegraph.optimizer.store import PromptStore
from aimegraph.prompts import DEFAULT_PROMPTS
from aimegraph.prompts.source import DEFAULT_VERSION


@pytest.fixture
def prompt_store(tmp_path: Path) -> tuple[PromptStore, str, str]:
    """Two stored versions: a manual one (active) and a GEPA child of it, better scored."""
    store = PromptStore(tmp_path / "prompts.jsonl")
    first = store.add(
        {"planner": DEFAULT_PROMPTS["planner"] + "\nPrefer few tasks."},
        scores={"val": 0.5},
        source="manual",
        note="hand edit",
    )
    second = store.add(
        {"planner": DEFAULT_PROMPTS["planner"] + f"\nPrefer few tasks. {HOSTILE}"},
        parent=first,
        scores={"val": 0.8, "train": 0.75},
        source="gepa",
    )
    store.use(first)
    return store, first, second


@pytest.fixture
def client(
    saver: BaseCheckpointSaver[Any], runs: RunManager, prompt_store: tuple[PromptStore, str, str]
) -> TestClient:
    return TestClient(create_app(saver, runs=runs, prompts=prompt_store[0]), base_url=LOCAL)


def test_versions_with_parent_scores_and_the_active_one(
    client: TestClient, prompt_store: tuple[PromptStore, str, str]
) -> None:
    _, first, second = prompt_store
    data = client.get("/api/prompts").json()
    assert data["active"] == first and data["current"] == first
    listed = [(v["version"], v["parent"], v["source"], v["active"]) for v in data["versions"]]
    assert listed == [
        (second, first, "gepa", False),
        (first, None, "manual", True),
        (DEFAULT_VERSION, None, "default", False),  # the built-in prompts, always listed
    ]
    newest = data["versions"][0]
    assert newest["scores"] == {"val": 0.8, "train": 0.75} and newest["changed"] == ["planner"]
    assert newest["created_at"] and "texts" not in newest


def test_a_versions_texts_and_what_it_changed(
    client: TestClient, prompt_store: tuple[PromptStore, str, str]
) -> None:
    _, first, second = prompt_store
    shown = client.get(f"/api/prompts/{second[:10]}").json()  # a unique prefix will do
    assert shown["version"] == second and shown["parent"] == first
    assert shown["texts"]["planner"].endswith(f"Prefer few tasks. {HOSTILE}")
    assert set(shown["texts"]) == set(DEFAULT_PROMPTS)
    assert shown["changed_from_parent"] == ["planner"]
    built_in = client.get("/api/prompts/default").json()
    assert built_in["version"] == DEFAULT_VERSION and built_in["changed_from_parent"] == []
    assert client.get("/api/prompts/ffffffffff").status_code == 404


def test_use_makes_a_version_active_in_the_store(
    client: TestClient, prompt_store: tuple[PromptStore, str, str], tmp_path: Path
) -> None:
    _, first, second = prompt_store
    used = client.post("/api/prompts/use", json={"version": second[:10]})
    assert used.status_code == 200 and used.json() == {"active": second}
    assert PromptStore(tmp_path / "prompts.jsonl").active() == second  # as another process reads it
    assert [v["version"] for v in client.get("/api/prompts").json()["versions"] if v["active"]] == [
        second
    ]
    assert client.post("/api/prompts/use", json={"version": "nope"}).status_code == 404
    assert client.post("/api/prompts/use", json={}).status_code == 400


def test_prompts_pane_is_token_protected_and_needs_a_store(
    saver: BaseCheckpointSaver[Any], runs: RunManager, prompt_store: tuple[PromptStore, str, str]
) -> None:
    guarded = TestClient(
        create_app(saver, runs=runs, prompts=prompt_store[0], token="s3cret"), base_url=LOCAL
    )
    assert guarded.get("/api/prompts").status_code == 401
    assert guarded.post("/api/prompts/use", json={"version": "default"}).status_code == 401
    assert prompt_store[0].active() == prompt_store[1]
    bearer = {"authorization": "Bearer s3cret"}
    assert guarded.get("/api/prompts", headers=bearer).status_code == 200
    without = TestClient(create_app(saver, runs=runs), base_url=LOCAL)
    assert without.get("/api/prompts").status_code == 404


def test_prompts_pane_in_the_browser(
    saver: BaseCheckpointSaver[Any],
    runs: RunManager,
    prompt_store: tuple[PromptStore, str, str],
    page: Any,
    screenshots: Path,
) -> None:
    from playwright.sync_api import expect

    from aimegraph.dashboard.server import serve_in_background

    store, first, second = prompt_store
    with serve_in_background(create_app(saver, runs=runs, prompts=store)) as url:
        page.goto(url + "/prompts")
        rows = page.locator("#prompt-versions tbody tr")
        expect(rows).to_have_count(3)
        expect(page.locator(f"tr[data-version='{first}']")).to_contain_text("active")
        expect(page.locator(f"tr[data-version='{second}']")).to_contain_text("val 0.800")
        # The active version opens first, its changed component chosen.
        expect(page.locator("#detail-version")).to_have_text(first)
        expect(page.locator("#detail-text")).to_contain_text("Prefer few tasks.")

        page.locator(f"tr[data-version='{second}'] td").first.click()
        expect(page.locator("#detail-version")).to_have_text(second)
        expect(page.locator("#detail-text")).to_contain_text(f"Prefer few tasks. {HOSTILE}")
        assert page.locator("main script, main img, main [onerror]").count() == 0
        assert page.evaluate("window.pwned") is None
        page.screenshot(path=screenshots / "prompts-pane.png", full_page=True)

        page.locator(f"tr[data-version='{second}']").get_by_role("button", name="Use").click()
        expect(page.locator(f"tr[data-version='{second}']")).to_contain_text("active")
        expect(page.locator(f"tr[data-version='{first}'] button.use")).to_be_visible()
    assert store.active() == second


def test_a_run_started_here_uses_the_active_version(
    client: TestClient,
    runs: RunManager,
    saver: BaseCheckpointSaver[Any],
    prompt_store: tuple[PromptStore, str, str],
) -> None:
    """As ``aimegraph run``: a run started on the dashboard is built with the prompt
    store, and starts with its active version; without an active version, the
    built-in prompts."""
    store, first, _ = prompt_store
    manager = RunManager(saver, prompts=store)
    app_client = TestClient(create_app(saver, runs=manager, prompts=store), base_url=LOCAL)
    started = app_client.post("/api/runs", json={"goal": "Add 2 and 3", "model": "scripted:demo"})
    thread_id = started.json()["thread_id"]
    manager.wait(thread_id, timeout=60)
    run = app_client.get(f"/api/threads/{thread_id}").json()
    assert run["prompt_version"] == first

    empty = RunManager(saver, prompts=PromptStore(store.path.parent / "none.jsonl"))
    other = TestClient(create_app(saver, runs=empty), base_url=LOCAL)
    thread_id = other.post("/api/runs", json={"goal": "Add 2 and 3", "model": "scripted:demo"})
    thread_id = thread_id.json()["thread_id"]
    empty.wait(thread_id, timeout=60)
    assert other.get(f"/api/threads/{thread_id}").json()["prompt_version"] == DEFAULT_VERSION
