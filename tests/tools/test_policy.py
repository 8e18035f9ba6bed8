"""Issue 25 point 6: tools marked retryable are retried on transient failures with the
models' backoff, a bounded number of times; a tool's own time limit replaces
``tool_timeout_s``."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from langchain_core.tools import StructuredTool, tool

from aimegraph.tools import ToolRetry, with_policy
from aimegraph.tools.policy import timeout_of
from tests.conftest import GraphFactory
from tests.scripted import call, plan, submit

FAST = {"initial_interval": 0.01}


def one_task(tool_call: dict[str, Any]) -> dict[str, Any]:
    return {
        "planner": [plan({"id": "a", "title": "Fetch", "tool_bundles": ["custom"]})],
        "actors": {"a": [tool_call, submit("{last_tool_output}")]},
    }


def flaky(failures: list[BaseException]) -> tuple[StructuredTool, list[int]]:
    """A tool raising ``failures`` in turn, then answering; and its attempt count."""
    attempts: list[int] = []

    def fetch(url: str) -> str:
        """Fetches a URL."""
        attempts.append(1)
        if len(attempts) <= len(failures):
            raise failures[len(attempts) - 1]
        return f"page at {url}"

    return StructuredTool.from_function(fetch), attempts


def status_error(code: int) -> httpx.HTTPStatusError:
    request = httpx.Request("GET", "http://example.test/")
    return httpx.HTTPStatusError(
        f"{code}", request=request, response=httpx.Response(code, request=request)
    )


def test_transient_failures_are_retried_until_the_tool_answers(
    scripted_graph: GraphFactory,
) -> None:
    fetch, attempts = flaky([ConnectionError("reset"), status_error(503)])
    retried = with_policy(fetch, retry=ToolRetry(**FAST))
    graph, _ = scripted_graph(one_task(call("fetch", url="u")), tools=[retried])
    assert graph.invoke({"goal": "g"})["tasks"]["a"].result.summary == "page at u"
    assert len(attempts) == 3


def test_retries_are_bounded_and_the_last_error_is_the_observation(
    scripted_graph: GraphFactory,
) -> None:
    fetch, attempts = flaky([status_error(503)] * 5)
    retried = with_policy(fetch, retry=ToolRetry(max_attempts=2, **FAST))
    graph, model = scripted_graph(one_task(call("fetch", url="u")), tools=[retried])
    summary = graph.invoke({"goal": "g"})["tasks"]["a"].result.summary
    assert len(attempts) == 2
    assert "the tool raised HTTPStatusError: 503" in summary


def test_other_failures_and_unlisted_statuses_are_not_retried() -> None:
    rule = ToolRetry(on=(TimeoutError,), status_codes=(429,))
    assert rule.is_transient(TimeoutError())
    assert rule.is_transient(status_error(429))
    assert not rule.is_transient(status_error(503))
    assert not rule.is_transient(ValueError("bad input"))
    # An error raised from a transient one is transient (a wrapper's message).
    try:
        try:
            raise TimeoutError("slow")
        except TimeoutError as exc:
            raise RuntimeError("fetch failed") from exc
    except RuntimeError as wrapped:
        assert rule.is_transient(wrapped)
    fetch, attempts = flaky([ValueError("bad input")])
    with pytest.raises(ValueError):
        with_policy(fetch, retry=ToolRetry(**FAST)).invoke({"url": "u"})
    assert len(attempts) == 1


async def test_async_tools_are_retried_too() -> None:
    attempts: list[int] = []

    @tool
    async def lookup(key: str) -> str:
        """Looks a key up."""
        attempts.append(1)
        if len(attempts) < 3:
            raise httpx.ConnectError("refused")
        return f"value of {key}"

    retried = with_policy(lookup, retry=ToolRetry(**FAST))
    assert await retried.ainvoke({"key": "k"}) == "value of k"
    assert len(attempts) == 3


def test_a_tools_own_timeout_replaces_tool_timeout_s(scripted_graph: GraphFactory) -> None:
    @tool
    def slow(seconds: float) -> str:
        """Sleeps, then answers."""
        time.sleep(seconds)
        return "finally"

    patient = with_policy(slow, timeout_s=30)
    hasty = with_policy(slow, timeout_s=0.2).model_copy(update={"name": "hasty"})
    assert timeout_of(patient, 5) == 30 and timeout_of(slow, 5) == 5
    scenario = {
        "planner": [plan({"id": "a", "title": "Wait", "tool_bundles": ["custom"]})],
        "actors": {
            "a": [
                call("slow", seconds=0.5),
                call("hasty", seconds=5),
                submit("{last_tool_output}"),
            ]
        },
    }
    graph, model = scripted_graph(scenario, tools=[patient, hasty], tool_timeout_s=0.3)
    summary = graph.invoke({"goal": "g"})["tasks"]["a"].result.summary
    assert "hasty did not finish within 0.2 s" in summary
    prompt = [p for p in model.prompts("actor") if "hasty did not finish" in p][-1]
    assert "finally" in prompt  # slow ran 0.5 s under its own 30 s, past tool_timeout_s


async def test_a_tools_own_timeout_cancels_an_async_tool(scripted_graph: GraphFactory) -> None:
    @tool
    async def hang() -> str:
        """Never answers."""
        await asyncio.sleep(3600)
        return "never"

    graph, _ = scripted_graph(
        one_task(call("hang")), tools=[with_policy(hang, timeout_s=0.2)], tool_timeout_s=60
    )
    out = await graph.ainvoke({"goal": "g"})
    assert "hang did not finish within 0.2 s (cancelled)" in out["tasks"]["a"].result.summary


def test_retry_needs_a_function_tool() -> None:
    from langchain_core.tools import BaseTool

    class Custom(BaseTool):
        name: str = "custom"
        description: str = "A tool of its own class."

        def _run(self) -> str:
            return "ran"

    with pytest.raises(TypeError, match="retry needs a function tool"):
        with_policy(Custom(), retry=True)
    assert timeout_of(with_policy(Custom(), timeout_s=3), 60) == 3
