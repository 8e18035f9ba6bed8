"""Submitting runs to the workers, resuming paused ones, waiting for them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from aimegraph.checkpoints import RunSettings, new_thread_id
from aimegraph.config import AimeConfig
from aimegraph.distributed import records
from aimegraph.distributed.app import (
    DEFAULT_QUEUE,
    TASK_NAME,
    BrokerConnectionError,
    check_broker,
    make_app,
)
from aimegraph.distributed.records import RunRecord
from aimegraph.nodes.planner import resolve_goal
from aimegraph.steering import WORKSPACES

__all__ = ["RunNotResumableError", "enqueue_resume", "submit_run", "wait_for_run"]


class RunNotResumableError(RuntimeError):
    """The run is queued or running already, so there is nothing to resume."""


def submit_run(
    goal: str,
    *,
    broker: str,
    checkpoints: str,
    model: str = "openai:gpt-4o-mini",
    config: AimeConfig | Mapping[str, Any] | None = None,
    tools: Sequence[str] = (),
    prompts: str | None = None,
    agents: str | None = None,
    response_format: str | None = None,
    mcp: str | None = None,
    thread_id: str | None = None,
    queue: str = DEFAULT_QUEUE,
) -> str:
    """Queue a run for the workers and return its thread id at once.

    Args:
        goal: what the agents should achieve.
        broker: the Redis URL the workers consume from.
        checkpoints: the workers' Postgres database (``postgresql://...``).
        model: model spec, resolved on the worker (``openai:...``, ``anthropic:...``,
            ``scripted:...``).
        config: ``AimeConfig`` or its fields; the workspace defaults to
            ``.aimegraph/workspace/<thread id>`` under the worker's directory.
        tools: ``module:attr`` references to the application's tools, imported on
            the worker (see ``aimegraph run --tools``).
        prompts: a prompt-set file or prompt store (``.jsonl``) the run is built with
            (``aimegraph run --prompts``); stored as an absolute path, which the
            workers read: the same path on every machine, or a shared filesystem.
        agents: agent units (a YAML / JSON file, same rule as ``prompts``, or
            ``module:attr`` importable on the workers; ``aimegraph run --agents``).
        response_format: the typed answer's format (a JSON schema file, same rule as
            ``prompts``, or ``module:attr``; ``aimegraph run --response-format``).
        mcp: an MCP servers file (``aimegraph run --mcp``; same rule as ``prompts``);
            the workers start or reach the servers.
        thread_id: defaults to a new one; an existing one raises ThreadExistsError.

    Raises:
        BrokerConnectionError, CheckpointConnectionError, CheckpointURLError: a bad
            or unreachable URL (checked before anything is written).
        ThreadExistsError: ``thread_id`` is taken.
        GoalError: the goal is not one the run would take (longer than
            ``max_goal_chars``): refused before it is stored.
    """
    thread_id = thread_id or new_thread_id()
    fields = config.model_dump() if isinstance(config, AimeConfig) else dict(config or {})
    fields.setdefault("workspace", WORKSPACES / thread_id)
    settings = RunSettings(
        model=model,
        config=AimeConfig.model_validate(fields),
        tools=tuple(tools),
        prompts=prompts,
        agents=agents,
        response_format=response_format,
        mcp=mcp,
    )
    resolve_goal({"goal": goal}, max_chars=settings.config.max_goal_chars)
    app = make_app(broker, queue=queue)
    check_broker(app)
    with records.connect(checkpoints) as conn:
        records.insert_queued(conn, thread_id, goal, settings)
        try:
            app.send_task(TASK_NAME, args=[thread_id], queue=queue)
        except Exception as exc:
            records.delete(conn, thread_id)
            raise BrokerConnectionError(f"could not queue run {thread_id!r}: {exc}") from exc
    return thread_id


def enqueue_resume(
    thread_id: str,
    answers: Mapping[str, Any] | None,
    *,
    broker: str,
    checkpoints: str,
    queue: str = DEFAULT_QUEUE,
) -> None:
    """Queue the continuation of a paused (or stopped) distributed run.

    ``answers`` maps pending interrupt ids to the human's answers (the ``resume``
    of ``Command(resume={id: answer})``); None continues a run that stopped mid-way.

    Raises:
        RunNotResumableError: the run is queued or running.
        LookupError: no distributed run has this thread id.
    """
    app = make_app(broker, queue=queue)
    check_broker(app)
    with records.connect(checkpoints) as conn:
        record = records.get(conn, thread_id)
        if record is None:
            raise LookupError(f"no distributed run {thread_id!r}")
        if not records.requeue(conn, thread_id):
            raise RunNotResumableError(f"run {thread_id!r} is {record.state} already")
        try:
            app.send_task(TASK_NAME, args=[thread_id, dict(answers or {})], queue=queue)
        except Exception as exc:
            before: Literal["paused", "finished"] = (
                "paused" if record.state == "paused" else "finished"
            )
            records.mark_ended(conn, thread_id, before, record.status, record.reason)
            raise BrokerConnectionError(
                f"could not queue the resume of {thread_id!r}: {exc}"
            ) from exc


def wait_for_run(thread_id: str, *, checkpoints: str, timeout: float | None = None) -> RunRecord:
    """Block until the run is paused or finished and return its record.

    Raises:
        TimeoutError: still queued or running after ``timeout`` seconds.
        LookupError: no distributed run has this thread id.
    """
    with records.connect(checkpoints) as conn:
        return records.wait_until_ended(conn, thread_id, timeout)
