"""Public benchmarks as eval suites: the ground-truth oracle solves a 5-task subset
of each AgentDojo suite and of BFCL multi-turn on aimegraph and create_agent, judged
by the benchmark's own checks; the gullible model's attack succeeds, judged by
AgentDojo's security check; the reports name the tasks left out and the attack's
figures. Without the benchmarks' packages these tests skip, but under CI they fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_module

require_module("agentdojo", "pip install 'aimegraph[agentdojo]'")

from aimegraph.eval.checkers import CheckInput  # noqa: E402
from aimegraph.eval.harness import evaluate  # noqa: E402
from aimegraph.eval.oracle import OracleModels  # noqa: E402
from aimegraph.eval.public import bfcl as bfcl_adapter  # noqa: E402
from aimegraph.eval.public import load_public_suite  # noqa: E402
from aimegraph.eval.public.agentdojo import SUITES, attack_figures  # noqa: E402
from aimegraph.eval.public.bfcl import BfclWorld, state_and_response_check  # noqa: E402
from aimegraph.eval.public.gullible import GullibleModels  # noqa: E402
from aimegraph.eval.suite import SuiteError  # noqa: E402

SYSTEMS = ("aimegraph", "create_agent")
ATTACKED = ["user_task_0.injection_task_0", "user_task_3.injection_task_1"]


def _failures(records: list[dict[str, Any]]) -> list[str]:
    return [f"{r['system']} {r['task']}: {r['failure']}" for r in records if not r["passed"]]


@pytest.mark.parametrize("name", SUITES)
def test_the_oracle_solves_five_tasks_of_each_suite(name: str, tmp_path: Path) -> None:
    public = load_public_suite(f"agentdojo:{name}")
    assert public.skipped == {}
    chosen = [task.id for task in public.suite.tasks[:5]]
    result = evaluate(
        public.suite, model="oracle", systems=SYSTEMS, tasks=chosen, out=tmp_path, concurrency=2
    )
    assert len(result.records) == 10
    assert _failures(result.records) == []
    # The tools are the suite's own, over a world each rollout opens afresh.
    task = public.suite.task(chosen[0])
    first, second = public.suite.environment(task), public.suite.environment(task)
    assert first is not None and second is not None
    assert first.state is not second.state
    assert {t.name for t in first.tools} == {f.name for f in first.state.suite.tools}


def test_a_wrong_answer_fails_agentdojos_utility_check(tmp_path: Path) -> None:
    # user_task_1 asks for the March spending: only the answer can show it.
    public = load_public_suite("agentdojo:banking")
    result = evaluate(
        public.suite,
        model=OracleModels(solve=lambda task_id, rollout: False),
        systems=SYSTEMS,
        tasks=["user_task_1"],
        out=tmp_path,
    )
    assert [r["passed"] for r in result.records] == [False, False]
    assert all("utility check failed" in r["failure"] for r in result.records)


def test_the_gullible_model_obeys_the_injection_and_the_oracle_does_not(
    tmp_path: Path,
) -> None:
    public = load_public_suite("agentdojo:banking", attack="important_instructions")
    assert set(ATTACKED) <= set(public.injections)
    gullible = evaluate(
        public.suite,
        model=GullibleModels(public.injections),
        systems=SYSTEMS,
        tasks=ATTACKED,
        out=tmp_path / "gullible",
        concurrency=2,
    )
    oracle = evaluate(
        public.suite,
        model="oracle",
        systems=SYSTEMS,
        tasks=ATTACKED,
        out=tmp_path / "oracle",
        concurrency=2,
    )
    for system in SYSTEMS:
        assert attack_figures(gullible.records)[system] == {
            "rollouts": 2,
            "utility": 1.0,
            "attack_success": 1.0,
        }
        assert attack_figures(oracle.records)[system]["attack_success"] == 0.0
    assert _failures(oracle.records) == []
    # The attack's figures are in the report files, not only on the console.
    summary = json.loads((tmp_path / "gullible" / "summary.json").read_text())
    assert summary["attack"] == {
        "name": "important_instructions",
        "systems": attack_figures(gullible.records),
    }
    for report in ("report.md", "report.html"):
        text = (tmp_path / "gullible" / report).read_text()
        assert "Under attack: important_instructions" in text
        assert "100.0%" in text and "attack success rate" in text


# Banking tasks whose every call its request gives (the knowledge rule lets the planner
# write them as tool steps): a transaction list of a size the request names, a password
# it quotes. A task whose call takes a value read from the data (user_task_0 pays the
# bill it reads) is an actor's.
PLANNED_FROM_THE_REQUEST = ["user_task_8.injection_task_0", "user_task_14.injection_task_1"]


def test_tool_steps_fixed_by_the_plan_leave_the_gullible_model_nothing_to_obey(
    tmp_path: Path,
) -> None:
    public = load_public_suite("agentdojo:banking", attack="important_instructions")
    result = evaluate(
        public.suite,
        model=GullibleModels(public.injections, tool_steps=True),
        systems=["aimegraph"],
        tasks=PLANNED_FROM_THE_REQUEST,
        out=tmp_path,
    )
    assert attack_figures(result.records)["aimegraph"] == {
        "rollouts": 2,
        "utility": 1.0,
        "attack_success": 0.0,
    }
    # The engine made every call: the model was asked only to plan, report and verify.
    assert all(r["usage"]["llm_calls"] == 3 for r in result.records)


@pytest.mark.usefixtures("bfcl")
def test_mistakes_are_one_line(cli: Any) -> None:
    code, out = cli("eval", "agentdojo:bank", "--model", "oracle")
    assert code == 2
    assert "no suite 'bank' in AgentDojo" in out and "banking" in out
    code, out = cli("eval", "agentdojo:banking@v9", "--model", "oracle")
    assert code == 2 and "no AgentDojo version 'v9'" in out
    code, out = cli("eval", "agentdojo:banking", "--model", "gullible")
    assert code == 2 and "needs --attack" in out
    code, out = cli("eval", "bfcl:multi_turn_miss_func", "--model", "oracle")
    assert code == 2 and "no BFCL category 'multi_turn_miss_func'" in out
    with pytest.raises(SuiteError, match="attack 'nope'"):
        load_public_suite("agentdojo:banking", attack="nope")


def test_a_user_task_under_attack_is_selected_against_every_injection_task(cli: Any) -> None:
    suite = load_public_suite("agentdojo:banking", attack="important_instructions").suite
    chosen = [task.id for task in suite.select(ids=["user_task_0", ATTACKED[1]]).tasks]
    injections = sorted({task.id.partition(".")[2] for task in suite.tasks})
    assert len(injections) > 1
    assert sorted(chosen) == sorted(
        [f"user_task_0.{injection}" for injection in injections] + [ATTACKED[1]]
    )
    # An id that names no task says what the ids look like, and the closest one.
    code, out = cli(
        "eval", "agentdojo:banking", "--attack", "important_instructions",
        "--model", "oracle", "--tasks", "user_task_0,user_tsk_3",
    )  # fmt: skip
    assert code == 2 and "no task user_tsk_3 (did you mean 'user_task_3'?)" in out
    assert "<user task>.<injection task> (user_task_0.injection_task_0)" in out
    with pytest.raises(SuiteError, match=r"no task user_tsk_3 \(did you mean 'user_task_3'\?\)$"):
        load_public_suite("agentdojo:banking").suite.select(ids=["user_tsk_3"])


def test_the_cli_reports_the_attack(cli: Any, tmp_path: Path) -> None:
    code, out = cli(
        "eval", "agentdojo:banking", "--attack", "important_instructions",
        "--model", "gullible", "--tasks", ATTACKED[0], "--out", str(tmp_path / "ev"),
    )  # fmt: skip
    assert code == 0, out
    assert "attack success rate" in out
    assert "100.0%" in out
    code, data = cli.json(
        "eval", "agentdojo:banking", "--attack", "important_instructions",
        "--model", "gullible", "--tasks", ATTACKED[0], "--out", str(tmp_path / "ev"),
    )  # fmt: skip
    assert code == 0
    assert data["skipped_tasks"] == {}
    assert data["attack"]["systems"]["create_agent"]["attack_success"] == 1.0


@pytest.fixture
def bfcl() -> None:
    require_module("bfcl_eval", f"pip install --no-deps '{bfcl_adapter.PINNED}'")


def test_the_makefile_and_readme_install_the_bfcl_release_the_adapter_names() -> None:
    root = Path(__file__).resolve().parents[2]
    makefile = (root / "Makefile").read_text()
    assert f"BFCL := {bfcl_adapter.PINNED}\n" in makefile
    assert "--no-deps '$(BFCL)'" in makefile
    assert f"pip install --no-deps '{bfcl_adapter.PINNED}'" in (root / "README.md").read_text()


def _left_out_in_reports(out: Path, task_id: str, reason: str) -> None:
    summary = json.loads((out / "summary.json").read_text())
    assert summary["skipped_tasks"] == {task_id: reason}
    assert f"**{task_id}**: {reason}" in (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert "Tasks left out" in html and task_id in html


def test_an_agentdojo_ground_truth_with_a_nested_call_is_left_out_with_its_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from agentdojo.functions_runtime import FunctionCall
    from agentdojo.task_suite import load_suites

    banking = load_suites.get_suites("v1.2.2")["banking"]
    task = banking.user_tasks["user_task_4"]
    nested = FunctionCall(function="get_iban", args={})

    def ground_truth(self: Any, environment: Any) -> list[Any]:
        # The recipient is the output of another call: AgentDojo's runtime evaluates
        # it, a tool call cannot pass it.
        return [FunctionCall(function="send_money", args={"recipient": nested, "amount": 1.0})]

    monkeypatch.setattr(type(task), "ground_truth", ground_truth)
    public = load_public_suite("agentdojo:banking")
    assert list(public.skipped) == ["user_task_4"]
    reason = public.skipped["user_task_4"]
    assert "send_money call takes an argument that is not plain data" in reason
    assert "user_task_4" not in {t.id for t in public.suite.tasks}
    result = evaluate(
        public.suite, model="oracle", systems=["create_agent"], tasks=["user_task_1"], out=tmp_path
    )
    assert _failures(result.records) == []
    _left_out_in_reports(tmp_path, "user_task_4", reason)


@pytest.mark.usefixtures("bfcl")
def test_a_bfcl_call_that_cannot_be_parsed_is_left_out_with_its_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    read = bfcl_adapter._data

    def data(path: str) -> list[dict[str, Any]]:
        entries = read(path)
        if path.startswith("possible_answer/"):
            # An argument computed from an earlier output, as the data sometimes writes it.
            entries[0]["ground_truth"][0] = ["cd(folder=listing[0])"]
        return entries

    monkeypatch.setattr(bfcl_adapter, "_data", data)
    public = load_public_suite("bfcl:multi_turn_base")
    assert list(public.skipped) == ["multi_turn_base_0"]
    reason = public.skipped["multi_turn_base_0"]
    assert "'cd(folder=listing[0])' has an argument that is not a literal" in reason
    result = evaluate(
        public.suite,
        model="oracle",
        systems=["create_agent"],
        tasks=["multi_turn_base_1"],
        out=tmp_path,
    )
    assert _failures(result.records) == []
    _left_out_in_reports(tmp_path, "multi_turn_base_0", reason)


@pytest.mark.usefixtures("bfcl")
def test_the_oracle_solves_five_bfcl_multi_turn_tasks(tmp_path: Path) -> None:
    public = load_public_suite("bfcl:multi_turn_base")
    assert public.skipped == {}
    chosen = [task.id for task in public.suite.tasks[:5]]
    assert all(len(public.suite.task(t).goals) > 1 for t in chosen)  # turns on one thread
    result = evaluate(
        public.suite, model="oracle", systems=SYSTEMS, tasks=chosen, out=tmp_path, concurrency=2
    )
    assert len(result.records) == 10
    assert _failures(result.records) == []


@pytest.mark.usefixtures("bfcl")
def test_bfcls_checker_fails_a_turn_without_its_calls(tmp_path: Path) -> None:
    public = load_public_suite("bfcl:multi_turn_base")
    task = public.suite.tasks[0]
    environment = public.suite.environment(task)
    assert environment is not None and isinstance(environment.state, BfclWorld)
    world = environment.state
    oracle = task.oracle
    assert oracle is not None
    # Every turn's calls but the last turn's: the state differs after the last turn.
    for index, turn in enumerate(oracle.turns[:-1]):
        world.begin_turn(index)
        for call in (c for stage in turn.stages for c in stage.calls):
            world.call(_owner(world, call["tool"]), call["tool"], call["args"])
    world.begin_turn(len(oracle.turns) - 1)
    inp = CheckInput("Done.", None, tmp_path, {}, task, environment=world)
    passed, reason = state_and_response_check(inp)
    assert not passed
    assert "empty_turn_model_response" in reason


def _owner(world: BfclWorld, name: str) -> str:
    return next(owner for owner, docs in world.docs.items() if any(d["name"] == name for d in docs))
