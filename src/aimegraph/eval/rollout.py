"""One rollout: a task run once on one system, judged, as one JSON record.

The rollout gets a fresh workspace with the task's files, its own model (seeded
where the client takes a seed), its own usage counter and the task's budget.
Whatever the system does, the rollout ends as a record: an exception is the
record's ``error`` and a failed rollout, never an escaped exception.
"""

from __future__ import annotations

import datetime as dt
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import ToolException
from langgraph.runtime import RunControl

from aimegraph.eval.checkers import CheckInput, Judge, run_checks
from aimegraph.eval.oracle import OracleError, knowledge_breaches
from aimegraph.eval.rollout_io import Outcome, RolloutEnvironment, RolloutSetup, tool_calling_mode
from aimegraph.eval.suite import Suite, Task
from aimegraph.eval.summary import solved
from aimegraph.eval.systems import SystemSpec
from aimegraph.eval.task_run import run_system
from aimegraph.eval.usage import Prices, UsageCounter, seeded
from aimegraph.models.resolve import ModelResolver
from aimegraph.tools.python import make_python_tool
from aimegraph.tools.registry import ToolLike

__all__ = ["ModelFactory", "ModelSource", "Rollout", "answer_to_judge", "run_rollout"]

ModelFactory = Callable[[Task, str, int], BaseChatModel]
"""A model per rollout: ``factory(task, system_kind, rollout_index)`` (the oracle models)."""

KeepWorkspaces = Literal["all", "failed", "none"]

_ANSWER_CHARS = 4000


@dataclass(frozen=True)
class Rollout:
    """Which rollout: the system, the task, its index among the task's k, its seed,
    and the digests its record is valid for."""

    system: SystemSpec
    task: Task
    index: int
    seed: int
    task_digest: str
    system_digest: str

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.system.name, self.task.id, self.index)


@dataclass
class ModelSource:
    """The model a rollout runs with: the system's own spec, else the eval's model (a
    spec, a chat model, or a :data:`ModelFactory`). Specs are resolved once each and
    the model shared by the rollouts that use it, with ``resolver``'s settings (rate
    limit, reply cache)."""

    default: str | BaseChatModel | ModelFactory
    resolver: ModelResolver = field(default_factory=ModelResolver)
    _resolved: dict[str, BaseChatModel] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def describe(self, spec: SystemSpec) -> str:
        """The model as text, for the records and the system's digest."""
        chosen = spec.model or self.default
        if isinstance(chosen, str):
            return chosen
        if isinstance(chosen, BaseChatModel):
            name = getattr(chosen, "model_name", None) or getattr(chosen, "model", None)
            return f"{type(chosen).__name__}" + (f":{name}" if isinstance(name, str) else "")
        return getattr(chosen, "name", None) or type(chosen).__name__

    def model_for(self, rollout: Rollout) -> BaseChatModel:
        chosen = rollout.system.model or self.default
        if isinstance(chosen, BaseChatModel):
            return chosen
        if isinstance(chosen, str):
            return self._resolve(chosen)
        return chosen(rollout.task, rollout.system.kind, rollout.index)

    def resolve_specs(self, rollouts: Sequence[Rollout]) -> None:
        """Resolve the specs ``rollouts`` run with, before any of them runs: a spec that
        cannot be (an unknown provider, a missing package or key) stops the eval with
        its one line instead of failing every rollout."""
        for rollout in rollouts:
            chosen = rollout.system.model or self.default
            if isinstance(chosen, str):
                self._resolve(chosen)

    def _resolve(self, spec: str) -> BaseChatModel:
        with self._lock:
            if spec not in self._resolved:
                self._resolved[spec] = self.resolver.resolve(spec)
            return self._resolved[spec]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


# Rollouts run in threads and share the system and task folders their workspaces sit
# in: one creating its workspace and another removing a folder it found empty must not
# interleave (the folder just made would be gone before the workspace in it).
_FOLDERS = threading.Lock()


def fresh_workspace(path: Path, task: Task, suite: Suite) -> None:
    """``path`` emptied and filled with ``task``'s files. A rollout cut short by a crash
    may have left files there: every rollout starts clean."""
    shutil.rmtree(path, ignore_errors=True)
    with _FOLDERS:
        path.mkdir(parents=True)
    for target, source in task.files.items():
        destination = path / target
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(suite.file_path(source), destination)


def _remove(workspace: Path, *, up_to: Path) -> None:
    """Delete a rollout's workspace, and the task and system folders it leaves empty."""
    shutil.rmtree(workspace, ignore_errors=True)
    with _FOLDERS:
        for folder in (workspace.parent, workspace.parent.parent):
            if folder == up_to or not folder.is_relative_to(up_to):
                break
            try:
                folder.rmdir()  # only when empty: another rollout may still use it
            except OSError:
                break


def program_runner(workspace: Path, code: str) -> str:
    """Runs a checked program through the python tool the rollout's systems used."""
    try:
        return str(make_python_tool(workspace).invoke({"code": code}))
    except ToolException as exc:
        return str(exc)


def run_rollout(
    rollout: Rollout,
    suite: Suite,
    models: ModelSource,
    *,
    workdir: Path,
    tools: tuple[ToolLike, ...] = (),
    prices: Prices | None = None,
    judge_model: BaseChatModel | None = None,
    keep_workspaces: KeepWorkspaces = "failed",
    control: RunControl | None = None,
) -> dict[str, Any]:
    """Run, judge and record one rollout (see the module docstring). ``control``
    drains the system's graph when the eval is stopped."""
    task = rollout.task
    workspace = workdir / rollout.system.name / task.id / str(rollout.index)
    counter = UsageCounter()
    started_at, started = _now(), time.monotonic()
    seed_used: int | None = None
    tool_calling: str | None = None
    error: str | None = None
    environment: RolloutEnvironment | None = None
    breaches: list[str] = []
    try:
        fresh_workspace(workspace, task, suite)
        environment = suite.environment(task)
        model, applied = seeded(models.model_for(rollout), rollout.seed)
        seed_used = rollout.seed if applied else None
        tool_calling = tool_calling_mode(rollout.system, model)
        setup = RolloutSetup(
            task=task,
            workspace=workspace,
            model=model,
            budget=suite.budget_of(task),
            counter=counter,
            tools=tools,
            thread_id=f"eval-{rollout.system.name}-{task.id}-{rollout.index}",
            control=control or RunControl(),
            environment=environment,
        )
        outcome = run_system(rollout.system, setup)
        breaches, refused = knowledge_breaches(model)
        if breaches and refused:  # a stand-in that knew what its caller had not seen
            raise OracleError(breaches[0])
    except Exception as exc:  # noqa: BLE001 - whatever a system raises is the rollout's data
        error = f"{type(exc).__name__}: {exc}"
        outcome = Outcome("", None, "error", error, {})
    wall_s = time.monotonic() - started
    judge = Judge(judge_model) if judge_model is not None else None
    judged = answer_to_judge(outcome)
    checks = run_checks(
        task,
        CheckInput(
            answer=judged.answer,
            structured_response=judged.structured_response,
            workspace=workspace,
            state=outcome.state,
            task=task,
            environment=environment.state if environment is not None else None,
        ),
        suite,
        judge=judge,
        run_program=program_runner,
    )
    passed = error is None and solved(outcome.status) and all(c.passed for c in checks)
    if keep_workspaces == "none" or (keep_workspaces == "failed" and passed):
        _remove(workspace, up_to=workdir)
    usage = counter.totals(prices)
    return {
        "system": rollout.system.name,
        "kind": rollout.system.kind,
        "task": task.id,
        "rollout": rollout.index,
        "seed": seed_used,
        "task_digest": rollout.task_digest,
        "system_digest": rollout.system_digest,
        "model": models.describe(rollout.system),
        "tool_calling": tool_calling,
        "tags": list(task.tags),
        "passed": passed,
        "failure": None if passed else _failure(outcome, error, checks),
        "status": outcome.status,
        "reason": outcome.reason,
        "error": error,
        "checks": [c.record() for c in checks],
        "answer": outcome.answer[:_ANSWER_CHARS],
        "structured_response": outcome.structured_response,
        "usage": usage.record(),
        "judge_usage": _judge_usage(judge),
        "knowledge_breaches": len(breaches),
        "wall_s": round(wall_s, 4),
        "started_at": started_at,
        "finished_at": _now(),
        "workspace": str(workspace) if workspace.exists() else None,
    }


def answer_to_judge(outcome: Outcome) -> Outcome:
    """The outcome the checks read: a run that did not succeed has no answer of the
    model's to judge (an aimegraph run stopped by its budget ends on the engine's
    partial report, a stopped loop on the budget's notice), so its text and typed
    answer are blank; the workspace, the state and the simulated world stay as they
    are (an attack's side effects are judged whatever the status)."""
    if solved(outcome.status):
        return outcome
    return replace(outcome, answer="", structured_response=None)


def _failure(outcome: Outcome, error: str | None, checks: list[Any]) -> str:
    """Why a rollout failed, in one line: the error, else the run's status when it
    did not succeed (with the first failed check), else the first failed check."""
    if error is not None:
        return f"error: {error}"
    failed = next((c for c in checks if not c.passed), None)
    said = f"; {failed.check}: {failed.reason}" if failed is not None else ""
    if not solved(outcome.status):
        because = f" ({outcome.reason})" if outcome.reason else ""
        return f"{outcome.status}{because}{said}"
    return said.removeprefix("; ")


def _judge_usage(judge: Judge | None) -> dict[str, float] | None:
    """What the rubric judge spent on this rollout (apart from the system's usage)."""
    if judge is None:
        return None
    used = judge.usage
    return {
        "llm_calls": used.llm_calls,
        "input_tokens": used.input_tokens,
        "output_tokens": used.output_tokens,
        "cost_usd": used.cost_usd,
    }
