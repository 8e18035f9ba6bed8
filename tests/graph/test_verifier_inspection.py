"""The verifier looks at the work (issue 27 point 1): with files written by the run,
it is a small agent with read-only workspace tools and a step budget, never sees the
plan, and its verdict cites the file and line or the recomputed value."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import GraphFactory
from tests.scripted import call, plan, spec, submit

from aimegraph import AimeConfig, build_verifier_graph
from aimegraph.models import ScriptedChatModel

SALES = "region,amount\nnorth,500\nsouth,750\n"
REPORT = "# Sales report\nTotal: 1300\nNorth leads.\n"  # the total is 1250
RECOMPUTE = "import csv\nprint(sum(int(r['amount']) for r in csv.DictReader(open('sales.csv'))))"

WRITE_REPORT = {
    "planner": [plan(spec("a", tool_bundles=["files"], title="Write the report"))],
    "actors": {
        "a": [
            call("write_file", path="report.md", content=REPORT),
            submit("report.md written; its total is right."),
        ]
    },
    "reporter": [{"text": "report.md gives the correct total of the sales."}],
}

LOOKS_AND_REJECTS = [
    call("read_lines", path="report.md"),
    call("python", code=RECOMPUTE),
    call(
        "submit_verdict",
        passed=False,
        reasoning="The report's total is wrong.",
        issues=["report.md:2 says 1300, the data sums to {last_tool_output}"],
        evidence=["report.md:2: Total: 1300", "recomputed: sum of amount = {last_tool_output}"],
    ),
]


@pytest.fixture
def sales(workspace: Path) -> Path:
    (workspace / "sales.csv").write_text(SALES)
    return workspace


def verifier_prompts(model: ScriptedChatModel) -> list[str]:
    return model.prompts("verifier")


def test_a_report_with_a_wrong_figure_is_rejected_citing_the_file(
    scripted_graph: GraphFactory, sales: Path
) -> None:
    graph, model = scripted_graph({**WRITE_REPORT, "verifier": LOOKS_AND_REJECTS}, max_replans=0)
    out = graph.invoke({"goal": "Write report.md with the total of sales.csv"})
    assert out["status"] == "rejected"
    verdict = out["verdict"]
    assert not verdict.passed
    # The recomputed value is what python printed from the data: the tools ran.
    assert verdict.evidence == ["report.md:2: Total: 1300", "recomputed: sum of amount = 1250"]
    assert verdict.issues == ["report.md:2 says 1300, the data sums to 1250"]
    first, after_read, after_python = verifier_prompts(model)
    # The file the run wrote is listed; the input it was given is not.
    listed = first.split("Files the run wrote or changed in the workspace:\n")[1].split("\n\n")[0]
    assert listed == "- report.md"
    assert "    2| Total: 1300" in after_read
    assert "1250" in after_python
    # Three verifier calls, counted in the run's usage.
    assert out["usage"].by_role["verifier"].llm_calls == 3


def test_the_inspecting_verifier_never_sees_the_plan(
    scripted_graph: GraphFactory, sales: Path
) -> None:
    graph, model = scripted_graph({**WRITE_REPORT, "verifier": LOOKS_AND_REJECTS}, max_replans=0)
    graph.invoke({"goal": "Write report.md with the total of sales.csv"})
    seen = "\n".join(verifier_prompts(model))
    assert "Write the report" not in seen and "- [x]" not in seen  # task title, checklist
    assert "report.md written" not in seen  # the actor's own summary


@pytest.mark.parametrize(
    ("setting", "writes", "inspected"),
    [
        ("auto", True, True),
        ("auto", False, False),
        ("always", False, True),
        ("never", True, False),
    ],
)
def test_when_the_verifier_inspects(
    scripted_graph: GraphFactory, sales: Path, setting: str, writes: bool, inspected: bool
) -> None:
    scenario = WRITE_REPORT if writes else {**WRITE_REPORT, "actors": {"a": [submit("1250")]}}
    graph, model = scripted_graph(scenario, verifier_inspects=setting)
    out = graph.invoke({"goal": "the total"})
    assert out["status"] == "succeeded"
    (prompt,) = verifier_prompts(model)
    assert ("Files the run wrote" in prompt) == inspected


def test_the_step_budget_ends_the_looking_and_the_verdict_cites_what_was_seen(
    scripted_graph: GraphFactory, sales: Path
) -> None:
    looking = [call("read_lines", path="report.md"), call("list_dir")]
    verdict = {"passed": False, "reasoning": "wrong total", "issues": ["total"]}
    graph, model = scripted_graph(
        {**WRITE_REPORT, "verifier": [*looking, verdict]}, max_replans=0, verifier_max_steps=2
    )
    out = graph.invoke({"goal": "the total"})
    prompts = verifier_prompts(model)
    assert len(prompts) == 3  # two tool steps, then the verdict asked for
    assert "What you looked at so far" in prompts[-1] and "Total: 1300" in prompts[-1]
    # The model cited nothing: the verdict cites what it read.
    assert out["verdict"].evidence == ["report.md:1-3 (read)"]


def test_a_verifier_failing_to_give_a_verdict_fails_the_run_with_the_reason(
    scripted_graph: GraphFactory, sales: Path
) -> None:
    graph, _ = scripted_graph(
        {**WRITE_REPORT, "verifier": [call("read_lines", path="report.md"), {"error": "fatal"}]}
    )
    out = graph.invoke({"goal": "the total"})
    assert out["status"] == "failed" and "the verifier gave no verdict" in out["reason"]


def test_a_tool_error_is_the_verifiers_observation(
    scripted_graph: GraphFactory, sales: Path
) -> None:
    verifier = [call("read_lines", path="../../etc/passwd"), {"passed": True, "reasoning": "ok"}]
    graph, model = scripted_graph({**WRITE_REPORT, "verifier": verifier})
    assert graph.invoke({"goal": "g"})["status"] == "succeeded"
    assert "outside the workspace" in verifier_prompts(model)[1]


def test_the_task_check_inspects_the_tasks_files_too(
    scripted_graph: GraphFactory, sales: Path
) -> None:
    checks = {
        "a": [
            call("read_lines", path="report.md", start=2, count=1),
            call(
                "submit_verdict",
                passed=False,
                reasoning="wrong total",
                issues=["total"],
                evidence=["{last_tool_output}"],
            ),
        ]
    }
    graph, model = scripted_graph(
        {**WRITE_REPORT, "task_checks": checks}, verify="tasks", max_replans=0, task_retries=0
    )
    out = graph.invoke({"goal": "the total"})
    result = out["tasks"]["a"].result
    assert result.status == "failed"
    assert "Evidence: 2| Total: 1300" in result.summary


@pytest.mark.parametrize("tool_calling", ["native", "json"])
def test_the_verifier_graph_on_its_own_inspects_under_invoke_and_ainvoke(
    sales: Path, tool_calling: str
) -> None:
    (sales / "report.md").write_text(REPORT)
    model = ScriptedChatModel.from_dict({"planner": [plan()], "verifier": LOOKS_AND_REJECTS})
    graph = build_verifier_graph(
        model, config=AimeConfig(workspace=sales, tool_calling=tool_calling, max_replans=0)
    )
    inputs: dict[str, Any] = {"goal": "report the total", "final_answer": "see report.md"}
    out = graph.invoke(inputs)
    assert out["status"] == "rejected"
    assert out["verdict"].evidence[1] == "recomputed: sum of amount = 1250"
    model.reset()
    out = asyncio.run(graph.ainvoke(inputs))
    assert out["verdict"].evidence[1] == "recomputed: sum of amount = 1250"


async def test_under_ainvoke_nothing_blocks_the_event_loop(
    scripted_graph: GraphFactory, sales: Path
) -> None:
    # LangGraph Server refuses blocking calls on its event loop (blockbuster): listing
    # the changed files, reading and recomputing run off the loop.
    blockbuster = pytest.importorskip("blockbuster")
    graph, _ = scripted_graph({**WRITE_REPORT, "verifier": LOOKS_AND_REJECTS}, max_replans=0)
    with blockbuster.blockbuster_ctx():
        out = await graph.ainvoke({"goal": "the total"})
    assert out["status"] == "rejected" and out["verdict"].evidence
