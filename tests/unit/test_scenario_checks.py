"""Issue 11: scripted scenarios refuse the mistakes they used to ignore silently
(an actor script for an unknown task, misspelled task fields, unknown placeholders)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.models.offline.scripted import ScenarioError, ScriptedChatModel, load_scenario

PLAN = {"rationale": "r", "tasks": [{"id": "a", "title": "A"}, {"id": "b", "title": "B"}]}


def _scenario(**sections: Any) -> dict[str, Any]:
    return {"planner": [PLAN], **sections}


@pytest.mark.parametrize(
    "scenario, says",
    [
        (
            {
                "planner": [
                    {"rationale": "r", "tasks": [{"id": "a", "title": "A", "dependecies": []}]}
                ]
            },
            "planner task 'a' has an unknown field 'dependecies' (did you mean 'dependencies'?)",
        ),
        (
            _scenario(reporter=[{"text": "{last_output}"}]),
            "unknown placeholder {last_output} (did you mean {last_tool_output}?)",
        ),
        (_scenario(reporter=[{"text": "{results:a}"}]), "did you mean {result:<id>}?"),
        ({"planer": [PLAN]}, "planer: Extra inputs are not permitted"),
    ],
)
def test_mistakes_are_scenario_errors(scenario: dict[str, Any], says: str) -> None:
    with pytest.raises(ScenarioError, match="malformed") as info:
        ScriptedChatModel.from_dict(scenario)
    assert says in str(info.value)


def test_a_scenario_file_with_a_mistake_is_refused_on_load(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(_scenario(reporter=[{"text": "{answr}"}])))
    with pytest.raises(ScenarioError, match="scenario 'typo'.*did you mean {answer}"):
        load_scenario(str(path))


def test_a_script_for_a_misspelled_task_id_fails_the_run(tmp_path: Path) -> None:
    # The script is for "A"; the plan's task is "a". It used to "succeed" with
    # "A: done" and the script never ran.
    scenario = _scenario(actors={"A": [{"tool": "calculator", "args": {"expression": "1+1"}}]})
    graph = build_aime_graph(
        ScriptedChatModel.from_dict(scenario), config=AimeConfig(workspace=tmp_path)
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] != "succeeded"
    reasons = " ".join(t.result.summary for t in out["tasks"].values() if t.result)
    assert "no script for task 'a'" in reasons
    assert "for tasks no planner entry defines: A (misspelled?)" in reasons


def test_what_stays_allowed() -> None:
    # Code braces, known placeholders, raw steps (malformed output on purpose), and
    # actor scripts without planner tasks (an actor graph driven on its own).
    ScriptedChatModel.from_dict(
        _scenario(
            actors={
                "a": [
                    {"tool": "python", "args": {"code": "print(f'{total} {row[0]}')"}},
                    {"raw": "{last_output} {dep:nowhere}"},
                    {"tool": "submit_result", "args": {"summary": "{last_tool_output} {dep:b}"}},
                ]
            },
            reporter=[{"text": "{goal}: {result:a} {all_results}"}],
        )
    )
    ScriptedChatModel.from_dict({"actors": {"anything": [{"text": "{answer}"}]}})
