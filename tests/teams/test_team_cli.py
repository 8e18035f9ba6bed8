"""``aimegraph run --agents``: units from a YAML file or ``module:attr``, stored with
the run so that a resume (here after plan approval) rebuilds the team executor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from aimegraph.cli import main
from aimegraph.teams import load_agents
from tests.scripted import submit
from tests.teams.helpers import UNITS

SCENARIO = {
    "planner": [
        {
            "rationale": "write, then review",
            "tasks": [
                {
                    "id": "t1",
                    "title": "Write the note",
                    "team": {"mode": "sequential", "members": ["writer", "reviewer"]},
                }
            ],
        }
    ],
    "actors": {"t1/writer": [submit("draft 48000")], "t1/reviewer": [submit("fixed: 48213")]},
    "reporter": [{"text": "{all_results}"}],
}


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main([*args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_run_with_agents_from_a_yaml_file_pauses_and_resumes_as_a_team(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "team.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    agents = tmp_path / "agents.yaml"
    agents.write_text(yaml.safe_dump([u.model_dump(exclude={"model"}) for u in UNITS]))
    base = ["--checkpoints", f"sqlite:///{tmp_path / 'cp.db'}"]
    code, summary = run_cli(
        capsys, *base, "run", "Write the note", "--model", f"scripted:{scenario}",
        "--agents", str(agents), "--thread", "team", "--workspace", str(tmp_path / "ws"),
        "--approve-plan",
    )  # fmt: skip
    assert (
        code == 5 and "team (sequential): writer, reviewer" in summary["interrupts"][0]["checklist"]
    )

    # A new process: the stored settings bring the units back.
    code, summary = run_cli(capsys, *base, "resume", "team", "--approve")
    assert code == 0 and summary["status"] == "succeeded"
    task = summary["tasks"]["t1"]
    assert task["result"]["summary"] == "fixed: 48213"
    assert [m["member"] for m in task["members"]] == ["writer", "reviewer"]


def test_load_agents_from_module_attr_and_bad_specs(tmp_path: Path) -> None:
    assert [u.name for u in load_agents("tests.teams.helpers:UNITS")] == [
        "writer",
        "reviewer",
        "analyst",
    ]
    with pytest.raises(ValueError, match="cannot import agent units"):
        load_agents("tests.teams.helpers:NOPE")
    bad = tmp_path / "bad.json"
    bad.write_text('{"agents": {"name": "x"}}')
    with pytest.raises(ValueError, match="expected a list"):
        load_agents(str(bad))
    with pytest.raises(ValueError, match="file or module:attr"):
        load_agents("no-colon")
