"""The distributed tests' harness: Celery worker processes over Redis and Postgres.

The workers import this module (``--graph`` and the run's ``--tools``): its graph
builders run the standard graph on a latency model, and its tools append one line per
completed call to a side-effect log, so that the tests can count every call. A
``Cluster`` is a set of ``aimegraph worker`` processes on a private queue; the fixtures
that start and clean one up are in this directory's ``conftest.py``.

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
from pathlib import Path
from typing import Any

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
from tests.human_scenarios import EVERY_WAIT, FAILING, FAILING_TOOL

from aimegraph import build_aime_graph
from aimegraph.checkpoints import RunSettings
from aimegraph.cli import main
from aimegraph.distributed import records
from aimegraph.distributed.submit import submit_run
from aimegraph.graphs.aime import AimeGraph
from aimegraph.steering import run_tools

REPO = Path(__file__).resolve().parents[2]
SUPPORT = "tests.integration.distributed_env"  # as the workers import this module
SIDE_EFFECTS_ENV = "AIMEGRAPH_TEST_SIDE_EFFECTS"
HOLD_ENV = "AIMEGRAPH_TEST_HOLD"
PLANNER_PROMPTS_ENV = "AIMEGRAPH_TEST_PLANNER_PROMPTS"
LATENCY_S = 0.2
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


# --- the cluster the tests drive ---


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


# --- helpers ---


def _side_effects(cluster: Cluster) -> defaultdict[str, Counter[str]]:
    effects: defaultdict[str, Counter[str]] = defaultdict(Counter)
    if cluster.side_effects.exists():
        for line in cluster.side_effects.read_text().splitlines():
            thread_id, key = line.rsplit(":", 1)
            effects[thread_id][key] += 1
    return effects


def _settings(cluster: Cluster, thread_id: str) -> RunSettings:
    with records.connect(cluster.checkpoints) as conn:
        record = records.get(conn, thread_id)
    assert record is not None
    return record.settings
