"""Prompt components through the graph: each override reaches its role's model,
a prompt store's active version is taken per run, a resumed run keeps its version.

The scripted model records every prompt it receives (``model.prompts(role)``), so
the tests read exactly what each role was asked with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import make_serializer, thread_config
from aimegraph.graphs import build_actor_graph, build_planner_graph, build_verifier_graph
from aimegraph.graphs.sources import open_prompt_source
from aimegraph.models import ScriptedChatModel
from aimegraph.nodes import ActorSpec, DefaultActorFactory
from aimegraph.optimizer.store import PromptStore
from aimegraph.prompts import DEFAULT_PROMPTS, actor, planner, reporter, verifier
from aimegraph.prompts.source import DEFAULT_VERSION, PromptSet, prompt_source, version_id
from aimegraph.state import Task, TaskResult
from aimegraph.tools import default_registry

SCENARIO: dict[str, Any] = {
    "planner": [
        {
            "rationale": "one task",
            "tasks": [{"id": "a", "title": "Task a", "completion_criteria": "a is done"}],
            "drop": [],
        }
    ],
    "actors": {"a": [{"tool": "submit_result", "args": {"status": "completed", "summary": "a"}}]},
    "verifier": [{"passed": True, "reasoning": "fine", "issues": []}],
    "reporter": [{"text": "the answer"}],
}

MARKS = {
    "planner": "MARK-PLANNER",
    "actor": "MARK-ACTOR",
    "persona_habits": "MARK-HABITS",
    "verifier": "MARK-VERIFIER",
    "reporter": "MARK-REPORTER",
}


def marked(mark_suffix: str = "") -> dict[str, str]:
    """Every component with its mark appended (the ``# Role:`` line stays first)."""
    return {
        name: (text + "\n" if name != "persona_habits" else "") + MARKS[name] + mark_suffix
        for name, text in DEFAULT_PROMPTS.items()
    }


def build(workspace: Path, prompts: Any = None, **kwargs: Any) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel.from_dict(SCENARIO)
    config = AimeConfig(workspace=workspace, verify="both", **kwargs.pop("config", {}))
    return build_aime_graph(model, config=config, prompts=prompts, **kwargs), model


def marks_seen(model: ScriptedChatModel, role: str) -> set[str]:
    return {m for text in model.prompts(role) for m in MARKS.values() if m in text}


def test_each_override_reaches_only_its_roles_model(workspace: Path) -> None:
    graph, model = build(workspace, prompts=marked())
    out = graph.invoke({"goal": "do a"})
    assert out["status"] == "succeeded"
    assert marks_seen(model, "planner") == {"MARK-PLANNER"}
    # The actor's system prompt carries the actor template and the persona habits.
    assert marks_seen(model, "actor") == {"MARK-ACTOR", "MARK-HABITS"}
    (system,) = {text.split("\n## Your task")[0] for text in model.prompts("actor")}
    assert system.rstrip().endswith(f"{actor.DEFAULT_PERSONA} MARK-HABITS")
    # The verifier judges the answer and checks the task (verify="both"): both marked.
    verifier_prompts = model.prompts("verifier")
    assert len(verifier_prompts) == 2
    assert all("MARK-VERIFIER" in text for text in verifier_prompts)
    assert marks_seen(model, "verifier") == {"MARK-VERIFIER"}
    assert marks_seen(model, "reporter") == {"MARK-REPORTER"}
    assert out["prompt_version"] == version_id(marked())


def test_without_overrides_the_built_in_prompts_are_used(workspace: Path) -> None:
    graph, model = build(workspace)
    out = graph.invoke({"goal": "do a"})
    assert out["prompt_version"] == DEFAULT_VERSION
    assert model.prompts("planner")[0].startswith(
        planner.SYSTEM.format(max_tasks=30, bundles="")[:200]
    )
    assert any(verifier.SYSTEM in text for text in model.prompts("verifier"))
    assert any(reporter.SYSTEM in text for text in model.prompts("reporter"))
    assert not marks_seen(model, "actor")


def test_a_prompt_set_file_overrides_some_components(workspace: Path, tmp_path: Path) -> None:
    path = tmp_path / "prompts.yaml"
    path.write_text(
        "persona_habits: Always state units. MARK-HABITS\n"
        f"reporter: {json.dumps(reporter.SYSTEM + 'MARK-REPORTER')}\n",
        encoding="utf-8",
    )
    graph, model = build(workspace, prompts=path)
    graph.invoke({"goal": "do a"})
    assert marks_seen(model, "actor") == {"MARK-HABITS"}
    assert marks_seen(model, "reporter") == {"MARK-REPORTER"}
    assert not marks_seen(model, "planner")


def test_literal_braces_are_written_doubled_and_reach_the_model_single(workspace: Path) -> None:
    graph, model = build(
        workspace, prompts={"reporter": reporter.SYSTEM + 'Answer as JSON: {{"answer": ...}}'}
    )
    graph.invoke({"goal": "do a"})
    assert 'Answer as JSON: {"answer": ...}' in model.prompts("reporter")[0]


@pytest.mark.parametrize(
    ("prompts", "error"),
    [
        ({"plannr": "x"}, r"unknown prompt component\(s\) \['plannr'\]"),
        ({"planner": "# Role: planner\nPlan."}, r"'planner' lacks placeholder\(s\)"),
        ({"actor": actor.SYSTEM + "{workspace}"}, r"'actor' has unknown placeholder"),
        ({"verifier": "# Role: verifier {oops"}, "'verifier' is not a valid template"),
        ("no/such/prompts.yaml", "no/such/prompts.yaml: no such file"),
    ],
)
def test_bad_overrides_are_refused_when_the_graph_is_built(
    workspace: Path, prompts: Any, error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        build(workspace, prompts=prompts)


def test_a_store_version_activated_between_runs_is_used_from_the_next_run(
    workspace: Path, tmp_path: Path
) -> None:
    store = PromptStore(tmp_path / "prompts.jsonl")
    v1 = store.add(marked("-V1"), source="manual")
    v2 = store.add(marked("-V2"), parent=v1, source="gepa")
    store.use(v1)
    graph, model = build(
        workspace, prompts=store, checkpointer=InMemorySaver(serde=make_serializer())
    )
    config = thread_config("chat")
    first = graph.invoke({"goal": "do a"}, config)
    assert first["prompt_version"] == v1
    assert all("MARK-PLANNER-V1" in text for text in model.prompts("planner"))

    store.use(v2)  # e.g. by the optimiser, in another process: the graph is not rebuilt
    model.reset()
    second = graph.invoke({"messages": [("human", "do a again")]}, config)
    assert second["status"] == "succeeded" and second["prompt_version"] == v2
    assert second["runs"][0]["prompt_version"] == v1  # the archived first run
    for role in ("planner", "actor", "verifier", "reporter"):
        prompts = model.prompts(role)
        assert prompts and all("-V2" in t and "-V1" not in t for t in prompts), role

    # A store given by path behaves the same.
    graph_by_path, model_by_path = build(workspace, prompts=str(store.path))
    assert graph_by_path.invoke({"goal": "do a"})["prompt_version"] == v2
    assert "MARK-PLANNER-V2" in model_by_path.prompts("planner")[0]


def test_a_store_path_is_opened_by_the_builders_not_by_the_core(tmp_path: Path) -> None:
    # The prompt store is the optimiser's; the core prompts package must not import it.
    store = PromptStore(tmp_path / "prompts.jsonl")
    store.use(version := store.add(marked("-S"), source="manual"))
    with pytest.raises(ValueError, match=r"PromptStore\("):
        prompt_source(str(store.path))
    assert open_prompt_source(str(store.path)).current() == version
    assert open_prompt_source(store.path).texts()["planner"] == marked("-S")["planner"]


def test_a_resumed_run_keeps_the_version_it_started_with(workspace: Path, tmp_path: Path) -> None:
    store = PromptStore(tmp_path / "prompts.jsonl")
    v1, v2 = store.add(marked("-V1")), store.add(marked("-V2"))
    store.use(v1)
    saver = InMemorySaver(serde=make_serializer())
    graph, model = build(
        workspace, prompts=store, checkpointer=saver, config={"approve_plan": True}
    )
    config = thread_config("paused")
    paused = graph.invoke({"goal": "do a"}, config)
    assert paused["__interrupt__"] and model.prompts("actor") == []

    store.use(v2)
    # Resumed by a graph built afresh over the store (as another process would).
    rebuilt, rebuilt_model = build(
        workspace,
        prompts=PromptStore(store.path),
        checkpointer=saver,
        config={"approve_plan": True},
    )
    out = rebuilt.invoke(Command(resume={"action": "approve"}), config)
    assert out["status"] == "succeeded" and out["prompt_version"] == v1
    for role in ("actor", "verifier", "reporter"):
        prompts = rebuilt_model.prompts(role)
        assert prompts and all("-V1" in t and "-V2" not in t for t in prompts), role


def test_a_resume_with_prompts_lacking_the_runs_version_warns_and_uses_its_own(
    workspace: Path,
) -> None:
    saver = InMemorySaver(serde=make_serializer())
    graph, _ = build(
        workspace, prompts=marked("-V1"), checkpointer=saver, config={"approve_plan": True}
    )
    config = thread_config("other-prompts")
    graph.invoke({"goal": "do a"}, config)
    rebuilt, model = build(
        workspace, prompts=marked("-V2"), checkpointer=saver, config={"approve_plan": True}
    )
    with pytest.warns(UserWarning, match="not in the graph's prompt source"):
        out = rebuilt.invoke(Command(resume={"action": "approve"}), config)
    assert out["status"] == "succeeded"
    assert all("-V2" in t for t in model.prompts("actor"))


class PlainFactory:
    """A third-party factory written against the ActorFactory protocol only."""

    def build(self, task: Task, goal: str, dependencies: Any) -> ActorSpec:
        return ActorSpec(
            task_id=task.id,
            persona="You are a plain worker.",
            bundles=(),
            tools=(),
            knowledge=(),
            environment="nowhere",
            output_format="text",
        )


def test_a_custom_factory_gets_the_runs_actor_prompts(workspace: Path) -> None:
    graph, model = build(workspace, prompts=marked(), factory=PlainFactory())
    assert graph.invoke({"goal": "do a"})["status"] == "succeeded"
    (text,) = model.prompts("actor")
    assert "You are a plain worker. MARK-HABITS" in text and "MARK-ACTOR" in text


def test_role_subgraphs_take_prompts_on_their_own(workspace: Path) -> None:
    model = ScriptedChatModel.from_dict(SCENARIO)
    planner_graph = build_planner_graph(model, prompts={"planner": marked()["planner"]})
    assert planner_graph.invoke({"goal": "do a"})["tasks"]
    assert marks_seen(model, "planner") == {"MARK-PLANNER"}

    verifier_graph = build_verifier_graph(model, prompts=PromptSet(marked()))
    assert verifier_graph.invoke({"goal": "do a", "final_answer": "a"})["verdict"].passed
    assert marks_seen(model, "verifier") == {"MARK-VERIFIER"}

    registry = default_registry(workspace)
    actor_graph = build_actor_graph(
        model,
        registry=registry,
        factory=DefaultActorFactory(registry, workspace=workspace),
        prompts={"persona_habits": "MARK-HABITS"},
    )
    out = actor_graph.invoke(
        {
            "goal": "do a",
            "task": Task(id="a", title="Task a", status="in_progress", attempts=1),
            "dependency_results": {},
        }
    )
    assert out["tasks"]["a"].result == TaskResult(status="completed", summary="a")
    assert marks_seen(model, "actor") == {"MARK-HABITS"}


async def test_overrides_apply_under_ainvoke(workspace: Path) -> None:
    graph, model = build(workspace, prompts=marked())
    out = await graph.ainvoke({"goal": "do a"})
    assert out["status"] == "succeeded"
    assert marks_seen(model, "planner") == {"MARK-PLANNER"}
    assert marks_seen(model, "reporter") == {"MARK-REPORTER"}


def test_team_members_and_the_team_check_keep_the_runs_version(
    workspace: Path, tmp_path: Path
) -> None:
    from aimegraph.teams import AgentUnit

    units = [
        AgentUnit(name="writer", description="Writes reports.", persona="You write."),
        AgentUnit(name="reviewer", description="Reviews reports.", persona="You review."),
    ]
    team = {"mode": "sequential", "members": ["writer", "reviewer"], "max_rounds": 1}
    scenario = {
        **SCENARIO,
        "planner": [{"rationale": "r", "tasks": [{"id": "a", "title": "A", "team": team}]}],
        "actors": {
            f"a/{who}": [{"tool": "submit_result", "args": {"status": "completed", "summary": who}}]
            for who in ("writer", "reviewer")
        },
    }
    store = PromptStore(tmp_path / "prompts.jsonl")
    v1, v2 = store.add(marked("-V1")), store.add(marked("-V2"))
    store.use(v1)
    model = ScriptedChatModel.from_dict(scenario)
    graph = build_aime_graph(
        model,
        agents=units,
        prompts=store,
        checkpointer=InMemorySaver(serde=make_serializer()),
        config=AimeConfig(workspace=workspace, verify="both", approve_plan=True),
    )
    config = thread_config("team")
    assert graph.invoke({"goal": "do a"}, config)["__interrupt__"]
    store.use(v2)  # while the run waits for the plan's approval
    out = graph.invoke(Command(resume={"action": "approve"}), config)
    assert out["status"] == "succeeded" and out["prompt_version"] == v1
    assert [m.member for m in out["tasks"]["a"].members] == ["writer", "reviewer"]
    actors, verifiers = model.prompts("actor"), model.prompts("verifier")
    assert len(actors) == 2 and len(verifiers) == 2  # two turns; the team check and the judge
    for text in actors + verifiers:
        assert "-V1" in text and "-V2" not in text
