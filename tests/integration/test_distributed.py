"""Distributed runs: Celery worker processes over Redis and Postgres.

Three ``aimegraph worker`` processes serve 30 runs of a latency model; one worker
is killed with SIGKILL in the middle of a run. Every run must still succeed, its
thread's checkpoints must be in Postgres, and no completed tool call may run
twice (each call appends one line to a side-effect log). Then a run that pauses
for plan approval frees its worker and is resumed through ``aimegraph resume``.

Redis (``AIMEGRAPH_TEST_REDIS_URL``, default ``redis://127.0.0.1:6379/0``) and
Postgres must answer; without them the tests skip, except under ``CI``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from bench.chat_models import LatencyChatModel
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_config
from langgraph.runtime import get_runtime
from langgraph.store.base import BaseStore
from tests.human_scenarios import ESCALATE, EVERY_WAIT, FAILING, FAILING_TOOL, UNATTENDED
from tests.webhook_receiver import Receiver

from aimegraph import AimeConfig, build_aime_graph, distributed
from aimegraph.checkpoints import RunSettings, open_checkpointer, run_config
from aimegraph.checkpoints.delta import checkpoint_values, finished_tasks
from aimegraph.cli import main
from aimegraph.distributed import records, runner
from aimegraph.distributed.runner import ThreadBusyError, execute_run
from aimegraph.distributed.submit import submit_run, wait_for_run
from aimegraph.graphs.aime import AimeGraph
from aimegraph.memory import open_store
from aimegraph.steering import run_graph, run_tools

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SUPPORT = "tests.integration.test_distributed"  # as the workers import this module
SIDE_EFFECTS_ENV = "AIMEGRAPH_TEST_SIDE_EFFECTS"
HOLD_ENV = "AIMEGRAPH_TEST_HOLD"
THREAD_LOCK_SQL = "SELECT pg_advisory_lock(hashtextextended('aimegraph-thread:' || %s, 0))"
PLANNER_PROMPTS_ENV = "AIMEGRAPH_TEST_PLANNER_PROMPTS"
LATENCY_S = 0.2
RUNS = 30
TASKS = ("t1", "t2", "t3")
VISIBILITY_TIMEOUT_S = 4


# --- what the workers import (``--graph`` and the run's ``--tools``) ---


@tool
def record_side_effect(key: str, config: RunnableConfig) -> str:
    """Record that the work item ``key`` was done (an external side effect)."""
    line = f"{config['configurable']['thread_id']}:{key}\n"
    # O_APPEND: whole lines from concurrent processes never interleave.
    fd = os.open(os.environ[SIDE_EFFECTS_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    return f"recorded {key}"


@tool
def held_side_effect(key: str, config: RunnableConfig) -> str:
    """Record the work item ``key``, once the test lets it go (it stays in flight
    until its run is asked to stop, or a ``go-<key>`` file appears)."""
    hold = Path(os.environ[HOLD_ENV])
    thread_id = config["configurable"]["thread_id"]
    (hold / f"started-{thread_id}-{key}").touch()
    control = get_runtime().control
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (
        (control is not None and control.drain_requested) or (hold / f"go-{key}").exists()
    ):
        time.sleep(0.02)
    return str(record_side_effect.invoke({"key": key}, config))


def _scenario(held: str | None = None) -> dict[str, Any]:
    tasks = [
        {
            "id": t,
            "title": f"Work item {t}",
            "description": f"Do {t}.",
            "dependencies": [TASKS[i - 1]] if i else [],
            "tool_bundles": ["custom"],
        }
        for i, t in enumerate(TASKS)
    ]
    return {
        "goal": "Do the three work items.",
        "any_goal": True,  # the tests submit it with goals of their own
        "planner": [{"rationale": "One item after the other.", "tasks": tasks}],
        "actors": {
            t: [
                {
                    "tool": "held_side_effect" if t == held else "record_side_effect",
                    "args": {"key": t},
                }
            ]
            for t in TASKS
        },  # fmt: skip
        "reporter": [{"text": "Done: {all_results}"}],
    }


def build_latency_graph(
    settings: RunSettings, saver: BaseCheckpointSaver[Any], store: BaseStore | None = None
) -> AimeGraph:
    """The standard graph with the run's tools (and the worker's memory store), on a
    model that waits like a remote one."""
    model = LatencyChatModel.from_dict(_scenario(), latency_s=LATENCY_S)
    return build_aime_graph(
        model, tools=run_tools(settings), config=settings.config, checkpointer=saver, store=store
    )


class PlannerPromptLog(LatencyChatModel):
    """Appends each planner prompt, with its thread id, to a file: what a worker
    process showed its planner, for the test process to read."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        before = len(self.prompts("planner"))
        result = super()._generate(messages, stop, run_manager, **kwargs)
        planner = self.prompts("planner")
        if len(planner) > before:
            line = {"thread_id": get_config()["configurable"]["thread_id"], "prompt": planner[-1]}
            with open(os.environ[PLANNER_PROMPTS_ENV], "a") as log:
                log.write(json.dumps(line) + "\n")
        return result


def build_prompt_logging_graph(
    settings: RunSettings, saver: BaseCheckpointSaver[Any], store: BaseStore | None = None
) -> AimeGraph:
    """As build_latency_graph, with a model that logs its planner prompts."""
    model = PlannerPromptLog.from_dict(_scenario(), latency_s=0.0)
    return build_aime_graph(
        model, tools=run_tools(settings), config=settings.config, checkpointer=saver, store=store
    )


def build_held_graph(
    settings: RunSettings, saver: BaseCheckpointSaver[Any], store: BaseStore | None = None
) -> AimeGraph:
    """As build_latency_graph, with t2 held in flight (``held_side_effect``)."""
    model = LatencyChatModel.from_dict(_scenario(held="t2"), latency_s=0.0)
    return build_aime_graph(
        model, tools=run_tools(settings), config=settings.config, checkpointer=saver, store=store
    )


def build_escalating_graph(
    settings: RunSettings, saver: BaseCheckpointSaver[Any], store: BaseStore | None = None
) -> AimeGraph:
    """A run whose task fails for good: with ``escalate`` it waits for a human."""
    model = LatencyChatModel.from_dict(FAILING, latency_s=0.0)
    return build_aime_graph(model, config=settings.config, checkpointer=saver, store=store)


def build_waiting_graph(
    settings: RunSettings, saver: BaseCheckpointSaver[Any], store: BaseStore | None = None
) -> AimeGraph:
    """A run that waits for each kind of human in turn (plan, tool call, question)."""
    model = LatencyChatModel.from_dict(EVERY_WAIT, latency_s=0.0)
    return build_aime_graph(model, config=settings.config, checkpointer=saver, store=store)


def build_failing_tool_graph(
    settings: RunSettings, saver: BaseCheckpointSaver[Any], store: BaseStore | None = None
) -> AimeGraph:
    """A run whose calculator fails on two of its three calls."""
    model = LatencyChatModel.from_dict(FAILING_TOOL, latency_s=0.0)
    return build_aime_graph(model, config=settings.config, checkpointer=saver, store=store)


def build_without_store(settings: RunSettings, saver: BaseCheckpointSaver[Any]) -> AimeGraph:
    """A builder written before workers had a memory store (two arguments)."""
    return build_latency_graph(settings, saver)


# --- fixtures ---


@pytest.fixture(scope="module")
def redis_url() -> str:
    url = os.environ.get("AIMEGRAPH_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=3).ping()
    except redis.RedisError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the distributed tests must run in CI: Redis at {url}: {exc}")
        pytest.skip(f"Redis is not reachable at {url}: {exc}")
    return url


class Cluster:
    """Worker processes on one private queue, and the runs submitted to it."""

    def __init__(self, broker: str, checkpoints: str, tmp: Path) -> None:
        self.broker, self.checkpoints, self.tmp = broker, checkpoints, tmp
        self.queue = f"pytest-{uuid.uuid4().hex[:8]}"
        self.side_effects = tmp / "side-effects.log"
        self.hold = tmp / "hold"
        self.hold.mkdir(exist_ok=True)
        self.planner_prompts = tmp / "planner-prompts.jsonl"
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            SIDE_EFFECTS_ENV: str(self.side_effects),
            PLANNER_PROMPTS_ENV: str(self.planner_prompts),
            HOLD_ENV: str(self.hold),
        }

    def start_worker(
        self, name: str, graph: str = "build_latency_graph", extra: tuple[str, ...] = ()
    ) -> None:
        log = (self.tmp / f"{name}.log").open("wb")
        self.workers[name] = subprocess.Popen(
            [sys.executable, "-m", "aimegraph.cli", "worker", "--checkpoints", self.checkpoints]
            + ["--broker", self.broker, "--queue", self.queue, "--name", f"{name}@%h"]
            + ["--visibility-timeout", str(VISIBILITY_TIMEOUT_S)]
            + ["--graph", f"{SUPPORT}:{graph}", *extra],
            cwd=self.tmp,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def submit(self, goal: str = "Do the three work items.", **config: Any) -> str:
        return submit_run(
            goal,
            broker=self.broker,
            checkpoints=self.checkpoints,
            # The workers' --graph builds the latency model; the CLI reads the
            # thread with this spec.
            model="scripted:demo",
            # Memories scoped to the queue, which the fixture deletes afterwards.
            config={"workspace": self.tmp / "workspace", "user_id": self.queue, **config},
            tools=[f"{SUPPORT}:record_side_effect", f"{SUPPORT}:held_side_effect"],
            thread_id=f"{self.queue}-{uuid.uuid4().hex[:8]}",
            queue=self.queue,
        )

    def cli(self, *args: str) -> tuple[int, Any]:
        """``aimegraph ARGS --json`` in process: exit code and parsed stdout."""
        argv = [*args, "--json", "--checkpoints", self.checkpoints]
        out = self.tmp / "cli.out"
        with out.open("w") as stream:
            saved, sys.stdout = sys.stdout, stream
            try:
                code = main(argv)
            finally:
                sys.stdout = saved
        text = out.read_text()
        return code, json.loads(text) if text.strip() else None

    def stop(self) -> None:
        for process in self.workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.workers.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        from aimegraph.distributed.app import make_app

        with make_app(self.broker).connection_for_write() as connection:
            connection.default_channel.queue_delete(self.queue)


@pytest.fixture(scope="module")
def cluster(
    redis_url: str, postgres_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    yield from _cluster(redis_url, postgres_url, tmp_path_factory.mktemp("distributed"))


@pytest.fixture
def own_cluster(redis_url: str, postgres_url: str, tmp_path: Path) -> Iterator[Cluster]:
    """A cluster of its own (its own queue and workers)."""
    yield from _cluster(redis_url, postgres_url, tmp_path)


@pytest.fixture
def memory_cluster(redis_url: str, postgres_url: str, tmp_path: Path) -> Iterator[Cluster]:
    """A cluster of its own (its own queue): its worker logs its planner prompts."""
    yield from _cluster(redis_url, postgres_url, tmp_path)


def _cluster(redis_url: str, postgres_url: str, tmp: Path) -> Iterator[Cluster]:
    cluster = Cluster(redis_url, postgres_url, tmp)
    yield cluster
    cluster.stop()
    with records.connect(postgres_url) as conn, open_checkpointer(postgres_url) as saver:
        rows = conn.execute(
            "DELETE FROM aimegraph_runs WHERE thread_id LIKE %s RETURNING thread_id",
            (f"{cluster.queue}-%",),
        ).fetchall()
        for (thread_id,) in rows:
            saver.delete_thread(thread_id)
    with open_store(postgres_url) as store:  # the memories of runs scoped to the queue
        for namespace in store.list_namespaces(prefix=("aimegraph", cluster.queue)):
            for item in store.search(namespace, limit=1000):
                store.delete(namespace, item.key)


# --- tests ---


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
    deadline = time.monotonic() + 60
    while (record := wait_for_run(thread_id, checkpoints=cluster.checkpoints)).state != "finished":
        assert time.monotonic() < deadline, f"still {record.state} a minute after the pause"
        time.sleep(0.2)
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
    deadline = time.monotonic() + 90
    while (record := wait_for_run(thread_id, checkpoints=cluster.checkpoints)).state != "finished":
        assert time.monotonic() < deadline, f"still {record.state} after 90 s"
        time.sleep(0.2)
    assert record.outcome == "succeeded"
    _, shown = cluster.cli("show", thread_id)
    assert shown["tasks"]["t1"]["result"]["summary"] == "North"
    assert webhook.kinds() == ["approve_plan", "approve_tool", "ask_human"]
    assert all(body["thread_id"] == thread_id for body in webhook.bodies)


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


def test_distributed_runs_record_and_recall_memories_in_postgres(
    memory_cluster: Cluster, postgres_url: str
) -> None:
    """A worker opens the checkpoints' database as its memory store by default: a
    run records its episodes there, a later run on a related goal (on the worker,
    a fresh graph) shows them to its planner, and a run with memory "off" neither
    recalls nor records."""
    cluster, scope = memory_cluster, memory_cluster.queue  # the runs' user_id
    cluster.start_worker("m1", graph="build_prompt_logging_graph")
    first = cluster.submit("Do the three work items.")
    assert wait_for_run(first, checkpoints=cluster.checkpoints, timeout=90).outcome == "succeeded"

    with open_store(postgres_url) as store:
        episodes = store.search(("aimegraph", scope, "episodes"), limit=100)
    assert {item.key.split(":")[1] for item in episodes if item.value["thread_id"] == first} == {
        *TASKS,
        "run",
    }

    second = cluster.submit("Do the three work items again.")
    assert wait_for_run(second, checkpoints=cluster.checkpoints, timeout=90).outcome == "succeeded"
    off = cluster.submit("Do the three work items once more.", memory="off")
    assert wait_for_run(off, checkpoints=cluster.checkpoints, timeout=90).outcome == "succeeded"

    planner = _planner_prompts(cluster)
    assert "From memory" not in planner[first][0]
    recalled = planner[second][0].split("From memory", 1)[1]
    assert "goal: Do the three work items.; outcome: completed" in recalled
    assert "Work item t1" in recalled  # the first run's plan
    assert "From memory" not in planner[off][0]
    with open_store(postgres_url) as store:
        threads = {i.value["thread_id"] for i in store.search(("aimegraph", scope), limit=100)}
    assert first in threads and second in threads and off not in threads


def test_a_builder_without_a_store_parameter_still_runs(
    cluster: Cluster, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A two-argument ``--graph`` builder (written before workers had a memory store)
    is called without one, and its run records nothing."""
    monkeypatch.setenv(SIDE_EFFECTS_ENV, str(cluster.side_effects))
    assert runner.takes_store(build_latency_graph) and runner.takes_store(run_graph)
    assert not runner.takes_store(build_without_store)
    thread_id = f"{cluster.queue}-{uuid.uuid4().hex[:8]}"
    settings = RunSettings(
        model="scripted:demo",
        config=AimeConfig(workspace=cluster.tmp / "workspace", user_id=cluster.queue),
        tools=(f"{SUPPORT}:record_side_effect",),
    )
    with records.connect(cluster.checkpoints) as conn:
        records.insert_queued(conn, thread_id, "Do the three work items.", settings)
    with open_store(postgres_url) as store:
        ended = execute_run(cluster.checkpoints, thread_id, "w9", build_without_store, store=store)
        assert ended is not None and ended.outcome == "succeeded"
        recorded = store.search(("aimegraph", cluster.queue, "episodes"), limit=100)
    assert thread_id not in {item.value["thread_id"] for item in recorded}


def test_submit_stores_prompts_and_agents_for_the_workers(cluster: Cluster, tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.yaml"
    prompts.write_text("persona_habits: Always state units.\n")
    agents = tmp_path / "agents.yaml"
    agents.write_text(
        json.dumps([{"name": "writer", "description": "Writes notes.", "persona": "A writer."}])
    )
    queue = ["--broker", cluster.broker, "--queue", cluster.queue]
    queue += ["--config", json.dumps({"user_id": cluster.queue})]  # its memories: cleaned up
    thread_id = f"{cluster.queue}-{uuid.uuid4().hex[:8]}"
    code, submitted = cluster.cli(
        "submit", "a goal", "--thread", thread_id, "--prompts", str(prompts),
        "--agents", str(agents), *queue,
    )  # fmt: skip
    assert (code, submitted) == (0, {"thread_id": thread_id})
    settings = _settings(cluster, thread_id)
    assert (settings.prompts, settings.agents) == (str(prompts), str(agents))

    for flag, missing in (("--prompts", "nosuch.yaml"), ("--agents", "nosuch.yaml")):
        code, _ = cluster.cli("submit", "a goal", flag, str(tmp_path / missing), *queue)
        assert code == 2, flag


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


def test_a_worker_reaches_the_mcp_servers_of_the_run(cluster: Cluster, tmp_path: Path) -> None:
    # Issue 25: `submit --mcp FILE` stores the file's path; the worker's graph (the
    # default builder, run_graph) reads it and runs with the servers' tools.
    pytest.importorskip("langchain_mcp_adapters", reason="the [mcp] extra is not installed")
    from bench.mcp_servers import notes_command, serve_weather

    scenario = REPO / "tests" / "data" / "scenarios" / "mcp_tools.yaml"
    servers = tmp_path / "servers.json"
    thread_id = f"{cluster.queue}-{uuid.uuid4().hex[:8]}"
    with serve_weather() as weather:
        servers.write_text(
            json.dumps({"mcpServers": {"notes": notes_command(), "weather": {"url": weather}}})
        )
        settings = RunSettings(
            model=f"scripted:{scenario}",
            config=AimeConfig(workspace=cluster.tmp / "ws", user_id=cluster.queue),
            mcp=str(servers),
        )
        # Queued without a message, so that this process runs it as a worker would.
        with records.connect(cluster.checkpoints) as conn:
            records.insert_queued(conn, thread_id, "Note the Oslo forecast.", settings)
        record = execute_run(cluster.checkpoints, thread_id, "w9", run_graph)
    assert record is not None and record.outcome == "succeeded", record
    assert _settings(cluster, thread_id).mcp == str(servers)
    code, shown = cluster.cli("show", thread_id)
    assert code == 0 and shown["final_answer"] == "Answer: noted: Oslo: sunny, 21 C"
    code, _ = cluster.cli(
        "submit", "a goal", "--mcp", str(tmp_path / "nosuch.json"), "--broker", cluster.broker,
        "--queue", cluster.queue,
    )  # fmt: skip
    assert code == 2  # checked before anything is queued


def test_bad_broker_or_database_url_is_a_clear_error(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    pg, dead_pg = cluster.checkpoints, "postgresql://postgres@127.0.0.1:1/test"
    cases = [
        (["submit", "goal", "--broker", "redis://127.0.0.1:1/0", "--checkpoints", pg], "broker"),
        (["worker", "--broker", "redis://127.0.0.1:1/0", "--checkpoints", pg], "broker"),
        (["submit", "goal", "--broker", "nosuch://x", "--checkpoints", pg], "broker"),
        (["submit", "goal", "--broker", cluster.broker, "--checkpoints", dead_pg], "127.0.0.1"),
        (["worker", "--broker", cluster.broker, "--checkpoints", dead_pg], "127.0.0.1"),
        (["worker", "--checkpoints", f"sqlite:///{cluster.tmp}/x.db"], "Postgres"),
    ]
    for argv, named in cases:  # a hang would run into the suite's timeout
        code = main(argv)
        message = capsys.readouterr().err
        assert code == 2, (argv, message)
        assert "error:" in message and named in message, (argv, message)


def test_without_the_extra_the_commands_name_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "celery", None)  # as if not installed
    for module in ("commands", "submit", "app"):
        monkeypatch.delitem(sys.modules, f"aimegraph.distributed.{module}", raising=False)
        monkeypatch.delattr(distributed, module, raising=False)
    assert main(["--checkpoints", "memory", "submit", "goal"]) == 2
    assert "pip install 'aimegraph[distributed]'" in capsys.readouterr().err


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


def _wait_for_text(path: Path, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and text in path.read_text(errors="replace")):
        assert time.monotonic() < deadline, f"{text!r} not in {path} after {timeout} s"
        time.sleep(0.1)


def _wait_for_file(path: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


def _side_effects(cluster: Cluster) -> defaultdict[str, Counter[str]]:
    effects: defaultdict[str, Counter[str]] = defaultdict(Counter)
    if cluster.side_effects.exists():
        for line in cluster.side_effects.read_text().splitlines():
            thread_id, key = line.rsplit(":", 1)
            effects[thread_id][key] += 1
    return effects


def _planner_prompts(cluster: Cluster) -> defaultdict[str, list[str]]:
    """Each thread's planner prompts, as the workers' model logged them."""
    prompts: defaultdict[str, list[str]] = defaultdict(list)
    for line in cluster.planner_prompts.read_text().splitlines():
        logged = json.loads(line)
        prompts[logged["thread_id"]].append(logged["prompt"])
    return prompts


def _settings(cluster: Cluster, thread_id: str) -> RunSettings:
    with records.connect(cluster.checkpoints) as conn:
        record = records.get(conn, thread_id)
    assert record is not None
    return record.settings


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


def records_settings(cluster: Cluster, thread_id: str) -> RunSettings:
    with records.connect(cluster.checkpoints) as conn:
        record = records.get(conn, thread_id)
    assert record is not None
    return record.settings


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
