"""The aimegraph oracle ends each task in the reply that does its last work, where a
real model could end it there (issue 34 point 4); its planner names bundles from the
task, not from the calls it will make (point 7)."""

from __future__ import annotations

from aimegraph.eval import load_suite
from aimegraph.eval.oracle import aime_scenario, stage_steps
from aimegraph.eval.suite_parts import OracleStage

READ = {"tool": "read_file", "args": {"path": "data.csv"}}
SUM = {"tool": "python", "args": {"code": "print(7)"}}
WRITE = {"tool": "write_file", "args": {"path": "out.txt", "content": "{stage:sum}"}}


def _submit(summary: str) -> dict[str, object]:
    return {"tool": "submit_result", "args": {"status": "completed", "summary": summary}}


def test_a_result_that_is_the_last_output_is_submitted_beside_the_last_call() -> None:
    stage = OracleStage(id="sum", title="Sum", calls=[READ, SUM])
    assert stage_steps(stage) == [READ, {"calls": [SUM, _submit("")]}]


def test_a_result_the_caller_knows_before_the_write_answers_is_submitted_beside_it() -> None:
    stage = OracleStage(id="w", title="Write", calls=[WRITE], result="out.txt written.")
    written = {"tool": "write_file", "args": {"path": "out.txt", "content": "{dep:sum}"}}
    assert stage_steps(stage) == [{"calls": [written, _submit("out.txt written.")]}]


def test_a_result_that_needs_the_output_is_a_plain_answer_once_it_is_read() -> None:
    stage = OracleStage(id="look", title="Look", calls=[READ], result="data.csv: two columns.")
    assert stage_steps(stage) == [READ, {"text": "data.csv: two columns."}]
    around = OracleStage(id="say", title="Say", calls=[SUM], result="The sum is {last_tool_output}")
    assert stage_steps(around) == [SUM, {"text": "The sum is {last_tool_output}"}]


def _actor_tasks(scenario: dict[str, object]) -> list[dict[str, object]]:
    plans = scenario["planner"]
    assert isinstance(plans, list)
    return [t for plan in plans for t in plan["tasks"] if "call" not in t]


def test_every_actor_of_a_task_gets_the_bundles_the_whole_task_needs() -> None:
    task = load_suite("bundled").task("long-incident-report")
    actors = _actor_tasks(aime_scenario(task))
    # The planner reads the goal, not the oracle's calls: no stage-by-stage choice.
    assert actors and all(t["tool_bundles"] == ["compute", "files"] for t in actors)


def test_tool_steps_off_gives_every_stage_to_an_actor() -> None:
    task = load_suite("bundled").task("sales-total-revenue")
    assert _actor_tasks(aime_scenario(task)) == []
    played = aime_scenario(task, actors_only=True)
    assert [t["id"] for t in _actor_tasks(played)] == list(played["actors"])
    assert _actor_tasks(played)


def test_the_twin_binds_every_actor_the_bundles_of_the_loops_tools() -> None:
    task = load_suite("bundled").task("long-incident-report")
    actors = _actor_tasks(aime_scenario(task, every_bundle=True))
    assert actors and all(t["tool_bundles"] == ["compute", "files"] for t in actors)
    one_bundle = load_suite("bundled").task("discount-chain")
    actors = _actor_tasks(aime_scenario(one_bundle, every_bundle=True))
    assert actors and all(t["tool_bundles"] == ["compute", "files"] for t in actors)
