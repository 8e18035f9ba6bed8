"""The GEPA adapter: a candidate is a prompt set, a rollout is one aime run.

``gepa.optimize`` drives the search (Pareto selection, minibatches, acceptance,
budget, resume); this module only teaches it how to run the workflow with a
candidate's prompts, how to score a run, and what a run's trace says about each
prompt component.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from aimegraph.models.calls import usage_of
from aimegraph.models.reasoning import visible_text
from aimegraph.optimizer.trace import Example, Scorer, Trace, failed_run_state, run_trace
from aimegraph.prompts import DEFAULT_PROMPTS, placeholders, resolve_prompts
from aimegraph.prompts import optimizer as prompts
from aimegraph.state import Usage

try:
    from gepa import EvaluationBatch, GEPAAdapter
except ImportError as exc:  # an optional extra
    raise ImportError(
        f"the prompt optimiser needs GEPA: pip install 'aimegraph[optimize]' ({exc})"
    ) from exc

__all__ = [
    "AimeAdapter",
    "ReflectionLM",
    "reflection_templates",
    "reflective_dataset",
]

log = logging.getLogger("aimegraph.optimizer")

#: Builds the workflow with a full prompt set (``build_aime_graph(prompts=...)``).
GraphBuilder = Callable[[Mapping[str, str]], Any]

#: Runs one example with a full prompt set and returns the run's output state, for
#: examples that need more than a goal on a graph (files in a workspace of their
#: own, several turns): ``aimegraph.eval`` suites.
RunExample = Callable[[Mapping[str, str], Example], Mapping[str, Any]]

# Records per component handed to the reflection model: failures first; more
# would only lengthen its prompt.
_MAX_RECORDS = 5


class ReflectionLM:
    """GEPA's reflection LM (``(prompt) -> str``) over a LangChain chat model.

    GEPA's own LangChain helper would do the call; this one also counts the
    calls and tokens (the optimiser reports them, the online loop budgets them)
    and leaves reasoning text out of the reply.
    """

    def __init__(self, model: BaseChatModel) -> None:
        self.model = model
        self.usage = Usage()
        self._lock = threading.Lock()

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        """The reflection model's visible reply to ``prompt`` (text or chat messages)."""
        messages: str | list[tuple[str, Any]] = (
            prompt if isinstance(prompt, str) else [(m["role"], m["content"]) for m in prompt]
        )
        reply: BaseMessage = self.model.invoke(messages)
        with self._lock:
            self.usage = self.usage + usage_of(reply, "reflection")
        return visible_text(reply)


def reflection_templates(components: Sequence[str]) -> dict[str, str]:
    """GEPA reflection prompt per component, naming the placeholders it must keep."""
    templates = {}
    for name in components:
        fields = sorted(placeholders(DEFAULT_PROMPTS[name])) if name in DEFAULT_PROMPTS else []
        listed = ", ".join(f"{{{f}}}" for f in fields) or prompts.NO_PLACEHOLDERS
        templates[name] = prompts.REFLECTION.format(component=name, placeholders=listed)
    return templates


def _plan_text(trace: Trace) -> str:
    lines = []
    for task in trace["plan"]:
        deps = task["dependencies"]
        after = prompts.PLAN_AFTER.format(dependencies=", ".join(deps)) if deps else ""
        lines.append(
            prompts.PLAN_TASK.format(
                id=task["id"], title=task["title"], after=after, description=task["description"]
            ).strip()
        )
    return "\n".join(lines) or prompts.NO_PLAN


def _outcomes_text(trace: Trace) -> str:
    return (
        "\n".join(
            prompts.TASK_OUTCOME.format(
                id=t["id"], status=t["status"], attempts=t["attempts"], outcome=t["outcome"]
            )
            for t in trace["plan"]
        )
        or prompts.NO_PLAN
    )


def _verdict_text(trace: Trace) -> str:
    verdict = trace.get("verdict")
    if verdict is None:
        return prompts.NOT_VERIFIED
    return prompts.VERDICT.format(
        judgement=prompts.JUDGED_PASSED if verdict["passed"] else prompts.JUDGED_REJECTED,
        reasoning=verdict["reasoning"],
        issues="".join(prompts.VERDICT_ISSUE_LINE.format(issue=i) for i in verdict["issues"]),
    )


def _record(trace: Trace, component: str) -> dict[str, Any]:
    """What one run says about one component: its inputs, its output, the feedback."""
    goal = {prompts.GOAL: trace["goal"]}
    inputs: dict[str, str]
    if component == "planner":
        inputs, output = goal, _plan_text(trace)
    elif component in ("actor", "persona_habits"):
        inputs, output = {**goal, prompts.TASKS: _plan_text(trace)}, _outcomes_text(trace)
    elif component == "verifier":
        inputs = {**goal, prompts.FINAL_ANSWER: trace["final_answer"]}
        output = _verdict_text(trace)
    else:  # the reporter, and any component the code adds
        inputs, output = (
            {**goal, prompts.TASK_RESULTS: _outcomes_text(trace)},
            trace["final_answer"],
        )
    return {
        prompts.INPUTS: inputs,
        prompts.OUTPUTS: output,
        prompts.FEEDBACK: prompts.SCORED_FEEDBACK.format(
            score=trace["score"], feedback=trace["feedback"]
        ),
    }


def reflective_dataset(
    traces: Sequence[Trace], components: Sequence[str]
) -> dict[str, list[dict[str, Any]]]:
    """GEPA's reflective dataset: per component, a record per run (failures first)."""
    ordered = sorted(traces, key=lambda t: t["score"])[:_MAX_RECORDS]
    return {name: [_record(trace, name) for trace in ordered] for name in components}


class AimeAdapter(GEPAAdapter[Example, Trace, Trace]):
    """A ``gepa.GEPAAdapter`` whose rollout is one aime run per example.

    Args:
        build: Builds the workflow for a full prompt set (the candidate's texts
            over ``base``), e.g. ``lambda p: build_aime_graph(model, prompts=p)``.
            A prompt set ``resolve_prompts`` refuses (a dropped placeholder, a
            foreign one) scores 0.0 on every example without a run, with the
            reason as feedback, and costs no metric call.
        scorer: ``(example, output_state) -> (score, feedback)``.
        base: The prompts the candidate's components are laid over.
        max_workers: Examples run at once.
        run_example: Runs an example itself (``(prompts, example) -> output state``)
            instead of ``{"goal": ...}`` on the built graph.
    """

    #: GEPA's reflective proposer (with the reflection LM) writes the new texts.
    propose_new_texts = None

    def __init__(
        self,
        build: GraphBuilder,
        scorer: Scorer,
        *,
        base: Mapping[str, str] | None = None,
        max_workers: int = 1,
        run_example: RunExample | None = None,
    ) -> None:
        self.build = build
        self.run_example = run_example
        self.scorer = scorer
        self.base = dict(base or {})
        self.max_workers = max_workers
        self.usage = Usage()
        self.runs = 0
        self._lock = threading.Lock()
        self._known: tuple[dict[str, str], list[Example], list[float]] | None = None

    def known_scores(
        self, candidate: dict[str, str], batch: list[Example], scores: list[float]
    ) -> None:
        """Answer the next plain evaluation of exactly ``candidate`` on ``batch`` with
        ``scores``, without running it: a resumed GEPA scores its seed on the
        validation set again before it loads its saved state, which already holds
        those scores."""
        self._known = (dict(candidate), list(batch), list(scores))

    def rollout(self, run: Callable[[Example], Mapping[str, Any]], example: Example) -> Trace:
        """Run one example with ``run``; a run that raises is a failed run (data)."""
        goal = str(example["goal"])
        try:
            state = run(example)
        except Exception as exc:  # noqa: BLE001 - every failure a run can cause is data
            log.warning("rollout on %r raised %s: %s", goal[:60], type(exc).__name__, exc)
            state = failed_run_state(goal, exc)
        score, feedback = self.scorer(example, state)
        trace = run_trace(state, goal=goal) | {"score": score, "feedback": feedback}
        with self._lock:
            self.usage = self.usage + (state.get("usage") or Usage())
            self.runs += 1
        return trace

    def evaluate(
        self,
        batch: list[Example],
        candidate: dict[str, str],
        capture_traces: bool = False,
    ) -> EvaluationBatch[Trace, Trace]:
        """GEPA's hook: one run per example with ``candidate``'s prompts, scored by the
        metric (prompts that break a template score 0 without a run)."""
        known, self._known = self._known, None
        if known is not None and not capture_traces and known[:2] == (candidate, batch):
            saved = [{"resumed": True, "score": score} for score in known[2]]
            return EvaluationBatch(outputs=saved, scores=known[2], num_metric_calls=0)
        try:
            chosen = resolve_prompts({**self.base, **candidate})
        except ValueError as exc:
            feedback = f"The proposed prompts were refused, so nothing ran: {exc}"
            traces = [
                run_trace(failed_run_state(str(e["goal"]), exc), goal=str(e["goal"]))
                | {"score": 0.0, "feedback": feedback}
                for e in batch
            ]
            return EvaluationBatch(
                outputs=traces,
                scores=[0.0] * len(batch),
                trajectories=traces if capture_traces else None,
                num_metric_calls=0,
            )
        with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
            traces = list(pool.map(partial(self.rollout, self._runner(chosen)), batch))
        return EvaluationBatch(
            outputs=traces,
            scores=[trace["score"] for trace in traces],
            trajectories=traces if capture_traces else None,
        )

    def _runner(self, prompts: Mapping[str, str]) -> Callable[[Example], Mapping[str, Any]]:
        """How each example of a batch runs with ``prompts``."""
        if self.run_example is not None:
            return partial(self.run_example, prompts)
        graph = self.build(prompts)

        def on_graph(example: Example) -> Mapping[str, Any]:
            thread = {"configurable": {"thread_id": f"optimize-{uuid.uuid4().hex}"}}
            return graph.invoke({"goal": str(example["goal"])}, thread)  # type: ignore[no-any-return]

        return on_graph

    def make_reflective_dataset(
        self,
        candidate: dict[str, str],
        eval_batch: EvaluationBatch[Trace, Trace],
        components_to_update: list[str],
    ) -> dict[str, list[dict[str, Any]]]:
        """GEPA's hook: the records :func:`reflective_dataset` makes of the batch's runs."""
        return reflective_dataset(eval_batch.trajectories or [], components_to_update)
