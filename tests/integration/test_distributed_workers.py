"""Distributed runs survive their workers: killed, stopped, cancelled, or racing.

Three ``aimegraph worker`` processes serve 30 runs of a latency model; one worker
is killed with SIGKILL in the middle of a run. Every run must still succeed, its
thread's checkpoints must be in Postgres, and no completed tool call may run
twice (each call appends one line to a side-effect log). SIGTERM drains a worker,
whose run carries on elsewhere; a cancel stops a queued or a running run; one
worker at a time runs a thread, and a repeated delivery does nothing; a run that
cannot start ends failed with its reason.

The harness is in ``distributed_env.py``, the fixtures in ``conftest.py``.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from tests.integration.distributed_env import (
    SIDE_EFFECTS_ENV,
    SUPPORT,
    TASKS,
    Cluster,
    _settings,
    _side_effects,
    build_latency_graph,
)

from aimegraph import AimeConfig
from aimegraph.checkpoints import RunSettings, open_checkpointer, run_config
from aimegraph.checkpoints.delta import checkpoint_values, finished_tasks
from aimegraph.distributed import records
from aimegraph.distributed.runner import ThreadBusyError, execute_run
from aimegraph.distributed.submit import wait_for_run
from aimegraph.steering import run_graph

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

THREAD_LOCK_SQL = "SELECT pg_advisory_lock(hashtextextended('aimegraph-thread:' || %s, 0))"
RUNS = 30


def test_thirty_runs_survive_a_killed_worker(cluster: Cluster) -> None:
    threads = [cluster.submit() for _ in range(RUNS)]
    code, listed = cluster.cli("threads")
    assert code == 0
    assert {t["thread_id"]: t["status"] for t in listed if t["thread_id"] in threads} == {
        t: "queued" for t in threads
    }
    assert cluster.cli("show", threads[0])[1]["status"] == "queued"

    for name in ("w1", "w2", "w3"):
        cluster.start_worker(name)
    victim, thread_id, done = _wait_for_a_run_midway(cluster)
    cluster.workers[victim].send_signal(signal.SIGKILL)
    cluster.workers[victim].wait()
    # Killed between tasks, as meant: no tool call was in flight (a call cut off
    # mid-way has no recorded result, so it runs again: that is not what is tested).
    assert set(_side_effects(cluster)[thread_id]) == done
    with open_checkpointer(cluster.checkpoints) as saver:
        frozen = build_latency_graph(_settings(cluster, thread_id), saver).get_state(
            run_config(thread_id)
        )
    assert frozen.next, "the killed worker's run had not finished"

    ended = {t: wait_for_run(t, checkpoints=cluster.checkpoints, timeout=150) for t in threads}

    assert {t: r.outcome for t, r in ended.items()} == {t: "succeeded" for t in threads}
    redelivered = ended[thread_id]
    assert redelivered.deliveries >= 2
    assert redelivered.worker is not None and not redelivered.worker.startswith(victim)
    effects = _side_effects(cluster)
    for t in threads:  # each completed tool call exactly once, the killed run's included
        assert effects[t] == Counter({key: 1 for key in TASKS}), t
    with open_checkpointer(cluster.checkpoints) as saver:
        for t in threads:
            state = build_latency_graph(_settings(cluster, t), saver).get_state(run_config(t))
            assert state.values["status"] == "succeeded"
            assert all(task.status == "completed" for task in state.values["tasks"].values())
    code, listed = cluster.cli("threads")
    statuses = {t["thread_id"]: t["status"] for t in listed}
    assert all(statuses[t] == "succeeded" for t in threads)


def test_sigterm_drains_a_worker_and_its_run_carries_on_elsewhere(own_cluster: Cluster) -> None:
    """SIGTERM to a worker mid-run: the call in flight finishes, the run stops at
    the next step, it is queued again, the worker exits; another worker finishes
    it, every tool call done once."""
    cluster = own_cluster
    cluster.start_worker("d1", graph="build_held_graph")
    thread_id = cluster.submit()
    _wait_for_file(cluster.hold / f"started-{thread_id}-t2")
    worker = cluster.workers["d1"]
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0  # the bound: the calls in flight, then out
    with records.connect(cluster.checkpoints) as conn:
        record = records.get(conn, thread_id)
    assert record is not None and record.state == "queued" and record.deliveries == 1
    assert _side_effects(cluster)[thread_id] == Counter({"t1": 1, "t2": 1})  # t2 finished

    cluster.start_worker("d2", graph="build_held_graph")
    ended = wait_for_run(thread_id, checkpoints=cluster.checkpoints, timeout=90)
    assert ended.outcome == "succeeded" and ended.worker is not None
    assert ended.worker.startswith("d2")
    assert _side_effects(cluster)[thread_id] == Counter({key: 1 for key in TASKS})


def test_cancel_a_queued_and_a_running_distributed_run(own_cluster: Cluster) -> None:
    cluster = own_cluster
    queued = cluster.submit()  # no worker yet: it waits in the broker
    code, out = cluster.cli("cancel", queued, "--broker", cluster.broker)
    assert (code, out) == (0, {"thread_id": queued, "status": "cancelled"})

    cluster.start_worker("c1", graph="build_held_graph")
    running = cluster.submit()
    _wait_for_file(cluster.hold / f"started-{running}-t2")
    code, out = cluster.cli("cancel", running, "--broker", cluster.broker)
    assert (code, out) == (0, {"thread_id": running, "status": "requested"})
    code, shown = cluster.cli("wait", running, "--timeout", "60")
    assert code == 8 and shown["status"] == "cancelled"  # stopped at the next step
    assert _side_effects(cluster)[running] == Counter({"t1": 1, "t2": 1})  # t3 never started
    assert shown["usage"]["llm_calls"] > 0  # its usage kept

    # The revoked run's delivery was dropped by the worker: it never ran.
    ended = wait_for_run(queued, checkpoints=cluster.checkpoints, timeout=5)
    assert ended.outcome == "cancelled" and queued not in _side_effects(cluster)
    assert cluster.cli("resume", running, "--broker", cluster.broker)[0] == 6
    assert cluster.cli("cancel", running, "--broker", cluster.broker)[0] == 6


def test_one_worker_at_a_time_and_repeated_deliveries_do_nothing(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process: a delivery of a thread another worker holds is refused (Celery
    retries it later); once free it runs; a repeated delivery of the ended run
    neither runs anything again nor counts as a delivery."""
    monkeypatch.setenv(SIDE_EFFECTS_ENV, str(cluster.side_effects))
    thread_id = f"{cluster.queue}-{uuid.uuid4().hex[:8]}"
    settings = RunSettings(
        model="scripted:demo",
        config=AimeConfig(workspace=cluster.tmp / "workspace"),
        tools=(f"{SUPPORT}:record_side_effect",),
    )
    with records.connect(cluster.checkpoints) as conn:
        records.insert_queued(conn, thread_id, "Do the three work items.", settings)

        def deliver() -> records.RunRecord | None:
            return execute_run(cluster.checkpoints, thread_id, "w9", build_latency_graph)

        with records.connect(cluster.checkpoints) as other_worker:  # the thread's lease
            other_worker.execute(THREAD_LOCK_SQL, (thread_id,))
            with pytest.raises(ThreadBusyError):
                deliver()
            assert records.get(conn, thread_id).state == "queued"
        first = deliver()
        again = deliver()
    assert first is not None and (first.outcome, first.deliveries) == ("succeeded", 1)
    assert again is not None and (again.outcome, again.deliveries) == ("succeeded", 1)
    assert _side_effects(cluster)[thread_id] == Counter({key: 1 for key in TASKS})


def test_a_run_that_cannot_start_ends_failed_with_the_reason(cluster: Cluster) -> None:
    thread_id = f"{cluster.queue}-{uuid.uuid4().hex[:8]}"
    settings = RunSettings(model="openai:", config=AimeConfig(workspace=cluster.tmp / "ws"))
    with records.connect(cluster.checkpoints) as conn:
        records.insert_queued(conn, thread_id, "anything", settings)
    with pytest.raises(ValueError, match="empty model name"):
        execute_run(cluster.checkpoints, thread_id, "w9", run_graph)
    record = wait_for_run(thread_id, checkpoints=cluster.checkpoints, timeout=5)
    assert record.outcome == "failed"
    assert record.reason is not None and "empty model name" in record.reason
    code, shown = cluster.cli("wait", thread_id)  # no checkpoint: the record tells
    assert code == 1 and shown["status"] == "failed" and shown["reason"] == record.reason


# --- helpers ---


def _wait_for_a_run_midway(cluster: Cluster) -> tuple[str, str, set[str]]:
    """(worker, thread, completed tasks) of a run caught between tasks: some but not
    all of its tasks are completed in its newest checkpoint, and its side effects are
    exactly those tasks' (the next task's tool call, a model call away, has not run)."""
    deadline = time.monotonic() + 90
    with (
        records.connect(cluster.checkpoints) as conn,
        open_checkpointer(cluster.checkpoints) as saver,
    ):
        while time.monotonic() < deadline:
            for thread_id, worker in conn.execute(
                "SELECT thread_id, worker FROM aimegraph_runs "
                "WHERE state = 'running' AND thread_id LIKE %s",
                (f"{cluster.queue}-%",),
            ).fetchall():
                stored = saver.get_tuple(run_config(thread_id))
                # tasks is a DeltaChannel: rebuilt from the saved writes, not read raw;
                # the tasks an eager executor step finished so far are its pending writes.
                tasks = checkpoint_values(saver, stored).get("tasks", {}) if stored else {}
                tasks = {**tasks, **finished_tasks(stored)}
                done = {tid for tid, task in tasks.items() if task.status == "completed"}
                if 1 <= len(done) < len(TASKS) and set(_side_effects(cluster)[thread_id]) == done:
                    return worker.split("@")[0], thread_id, done
            time.sleep(0.02)
    raise AssertionError("no run was seen half-way within 90 s")


def _wait_for_file(path: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)
