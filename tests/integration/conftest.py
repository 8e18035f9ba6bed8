"""Fixtures of the tests that share a harness in this directory.

The distributed tests' clusters (``distributed_env.py``: worker processes on a private
queue, cleaned up afterwards) and the run-control tests' files (``run_control_env.py``).
The distributed harness needs the [distributed] extra (Celery), so it is imported
only when one of its fixtures is set up: the other tests here run without it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml
from tests.integration.run_control_env import DANGER_SCENARIO, SCENARIO, TOOLS_MODULE, Env

from aimegraph.checkpoints import open_checkpointer
from aimegraph.distributed import records
from aimegraph.memory import open_store

if TYPE_CHECKING:
    from tests.integration.distributed_env import Cluster


# --- the distributed tests (test_distributed_*.py) ---


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
    from tests.integration.distributed_env import Cluster

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


# --- the run-control tests (test_run_control_*.py) ---


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    (tmp_path / "rc_tools.py").write_text(TOOLS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "rc_tools", raising=False)
    scenario, danger = tmp_path / "steps.yaml", tmp_path / "danger.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    danger.write_text(yaml.safe_dump(DANGER_SCENARIO))
    log = tmp_path / "log.txt"
    monkeypatch.setenv("RC_LOG", str(log))
    monkeypatch.delenv("RC_HOLD_AT", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return Env(
        tmp=tmp_path,
        url=f"sqlite:///{tmp_path / 'cp.db'}",
        model=f"scripted:{scenario}",
        danger_model=f"scripted:{danger}",
        log=log,
        go=tmp_path / "go",
        workspace=tmp_path / "ws",
    )
