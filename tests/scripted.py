"""Steps of a scripted scenario (``ScriptedChatModel.from_dict``), shared by the tests:
a planner's plan and its task specs, an actor's tool calls and its result."""

from __future__ import annotations

from typing import Any


def spec(id: str, *deps: str, **extra: Any) -> dict[str, Any]:
    """A planner ``TaskSpec`` titled ``Task <id>``, depending on ``deps``."""
    return {"id": id, "title": f"Task {id}", "dependencies": list(deps), **extra}


def plan(*tasks: dict[str, Any], drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """A planner reply (``PlanUpdate``) adding or revising ``tasks``."""
    return {"rationale": "scripted", "tasks": list(tasks), "drop": list(drop)}


def call(name: str, **args: Any) -> dict[str, Any]:
    """An actor step calling tool ``name``."""
    return {"tool": name, "args": args}


def submit(summary: str, status: str = "completed", **artifacts: str) -> dict[str, Any]:
    """An actor step ending its task with ``submit_result``."""
    args: dict[str, Any] = {"status": status, "summary": summary}
    if artifacts:
        args["artifacts"] = artifacts
    return call("submit_result", **args)
