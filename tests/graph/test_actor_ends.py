"""An actor ends its task in the reply that does its last work (issue 34 point 4):
``submit_result`` beside the work calls runs after them, with their outputs in the
result; an empty summary hands back the newest work output."""

from __future__ import annotations

from typing import Any

from tests.conftest import GraphFactory
from tests.scripted import call, plan

from aimegraph import TaskResult

SIX_BY_SEVEN = call("python", code="print(6 * 7)")
BROKEN = call("python", source="print(1)")  # an argument python does not take


def submitting(summary: str = "", status: str = "completed") -> dict[str, Any]:
    return call("submit_result", status=status, summary=summary)


def beside(*calls: dict[str, Any]) -> dict[str, Any]:
    """One reply making ``calls`` together."""
    return {"calls": list(calls)}


def run(scripted_graph: GraphFactory, steps: list[dict[str, Any]]) -> tuple[Any, Any]:
    graph, model = scripted_graph(
        {
            "planner": [plan({"id": "a", "title": "Multiply", "tool_bundles": ["compute"]})],
            "actors": {"a": steps},
        },
        verify="off",
    )
    return graph.invoke({"goal": "What is 6 times 7?"}), model


def test_a_result_submitted_beside_the_work_takes_one_actor_call_and_keeps_its_output(
    scripted_graph: GraphFactory,
) -> None:
    out, model = run(scripted_graph, [beside(SIX_BY_SEVEN, submitting())])
    assert out["tasks"]["a"].result == TaskResult(status="completed", summary="42")
    assert len(model.prompts("actor")) == 1
    assert out["usage"].by_role["actor"].llm_calls == 1


def test_a_summary_written_beside_the_work_is_followed_by_the_output_it_did_not_see(
    scripted_graph: GraphFactory,
) -> None:
    progress = call("update_progress", status="working", message="multiplying")
    out, model = run(scripted_graph, [beside(progress, SIX_BY_SEVEN, submitting("Product:"))])
    assert out["tasks"]["a"].result.summary == "Product:\n\n42"
    assert [u.message for u in out["updates"] if u.task_id == "a"][0] == "multiplying"
    assert len(model.prompts("actor")) == 1


def test_a_result_submitted_beside_a_failed_call_is_refused_and_the_model_hears_why(
    scripted_graph: GraphFactory,
) -> None:
    steps = [beside(BROKEN, submitting("done")), beside(SIX_BY_SEVEN, submitting())]
    out, model = run(scripted_graph, steps)
    assert out["tasks"]["a"].result == TaskResult(status="completed", summary="42")
    second = model.prompts("actor")[1]
    assert "Not submitted: python beside it failed" in second


def test_an_empty_summary_after_the_work_hands_back_the_newest_work_output(
    scripted_graph: GraphFactory,
) -> None:
    progress = call("update_progress", status="done", message="computed")
    out, _ = run(
        scripted_graph, [call("python", code="print(1)"), SIX_BY_SEVEN, progress, submitting()]
    )
    assert out["tasks"]["a"].result == TaskResult(status="completed", summary="42")


def test_an_empty_summary_with_nothing_to_hand_back_is_refused(
    scripted_graph: GraphFactory,
) -> None:
    out, model = run(scripted_graph, [submitting(), submitting("It is 42.")])
    assert out["tasks"]["a"].result == TaskResult(status="completed", summary="It is 42.")
    assert "Not submitted: the summary is empty" in model.prompts("actor")[1]


def test_a_plain_answer_after_the_last_observation_still_ends_the_task(
    scripted_graph: GraphFactory,
) -> None:
    out, model = run(scripted_graph, [SIX_BY_SEVEN, {"text": "6 times 7 is 42."}])
    assert out["tasks"]["a"].result == TaskResult(status="completed", summary="6 times 7 is 42.")
    assert len(model.prompts("actor")) == 2
