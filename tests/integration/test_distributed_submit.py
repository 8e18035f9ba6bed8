"""What a submitted run takes to its worker, and what ``submit`` refuses.

A worker's memory store is the checkpoints' Postgres: a run records its episodes
there and a later run's planner recalls them (not with memory "off"; not with a
``--graph`` builder that takes no store). ``submit`` stores the paths of the run's
prompts, agents and MCP servers for the workers, and checks them first; a bad
broker or database URL, or a missing [distributed] extra, is a clear error.

The harness is in ``distributed_env.py``, the fixtures in ``conftest.py``.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections import defaultdict
from pathlib import Path

import pytest
from tests.integration.distributed_env import (
    REPO,
    SIDE_EFFECTS_ENV,
    SUPPORT,
    TASKS,
    Cluster,
    _settings,
    build_latency_graph,
    build_without_store,
)

from aimegraph import AimeConfig, distributed
from aimegraph.checkpoints import RunSettings
from aimegraph.cli import main
from aimegraph.distributed import records, runner
from aimegraph.distributed.runner import execute_run
from aimegraph.distributed.submit import wait_for_run
from aimegraph.memory import open_store
from aimegraph.steering import run_graph

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


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


def _planner_prompts(cluster: Cluster) -> defaultdict[str, list[str]]:
    """Each thread's planner prompts, as the workers' model logged them."""
    prompts: defaultdict[str, list[str]] = defaultdict(list)
    for line in cluster.planner_prompts.read_text().splitlines():
        logged = json.loads(line)
        prompts[logged["thread_id"]].append(logged["prompt"])
    return prompts
