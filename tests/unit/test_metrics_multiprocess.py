"""``PROMETHEUS_MULTIPROC_DIR``: a scrape reports the counters of every process of the
directory, and the scrape-time gauges (tasks and runs in flight, the longest-running
task) of the process scraped. Each process is a real interpreter: prometheus-client
picks its multiprocess storage when it is first imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

PROCESS = """
import sys, time, uuid
from aimegraph.metrics import enable_metrics, exposition

metrics = enable_metrics()
metrics.tool_call("calculator", "error", 0.01)
if sys.argv[1] == "scrape":  # a task and a run in flight while it is scraped
    metrics.task_started(uuid.uuid4())
    time.sleep(0.2)
    with metrics.run_in_flight():
        sys.stdout.write(exposition()[0].decode())
"""


def run_process(role: str, directory: Path) -> str:
    env = {
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": str(directory),
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", PROCESS, role],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def test_a_multiprocess_scrape_has_every_processs_counts_and_its_own_live_gauges(
    tmp_path: Path,
) -> None:
    run_process("count", tmp_path)  # another process of the pool, ended
    text = run_process("scrape", tmp_path)
    families = list(text_string_to_metric_families(text))
    names = [family.name for family in families]
    assert len(names) == len(set(names))  # each family once
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in families
        for s in family.samples
    }
    calls = (
        "aimegraph_tool_call_duration_seconds_count",
        (("outcome", "error"), ("tool", "calculator")),
    )
    assert samples[calls] == 2  # both processes' calls: read from the directory
    assert samples[("aimegraph_tasks_in_flight", ())] == 1
    assert samples[("aimegraph_runs_in_flight", ())] == 1
    assert samples[("aimegraph_task_longest_running_seconds", ())] >= 0.2
