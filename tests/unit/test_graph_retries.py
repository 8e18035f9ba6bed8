"""Retries in the graph: LangGraph's ``RetryPolicy`` on every model-calling node.

Models that fail transiently a given number of times per role: below the attempt
limit the node is re-run (not the task), above it the failure becomes data (a failed
run, a failed task, a reporter falling back to the results); permanent errors are not
retried; a real OpenAI client whose server keeps failing is retried the same way.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import openai
import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import Field, PrivateAttr
from tests.canned_models import StatusError, openai_errors
from tests.conftest import GraphFactory
from tests.fake_openai import FakeOpenAI

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.models import ScriptedChatModel
from aimegraph.models.calls import LLM_RETRY_POLICY
from aimegraph.models.resolve import resolve_model

# --------------------------------------------------------------------------- graph retries

_ROLE = re.compile(r"^#\s*Role:\s*(\w+)", re.MULTILINE)


class Flaky(ScriptedChatModel):
    """The scripted model, but the first ``failures[role]`` calls of a role raise ``error``."""

    failures: dict[str, int] = Field(default_factory=dict)
    error: Any = None
    _failed: dict[str, int] = PrivateAttr(default_factory=dict)
    _flaky_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def failed(self, role: str) -> int:
        return self._failed.get(role, 0)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        first = messages[0].content if messages else ""
        match = _ROLE.search(first if isinstance(first, str) else "")
        role = match.group(1) if match else "reporter"
        with self._flaky_lock:
            if self._failed.get(role, 0) < self.failures.get(role, 0):
                self._failed[role] = self._failed.get(role, 0) + 1
                raise self.error or ConnectionResetError(f"{role}: connection reset by peer")
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def flaky_graph(workspace: Any, failures: dict[str, int], error: Any = None, **config: Any) -> Any:
    model = Flaky(
        scenario=ScriptedChatModel.from_dict(
            {
                "planner": [
                    {"rationale": "r", "tasks": [{"id": "a", "title": "Task a"}], "drop": []}
                ],
                "actors": {
                    "a": [
                        {
                            "tool": "submit_result",
                            "args": {"status": "completed", "summary": "a ok"},
                        }
                    ]
                },
                "reporter": [{"text": "Answer: {all_results}"}],
            }
        ).scenario,
        failures=failures,
        error=error,
    )
    cfg = AimeConfig(workspace=workspace, **config)
    return build_aime_graph(model, config=cfg), model


ATTEMPTS = LLM_RETRY_POLICY.max_attempts


@pytest.mark.parametrize("role", ["planner", "actor", "reporter", "verifier"])
@pytest.mark.parametrize("mode", ["native", "json"])
def test_transient_failures_below_the_attempt_limit_are_retried(
    fast_retries: None, workspace: Any, role: str, mode: str
) -> None:
    graph, model = flaky_graph(workspace, {role: ATTEMPTS - 1}, tool_calling=mode)
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded", out.get("reason")
    assert model.failed(role) == ATTEMPTS - 1
    # The node was re-run, not the task: one attempt, one counted call per role.
    assert out["tasks"]["a"].attempts == 1 and out["tasks"]["a"].result.summary == "a ok"
    assert out["usage"].by_role[role].llm_calls == 1
    assert out["final_answer"] == "Answer: a ok"


def test_retries_use_the_real_backoff(workspace: Any) -> None:
    # One retry with the engine's own policy: the wait is between 1 and 2 seconds.
    graph, model = flaky_graph(workspace, {"planner": 1})
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded" and model.failed("planner") == 1


def test_openai_rate_limits_are_retried(fast_retries: None, workspace: Any) -> None:
    rate_limit = openai_errors()[0].values[0]
    assert isinstance(rate_limit, openai.RateLimitError)
    graph, model = flaky_graph(workspace, {"actor": ATTEMPTS - 1}, error=rate_limit)
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded" and model.failed("actor") == ATTEMPTS - 1


def test_a_planner_failing_more_often_than_its_attempts_fails_the_run_as_data(
    fast_retries: None, workspace: Any
) -> None:
    graph, model = flaky_graph(workspace, {"planner": 99}, error=TimeoutError("no answer"))
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "failed"
    assert "model call failed: TimeoutError: no answer" in out["reason"]
    assert model.failed("planner") == ATTEMPTS  # one call per node attempt, then data
    assert (
        isinstance(out["final_answer"], str) and "stopped before finishing" in out["final_answer"]
    )


def test_an_actor_failing_more_often_than_its_attempts_fails_the_task_as_data(
    fast_retries: None, workspace: Any
) -> None:
    graph, model = flaky_graph(workspace, {"actor": 99}, task_retries=1, max_replans=0)
    out = graph.invoke({"goal": "g"})
    task = out["tasks"]["a"]
    assert task.status == "failed" and task.attempts == 2  # the task retry ran too
    assert task.result.summary.startswith("model call failed: ConnectionResetError")
    assert model.failed("actor") == 2 * ATTEMPTS
    assert out["status"] == "budget_exhausted" and "no replans left" in out["reason"]


def test_a_verifier_failing_for_good_fails_the_run_as_data(
    fast_retries: None, workspace: Any
) -> None:
    graph, _ = flaky_graph(workspace, {"verifier": 99})
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "failed" and "the verifier gave no verdict" in out["reason"]
    assert out["final_answer"] == "Answer: a ok"


def test_a_reporter_failing_for_good_falls_back_to_the_results(
    fast_retries: None, workspace: Any
) -> None:
    graph, _ = flaky_graph(workspace, {"reporter": 99}, verify="off")
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded"
    assert "a ok" in out["final_answer"] and "reporter model failed" in out["reason"]


def test_a_permanent_error_is_not_retried(fast_retries: None, workspace: Any) -> None:
    graph, model = flaky_graph(workspace, {"planner": 99}, error=StatusError(400))
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "failed" and "HTTP 400" in out["reason"]
    assert model.failed("planner") == 1


def test_scripted_transient_steps_are_retried(
    fast_retries: None, scripted_graph: GraphFactory
) -> None:
    graph, _ = scripted_graph(
        {
            "planner": [
                {"error": "timeout", "message": "read timed out"},
                {"rationale": "r", "tasks": [{"id": "a", "title": "A"}], "drop": []},
            ]
        },
        tool_calling="json",
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded" and out["usage"].by_role["planner"].llm_calls == 1


# --------------------------------------------------------------------------- a real client


def test_graph_retries_a_planner_whose_server_keeps_failing(
    fast_retries: None, fake_openai: FakeOpenAI, scripted_graph: GraphFactory, workspace: Any
) -> None:
    # Client retries off: each 503 reaches the graph, whose RetryPolicy re-runs the node.
    plan_json = json.dumps(
        {"rationale": "r", "tasks": [{"id": "a", "title": "Task a"}], "drop": []}
    )
    fake_openai.script = [(503, "overloaded")] * (ATTEMPTS - 1) + [(200, plan_json)]
    planner = resolve_model("openai:fake", max_retries=0)
    rest = ScriptedChatModel.from_dict({"planner": [{"rationale": "unused", "tasks": []}]})
    cfg = AimeConfig(workspace=workspace, tool_calling="json")
    graph = build_aime_graph(rest, models={"planner": planner}, config=cfg)
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded", out.get("reason")
    assert fake_openai.requests == ATTEMPTS
    assert out["usage"].by_role["planner"].llm_calls == 1
    assert out["usage"].by_role["planner"].input_tokens == 50

    # More failures than attempts: the run fails, as data.
    fake_openai.requests = 0
    fake_openai.script = [(503, "overloaded")]
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "failed" and "503" in out["reason"]
    assert fake_openai.requests == ATTEMPTS
