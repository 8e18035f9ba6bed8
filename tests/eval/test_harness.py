"""The eval harness against scripted oracles that solve known subsets: the reported
pass@k, pass^k, token and cost figures are checked against numbers worked out by
hand, not just produced; resuming never reruns a finished rollout; failures of
every kind end as records."""

from __future__ import annotations

import inspect
import io
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages.ai import UsageMetadata
from rich.console import Console

from aimegraph import build_aime_graph
from aimegraph.eval import OracleModels, SystemSpec, evaluate, load_suite
from aimegraph.eval.harness import RESULTS
from aimegraph.eval.oracle import UNSOLVED_ANSWER
from aimegraph.eval.suite import Budget
from aimegraph.models.offline.scripted import ScriptedChatModel
from tests.eval.helpers import AIME_CALLS, REACT_CALLS, THREE_TASKS, write_suite

pytest.importorskip("langchain.agents", reason="create_agent needs the [eval] extra")

# Every oracle call reports these tokens; the price table makes each call cost
# (60 fresh input x $1 + 40 cached x $0.5 + 10 output x $2) per million = $0.0001.
FIXED = UsageMetadata(
    input_tokens=100,
    output_tokens=10,
    total_tokens=110,
    input_token_details={"cache_read": 40},
    output_token_details={"reasoning": 4},
)
PRICES = {"oracle": (1.0, 2.0, 0.5)}
CALL_COST = 0.0001


def _solves(task_id: str, rollout: int) -> bool:
    """Task one always, two in rollouts 0 and 2 of 3, three never."""
    return task_id == "one" or (task_id == "two" and rollout in (0, 2))


@pytest.fixture
def suite_path(tmp_path: Path) -> Path:
    return write_suite(tmp_path / "suite", THREE_TASKS)


def test_pass_at_k_tokens_and_cost_are_exact(suite_path: Path, tmp_path: Path) -> None:
    result = evaluate(
        suite_path,
        model=OracleModels(solve=_solves, usage=FIXED),
        k=3,
        out=tmp_path / "out",
        prices=PRICES,
        concurrency=3,
    )
    by_name = {s["name"]: s for s in result.summary["systems"]}
    for name, calls in (("create_agent", REACT_CALLS), ("aimegraph", AIME_CALLS)):
        system = by_name[name]
        assert system["rollouts"] == 9 and system["tasks"] == 3
        assert system["solved"] == 5
        assert system["pass_at_1"] == pytest.approx((1 + 2 / 3 + 0) / 3)
        assert system["pass_at_k"] == pytest.approx((1 + 1 + 0) / 3)
        assert system["pass_hat_k"] == pytest.approx((1 + 0 + 0) / 3)
        total_calls = 3 * sum(calls.values())
        per = system["per_rollout"]
        assert per["llm_calls"] == pytest.approx(total_calls / 9)
        assert per["input_tokens"] == pytest.approx(100 * total_calls / 9)
        assert per["cached_input_tokens"] == pytest.approx(40 * total_calls / 9)
        assert per["output_tokens"] == pytest.approx(10 * total_calls / 9)
        assert per["reasoning_tokens"] == pytest.approx(4 * total_calls / 9)
        assert per["cost_usd"] == pytest.approx(CALL_COST * total_calls / 9)
        assert system["tokens_per_solved"] == pytest.approx(110 * total_calls / 5)
        assert system["input_tokens_per_solved"] == pytest.approx(100 * total_calls / 5)
        assert system["cost_per_solved"] == pytest.approx(CALL_COST * total_calls / 5)
        # The one-step tag: task one only, solved every time.
        tag = system["by_tag"]["one-step"]
        assert tag["tasks"] == 1 and tag["solved"] == 3
        assert tag["input_tokens_per_solved"] == pytest.approx(100 * calls["one"])
    for record in result.records:
        calls = (REACT_CALLS if record["kind"] == "create_agent" else AIME_CALLS)[record["task"]]
        assert record["usage"]["llm_calls"] == calls
        assert record["usage"]["cost_usd"] == pytest.approx(CALL_COST * calls)
        assert record["passed"] == _solves(record["task"], record["rollout"])


def test_failed_rollouts_say_why(suite_path: Path, tmp_path: Path) -> None:
    result = evaluate(
        suite_path, model=OracleModels(solve=_solves), k=3, out=tmp_path / "out", tasks=["three"]
    )
    rows = {t["id"]: t for t in result.summary["tasks"]}
    for name in ("aimegraph", "create_agent"):
        failures = rows["three"]["results"][name]["failures"]
        assert failures[0]["count"] == 3
        assert "number 43" in failures[0]["reason"]
        assert UNSOLVED_ANSWER in failures[0]["reason"]
    markdown = result.report_md.read_text()
    assert "number 43" in markdown and "(x3)" in markdown
    assert "| pass@1 | pass@3 | pass^3 |" in markdown and "pass@3 is the chance" in markdown


def test_usage_is_counted_alike_for_aimegraph_as_its_own_usage(
    suite_path: Path, tmp_path: Path
) -> None:
    """The callback counter sees every model call the engine makes: the same calls
    and tokens as the run's own ``usage``."""
    result = evaluate(
        suite_path, model="oracle", systems=["aimegraph"], out=tmp_path / "out", tasks=["two"]
    )
    (record,) = result.records
    assert record["passed"], record["failure"]
    from aimegraph import build_aime_graph
    from aimegraph.eval.oracle import OracleModels as Oracle

    suite = load_suite(suite_path)
    task = suite.task("two")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "data.csv").write_text("name,value\na,3\nb,4\n")
    from aimegraph import AimeConfig

    graph = build_aime_graph(Oracle()(task, "aimegraph", 0), config=AimeConfig(workspace=workspace))
    out = graph.invoke({"goal": task.goals[0]})
    assert out["usage"].llm_calls == record["usage"]["llm_calls"] == AIME_CALLS["two"]
    assert out["usage"].output_tokens == record["usage"]["output_tokens"]


def test_resume_never_reruns_a_finished_rollout(suite_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = evaluate(suite_path, model="oracle", k=2, out=out, tasks=["one", "two"])
    assert (first.ran, first.resumed) == (8, 0)
    started = {(r["system"], r["task"], r["rollout"]): r["started_at"] for r in first.records}

    calls: list[tuple[str, str, int]] = []

    class Counting(OracleModels):
        def __call__(self, task: Any, kind: str, rollout: int) -> Any:
            calls.append((kind, task.id, rollout))
            return super().__call__(task, kind, rollout)

    counting = Counting()  # named "oracle" like the first run's: the same system

    # The same eval again: nothing to run. With k=3: only the third rollouts.
    again = evaluate(suite_path, model=counting, k=2, out=out, tasks=["one", "two"])
    assert (again.ran, again.resumed, calls) == (0, 8, [])
    more = evaluate(suite_path, model=counting, k=3, out=out, tasks=["one", "two"])
    assert more.ran == 4 and more.resumed == 8
    assert sorted(calls) == sorted(
        (kind, task, 2) for kind in ("aimegraph", "create_agent") for task in ("one", "two")
    )
    for record in more.records:
        key = (record["system"], record["task"], record["rollout"])
        if key in started:
            assert record["started_at"] == started[key]
    lines = (out / RESULTS).read_text().splitlines()
    assert (
        len(lines) == 12
        and len({tuple(json.loads(x)[k] for k in ("system", "task", "rollout")) for x in lines})
        == 12
    )


def test_a_changed_task_runs_again_and_a_torn_line_is_skipped(
    suite_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    evaluate(suite_path, model="oracle", systems=["create_agent"], out=out)
    with (out / RESULTS).open("a") as handle:
        handle.write('{"system": "create_agent", "task": "one", "rol')  # a crash mid-write
    changed = [dict(THREE_TASKS[0], goal="What is the total of the value column in data.csv?")]
    changed += THREE_TASKS[1:]
    write_suite(suite_path.parent, changed)
    again = evaluate(suite_path, model="oracle", systems=["create_agent"], out=out)
    assert again.ran == 1 and again.resumed == 2 and again.torn == 1
    assert {r["task"] for r in again.records} == {"one", "two", "three"}


def test_typed_answers_on_create_agent(tmp_path: Path) -> None:
    suite = load_suite("bundled").select(tags=["typed"])
    result = evaluate(suite, model="oracle", systems=["create_agent"], out=tmp_path / "out")
    assert len(result.records) == 3
    for record in result.records:
        assert record["passed"], record["failure"]
        assert isinstance(record["structured_response"], dict)
    summary = next(r for r in result.records if r["task"] == "typed-sales-summary")
    assert summary["structured_response"] == {
        "total_revenue": 54038.35,
        "top_region": "West",
        "rows": 120,
    }


def test_typed_answer_missing_fails_its_field_checks(tmp_path: Path) -> None:
    suite = load_suite("bundled").select(ids=["typed-low-stock"])
    result = evaluate(
        suite,
        model=OracleModels(solve=lambda task, rollout: False),
        systems=["create_agent"],
        out=tmp_path / "out",
    )
    (record,) = result.records
    assert not record["passed"]
    assert record["structured_response"] is None
    assert "no field 'skus'" in record["failure"]


@pytest.mark.parametrize("where", ["suite", "ceiling"])
def test_the_budget_stops_both_systems_alike(tmp_path: Path, where: str) -> None:
    """The suite's budget, or the eval's ceiling over a looser one (``--max-llm-calls``).
    One call: aimegraph's planner runs the sum as a tool step in its one call, so with
    two its actor would already write the file."""
    suite_budget = {"max_llm_calls": 1 if where == "suite" else 30}
    path = write_suite(tmp_path / "suite", THREE_TASKS, budget=suite_budget)
    ceiling = Budget(max_llm_calls=1) if where == "ceiling" else None
    result = evaluate(path, model="oracle", out=tmp_path / "out", tasks=["two"], budget=ceiling)
    by_system = {r["system"]: r for r in result.records}
    react = by_system["create_agent"]
    assert react["status"] == "budget_exhausted" and "max_llm_calls (1)" in react["reason"]
    assert react["usage"]["llm_calls"] == 1 and not react["passed"]
    aime = by_system["aimegraph"]
    assert aime["status"] == "budget_exhausted" and not aime["passed"]
    assert "budget_exhausted" in aime["failure"]


def test_a_run_stopped_by_its_budget_is_not_solved_by_the_figure_its_report_holds(
    tmp_path: Path,
) -> None:
    """Two calls: aimegraph's planner runs the sum as a tool step, its actor writes the
    file, then the budget stops the run before the reporter. The engine's partial report
    quotes the results (7, what the ``contains`` check wants), yet the run did not
    succeed, so it is not solved, and the checks read no answer of the model's."""
    path = write_suite(tmp_path / "suite", THREE_TASKS, budget={"max_llm_calls": 2})
    result = evaluate(
        path, model="oracle", systems=["aimegraph"], out=tmp_path / "out", tasks=["two"]
    )
    (record,) = result.records
    assert record["status"] == "budget_exhausted"
    assert "7" in record["answer"]  # the engine's partial report holds the figure
    assert not record["passed"]
    assert record["failure"].startswith("budget_exhausted")
    by_check = {c["check"]: c["passed"] for c in record["checks"]}
    assert list(by_check.values()) == [True, False]  # the file is right; no answer holds 7


def test_attack_utility_counts_only_runs_that_succeeded() -> None:
    from aimegraph.eval.summary import attack_figures

    def record(status: str, utility: bool, security: bool) -> dict[str, Any]:
        checks = [
            {"check": "utility", "passed": utility, "reason": ""},
            {"check": "security", "passed": security, "reason": ""},
        ]
        return {"system": "s", "status": status, "checks": checks}

    records = [
        record("succeeded", True, True),
        record("budget_exhausted", True, False),  # its world looks done: still not useful
        record("failed", False, False),
        record("succeeded", False, True),
    ]
    figures = attack_figures(records, utility="utility", security="security")["s"]
    assert figures == {"rollouts": 4, "utility": 0.25, "attack_success": 0.5}


def test_a_model_that_raises_is_a_failed_rollout(suite_path: Path, tmp_path: Path) -> None:
    broken = ScriptedChatModel.from_dict(
        {"reporter": [{"error": "fatal", "message": "the provider is down"}]}  # any unscripted role
    )
    result = evaluate(
        suite_path,
        model=lambda task, kind, rollout: broken,
        systems=["create_agent"],
        out=tmp_path / "out",
        tasks=["one"],
    )
    (record,) = result.records
    assert not record["passed"]
    assert record["error"] is not None and "the provider is down" in record["error"]
    assert record["failure"].startswith("error: ")


def test_deepagents_without_the_package_is_skipped_with_the_reason(
    suite_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "deepagents" else find_spec(name),
    )
    spec = SystemSpec(name="deep", kind="deepagents", model="openai:gpt-4o-mini")
    result = evaluate(
        suite_path, model="oracle", systems=["create_agent", spec], out=tmp_path / "o"
    )
    assert result.skipped == {"deep": "deepagents is not installed (pip install deepagents)"}
    assert {r["system"] for r in result.records} == {"create_agent"}
    assert "deep** skipped: deepagents is not installed" in result.report_md.read_text()


def test_html_report_is_self_contained_and_escapes_run_text(tmp_path: Path) -> None:
    tasks = [
        dict(
            THREE_TASKS[0],
            id="evil",
            oracle={
                "stages": THREE_TASKS[0]["oracle"]["stages"],
                "answer": "<script>alert(1)</script> {stage:s1}",
            },
            check={"contains": "<script>nope"},
        )
    ]
    path = write_suite(tmp_path / "suite", tasks)
    result = evaluate(path, model="oracle", out=tmp_path / "out")
    html = result.report_html.read_text()
    assert "<script" not in html and "&lt;script&gt;" in html
    assert "<svg" in html and "success against cost" in html and "per-task results" in html
    assert "pass^1" not in html and "pass@1" in html  # k = 1: pass@k and pass^k say nothing more
    assert "http" not in html.replace("http://www.w3.org/2000/svg", "")  # nothing external


TYPED_ANSWERS = "response_format" in inspect.signature(build_aime_graph).parameters


@pytest.mark.skipif(not TYPED_ANSWERS, reason="build_aime_graph has no response_format (issue 24)")
def test_typed_answers_on_aimegraph(tmp_path: Path) -> None:
    """The same typed tasks through aimegraph's reporter (``response_format``, the
    state's ``structured_response``), one with a field named like a scripted step."""
    suite = load_suite("bundled").select(tags=["typed"])
    result = evaluate(suite, model="oracle", systems=["aimegraph"], out=tmp_path / "out")
    assert len(result.records) == 3
    for record in result.records:
        assert record["passed"], record["failure"]
    levels = next(r for r in result.records if r["task"] == "typed-log-levels")
    assert levels["structured_response"] == {"info": 119, "warn": 24, "error": 17}


def test_ctrl_c_keeps_the_records_and_drains_the_rollouts_in_flight(tmp_path: Path) -> None:
    """Interrupted in Python (a notebook, a REPL), the eval writes its reports and
    raises; the rollouts still running stop at their next step instead of running
    on in the background, and are not recorded."""
    mark = "import time\ntime.sleep(0.2)\nopen('progress.txt', 'a').write('x')\nprint(1)"
    notes = {"0.2": "a wait"}
    steps = [{"tool": "python", "args": {"code": mark}, "derived": notes}] * 6
    tasks = [
        {
            "id": f"slow{i}",
            "goal": "Work, marking progress.txt.",
            "check": {"number": 1},
            # slow0 is done first (one step), while the others have five more to go.
            "oracle": {
                "stages": [{"id": "s", "title": "Work", "calls": steps[: 1 if i == 0 else 6]}],
                "answer": "1",
            },
        }
        for i in range(3)
    ]
    path = write_suite(tmp_path / "suite", tasks)
    out = tmp_path / "out"

    def interrupt(record: Any) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        evaluate(
            path,
            model="oracle",
            systems=["create_agent"],
            out=out,
            concurrency=2,
            keep_workspaces="all",
            on_rollout=interrupt,
        )
    for thread in threading.enumerate():
        if thread.name.startswith("eval-"):
            thread.join(timeout=60)
    (recorded,) = [json.loads(line) for line in (out / RESULTS).read_text().splitlines()]
    assert recorded["task"] == "slow0"
    assert "Incomplete: 1 of 3" in (out / "report.md").read_text().replace("**", "")
    stopped = [
        len((out / "workspaces" / "create_agent" / task / "0" / "progress.txt").read_text())
        for task in ("slow0", "slow1", "slow2")
        if task != recorded["task"]
        and (out / "workspaces" / "create_agent" / task / "0" / "progress.txt").exists()
    ]
    assert stopped and all(count < 6 for count in stopped)


def test_create_agent_without_langchain_v1_is_skipped_with_the_reason(
    suite_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.metadata

    version = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata,
        "version",
        lambda name: "0.3.27" if name == "langchain" else version(name),
    )
    result = evaluate(suite_path, model="oracle", out=tmp_path / "out", tasks=["one"])
    assert result.skipped == {
        "create_agent": "create_agent needs LangChain v1: pip install 'aimegraph[eval]'"
    }
    assert [r["system"] for r in result.records] == ["aimegraph"]


def test_progress_bar_counts_rollouts_and_passes(suite_path: Path, tmp_path: Path) -> None:
    console = Console(file=io.StringIO(), width=120)
    evaluate(
        suite_path,
        model=OracleModels(solve=_solves),
        systems=["create_agent"],
        out=tmp_path / "out",
        k=3,
        progress=console,
    )
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "9/9" in shown and "5 passed" in shown
    # Passed rollouts leave no workspace; failed ones keep theirs for a look.
    kept = sorted(
        p.relative_to(tmp_path / "out" / "workspaces")
        for p in (tmp_path / "out" / "workspaces").glob("*/*/*")
    )
    assert kept == [
        Path("create_agent/three/0"),
        Path("create_agent/three/1"),
        Path("create_agent/three/2"),
        Path("create_agent/two/1"),
    ]


def test_rollouts_in_threads_never_lose_a_workspace_folder(tmp_path: Path) -> None:
    """One rollout makes its workspace while another removes the system folder it
    found empty: the new workspace must be there (the bundled suite's rollouts failed
    with FileNotFoundError now and then before the two were serialised)."""
    from aimegraph.eval.rollout import _remove, fresh_workspace

    suite = load_suite(write_suite(tmp_path / "suite", THREE_TASKS))
    task = suite.tasks[0]
    workdir = tmp_path / "work"
    missing: list[str] = []

    def churn(worker: int) -> None:
        for attempt in range(150):
            workspace = workdir / "system" / f"task-{worker}" / str(attempt)
            try:
                fresh_workspace(workspace, task, suite)
            except FileNotFoundError as exc:
                missing.append(str(exc))
                continue
            _remove(workspace, up_to=workdir)

    threads = [threading.Thread(target=churn, args=(i,)) for i in range(8)]
    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns often: the race shows at once
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switching)
    assert missing == []
