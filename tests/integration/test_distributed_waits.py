"""Distributed runs that wait for a human: the pause frees the worker.

A run that pauses for plan approval ends its Celery task; the workers take other
runs meanwhile, and ``aimegraph resume`` (or the dashboard's approval) queues the
rest for them. Unanswered waits (an escalation, plan and tool approval, ask_human)
take their defaults on the worker when a delivery at the deadline resumes them.

The harness is in ``distributed_env.py``, the fixtures in ``conftest.py``.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from tests.human_scenarios import ESCALATE, UNATTENDED
from tests.integration.distributed_env import TASKS, Cluster, _side_effects
from tests.webhook_receiver import Receiver

from aimegraph.checkpoints import open_checkpointer
from aimegraph.distributed.records import RunRecord
from aimegraph.distributed.submit import wait_for_run

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_a_pause_frees_the_worker_and_resume_queues_the_rest(cluster: Cluster) -> None:
    if not any(p.poll() is None for p in cluster.workers.values()):
        cluster.start_worker("w4")
    paused = cluster.submit(approve_plan=True)
    assert wait_for_run(paused, checkpoints=cluster.checkpoints, timeout=60).state == "paused"
    # The pause ended the Celery task: the workers take other runs meanwhile.
    other = cluster.submit()
    assert wait_for_run(other, checkpoints=cluster.checkpoints, timeout=60).outcome == "succeeded"
    assert cluster.cli("show", paused)[1]["status"] == "paused"

    code, queued = cluster.cli(
        "resume", paused, "--approve", "--broker", cluster.broker, "--queue", cluster.queue
    )
    assert (code, queued) == (0, {"thread_id": paused, "status": "queued"})
    code, shown = cluster.cli("wait", paused, "--timeout", "60")
    assert code == 0 and shown["status"] == "succeeded"
    assert _side_effects(cluster)[paused] == Counter({key: 1 for key in TASKS})
    # A finished run has nothing left to resume.
    code, _ = cluster.cli("resume", paused, "--broker", cluster.broker, "--queue", cluster.queue)
    assert code == 6


def test_the_dashboard_queues_a_distributed_resume_for_the_workers(cluster: Cluster) -> None:
    """Approving a distributed run's plan on the dashboard queues it (as ``aimegraph
    resume`` does): a worker runs the rest, the dashboard's process runs nothing."""
    pytest.importorskip("starlette", reason="the [dashboard] extra is not installed")
    from starlette.testclient import TestClient

    from aimegraph.dashboard import create_app
    from aimegraph.dashboard.runs import DistributedQueue, RunManager

    if not any(p.poll() is None for p in cluster.workers.values()):
        cluster.start_worker("w5")
    paused = cluster.submit(approve_plan=True)
    assert wait_for_run(paused, checkpoints=cluster.checkpoints, timeout=60).state == "paused"
    queue = DistributedQueue(cluster.checkpoints, cluster.broker, cluster.queue)
    with open_checkpointer(cluster.checkpoints) as saver:
        runs = RunManager(saver, distributed=queue)
        client = TestClient(create_app(saver, runs=runs), base_url="http://127.0.0.1")
        (waiting,) = client.get(f"/api/threads/{paused}").json()["interrupts"]
        assert waiting["kind"] == "approve_plan"

        response = client.post(f"/api/threads/{paused}/resume", json={"action": "approve"})

        assert response.status_code == 202
        assert response.json() == {"thread_id": paused, "queued": True}
        assert not runs.active()
        ended = wait_for_run(paused, checkpoints=cluster.checkpoints, timeout=60)
        assert ended.outcome == "succeeded" and ended.worker is not None
        assert client.get(f"/api/threads/{paused}").json()["status"] == "succeeded"
        finished = client.post(f"/api/threads/{paused}/resume", json={"action": "approve"})
        assert finished.status_code == 404  # nothing left to resume
    assert _side_effects(cluster)[paused] == Counter({key: 1 for key in TASKS})


def test_an_unanswered_escalation_takes_its_default_on_the_worker(own_cluster: Cluster) -> None:
    """Nobody answers an escalation with a timeout: the pause frees the worker, and a
    delivery at the deadline resumes it with the default (give up)."""
    cluster = own_cluster
    cluster.start_worker("e1", graph="build_escalating_graph")
    log = cluster.tmp / "e1.log"
    _wait_for_text(log, "e1@")  # Celery's own log reaches the worker's stderr
    _wait_for_text(log, " ready.")
    thread_id = cluster.submit(**ESCALATE, escalation_timeout_s=3)
    paused = wait_for_run(thread_id, checkpoints=cluster.checkpoints, timeout=60)
    assert paused.state == "paused"
    record = _finished(cluster, thread_id, within_s=60)
    assert record.outcome == "budget_exhausted"
    _, shown = cluster.cli("show", thread_id)
    assert shown["status"] == "budget_exhausted" and "no answer within 3 s" in shown["reason"]
    _wait_for_text(log, f"thread {thread_id}: budget_exhausted")


def test_each_kind_of_wait_takes_its_default_on_the_worker(
    own_cluster: Cluster, webhook: Receiver
) -> None:
    """Plan approval, tool approval and ask_human with timeouts: each pause frees the
    worker, is posted to the webhook, and a delivery at its deadline takes the default."""
    cluster = own_cluster
    cluster.start_worker("h1", graph="build_waiting_graph")
    log = cluster.tmp / "h1.log"
    _wait_for_text(log, " ready.")
    timeouts = {"approval_timeout_s": 1, "ask_human_timeout_s": 1}
    thread_id = cluster.submit(**UNATTENDED | timeouts, notify_webhook=webhook.url)
    record = _finished(cluster, thread_id, within_s=90)
    assert record.outcome == "succeeded"
    _, shown = cluster.cli("show", thread_id)
    assert shown["tasks"]["t1"]["result"]["summary"] == "North"
    assert webhook.kinds() == ["approve_plan", "approve_tool", "ask_human"]
    assert all(body["thread_id"] == thread_id for body in webhook.bodies)


# --- helpers ---


def _wait_for_text(path: Path, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and text in path.read_text(errors="replace")):
        assert time.monotonic() < deadline, f"{text!r} not in {path} after {timeout} s"
        time.sleep(0.1)


def _finished(cluster: Cluster, thread_id: str, *, within_s: float) -> RunRecord:
    """The run's record once it has finished (pausing on the way), within ``within_s``."""
    deadline = time.monotonic() + within_s
    while (record := wait_for_run(thread_id, checkpoints=cluster.checkpoints)).state != "finished":
        assert time.monotonic() < deadline, f"still {record.state} after {within_s} s"
        time.sleep(0.2)
    return record
