"""What a worker tells its operators: its /metrics and its alerts.

A worker with ``--metrics-port`` serves the queue depth, the runs in flight and the
runs' usage while it runs them; one with ``--alerts`` posts its alerts to a webhook
and records them in the runs' database, where the dashboard lists them.

The harness is in ``distributed_env.py``, the fixtures in ``conftest.py``.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
import yaml
from tests.integration.distributed_env import TASKS, Cluster
from tests.webhook_receiver import Receiver

from aimegraph.checkpoints import RunSettings, open_checkpointer, run_config
from aimegraph.distributed import records
from aimegraph.distributed.submit import wait_for_run
from aimegraph.steering import run_graph

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_a_worker_serves_metrics_during_and_after_its_runs(own_cluster: Cluster) -> None:
    import httpx

    cluster = own_cluster
    threads = [cluster.submit() for _ in range(3)]  # queued before any worker is up
    port = _free_port()
    cluster.start_worker("metrics1", extra=("--metrics-port", str(port)))
    url = f"http://127.0.0.1:{port}/metrics"
    seen_depth, seen_in_flight = [], []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # during: one run at a time, the others queued
        try:
            during = _scrape(url)
        except httpx.TransportError:  # not listening yet
            assert cluster.workers["metrics1"].poll() is None, "the worker exited"
            time.sleep(0.1)
            continue
        seen_depth.append(during.get(("aimegraph_queue_depth", (("queue", cluster.queue),))))
        seen_in_flight.append(during.get(("aimegraph_runs_in_flight", ())))
        if during.get(("aimegraph_runs_total", (("status", "succeeded"),)), 0) == 3:
            break
        time.sleep(0.1)
    after = _scrape(url)
    assert after[("aimegraph_runs_total", (("status", "succeeded"),))] == 3
    assert 1 in seen_in_flight and max(d or 0 for d in seen_depth) >= 1
    assert after[("aimegraph_queue_depth", (("queue", cluster.queue),))] == 0

    # The counters add up to the runs' own usage, by role.
    with open_checkpointer(cluster.checkpoints) as saver:
        graph = run_graph(records_settings(cluster, threads[0]), saver)
        usages = [graph.get_state(run_config(t)).values["usage"] for t in threads]
    roles = {role for usage in usages for role in usage.by_role}
    for role in roles:
        spent = sum(u.by_role[role].input_tokens for u in usages if role in u.by_role)
        assert after[("aimegraph_tokens_total", (("kind", "input"), ("role", role)))] == spent
    calls = sum(
        v for (name, _), v in after.items() if name == "aimegraph_model_call_duration_seconds_count"
    )
    assert calls == sum(u.llm_calls for u in usages)
    tools = after[
        (
            "aimegraph_tool_call_duration_seconds_count",
            (("outcome", "ok"), ("tool", "record_side_effect")),
        )
    ]
    assert tools == 3 * len(TASKS)


def test_a_workers_alerts_reach_the_webhook_and_the_dashboard(
    own_cluster: Cluster, webhook: Receiver
) -> None:
    """A worker with ``--alerts``: a run it paused waits too long (its human_wait rule,
    over the runs it paused), then its calculator fails too often. Each alert is posted
    to the webhook and recorded in the runs' database, where the dashboard lists it
    with its own; once the worker stops checking, its firing alert is stale."""
    pytest.importorskip("starlette", reason="the [dashboard] extra is not installed")
    from starlette.testclient import TestClient

    from aimegraph.dashboard import create_app
    from aimegraph.dashboard.runs import DistributedQueue, RunManager

    cluster = own_cluster
    rules = cluster.tmp / "alerts.yaml"
    rules.write_text(
        yaml.safe_dump(
            {
                "webhook": {"url": webhook.url},
                "interval_s": 0.2,
                "rules": [
                    {"name": "tools-failing", "kind": "tool_failure_rate", "limit": 0.5,
                     "min_calls": 3},
                    {"name": "human-waiting", "kind": "human_wait", "limit": 1},
                    {"name": "failing-runs", "kind": "failed_runs", "limit": 1},  # quiet
                ],
            }
        )
    )  # fmt: skip
    name = f"alerts-{cluster.queue}"  # the alerts table is shared: ours are this worker's
    cluster.start_worker(name, graph="build_failing_tool_graph", extra=("--alerts", str(rules)))

    def posted() -> list[tuple[str, str, str]]:
        return [(b["rule"], b["subject"], b["state"]) for b in webhook.bodies]

    def until(condition: Any, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert cluster.workers[name].poll() is None, "the worker exited"
            assert time.monotonic() < deadline, posted()
            time.sleep(0.1)

    thread_id = cluster.submit(approve_plan=True)
    paused = wait_for_run(thread_id, checkpoints=cluster.checkpoints, timeout=60)
    assert paused.state == "paused" and paused.worker is not None
    worker = paused.worker  # the node name the worker's alerts carry
    try:
        until(lambda: ("human-waiting", "", "firing") in posted())
        code, _ = cluster.cli(
            "resume", thread_id, "--approve", "--broker", cluster.broker, "--queue", cluster.queue
        )
        assert code == 0
        ended = wait_for_run(thread_id, checkpoints=cluster.checkpoints, timeout=60)
        assert ended.outcome == "succeeded"
        until(lambda: len(posted()) == 3)
        assert sorted(posted()) == [
            ("human-waiting", "", "firing"),
            ("human-waiting", "", "resolved"),
            ("tools-failing", "calculator", "firing"),
        ]
        assert {b["origin"] for b in webhook.bodies} == {worker}

        with open_checkpointer(cluster.checkpoints) as saver:
            queue = DistributedQueue(cluster.checkpoints, cluster.broker, cluster.queue)
            runs = RunManager(saver, distributed=queue)
            client = TestClient(create_app(saver, runs=runs), base_url="http://127.0.0.1")

            def listed(path: str = "/api/alerts") -> list[tuple[str, str, str]]:
                alerts = client.get(path).json()["alerts"]
                return [
                    (a["rule"], a["subject"], a["state"]) for a in alerts if a["origin"] == worker
                ]

            assert listed() == [
                ("tools-failing", "calculator", "firing"),
                ("human-waiting", "", "resolved"),
            ]
            assert listed("/api/threads")[0] == ("tools-failing", "calculator", "firing")
            # The worker stops, and with it its checks: its firing alert goes stale.
            cluster.workers[name].send_signal(signal.SIGTERM)
            assert cluster.workers[name].wait(timeout=30) == 0
            with records.connect(cluster.checkpoints) as conn:
                conn.execute(
                    "UPDATE aimegraph_alerts SET checked_at = now() - interval '1 hour' "
                    "WHERE origin = %s",
                    (worker,),
                )
            time.sleep(1.1)  # the dashboard rereads the table at most once a second
            assert listed()[0] == ("tools-failing", "calculator", "stale")
    finally:
        with records.connect(cluster.checkpoints) as conn:
            conn.execute("DELETE FROM aimegraph_alerts WHERE origin = %s", (worker,))


# --- helpers ---


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(url, timeout=5).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def records_settings(cluster: Cluster, thread_id: str) -> RunSettings:
    with records.connect(cluster.checkpoints) as conn:
        record = records.get(conn, thread_id)
    assert record is not None
    return record.settings
