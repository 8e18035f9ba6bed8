"""Agent Skills: the prompt lists names and descriptions only, load_skill gives the
body, the sandbox shows a skill's files read-only, and bad folders fail in one line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from aimegraph.checkpoints import make_serializer, thread_config
from aimegraph.models.offline.scripted import ScriptedChatModel
from aimegraph.nodes.actor_factory import DefaultActorFactory
from aimegraph.sandbox import BubblewrapSandbox, DockerSandbox, Job, Workspace
from aimegraph.state import Task
from aimegraph.state.models import plan_update_schema
from aimegraph.tools.registry import default_registry
from aimegraph.tools.skills import SkillError, load_skills
from tests.conftest import GraphFactory
from tests.eval.helpers import THREE_TASKS, write_suite
from tests.scripted import call, plan, spec, submit

BODY = "Run scripts/probe.py and report what it prints. SECRET-BODY-MARKER"


def make_skill(parent: Path, name: str = "csv-stats", front: str | None = None) -> Path:
    folder = parent / name
    (folder / "scripts").mkdir(parents=True)
    meta = front if front is not None else f"name: {name}\ndescription: Summarise CSV files."
    (folder / "SKILL.md").write_text(f"---\n{meta}\n---\n{BODY}\n")
    (folder / "scripts" / "probe.py").write_text(
        textwrap.dedent(
            """
            import socket
            try:
                open("/etc/shadow").read(); print("shadow: read")
            except OSError as exc:
                print("shadow:", type(exc).__name__)
            try:
                socket.create_connection(("1.1.1.1", 53), timeout=2); print("net: open")
            except OSError as exc:
                print("net:", type(exc).__name__)
            """
        )
    )
    return folder


def test_prompt_lists_name_and_description_and_load_skill_gives_body(tmp_path: Path) -> None:
    skills = load_skills([make_skill(tmp_path / "skills")])
    registry = default_registry(tmp_path / "ws", skills=skills, sandbox=BubblewrapSandbox())
    factory = DefaultActorFactory(registry, workspace=tmp_path, skills=skills)
    spec = factory.build(Task(id="t1", title="Add two numbers"), "goal", {})
    prompt = spec.system_prompt()
    assert "- csv-stats: Summarise CSV files." in prompt
    assert "SECRET-BODY-MARKER" not in prompt
    assert "load_skill" in spec.tool_names
    loaded = registry.tools["load_skill"].invoke({"name": "csv-stats"})
    assert BODY in loaded and "/skills/csv-stats" in loaded and "scripts/probe.py" in loaded
    script = registry.tools["read_skill_file"].invoke(
        {"name": "csv-stats", "path": "scripts/probe.py"}
    )
    assert "/etc/shadow" in script


def test_no_skills_no_section(tmp_path: Path) -> None:
    registry = default_registry(tmp_path / "ws", sandbox=BubblewrapSandbox())
    spec = DefaultActorFactory(registry, workspace=tmp_path).build(
        Task(id="t1", title="x"), "g", {}
    )
    assert "Skills (" not in spec.system_prompt() and "load_skill" not in spec.tool_names


def test_skill_files_read_only_and_script_confined(
    tmp_path: Path, bubblewrap: BubblewrapSandbox
) -> None:
    folder = make_skill(tmp_path / "skills")
    registry = default_registry(tmp_path / "ws", skills=load_skills([folder]), sandbox=bubblewrap)
    code = (
        "import subprocess\n"
        "print(subprocess.run(['python', '/skills/csv-stats/scripts/probe.py'],"
        " capture_output=True, text=True).stdout)\n"
        "open('/skills/csv-stats/SKILL.md', 'a').write('x')\n"
    )
    out = registry.tools["python"].invoke({"code": code})
    assert "shadow: FileNotFoundError" in out or "shadow: PermissionError" in out
    assert "net: " in out and "net: open" not in out
    assert "Read-only file system" in out
    assert (folder / "SKILL.md").read_text().endswith(f"{BODY}\n")


def test_an_actor_loads_a_skill_then_runs_its_script_confined(
    scripted_graph: GraphFactory, tmp_path: Path, bubblewrap: BubblewrapSandbox
) -> None:
    """The whole graph: the task names the skill, its actor calls load_skill (the body
    reaches the model only then) and runs the skill's script from /skills in the
    bubblewrap sandbox, which keeps it from the host's files and the network."""
    folder = make_skill(tmp_path / "skills")
    scenario = {
        "planner": [plan(spec("t1", tool_bundles=["compute"], skills=["csv-stats"]))],
        "actors": {
            "t1": [
                {"tool": "load_skill", "args": {"name": "csv-stats"}},
                call("python", code="import runpy\nrunpy.run_path('/skills/csv-stats/scripts/probe.py')"),
                submit("{last_tool_output}"),
            ]
        },
        "reporter": [{"text": "{all_results}"}],
    }  # fmt: skip
    graph, model = scripted_graph(scenario, skills=(str(folder),), sandbox="bubblewrap")
    out = graph.invoke({"goal": "Probe the machine with the csv-stats skill"})
    assert out["status"] == "succeeded", out.get("reason")
    ran = out["tasks"]["t1"].result.summary
    assert "shadow: FileNotFoundError" in ran or "shadow: PermissionError" in ran
    assert "net: " in ran and "net: open" not in ran
    first, after_load, _ = model.prompts("actor")
    assert "- csv-stats: Summarise CSV files." in first and "SECRET-BODY-MARKER" not in first
    assert "SECRET-BODY-MARKER" in after_load and "/skills/csv-stats" in after_load


def test_a_sandbox_that_cannot_mount_is_told_it_has_no_skill_files(tmp_path: Path) -> None:
    """A confined sandbox that mounts nothing (docker; most of one's own) does not see
    the skills' folders: load_skill says so rather than give a path it lacks."""
    skills = load_skills([make_skill(tmp_path / "skills")])
    registry = default_registry(tmp_path / "ws", skills=skills, sandbox=DockerSandbox())
    loaded = registry.tools["load_skill"].invoke({"name": "csv-stats"})
    assert BODY in loaded and "/skills/csv-stats" not in loaded
    assert "not in the docker sandbox, which cannot mount them" in loaded
    assert "scripts/probe.py" in loaded and str(tmp_path) not in loaded


def test_bare_sandbox_has_no_skills(tmp_path: Path, bubblewrap: BubblewrapSandbox) -> None:
    """The mount comes from the skills, not from the sandbox: none without them."""
    make_skill(tmp_path / "skills")
    ws = tmp_path / "ws"
    ws.mkdir()
    code = "import os; print(os.path.exists('/skills'))"
    assert bubblewrap.run(Job("python", code, Workspace(ws))).stdout.strip() == "False"


@pytest.mark.parametrize(
    ("front", "error"),
    [
        ("name: [unclosed\ndescription: x", "bad YAML front matter"),
        ("description: only this", "has no name"),
        ("name: csv-stats", "has no description"),
        ("name: Bad_Name\ndescription: x", "must be 1-64 lowercase"),
        ("name: other\ndescription: x", "must match its folder's name"),
    ],
)
def test_bad_front_matter_is_one_line_naming_the_file(
    tmp_path: Path, front: str, error: str
) -> None:
    folder = make_skill(tmp_path, front=front)
    with pytest.raises(SkillError) as raised:
        load_skills([folder])
    message = str(raised.value)
    assert error in message and str(folder / "SKILL.md") in message and "\n" not in message


def test_missing_skill_md_and_duplicate_names(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(SkillError, match=r"empty/SKILL.md: missing"):
        load_skills([tmp_path / "empty"])
    first = make_skill(tmp_path / "a")
    second = make_skill(tmp_path / "b")
    with pytest.raises(SkillError, match=r"b/csv-stats/SKILL.md: skill name 'csv-stats' is"):
        load_skills([first, second])


def test_cli_skills(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = make_skill(tmp_path / "skills")
    code, out = cli("run", "x", "--model", "scripted:demo", "--skills", str(tmp_path / "none"))
    assert code == 2 and f"{tmp_path / 'none'}: no such skill folder" in out
    code, result = cli.run("t-skills", "--skills", str(folder), "--config", '{"sandbox": "none"}')
    assert code == 0, result
    assert result["status"] == "succeeded"


# ------------------------------------------------- the planner names a task's skills


@pytest.fixture
def two_skills(tmp_path: Path) -> dict[str, Any]:
    """Config fields installing csv-stats and pdf-fill, with unconfined code tools."""
    make_skill(tmp_path / "skills", "csv-stats")
    make_skill(tmp_path / "skills", "pdf-fill")
    return {"skills": (str(tmp_path / "skills"),), "sandbox": "none"}


def _actor_prompt(model: ScriptedChatModel, task_id: str) -> str:
    return next(p for p in model.prompts("actor") if f'<task id="{task_id}"' in p)


def test_the_planner_naming_a_skill_narrows_the_actors_list(
    scripted_graph: GraphFactory, two_skills: dict[str, Any]
) -> None:
    graph, model = scripted_graph(
        {"planner": [plan(spec("a", skills=["pdf-fill"]), spec("b", "a"))]}, **two_skills
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded", out.get("reason")
    assert out["tasks"]["a"].skills == ("pdf-fill",)
    # The planner learns the names from the skills bundle's description.
    assert "csv-stats, pdf-fill" in model.prompts("planner")[0]
    named, unnamed = _actor_prompt(model, "a"), _actor_prompt(model, "b")
    assert "- pdf-fill:" in named and "- csv-stats:" not in named
    assert "- pdf-fill:" in unnamed and "- csv-stats:" in unnamed


def test_an_unknown_skill_name_goes_back_to_the_planner(
    scripted_graph: GraphFactory, two_skills: dict[str, Any]
) -> None:
    graph, model = scripted_graph(
        {"planner": [plan(spec("a", skills=["pdf"])), plan(spec("a", skills=["pdf-fill"]))]},
        **two_skills,
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded", out.get("reason")
    error = "task 'a' names unknown skills ['pdf']; installed: ['csv-stats', 'pdf-fill']"
    assert error in model.prompts("planner")[1]
    assert out["tasks"]["a"].skills == ("pdf-fill",)


def test_without_skills_a_plan_cannot_name_one(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph({}, sandbox="none")
    given = plan(spec("a", skills=["pdf-fill"]))
    out = graph.invoke({"goal": "g", "plan": given})
    assert out["status"] == "failed"
    assert "names unknown skills ['pdf-fill']; no skills are installed" in out["reason"]


def test_the_planners_schema_has_skills_only_when_installed() -> None:
    def task_fields(**flags: bool) -> set[str]:
        schema = plan_update_schema(5, **flags).model_json_schema()
        return set(schema["$defs"]["TaskSpec"]["properties"])

    assert "skills" not in task_fields() and "skills" not in task_fields(teams=True)
    assert "skills" in task_fields(skills=True)
    assert {"agent", "team"} <= task_fields(teams=True, skills=True)
    assert not {"agent", "team"} & task_fields(skills=True)


# ------------------------------------------------------------- eval and resume flags


def test_eval_skills_reach_the_aimegraph_systems_config(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path
) -> None:
    pytest.importorskip("langchain.agents", reason="create_agent needs the [eval] extra")
    folder = make_skill(tmp_path / "skills")
    suite = write_suite(tmp_path / "s", THREE_TASKS[:1])
    out = tmp_path / "out"
    argv = ["eval", str(suite), "--model", "oracle", "--out", str(out)]
    code, text = cli(*argv, "--skills", str(tmp_path / "none"))
    assert code == 2 and f"{tmp_path / 'none'}: no such skill folder" in text
    code, summary = cli.json(*argv, "--skills", str(folder))
    assert code == 0 and summary["complete"], summary
    systems = {s["name"]: s for s in json.loads((out / "eval.json").read_text())["systems"]}
    assert systems["aimegraph"]["config"] == {"skills": [str(folder)]}
    assert "config" not in systems["create_agent"]


def test_resume_skills_override_the_stored_folders(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path
) -> None:
    first, second = make_skill(tmp_path / "a"), make_skill(tmp_path / "b", "pdf-fill")
    sandbox = ("--config", '{"sandbox": "none"}')
    code, summary = cli.run("t-resume", "--approve-plan", "--skills", str(first), *sandbox)
    assert code == 5, summary
    code, text = cli("resume", "t-resume", "--approve", "--skills", str(tmp_path / "none"))
    assert code == 2 and f"{tmp_path / 'none'}: no such skill folder" in text
    code, text = cli("resume", "t-resume", "--approve", "--skills", str(second))
    assert code == 0, text
    assert f"overrides: skills: ['{first}'] -> ['{second}']" in text


# ------------------------------------- a human's edited plan is checked as the planner's


def _asked_again(out: dict[str, Any], kind: str) -> str:
    (item,) = out["__interrupt__"]
    assert item.value["kind"] == kind
    return str(item.value["error"])


def test_an_edit_naming_an_unknown_skill_is_refused_at_approval_and_escalation(
    scripted_graph: GraphFactory, two_skills: dict[str, Any]
) -> None:
    """Plan approval and escalation check a human's edit with the planner's checks
    (graphs.parts.GraphParts.plan_checks), skill names included."""
    unknown = plan(spec("x", skills=["pdf"]))
    error = "task 'x' names unknown skills ['pdf']; installed: ['csv-stats', 'pdf-fill']"
    saver = InMemorySaver(serde=make_serializer())

    graph, _ = scripted_graph(
        {"planner": [plan(spec("a"))], "actors": {"x": [submit("x ok")]}},
        checkpointer=saver,
        approve_plan=True,
        **two_skills,
    )
    config = thread_config("edit-at-approval")
    graph.invoke({"goal": "g"}, config)
    out = graph.invoke(Command(resume={"action": "edit", "plan": unknown}), config)
    assert error in _asked_again(out, "approve_plan")
    known = plan(spec("x", skills=["pdf-fill"]))
    out = graph.invoke(Command(resume={"action": "edit", "plan": known}), config)
    assert out["status"] == "succeeded" and out["tasks"]["x"].skills == ("pdf-fill",)

    graph, _ = scripted_graph(
        {
            "planner": [plan(spec("a"))],
            "actors": {"a": [submit("offline", status="failed")], "x": [submit("x ok")]},
        },
        checkpointer=saver,
        escalate="exhausted",
        max_replans=0,
        task_retries=0,
        **two_skills,
    )
    config = thread_config("edit-at-escalation")
    _asked_again(graph.invoke({"goal": "g"}, config), "escalation")
    out = graph.invoke(Command(resume={"action": "edit", "plan": unknown}), config)
    assert error in _asked_again(out, "escalation")
    out = graph.invoke(Command(resume={"action": "edit", "plan": known}), config)
    assert out["status"] == "succeeded" and out["tasks"]["x"].skills == ("pdf-fill",)
