"""Task suites, and runs users rated, as the prompt optimiser's training and
validation sets.

``aimegraph optimize --trainset suite.yaml`` (and :func:`suite_for_optimizer` in
Python) runs each suite task the way ``aimegraph eval`` runs it on an aimegraph
system: in a fresh workspace with the task's files, every turn on one thread,
within the task's budget, judged by the task's checks. The score GEPA sees is the
share of the task's checks that pass; the feedback names each failed check and why.

``aimegraph optimize --from-feedback`` (:func:`feedback_trainset`) takes the runs
users rated (``aimegraph feedback``): each is an example with its goal, the rating
as ``score`` (1 to 5 mapped to 0 to 1) and the note as ``feedback``, scored by
:func:`feedback_metric`.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.runtime import RunControl
from langgraph.store.base import BaseStore

from aimegraph.config import AimeConfig
from aimegraph.eval.checkers import CheckInput, Judge, run_checks
from aimegraph.eval.rollout import fresh_workspace, program_runner
from aimegraph.eval.rollout_io import RolloutSetup
from aimegraph.eval.suite import Suite
from aimegraph.eval.systems import SystemSpec
from aimegraph.eval.task_run import run_system
from aimegraph.eval.usage import UsageCounter
from aimegraph.memory.feedback import rated_runs
from aimegraph.models.resolve import resolve_model
from aimegraph.optimizer.trace import default_metric
from aimegraph.tools.registry import ToolLike

__all__ = [
    "CHECKS_KEY",
    "SuiteExamples",
    "feedback_metric",
    "feedback_trainset",
    "suite_for_optimizer",
]

CHECKS_KEY = "eval_checks"
"""The key of the check results in the output state ``run_example`` returns."""


@dataclass(frozen=True)
class SuiteExamples:
    """What ``aimegraph.optimize`` takes for suites: one list of examples per suite
    (``{"goal": first turn, "task": id, "suite": n}``), the metric, and
    ``run_example``."""

    examples: list[list[dict[str, Any]]]
    suites: tuple[Suite, ...]
    model: BaseChatModel
    spec: SystemSpec
    tools: tuple[ToolLike, ...]
    judge: BaseChatModel | None

    def run_example(self, prompts: Mapping[str, str], example: Mapping[str, Any]) -> dict[str, Any]:
        """Run one suite task with ``prompts``; the output state with the check results."""
        suite = self.suites[int(example["suite"])]
        task = suite.task(str(example["task"]))
        with tempfile.TemporaryDirectory(prefix="aimegraph-optimize-") as folder:
            workspace = Path(folder)
            fresh_workspace(workspace, task, suite)
            setup = RolloutSetup(
                task=task,
                workspace=workspace,
                model=self.model,
                budget=suite.budget_of(task),
                counter=UsageCounter(),
                tools=self.tools,
                thread_id=f"optimize-{uuid.uuid4().hex}",
                control=RunControl(),
            )
            outcome = run_system(self.spec, setup, prompts=prompts)
            checks = run_checks(
                task,
                CheckInput(
                    outcome.answer, outcome.structured_response, workspace, outcome.state, task
                ),
                suite,
                judge=Judge(self.judge) if self.judge is not None else None,
                run_program=program_runner,
            )
        return {**outcome.state, CHECKS_KEY: [c.record() for c in checks]}

    @staticmethod
    def metric(example: Mapping[str, Any], state: Mapping[str, Any]) -> tuple[float, str]:
        """The share of the task's checks that pass; the failed ones and why."""
        checks = state.get(CHECKS_KEY)
        if not checks:
            return 0.0, "The run did not finish, so no check ran."
        failed = [c for c in checks if not c["passed"]]
        lines = [f"Check failed: {c['check']}: {c['reason']}" for c in failed]
        return (len(checks) - len(failed)) / len(checks), "\n".join(lines) or "Every check passed."


def suite_for_optimizer(
    suites: Sequence[Suite],
    *,
    model: str | BaseChatModel,
    config: AimeConfig | None = None,
    models: Mapping[str, str] | None = None,
    tools: Sequence[ToolLike] = (),
    judge_model: str | BaseChatModel | None = None,
) -> SuiteExamples:
    """The suites as optimiser inputs: pass ``examples[0]`` as the trainset
    (``examples[1]`` as the valset), ``metric`` and ``run_example`` to
    ``aimegraph.optimize``. Each run uses ``config`` (its workspace replaced by the
    task's own) and the task's budget."""
    fields = (config or AimeConfig()).model_dump(mode="json", exclude={"workspace"})
    spec = SystemSpec(name="optimize", kind="aimegraph", config=fields, models=dict(models or {}))
    return SuiteExamples(
        examples=[
            [{"goal": t.goals[0], "task": t.id, "suite": n} for t in suite.tasks]
            for n, suite in enumerate(suites)
        ],
        suites=tuple(suites),
        model=resolve_model(model) if isinstance(model, str) else model,
        spec=spec,
        tools=tuple(tools),
        judge=resolve_model(judge_model) if isinstance(judge_model, str) else judge_model,
    )


def feedback_trainset(store: BaseStore, scope: str) -> list[dict[str, Any]]:
    """The runs users rated in ``scope`` as examples, oldest first: ``goal``,
    ``score`` (the rating, 1 to 5, as 0.0 to 1.0), ``feedback`` (the note),
    ``rating``, ``rated_answer`` (the answer they rated) and ``thread_id``."""
    return [
        {
            "goal": rated.goal,
            "score": rated.score,
            "feedback": rated.note,
            "rating": rated.rating,
            "rated_answer": rated.answer,
            "thread_id": rated.thread_id,
        }
        for rated in rated_runs(store, scope)
    ]


def feedback_metric(example: Mapping[str, Any], state: Mapping[str, Any]) -> tuple[float, str]:
    """A rated goal's run: the same answer as the one the user rated scores the
    user's score, with their note; another answer is scored as any run is (it
    succeeded with a passing verdict), with the user's note on the earlier answer,
    so the reflection learns what the user wanted either way."""
    note = example.get("feedback") or "no note"
    said = f"A user rated an answer to this goal {example.get('rating')}/5: {note}"
    answer = str(state.get("final_answer") or "").strip()
    if answer and answer == str(example.get("rated_answer") or "").strip():
        return float(example["score"]), f"This is the answer the user rated. {said}"
    score, _ = default_metric(example, state)  # the optimiser adds the run's diagnostics
    return score, said
