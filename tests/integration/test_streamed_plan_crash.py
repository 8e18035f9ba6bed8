"""A run SIGKILLed while its plan still streams in (``stream_plans``) resumes with
``aimegraph resume`` and runs no task that had completed a second time; the tools'
side-effect log proves it (the crash sweep of ``test_persistence.py``, mid-stream)."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest
from tests.integration.test_persistence import (
    SCENARIOS,
    aimegraph,
    finish,
    kill_once_saved,
    log_events,
)

from aimegraph import build_aime_graph
from aimegraph.checkpoints import latest_settings, open_checkpointer, run_config
from aimegraph.checkpoints.delta import finished_tasks


@pytest.mark.slow
def test_sigkill_while_the_plan_streams_then_resume_runs_no_completed_task_twice(
    tmp_path: Path,
) -> None:
    workspace, log = tmp_path / "ws", tmp_path / "ws" / "log.txt"
    url = f"sqlite:///{tmp_path / 'cp.db'}"
    run = aimegraph(
        "--checkpoints", url, "run", "Run five logged steps.",
        "--model", f"scripted:{SCENARIOS / 'streamed_crash.yaml'}", "--thread", "killed",
        "--workspace", str(workspace), "--config", '{"sandbox": "none", "stream_plans": true}',
        "--durability", "sync", "--json",
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    # The plan streams a (quick), b (waiting for the file go), then c's long spec: kill
    # once a is done and saved and b waits, while c's spec (and so the reply) is still
    # streaming in.
    seen = kill_once_saved(
        run, log, {("a", "end"), ("b", "start")}, url=url, saved="a", timeout_s=90
    )
    assert ("b", "end") not in seen and ("c", "start") not in seen
    before = Counter((t, e) for t, e, _ in log_events(log))
    assert before == {("a", "start"): 1, ("a", "end"): 1, ("b", "start"): 1}

    # Stopped inside the planner's step, the plan not yet committed: a's result is
    # saved as one of the step's pending writes.
    with open_checkpointer(url) as saver:
        settings = latest_settings(saver, "killed")
        graph = build_aime_graph(settings.model, config=settings.config, checkpointer=saver)
        snapshot = graph.get_state(run_config("killed"))
        assert snapshot.next == ("planner",) and not snapshot.values.get("tasks")
        saved = finished_tasks(saver.get_tuple(snapshot.config))
        assert saved["a"].status == "completed"

    code, summary = finish(
        aimegraph("--checkpoints", url, "resume", "killed", "--json", cwd=tmp_path,
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE),
        timeout=120,
    )  # fmt: skip
    assert code == 0 and summary["status"] == "succeeded"
    assert {tid: t["status"] for tid, t in summary["tasks"].items()} == dict.fromkeys(
        "abcde", "completed"
    )
    assert all(t["attempts"] == 1 for t in summary["tasks"].values())
    after = Counter((t, e) for t, e, _ in log_events(log))
    # Completed before the kill: exactly once. In flight (b): redone. After: once.
    assert after == {
        ("a", "start"): 1, ("a", "end"): 1, ("b", "start"): 2, ("b", "end"): 1,
        ("c", "start"): 1, ("c", "end"): 1, ("d", "start"): 1, ("d", "end"): 1,
        ("e", "start"): 1, ("e", "end"): 1,
    }  # fmt: skip
