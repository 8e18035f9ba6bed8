"""Issue 6: the CLI's exit codes tell outcomes apart, and --json is machine-readable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from aimegraph.cli import main

ONE_TASK = {"rationale": "r", "tasks": [{"id": "a", "title": "A"}]}

SCENARIOS: dict[str, tuple[dict[str, Any], list[str], int, str]] = {
    "succeeded": ({"planner": [ONE_TASK]}, [], 0, "succeeded"),
    "failed": ({"planner": [{"rationale": "r", "tasks": [{"id": "a", "title": "A", "dependencies": ["a"]}]}]}, [], 1, "failed"),
    "rejected": (
        {"planner": [ONE_TASK], "verifier": [{"passed": False, "reasoning": "no", "issues": ["wrong"]}]},
        ["--max-replans", "0"],
        3,
        "rejected",
    ),
    "budget": ({"planner": [ONE_TASK]}, ["--max-llm-calls", "1"], 4, "budget_exhausted"),
    "paused": ({"planner": [ONE_TASK]}, ["--approve-plan"], 5, "paused"),
}


@pytest.mark.parametrize("case", list(SCENARIOS))
def test_exit_code_and_json_output(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario, flags, code, status = SCENARIOS[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    argv = [
        "--checkpoints", f"sqlite:///{tmp_path / 'cp.db'}",
        "run", "a goal", "--model", f"scripted:{path}", "--thread", case,
        "--workspace", str(tmp_path / "ws"), "--json", *flags,
    ]  # fmt: skip
    assert main(argv) == code
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == status and out["thread_id"] == case
    assert set(out) >= {"final_answer", "checklist", "tasks", "verdict", "usage", "reason"}
    if case == "paused":
        assert out["interrupts"][0]["kind"] == "approve_plan"
    if case in ("failed", "rejected", "budget"):
        assert out["reason"]


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run"])  # no goal
    assert info.value.code == 2
    assert main(["--checkpoints", "redis://x", "threads"]) == 2
    assert main(
        ["--checkpoints", f"sqlite:///{tmp_path / 'cp.db'}", "run", "g", "--model", "nonsense:x"]
    ) == 2
    assert "nonsense" in capsys.readouterr().err


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("run", "demo", "resume", "threads", "show", "history", "fork", "draw"):
        with pytest.raises(SystemExit) as info:
            main([command, "--help"])
        assert info.value.code == 0
        assert "usage: aimegraph" in capsys.readouterr().out
