"""Scripted scenarios shared by the human-control tests of every front end (Python,
CLI, dashboard, browser), and how to write one where a ``scripted:`` spec finds it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.scripted import call, plan, spec, submit

REPORTED = {"reporter": [{"text": "{all_results}"}]}

FAILING: dict[str, Any] = {
    "planner": [plan(spec("a", title="Fetch the figure"), spec("b", "a", title="Report it"))],
    "actors": {"a": [submit("offline", status="failed")], "b": [submit("b: {dep:a}")]},
    **REPORTED,
}
"""Task a fails for good; b needs its result."""

ESCALATE = {"escalate": "exhausted", "max_replans": 0, "task_retries": 0}
"""The settings under which FAILING pauses for a human instead of ending."""

ASKING: dict[str, Any] = {
    "planner": [plan(spec("t1", title="Ask", tool_bundles=["human"]))],
    "actors": {"t1": [call("ask_human", question="Which mirror?"), submit("ok")]},
    **REPORTED,
}
"""One actor waits on ask_human, then submits."""

EVERY_WAIT: dict[str, Any] = {
    "planner": [plan(spec("t1", title="Compute, then ask", tool_bundles=["compute", "human"]))],
    "actors": {
        "t1": [
            call("calculator", expression="6*7"),
            call("ask_human", question="Which region?"),
            submit("{last_tool_output}"),
        ]
    },
    **REPORTED,
}
"""The run waits for each kind of human in turn: the plan, the calculator call (under
``approve_tools``), then the actor's question; t1's result is the answer."""

UNATTENDED = {
    "approve_plan": True,
    "approve_tools": ["calculator"],
    "approval_timeout_s": 0.3,
    "approval_default": "approve",
    "ask_human_timeout_s": 0.3,
    "ask_human_default": "North",
}
"""The settings under which EVERY_WAIT waits for each kind of human, each taking its
default (approve; the answer "North") when nobody answers within 0.3 s."""

FAILING_TOOL: dict[str, Any] = {
    "planner": [plan(spec("t1", title="Compute", tool_bundles=["compute"]))],
    "actors": {
        "t1": [
            call("calculator", expression="1/0"),
            call("calculator", expression="2+2"),
            call("calculator", expression="1/0"),
            submit("done"),
        ]
    },
    **REPORTED,
}
"""Two of the calculator's three calls fail (division by zero); the run carries on
and succeeds (the alert tests' failing tool)."""

HEARD = "A note from the human, sent while you work"
"""How a note opens in an actor's loop."""


def reading(*paths: str) -> dict[str, Any]:
    """One actor reading ``paths`` in turn, then submitting the last one read."""
    reads = [call("read_file", path=path) for path in paths]
    return {
        "planner": [plan(spec("t1", title="Read", tool_bundles=["files"]))],
        "actors": {"t1": [*reads, submit("{last_tool_output}")]},
        **REPORTED,
    }


def scenario_spec(folder: Path, data: dict[str, Any], name: str = "scenario") -> str:
    """``data`` written to ``folder`` as JSON, as the ``scripted:`` model spec naming it."""
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return f"scripted:{path}"
