"""The dashboard's ``/metrics`` and alerts count the runs other processes ran on its
checkpoint store: an ``aimegraph run`` process of its own (no metrics of its own) that
fails moves the run counters and fires the failed-runs alert; a pause and its resume
from the CLI count as the dashboard's own do; a run that ended before the dashboard
started does not count, and the dashboard's own runs count once."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.memory import InMemoryStore
from starlette.testclient import TestClient
from tests.conftest import TWO_TASKS, cli_process
from tests.dashboard.conftest import LOCAL
from tests.dashboard.test_metrics import Samples, added, scrape, start_demo, value
from tests.human_scenarios import FAILING, scenario_spec
from tests.webhook_receiver import Receiver

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.alerts import AlertRule, AlertSettings, Webhook
from aimegraph.checkpoints import open_checkpointer, thread_config
from aimegraph.dashboard import create_app
from aimegraph.dashboard.runs import RunManager
from aimegraph.metrics import enable_metrics
from aimegraph.models import ScriptedChatModel

RUNS = "aimegraph_runs_total"
DURATIONS = "aimegraph_run_duration_seconds_count"
STREAK = "aimegraph_failed_runs_in_a_row"
NO_REPLANS = '{"max_replans": 0, "task_retries": 0}'
"""Under which FAILING ends ``budget_exhausted``: a failed run."""


def aimegraph(store_url: str, tmp_path: Path, *args: str) -> int:
    """``aimegraph --checkpoints STORE ARGS`` in a process of its own; its exit code."""
    _, env = cli_process(tmp_path)
    command = [sys.executable, "-m", "aimegraph.cli", "--checkpoints", store_url, *args]
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, timeout=300)
    return done.returncode


def fail_in_the_cli(store_url: str, tmp_path: Path, thread: str) -> None:
    model = scenario_spec(tmp_path, FAILING, "failing")
    code = aimegraph(
        store_url, tmp_path, "run", "Fetch the figure", "--model", model,
        "--config", NO_REPLANS, "--thread", thread,
    )  # fmt: skip
    assert code == 4  # budget_exhausted


def status_of(client: TestClient, thread_id: str) -> str:
    status: str = client.get(f"/api/threads/{thread_id}").json()["status"]
    return status


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    hook = Receiver()
    yield hook
    hook.close()


def test_a_failed_cli_run_moves_the_counters_and_fires_the_alert_and_own_runs_count_once(
    saver: BaseCheckpointSaver[Any],
    runs: RunManager,
    store_url: str,
    tmp_path: Path,
    receiver: Receiver,
) -> None:
    fail_in_the_cli(store_url, tmp_path, "ended-before")  # before the dashboard: not counted
    # One more failed run than the streak so far fires it; checked only when the test
    # says (check()), never in the background.
    limit = enable_metrics().failed_runs_in_a_row() + 1
    rules = AlertSettings(
        rules=[AlertRule(name="failing-runs", kind="failed_runs", limit=limit)],
        webhook=Webhook(url=receiver.url),
        interval_s=3600,
    )
    app = create_app(saver, runs=runs, alerts=rules)
    client = TestClient(app, base_url=LOCAL)
    engine = app.state.alerts
    try:
        start = scrape(client)
        assert engine.check() == [] and receiver.bodies == []

        fail_in_the_cli(store_url, tmp_path, "failed-in-the-cli")
        assert status_of(client, "failed-in-the-cli") == "budget_exhausted"
        failed = scrape(client)
        assert added(start, failed, RUNS, status="budget_exhausted") == 1
        assert added(start, failed, DURATIONS, status="budget_exhausted") == 1
        took = "aimegraph_run_duration_seconds_sum"
        assert 0 < added(start, failed, took, status="budget_exhausted") < 60
        assert added(start, failed, STREAK) == 1
        assert [(a.rule, a.state) for a in engine.check()] == [("failing-runs", "firing")]
        assert [(b["rule"], b["state"], b["value"]) for b in receiver.bodies] == [
            ("failing-runs", "firing", limit)
        ]
        assert _moved(failed, scrape(client)) == {}  # counted once, however often looked at

        # Paused in one CLI process, approved from another: a pause and an end.
        code = aimegraph(store_url, tmp_path, "run", "Multiply six by seven", "--model",
                         TWO_TASKS, "--approve-plan", "--thread", "paused-in-the-cli")  # fmt: skip
        assert code == 5
        paused = scrape(client)
        assert added(failed, paused, RUNS, status="paused") == 1
        assert aimegraph(store_url, tmp_path, "resume", "paused-in-the-cli", "--approve") == 0
        resumed = scrape(client)
        assert _moved(paused, resumed) == {(RUNS, "succeeded"): 1, (DURATIONS, "succeeded"): 1}
        assert value(resumed, STREAK) == 0
        assert [(a.rule, a.state) for a in engine.check()] == [("failing-runs", "resolved")]

        # The dashboard's own run: counted where it runs, not again from its checkpoints.
        own = start_demo(client, runs)
        assert status_of(client, own) == "succeeded"
        engine.check()
        after = scrape(client)
        assert _moved(resumed, after) == {(RUNS, "succeeded"): 1, (DURATIONS, "succeeded"): 1}
    finally:
        engine.stop()


@pytest.mark.parametrize("memory", [False, True], ids=["no-store", "store"])
def test_a_run_of_another_graph_on_the_same_file_counts_once_when_it_ends(
    saver: BaseCheckpointSaver[Any], runs: RunManager, store_url: str, tmp_path: Path, memory: bool
) -> None:
    """A graph run with no lease (plain ``stream``, its own connection to the file),
    looked at after every step: its status says ``budget_exhausted`` steps before
    the graph ends (the reporter still writes, and with a store ``record_run``), yet
    it counts once, at its end."""
    client = TestClient(create_app(saver, runs=runs), base_url=LOCAL)
    start = scrape(client)
    looks = []
    with open_checkpointer(store_url) as other:
        graph = build_aime_graph(
            ScriptedChatModel.from_dict(FAILING),
            config=AimeConfig(workspace=tmp_path, max_replans=0, task_retries=0),
            checkpointer=other,
            store=InMemoryStore() if memory else None,
        )
        config = thread_config("another-graph")
        for _ in graph.stream({"goal": "Fetch it"}, config, durability="sync"):
            snapshot = graph.get_state(config)
            if snapshot.values.get("status") == "budget_exhausted" and snapshot.next:
                looks.append(_moved(start, scrape(client)))
        assert not graph.get_state(config).next
    assert len(looks) >= 1  # looked at while it said it had ended and had steps left
    assert looks == [{}] * len(looks), "counted before the graph ended"
    assert _moved(start, scrape(client)) == {
        (RUNS, "budget_exhausted"): 1,
        (DURATIONS, "budget_exhausted"): 1,
    }


def _moved(before: Samples, after: Samples) -> dict[tuple[str, str], float]:
    """How much each run counter moved, by status."""
    return {
        (name, dict(labels)["status"]): after[(name, labels)] - before.get((name, labels), 0.0)
        for (name, labels) in after
        if name in (RUNS, DURATIONS) and after[(name, labels)] != before.get((name, labels), 0.0)
    }
