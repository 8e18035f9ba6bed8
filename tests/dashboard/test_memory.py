"""The dashboard with a long-term memory store: runs it starts or resumes keep
their memory nodes (a thread the CLI started with memory is answered here and
records its episodes), the memory pane lists, searches and forgets per scope,
``aimegraph dashboard --store`` opens the store, and a distributed thread's
resume is queued for the workers instead of run here."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from starlette.testclient import TestClient
from tests.conftest import TWO_TASKS
from tests.dashboard.conftest import HOSTILE, LOCAL

from aimegraph.checkpoints import RunSettings
from aimegraph.cli import main
from aimegraph.config import AimeConfig
from aimegraph.dashboard import create_app
from aimegraph.dashboard.runs import DistributedQueue, RunManager
from aimegraph.distributed.records import RunRecord
from aimegraph.memory import EPISODES, LESSONS, Episode, open_store
from aimegraph.memory.browse import list_memories
from aimegraph.memory.episodes import episode_ops
from aimegraph.memory.store import default_store_url


@pytest.fixture
def memory_store(store_url: str) -> Iterator[BaseStore]:
    """The store the CLI uses by default for ``store_url``'s checkpoints."""
    with open_store(default_store_url(store_url)) as store:
        yield store


@pytest.fixture
def memory_runs(saver: BaseCheckpointSaver[Any], memory_store: BaseStore) -> Iterator[RunManager]:
    manager = RunManager(saver, store=memory_store)
    yield manager
    for thread_id in manager.active():
        manager.wait(thread_id, timeout=60)


@pytest.fixture
def client(
    saver: BaseCheckpointSaver[Any], memory_store: BaseStore, memory_runs: RunManager
) -> TestClient:
    return TestClient(create_app(saver, store=memory_store, runs=memory_runs), base_url=LOCAL)


def put_episode(store: BaseStore, scope: str, key: str, **fields: Any) -> None:
    episode = Episode(
        goal=fields.pop("goal", "Price the spring catalogue"),
        task_id=fields.pop("task_id", "t1"),
        title=fields.pop("title", "Load the price list"),
        outcome=fields.pop("outcome", "completed"),
        thread_id=key.split(":")[0],
        **fields,
    )
    store.batch(episode_ops(scope, key, episode))


def test_a_cli_thread_with_memory_is_approved_here_and_records_its_episodes(
    client: TestClient, memory_runs: RunManager, memory_store: BaseStore, store_url: str
) -> None:
    """``aimegraph run`` builds its graph with the default store; the dashboard's
    resume must build the same graph, or the run ends without its memory nodes."""
    code = main(["--checkpoints", store_url, "run", "Multiply six by seven", "--model", TWO_TASKS,
                 "--approve-plan", "--thread", "remembered", "--json"])  # fmt: skip
    assert code == 5
    assert not list_memories(memory_store, "default")
    (waiting,) = client.get("/api/threads/remembered").json()["interrupts"]

    approved = client.post(
        "/api/threads/remembered/resume", json={"action": "approve", "interrupt_id": waiting["id"]}
    )
    assert approved.status_code == 202 and approved.json()["queued"] is False
    memory_runs.wait("remembered", timeout=60)

    assert client.get("/api/threads/remembered").json()["status"] == "succeeded"
    episodes = [
        i.value for i in list_memories(memory_store, "default", [EPISODES], limit=100)
        if i.value["thread_id"] == "remembered"
    ]  # fmt: skip
    assert {e["task_id"] for e in episodes} == {"t1", "t2", "run"}
    assert all(e["outcome"] == "completed" for e in episodes)
    listed = client.get("/api/memory").json()["items"]
    assert {i["key"].split(":")[1] for i in listed} >= {"t1", "run"}


def test_a_run_started_here_records_into_the_store(
    client: TestClient, memory_runs: RunManager, memory_store: BaseStore
) -> None:
    response = client.post("/api/demo", json={})
    thread_id = response.json()["thread_id"]
    memory_runs.wait(thread_id, timeout=60)
    keys = {i.key for i in list_memories(memory_store, "default", [EPISODES], limit=100)}
    assert any(k.startswith(f"{thread_id}:run:") for k in keys)


def test_memory_pane_lists_searches_and_forgets_per_scope(
    client: TestClient, memory_store: BaseStore
) -> None:
    put_episode(memory_store, "default", "a:t1:1", summary="Loaded 120 prices from prices.csv")
    put_episode(
        memory_store,
        "default",
        "a:t2:1",
        title="Convert the currency",
        outcome="failed",
        summary="rates missing",
        lesson="Fetch the exchange rates before converting",
    )
    put_episode(memory_store, "alice", "b:t1:1", title="Alice's private task", summary=HOSTILE)

    default = client.get("/api/memory").json()
    assert default["scope"] == "default" and set(default["scopes"]) == {"default", "alice"}
    assert {(i["kind"], i["key"]) for i in default["items"]} == {
        (EPISODES, "a:t1:1"),
        (EPISODES, "a:t2:1"),
        (LESSONS, "a:t2:1"),
    }
    assert not any("Alice" in str(i) for i in default["items"])  # scopes never mix
    lessons = client.get("/api/memory", params={"kind": LESSONS}).json()["items"]
    assert [i["value"]["lesson"] for i in lessons] == ["Fetch the exchange rates before converting"]
    assert lessons[0]["line"].startswith("lesson")

    found = client.get("/api/memory", params={"q": "exchange rates for currency"}).json()
    assert found["query"] and found["items"][0]["key"] == "a:t2:1"
    assert all("score" in i for i in found["items"])

    alice = client.get("/api/memory", params={"scope": "alice"}).json()["items"]
    assert [i["value"]["summary"] for i in alice] == [HOSTILE]  # JSON; the page shows it as text

    forgot = client.post("/api/memory/forget", json={"key": "a:t2:1"})
    assert forgot.status_code == 200 and forgot.json()["forgotten"] == [EPISODES, LESSONS]
    assert [i["key"] for i in client.get("/api/memory").json()["items"]] == ["a:t1:1"]
    again = client.post("/api/memory/forget", json={"key": "a:t2:1"})
    assert again.status_code == 404
    other_scope = client.post("/api/memory/forget", json={"key": "b:t1:1"})
    assert other_scope.status_code == 404  # alice's item is not in the default scope
    assert client.get("/api/memory", params={"kind": "facts"}).status_code == 400


def test_memory_pane_is_token_protected_and_needs_a_store(
    saver: BaseCheckpointSaver[Any], memory_store: BaseStore, memory_runs: RunManager
) -> None:
    guarded = TestClient(
        create_app(saver, store=memory_store, runs=memory_runs, token="s3cret"), base_url=LOCAL
    )
    assert guarded.get("/api/memory").status_code == 401
    assert guarded.post("/api/memory/forget", json={"key": "x"}).status_code == 401
    ok = guarded.get("/api/memory", headers={"authorization": "Bearer s3cret"})
    assert ok.status_code == 200
    without = TestClient(create_app(saver), base_url=LOCAL)
    missing = without.get("/api/memory")
    assert missing.status_code == 404 and "--store" in missing.json()["error"]


def test_dashboard_command_opens_the_stores(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``aimegraph dashboard --store URL`` serves with that memory store; without it,
    the store beside the checkpoints (as ``aimegraph run`` uses); the same for the
    prompt store and ``--prompts``."""
    from aimegraph.dashboard import server

    served: list[dict[str, Any]] = []

    def fake_serve(saver: BaseCheckpointSaver[Any], **kwargs: Any) -> None:
        store = kwargs["store"]
        served.append({**kwargs, "scopes": store.list_namespaces(prefix=("aimegraph",))})

    monkeypatch.setattr(server, "serve", fake_serve)
    with open_store(f"sqlite:///{tmp_path / 'other.db'}") as other:
        put_episode(other, "default", "x:t1:1")
    assert main(["--checkpoints", store_url, "dashboard", "--store",
                 f"sqlite:///{tmp_path / 'other.db'}"]) == 0  # fmt: skip
    assert main(["--checkpoints", store_url, "dashboard"]) == 0
    assert served[0]["scopes"] == [("aimegraph", "default", EPISODES)]
    assert served[1]["scopes"] == []
    assert (tmp_path / "memory.db").exists()  # the default, beside checkpoints.db
    assert served[0]["distributed"] is None  # SQLite checkpoints: no queue
    assert served[1]["prompts"].path == tmp_path / "prompts.jsonl"  # beside them too
    other_prompts = tmp_path / "elsewhere" / "prompts.jsonl"
    assert main(["--checkpoints", store_url, "dashboard", "--prompts", str(other_prompts)]) == 0
    assert served[2]["prompts"].path == other_prompts


def test_a_distributed_thread_is_queued_not_run_here(
    client: TestClient, memory_runs: RunManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread with a row in the runs table is resumed by the workers: the
    dashboard sends the answer to ``enqueue_resume`` and runs nothing itself."""
    from aimegraph.dashboard import runs as runs_module
    from aimegraph.distributed import submit

    thread_id = client.post("/api/demo", json={"approve_plan": True}).json()["thread_id"]
    memory_runs.wait(thread_id, timeout=60)
    (waiting,) = client.get(f"/api/threads/{thread_id}").json()["interrupts"]
    settings = RunSettings(model="scripted:demo", config=AimeConfig())
    record = RunRecord(
        thread_id=thread_id,
        state="paused",
        status=None,
        reason=None,
        goal="g",
        settings=settings,
        worker=None,
        deliveries=1,
        submitted_at=datetime.now(UTC),
    )
    memory_runs.distributed = DistributedQueue("postgresql://db/x", "redis://broker/0", "q")
    monkeypatch.setattr(runs_module, "find_run", lambda url, t: record if t == thread_id else None)
    queued: list[tuple[Any, ...]] = []
    monkeypatch.setattr(
        submit, "enqueue_resume", lambda *args, **kwargs: queued.append((args, kwargs))
    )

    response = client.post(f"/api/threads/{thread_id}/resume", json={"action": "approve"})

    assert response.status_code == 202 and response.json() == {
        "thread_id": thread_id,
        "queued": True,
    }
    assert queued == [
        (
            (thread_id, {waiting["id"]: {"action": "approve"}}),
            {"broker": "redis://broker/0", "checkpoints": "postgresql://db/x", "queue": "q"},
        )
    ]
    assert thread_id not in memory_runs.active()
    assert client.get(f"/api/threads/{thread_id}").json()["status"] == "paused"

    def busy(*args: Any, **kwargs: Any) -> None:
        raise submit.RunNotResumableError(f"run {thread_id!r} is running already")

    monkeypatch.setattr(submit, "enqueue_resume", busy)
    conflict = client.post(f"/api/threads/{thread_id}/resume", json={"action": "approve"})
    assert conflict.status_code == 409 and "running already" in conflict.text


def test_memory_pane_in_the_browser(
    saver: BaseCheckpointSaver[Any],
    memory_store: BaseStore,
    memory_runs: RunManager,
    page: Any,
    screenshots: Path,
) -> None:
    """The pane lists a scope, searches it, forgets an item on a click, and shows
    hostile text as text."""
    from playwright.sync_api import expect

    from aimegraph.dashboard.server import serve_in_background

    put_episode(memory_store, "default", "a:t1:1", summary="Loaded 120 prices from prices.csv")
    put_episode(
        memory_store,
        "default",
        "a:t2:1",
        title=f"Convert {HOSTILE}",
        outcome="failed",
        summary=HOSTILE,
        lesson="Fetch the exchange rates before converting",
    )
    put_episode(memory_store, "alice", "b:t1:1", title="Alice's private task")
    app = create_app(saver, store=memory_store, runs=memory_runs, poll_seconds=0.05)
    with serve_in_background(app) as url:
        page.goto(url + "/memory")
        items = page.locator("#memory-items details.memory-item")
        expect(items).to_have_count(3)
        expect(page.locator("#memory-items")).not_to_contain_text("Alice")
        expect(page.locator("#memory-items")).to_contain_text(f"Convert {HOSTILE}")
        page.locator("details[data-kind='episodes'][data-key='a:t2:1'] > summary").click()
        expect(
            page.locator("details[data-kind='episodes'][data-key='a:t2:1'] dd").first
        ).to_be_visible()
        page.screenshot(path=screenshots / "memory-pane.png", full_page=True)
        assert page.locator("main script, main img, main [onerror]").count() == 0
        assert page.evaluate("window.pwned") is None

        page.fill("#memory-query", "exchange rates for currency")
        page.click("#memory-search")
        expect(page.locator("#memory-count")).to_contain_text("nearest")
        expect(items.first).to_have_attribute("data-key", "a:t2:1")

        page.select_option("#memory-scope", "alice")
        page.fill("#memory-query", "")
        page.click("#memory-search")
        expect(items).to_have_count(1)
        expect(items.first).to_contain_text("Alice's private task")

        page.select_option("#memory-scope", "default")
        expect(items).to_have_count(3)
        page.once("dialog", lambda dialog: dialog.accept())
        page.locator("details[data-kind='episodes'][data-key='a:t2:1'] > summary").click()
        page.locator("details[data-kind='episodes'][data-key='a:t2:1']").get_by_role(
            "button", name="Forget"
        ).click()
        expect(items).to_have_count(1)
        expect(items.first).to_have_attribute("data-key", "a:t1:1")


def test_a_run_page_shows_the_runs_facts(
    client: TestClient, memory_runs: RunManager, tmp_path: Path
) -> None:
    import json

    scenario = {
        "goal": "Total the ledger",
        "planner": [
            {
                "rationale": "one task",
                "tasks": [{"id": "t1", "title": "Total it", "tool_bundles": ["memory"]}],
            }
        ],
        "actors": {
            "t1": [
                {"tool": "remember", "args": {"key": "q3_total", "value": f"48213 {HOSTILE}"}},
                {"tool": "submit_result", "args": {"status": "completed", "summary": "done"}},
            ]
        },
        "reporter": [{"text": "48213"}],
        "verifier": [{"passed": True, "reasoning": "fine"}],
    }
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(scenario))
    started = client.post(
        "/api/runs",
        json={"goal": scenario["goal"], "model": f"scripted:{path}", "thread_id": "facts"},
    )
    assert started.status_code == 202
    memory_runs.wait("facts", timeout=60)
    run = client.get("/api/threads/facts").json()
    assert run["status"] == "succeeded" and run["facts"] == {"q3_total": f"48213 {HOSTILE}"}


@pytest.mark.postgres
def test_dashboard_over_postgres_queues_distributed_resumes(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over Postgres checkpoints the dashboard knows where distributed runs live
    (the runs table beside them) and which queue their resumes go to."""
    from aimegraph.dashboard import server

    served: list[dict[str, Any]] = []
    monkeypatch.setattr(server, "serve", lambda saver, **kwargs: served.append(kwargs))
    assert main(["--checkpoints", postgres_url, "dashboard", "--broker", "redis://10.0.0.9:6379/2",
                 "--queue", "team"]) == 0  # fmt: skip
    assert served[0]["distributed"] == DistributedQueue(
        postgres_url, "redis://10.0.0.9:6379/2", "team"
    )


def test_queued_distributed_runs_are_listed_with_their_queue_state(
    client: TestClient, memory_runs: RunManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ``aimegraph threads``: a run the queue holds shows its queue state, one
    with no checkpoint yet gets a row of its own."""
    from aimegraph.checkpoints import ThreadSummary
    from aimegraph.dashboard import runs as runs_module

    done = client.post("/api/demo", json={"approve_plan": True}).json()["thread_id"]
    memory_runs.wait(done, timeout=60)
    memory_runs.distributed = DistributedQueue("postgresql://db/x", "redis://broker/0")
    waiting = ThreadSummary("waiting", "Queued goal", "queued", "2999-01-01T00:00:00+00:00", False)
    taken = ThreadSummary(done, "", "running", "2000-01-01T00:00:00+00:00", False)
    monkeypatch.setattr(runs_module, "active_runs", lambda url: [waiting, taken])

    rows = client.get("/api/threads").json()["threads"]
    assert [(r["thread_id"], r["status"]) for r in rows] == [
        ("waiting", "queued"),
        (done, "running"),
    ]
    assert rows[0]["goal"] == "Queued goal" and rows[1]["goal"]  # the checkpointed goal stays
    queued_only = client.get("/api/threads", params={"status": "queued"}).json()["threads"]
    assert [r["thread_id"] for r in queued_only] == ["waiting"]
