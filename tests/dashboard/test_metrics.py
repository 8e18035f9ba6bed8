"""The dashboard's ``/metrics`` scraped while a run waits for a human and after it
ends: the counters move by exactly the run's own usage (its tokens and its cost);
and its alerts, fired to a real webhook receiver on loopback, listed at
``/api/alerts`` and on the threads page: a run waiting too long, a tool failing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient
from tests.dashboard.conftest import LOCAL
from tests.human_scenarios import FAILING_TOOL, scenario_spec
from tests.local_http import LocalSite, serve
from tests.webhook_receiver import Receiver

from aimegraph.alerts import AlertRule, AlertSettings, Webhook
from aimegraph.dashboard import create_app
from aimegraph.dashboard.runs import RunManager
from aimegraph.state import Usage
from aimegraph.steering import prepare_demo

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client: TestClient) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def added(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def start_demo(client: TestClient, runs: RunManager, **body: Any) -> str:
    response = client.post("/api/demo", json=body)
    assert response.status_code == 202, response.text
    thread_id: str = response.json()["thread_id"]
    runs.wait(thread_id, timeout=60)
    return thread_id


def usage_of(client: TestClient, thread_id: str) -> Usage:
    return Usage.model_validate(client.get(f"/api/threads/{thread_id}").json()["usage"])


def start_run(client: TestClient, runs: RunManager, **body: Any) -> str:
    response = client.post("/api/runs", json=body)
    assert response.status_code == 202, response.text
    thread_id: str = response.json()["thread_id"]
    runs.wait(thread_id, timeout=60)
    return thread_id


PRICES = {"scripted:demo": [1000.0, 2000.0]}  # USD per million input, output tokens


def test_metrics_during_and_after_a_run_match_its_usage(
    client: TestClient, runs: RunManager
) -> None:
    before = scrape(client)
    # The demo, with prices: its cost counts, by role and by model.
    settings, goal = prepare_demo("priced")
    thread_id = start_run(
        client,
        runs,
        goal=goal,
        model="scripted:demo",
        config={
            "workspace": str(settings.config.workspace),
            "approve_plan": True,
            "prices": PRICES,
        },
    )

    waiting = scrape(client)  # during: the run waits for its plan's approval
    assert added(before, waiting, "aimegraph_runs_total", status="paused") == 1
    assert value(waiting, "aimegraph_runs_waiting_for_human") == 1
    assert value(waiting, "aimegraph_human_wait_longest_seconds") >= 0
    planned = usage_of(client, thread_id)
    assert planned.llm_calls == 1  # the planner, so far
    assert added(before, waiting, "aimegraph_tokens_total", role="planner", kind="input") == (
        planned.input_tokens
    )

    response = client.post(f"/api/threads/{thread_id}/resume", json={"action": "approve"})
    assert response.status_code == 202, response.text
    runs.wait(thread_id, timeout=60)
    after = scrape(client)
    usage = usage_of(client, thread_id)
    assert client.get(f"/api/threads/{thread_id}").json()["status"] == "succeeded"

    assert added(before, after, "aimegraph_runs_total", status="succeeded") == 1
    assert added(before, after, "aimegraph_human_wait_seconds_count") == 1
    assert value(after, "aimegraph_runs_waiting_for_human") == 0
    assert usage.cost_usd > 0
    for role, counts in usage.by_role.items():
        for kind in ("input", "output"):
            assert added(before, after, "aimegraph_tokens_total", role=role, kind=kind) == (
                getattr(counts, f"{kind}_tokens")
            ), (role, kind)
        assert counts.cost_usd > 0, role
        assert added(before, after, "aimegraph_cost_usd_total", role=role) == pytest.approx(
            counts.cost_usd
        )
    assert set(usage.by_model) == set(PRICES)
    for model, counts in usage.by_model.items():
        assert added(before, after, "aimegraph_model_tokens_total", model=model, kind="output") == (
            counts.output_tokens
        )
        assert added(before, after, "aimegraph_model_cost_usd_total", model=model) == (
            pytest.approx(counts.cost_usd)
        )
    assert sum(
        added(before, after, "aimegraph_cost_usd_total", role=role) for role in usage.by_role
    ) == pytest.approx(usage.cost_usd)
    # The model calls the callbacks timed are the calls the run counted.
    calls = sum(
        added(before, after, name, **dict(labels))
        for (name, labels) in after
        if name == "aimegraph_model_call_duration_seconds_count"
    )
    assert calls == usage.llm_calls
    tools = sum(
        added(before, after, name, **dict(labels))
        for (name, labels) in after
        if name == "aimegraph_tool_call_duration_seconds_count"
    )
    assert tools >= 4  # each of the demo's four tasks submits its result at least
    assert added(before, after, "aimegraph_task_duration_seconds_count", outcome="completed") == 4
    assert value(after, "aimegraph_tasks_in_flight") == 0
    # Bounded labels: no thread id anywhere.
    assert thread_id not in client.get("/metrics").text


@pytest.fixture
def site() -> Iterator[LocalSite]:
    yield from serve()


def test_a_run_waiting_too_long_fires_an_alert_on_the_dashboard_and_the_webhook(
    saver: BaseCheckpointSaver[Any], runs: RunManager, site: LocalSite
) -> None:
    rules = AlertSettings(
        rules=[
            AlertRule(name="waiting", kind="human_wait", limit=0.2),
            AlertRule(name="failing", kind="failed_runs", limit=1000),  # stays quiet
        ],
        webhook=Webhook(url=site.route("/hook", status=200)),
        interval_s=0.05,
    )
    app = create_app(saver, runs=runs, alerts=rules)
    client = TestClient(app, base_url=LOCAL)
    try:
        thread_id = start_demo(client, runs, approve_plan=True)
        deadline = time.monotonic() + 10
        while not site.posted and time.monotonic() < deadline:
            time.sleep(0.05)
        sent = [json.loads(body) for body in site.posted]
        assert [(p["rule"], p["state"]) for p in sent] == [("waiting", "firing")]
        listed = client.get("/api/alerts").json()["alerts"]
        assert [(a["rule"], a["state"]) for a in listed] == [("waiting", "firing")]
        assert client.get("/api/threads").json()["alerts"][0]["rule"] == "waiting"
        assert "waiting" in client.get("/").text  # in the threads page's data

        client.post(f"/api/threads/{thread_id}/resume", json={"action": "approve"})
        runs.wait(thread_id, timeout=60)
        while len(site.posted) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [json.loads(body)["state"] for body in site.posted] == ["firing", "resolved"]
    finally:
        app.state.alerts.stop()


def test_a_failing_tool_is_counted_and_fires_its_alert_on_the_dashboard(
    saver: BaseCheckpointSaver[Any], runs: RunManager, tmp_path: Path
) -> None:
    receiver = Receiver()
    rules = AlertSettings(
        rules=[
            AlertRule(name="tools-failing", kind="tool_failure_rate", limit=0.5, min_calls=3),
            # The same calls under a higher limit: quiet.
            AlertRule(name="tools-broken", kind="tool_failure_rate", limit=0.7, min_calls=3),
        ],
        webhook=Webhook(url=receiver.url),
        interval_s=0.05,
    )
    app = create_app(saver, runs=runs, alerts=rules)
    client = TestClient(app, base_url=LOCAL)
    try:
        before = scrape(client)
        thread_id = start_run(
            client, runs, goal="Compute it.", model=scenario_spec(tmp_path, FAILING_TOOL)
        )
        after = scrape(client)
        assert client.get(f"/api/threads/{thread_id}").json()["status"] == "succeeded"
        calls = "aimegraph_tool_call_duration_seconds_count"
        assert added(before, after, calls, tool="calculator", outcome="error") == 2
        assert added(before, after, calls, tool="calculator", outcome="ok") == 1

        deadline = time.monotonic() + 10
        while not receiver.bodies and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # a few more checks: nothing else fires
        assert [(b["rule"], b["subject"], b["state"]) for b in receiver.bodies] == [
            ("tools-failing", "calculator", "firing")
        ]
        assert receiver.bodies[0]["value"] == pytest.approx(2 / 3)
        listed = client.get("/api/alerts").json()["alerts"]
        assert [(a["rule"], a["subject"], a["origin"]) for a in listed] == [
            ("tools-failing", "calculator", "dashboard")
        ]
        assert client.get("/api/threads").json()["alerts"][0]["rule"] == "tools-failing"
    finally:
        app.state.alerts.stop()
        receiver.close()
