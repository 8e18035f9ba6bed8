"""A finished run as a trace, and the metrics that score it.

A trace is the JSON-safe record the optimiser learns from: the goal, the plan
(each task with its outcome), the failures and their reasons, the verifier's
verdict, the final answer and the usage. The offline optimiser builds one per
rollout; the online loop appends one per run to its trace file. Both score it
with the same metrics, so feedback reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from aimegraph.imports import import_object
from aimegraph.prompts import optimizer as prompts
from aimegraph.state import Task, Usage, Verdict

Example: TypeAlias = Mapping[str, Any]
MetricResult: TypeAlias = float | tuple[float, str]
#: A user's metric: ``metric(example, output_state) -> score | (score, feedback)``.
Metric: TypeAlias = Callable[[Example, Mapping[str, Any]], MetricResult]
#: A metric normalised to always give feedback.
Scorer: TypeAlias = Callable[[Example, Mapping[str, Any]], tuple[float, str]]
Trace: TypeAlias = dict[str, Any]

_CLIP = 600


def _clip(text: str | None, limit: int = _CLIP) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _task_record(task: Task) -> dict[str, Any]:
    return {
        "id": task.id,
        "title": task.title,
        "description": _clip(task.description, 300),
        "dependencies": list(task.dependencies),
        "persona": task.persona,
        "tool_bundles": list(task.tool_bundles),
        "status": task.status,
        "attempts": task.attempts,
        "outcome": _clip(task.result.summary) if task.result else "",
    }


def _usage_record(usage: Usage | None) -> dict[str, int]:
    usage = usage or Usage()
    return {
        "llm_calls": usage.llm_calls,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "tool_calls": usage.tool_calls,
    }


def run_trace(state: Mapping[str, Any], *, goal: str | None = None) -> Trace:
    """The trace of a finished run from its output state (``graph.invoke``'s result)."""
    tasks: Mapping[str, Task] = state.get("tasks") or {}
    verdict: Verdict | None = state.get("verdict")
    return {
        "goal": goal if goal is not None else str(state.get("goal") or ""),
        "status": str(state.get("status") or "failed"),
        "reason": state.get("reason"),
        "plan": [_task_record(task) for task in tasks.values()],
        "failures": [
            {
                "task": task.id,
                "title": task.title,
                "reason": _clip(task.result.summary if task.result else "no result"),
            }
            for task in tasks.values()
            if task.status == "failed"
        ],
        "verdict": verdict.model_dump() if verdict is not None else None,
        "final_answer": _clip(state.get("final_answer"), 2_000),
        "usage": _usage_record(state.get("usage")),
    }


def failed_run_state(goal: str, error: BaseException) -> dict[str, Any]:
    """The stand-in output of a run that raised, so it is scored and traced as data."""
    return {
        "goal": goal,
        "status": "failed",
        "reason": prompts.RUN_ERROR.format(error=f"{type(error).__name__}: {error}"),
    }


def run_feedback(trace: Trace) -> str:
    """What went wrong in a run, in lines: status and reason, the verifier's issues,
    the failed tasks and their reasons (the default metric's feedback)."""
    verdict = trace.get("verdict")
    if trace["status"] == "succeeded" and (verdict is None or verdict["passed"]):
        return prompts.SUCCEEDED
    lines = [prompts.STATUS.format(status=trace["status"])]
    if trace.get("reason"):
        lines.append(prompts.REASON.format(reason=trace["reason"]))
    if verdict is not None and not verdict["passed"]:
        lines.append(prompts.VERDICT_REJECTED.format(reasoning=verdict["reasoning"]))
        lines += [prompts.VERDICT_ISSUE.format(issue=issue) for issue in verdict["issues"]]
    lines += [
        prompts.TASK_FAILED.format(task_id=f["task"], title=f["title"], reason=f["reason"])
        for f in trace["failures"]
    ]
    return "\n".join(lines)


def default_metric(example: Example, state: Mapping[str, Any]) -> tuple[float, str]:
    """1.0 for a run that ``succeeded`` with a passing verdict (or none, with
    ``verify="off"`` or where ``"auto"`` skips it), else 0.0; the feedback is
    :func:`run_feedback`."""
    trace = run_trace(state)
    verdict = trace["verdict"]
    passed = trace["status"] == "succeeded" and (verdict is None or verdict["passed"])
    return (1.0 if passed else 0.0), run_feedback(trace)


def _expected(example: Example) -> str:
    if "answer" not in example:
        raise KeyError("the exact and contains metrics read example['answer']; this one has none")
    return str(example["answer"]).strip()


def exact_metric(example: Example, state: Mapping[str, Any]) -> tuple[float, str]:
    """1.0 when the final answer, stripped, equals ``example["answer"]``."""
    expected, answer = _expected(example), str(state.get("final_answer") or "").strip()
    if answer == expected:
        return 1.0, "The final answer is exactly the expected answer."
    return 0.0, f"The final answer should be exactly {expected!r}; it was {_clip(answer, 300)!r}."


def contains_metric(example: Example, state: Mapping[str, Any]) -> tuple[float, str]:
    """1.0 when the final answer contains ``example["answer"]`` (case-insensitive)."""
    expected, answer = _expected(example), str(state.get("final_answer") or "")
    if expected.casefold() in answer.casefold():
        return 1.0, f"The final answer contains the expected {expected!r}."
    return 0.0, f"The final answer should contain {expected!r}; it does not."


NAMED_METRICS: Mapping[str, Scorer] = {"exact": exact_metric, "contains": contains_metric}


def load_metric(spec: str) -> Metric:
    """A metric by name (``exact``, ``contains``) or as ``module:attribute``."""
    if spec in NAMED_METRICS:
        return NAMED_METRICS[spec]
    found = import_object(
        spec,
        malformed=f"unknown metric {spec!r}: use exact, contains or module:attribute "
        "(a callable metric(example, output_state) -> float | (float, str))",
        failed="cannot import metric",
    )
    if not callable(found):
        raise ValueError(f"metric {spec!r} is not a callable")
    return found  # type: ignore[no-any-return]


def resolve_metric(metric: Metric | str | None) -> Scorer:
    """The metric as a scorer returning ``(score, feedback)``.

    The run's own diagnostics (:func:`run_feedback`) always follow a user
    metric's feedback: a wrong answer is easier to fix knowing which task failed.
    """
    if metric is None:
        return default_metric
    user = load_metric(metric) if isinstance(metric, str) else metric

    def score(example: Example, state: Mapping[str, Any]) -> tuple[float, str]:
        result = user(example, state)
        value, said = result if isinstance(result, tuple) else (result, "")
        diagnostics = run_feedback(run_trace(state))
        return float(value), "\n".join(part for part in (said, diagnostics) if part)

    return score
