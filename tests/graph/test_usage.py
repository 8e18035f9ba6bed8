"""Usage per task and per team member, cached-input and reasoning tokens, cost: read
from each reply's ``usage_metadata``, kept in ``Usage``, streamed with the actors'
events, shown by ``aimegraph show``; the budgets still count the totals."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from tests.conftest import Cli
from tests.scripted import call, plan, spec, submit
from tests.teams.helpers import run_team, team_task

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.models import ScriptedChatModel, load_scenario
from aimegraph.models.calls import usage_of
from aimegraph.state import RoleUsage, Usage, render_timeline, run_timeline

COUNTS = tuple(RoleUsage.model_fields)


class CachingModel(ScriptedChatModel):
    """The scripted model, its replies reporting a prompt-cache hit of 8 tokens and
    2 reasoning tokens, as providers that cache prompts and reason do."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        result = super()._generate(messages, *args, **kwargs)
        message = result.generations[0].message
        assert isinstance(message, AIMessage) and message.usage_metadata is not None
        message.usage_metadata["input_token_details"] = {"cache_read": 8}
        message.usage_metadata["output_token_details"] = {"reasoning": 2}
        return result


def assert_adds_up(usage: Usage) -> None:
    """Every total is the sum of its shares: by role, and by task with the usage spent
    outside tasks (planner, reporter, final verifier)."""
    for name in COUNTS:
        total = getattr(usage, name)
        by_role = sum(getattr(share, name) for share in usage.by_role.values())
        in_tasks = sum(getattr(share, name) for share in usage.by_task.values())
        assert total == pytest.approx(by_role), name
        assert total == pytest.approx(in_tasks + getattr(usage.outside_tasks, name)), name


def two_tasks() -> dict[str, Any]:
    return {
        "planner": [plan(spec("t1", tool_bundles=["compute"]), spec("t2", "t1"))],
        "actors": {
            "t1": [call("calculator", expression="6*7"), submit("42")],
            "t2": [submit("six times seven is 42")],
        },
        "reporter": [{"text": "42"}],
    }


def test_usage_of_reads_cached_input_and_reasoning_tokens_and_prices_them() -> None:
    reply = AIMessage(
        "hi",
        usage_metadata={
            "input_tokens": 1000,
            "output_tokens": 200,
            "total_tokens": 1200,
            "input_token_details": {"cache_read": 600},
            "output_token_details": {"reasoning": 150},
        },
        response_metadata={"model_name": "m"},
    )
    # Cached input at its own rate when the price has a third figure ...
    used = usage_of(reply, "actor", {"m": (2.0, 10.0, 0.5)})
    assert (used.cached_input_tokens, used.reasoning_tokens) == (600, 150)
    assert used.cost_usd == pytest.approx((400 * 2.0 + 600 * 0.5 + 200 * 10.0) / 1e6)
    assert used.by_role["actor"].cached_input_tokens == 600
    # ... else at the input rate; an unpriced model costs nothing.
    assert usage_of(reply, "actor", {"m": (2.0, 10.0)}).cost_usd == pytest.approx(4000 / 1e6)
    assert usage_of(reply, "actor", {"other": (2.0, 10.0)}).cost_usd == 0.0


def test_a_run_splits_its_usage_by_task_with_cached_and_reasoning_tokens_and_cost(
    workspace: Path,
) -> None:
    model = CachingModel.from_dict(two_tasks())
    prices = {"scripted:inline": (1.0, 4.0, 0.25)}
    graph = build_aime_graph(model, config=AimeConfig(workspace=workspace, prices=prices))
    events, values = [], {}
    chunks = graph.stream({"goal": "Multiply"}, stream_mode=["custom", "values"], subgraphs=True)
    for namespace, mode, payload in chunks:
        if mode == "custom":
            events.append(payload)
        elif not namespace:
            values = payload
    usage: Usage = values["usage"]

    assert set(usage.by_task) == {"t1", "t2"}
    # The calculator is a tool call; the actors' submit_result calls are not.
    assert usage.by_task["t1"].llm_calls == 2 and usage.by_task["t1"].tool_calls == 1
    assert usage.by_task["t2"].llm_calls == 1 and usage.by_task["t2"].tool_calls == 0
    assert sum(t.llm_calls for t in usage.by_task.values()) == usage.by_role["actor"].llm_calls
    assert usage.cached_input_tokens == 8 * usage.llm_calls
    assert usage.reasoning_tokens == 2 * usage.llm_calls
    assert usage.by_task["t1"].cached_input_tokens == 16
    t1 = usage.by_task["t1"]
    priced = ((t1.input_tokens - 16) * 1.0 + 16 * 0.25 + t1.output_tokens * 4.0) / 1e6
    assert t1.cost_usd == pytest.approx(priced)
    assert usage.cost_usd == pytest.approx(sum(r.cost_usd for r in usage.by_role.values()))
    # The answer's event carries the run's usage as it stood (the verifier comes after).
    (answered,) = (p["usage"] for p in events if p["type"] == "final_answer")
    assert answered.llm_calls == usage.llm_calls - 1

    # Each actor's completed event carries the attempt's usage.
    done = {p["task_id"]: p["usage"] for p in events if p.get("event") == "completed"}
    assert done["t1"].llm_calls == 2 and done["t1"].tool_calls == 1
    assert done["t2"].llm_calls == 1


def test_the_budgets_count_the_totals_not_a_share(workspace: Path) -> None:
    model = ScriptedChatModel.from_dict(two_tasks())
    # Room for the plan and t1's two steps: t2 never starts.
    graph = build_aime_graph(model, config=AimeConfig(workspace=workspace, max_llm_calls=3))
    out = graph.invoke({"goal": "Multiply"})
    assert out["status"] == "budget_exhausted"
    assert out["usage"].llm_calls == 3 and set(out["usage"].by_task) == {"t1"}


def test_team_members_usage_is_kept_per_member_and_per_task(workspace: Path) -> None:
    scenario = {
        "actors": {
            "t1/writer": [call("update_progress", status="drafting", message="x"), submit("D")],
            "t1/reviewer": [submit("Checked.")],
        }
    }
    out, _ = run_team(workspace, team_task("sequential", "writer", "reviewer"), scenario)
    usage = out["usage"]
    assert usage.by_member["writer"].llm_calls == 2
    assert usage.by_member["reviewer"].llm_calls == 1
    assert usage.by_task["t1"].llm_calls == 3 == usage.llm_calls
    # The team task's share is its members' shares added up.
    assert sum(usage.by_member.values(), RoleUsage()) == usage.by_task["t1"]
    assert usage.tool_calls == 0  # update_progress and submit_result are reports


def test_usage_adds_up_every_breakdown() -> None:
    one = Usage.of_call("actor", input_tokens=10, output_tokens=2).for_task("t1", "ann")
    two = Usage.of_call("actor", input_tokens=5, output_tokens=1).for_task("t2")
    total = one + two + one
    assert total.by_task == {
        "t1": RoleUsage(llm_calls=2, input_tokens=20, output_tokens=4),
        "t2": RoleUsage(llm_calls=1, input_tokens=5, output_tokens=1),
    }
    assert total.by_member == {"ann": RoleUsage(llm_calls=2, input_tokens=20, output_tokens=4)}
    assert total.by_role["actor"].llm_calls == 3 and total.total_tokens == 30


def test_the_demos_usage_adds_up_and_counts_the_tool_calls_that_ran(workspace: Path) -> None:
    for item in (resources.files("aimegraph.demo") / "data").iterdir():
        if item.is_file():
            (workspace / item.name).write_bytes(item.read_bytes())
    graph = build_aime_graph("scripted:demo", config=AimeConfig(workspace=workspace))
    out = graph.invoke({"goal": load_scenario("demo").goal})
    assert out["status"] == "succeeded"
    usage: Usage = out["usage"]
    assert_adds_up(usage)
    # One definition of a tool call: the demo's are those its tasks' timelines time.
    assert usage.tool_calls == sum(len(task.tool_spans) for task in out["tasks"].values()) > 0
    for task_id, task in out["tasks"].items():
        assert usage.by_task[task_id].tool_calls == len(task.tool_spans)
    outside = sum((usage.by_role[r] for r in ("planner", "reporter", "verifier")), RoleUsage())
    assert usage.outside_tasks == outside and outside.llm_calls > 0


SALES_REPORT: dict[str, Any] = {
    "planner": [plan(spec("a", tool_bundles=["files"]))],
    "actors": {"a": [call("write_file", path="report.md", content="Total: 1250\n"), submit("ok")]},
    "reporter": [{"text": "report.md gives the total: 1250."}],
    "verifier": [
        call("read_lines", path="report.md"),
        call("list_dir"),
        call("submit_verdict", passed=True, reasoning="report.md:1 says 1250."),
    ],
}


def test_the_inspecting_verifiers_reads_are_its_tool_calls_and_add_up(
    workspace: Path,
) -> None:
    model = ScriptedChatModel.from_dict(SALES_REPORT)
    config = AimeConfig(workspace=workspace, verifier_inspects="always")
    out = build_aime_graph(model, config=config).invoke({"goal": "Write report.md"})
    assert out["status"] == "succeeded"
    usage: Usage = out["usage"]
    assert_adds_up(usage)
    # Two reads; its submit_verdict is its answer, as the actor's submit_result is.
    assert usage.by_role["verifier"].tool_calls == 2 == usage.outside_tasks.tool_calls
    assert usage.by_task["a"].tool_calls == 1 and usage.tool_calls == 3


def test_a_refused_call_counts_and_the_timeline_says_how_many_ran(workspace: Path) -> None:
    scenario = {
        **two_tasks(),
        "actors": {
            "t1": [call("shell", command="ls"), call("calculator", expression="6*7"), submit("")],
            "t2": [submit("42")],
        },
    }
    model = ScriptedChatModel.from_dict(scenario)
    out = build_aime_graph(model, config=AimeConfig(workspace=workspace)).invoke({"goal": "x"})
    assert out["status"] == "succeeded"
    assert out["usage"].by_task["t1"].tool_calls == 2  # shell is not t1's: refused
    t1 = next(bar for bar in run_timeline(out).bars if bar.name == "t1")
    assert (t1.tool_calls, len(t1.tools)) == (2, 1)
    (line,) = [row for row in render_timeline(run_timeline(out)).splitlines() if "t1" in row[:3]]
    assert ", 2 tool calls (1 timed: " in line


def test_show_and_its_timeline_count_a_tasks_tool_calls_alike(cli: Cli) -> None:
    code, _ = cli.run("counted")
    assert code == 0
    code, text = cli("show", "counted", "--timeline")
    assert code == 0
    usage_part, chart = text.split("timeline (seconds since the run started):")
    shares = {
        line.split(":")[0].strip(): line
        for line in usage_part.splitlines()
        if line.startswith("    t")
    }
    bars = {line.split(" (")[0]: line for line in chart.splitlines() if " |" in line}
    bars = {name: line for name, line in bars.items() if name.startswith("t")}
    assert set(shares) == set(bars) == {"t1", "t2"}

    def tool_calls(line: str) -> int:
        found = re.search(r"(\d+) tool calls?\b", line)
        return int(found.group(1)) if found else 0

    # t1 calls the calculator (and submits): one tool call, in both; t2 only submits.
    assert tool_calls(shares["t1"]) == tool_calls(bars["t1"]) == 1
    assert tool_calls(shares["t2"]) == tool_calls(bars["t2"]) == 0
    assert "    outside tasks: " in usage_part and "0 tool calls" in usage_part


def test_show_prints_the_usage_by_task_and_the_earlier_runs(cli: Cli) -> None:
    code, _ = cli.run("shown")
    assert code == 0
    code, text = cli("show", "shown")
    assert "  by task:\n    t1: 2 LLM calls" in text and "    t2: 1 LLM call," in text
    code, shown = cli.json("show", "shown")
    assert shown["usage"]["by_task"]["t1"]["tool_calls"] == 1
    assert shown["runs"] == [] and shown["thread_usage"] is None


def test_show_prints_a_python_threads_earlier_runs_and_the_thread_total(
    cli: Cli, workspace: Path
) -> None:
    from aimegraph.checkpoints import open_checkpointer, thread_config

    with open_checkpointer(cli.url) as saver:
        graph = build_aime_graph(
            ScriptedChatModel.from_dict(two_tasks()),
            config=AimeConfig(workspace=workspace),
            checkpointer=saver,
        )
        graph.invoke({"goal": "Multiply"}, thread_config("turns"))
        graph.invoke({"goal": "Multiply again"}, thread_config("turns"))
    code, text = cli("show", "turns")
    assert code == 0
    assert "  earlier run 1: succeeded, 6 LLM calls" in text and ": Multiply\n" in text
    assert "  thread total: 12 LLM calls" in text
    code, shown = cli.json("show", "turns")
    assert shown["thread_usage"]["llm_calls"] == 12 and shown["runs"][0]["goal"] == "Multiply"
