"""Issue 6: the CLI's exit codes tell outcomes apart, and --json is machine-readable."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from aimegraph.cli import main, missing_extra_message

ONE_TASK = {"rationale": "r", "tasks": [{"id": "a", "title": "A"}]}

SCENARIOS: dict[str, tuple[dict[str, Any], list[str], int, str]] = {
    "succeeded": ({"planner": [ONE_TASK]}, [], 0, "succeeded"),
    "failed": (
        {
            "planner": [
                {"rationale": "r", "tasks": [{"id": "a", "title": "A", "dependencies": ["a"]}]}
            ]
        },
        [],
        1,
        "failed",
    ),
    "rejected": (
        {
            "planner": [ONE_TASK],
            "verifier": [{"passed": False, "reasoning": "no", "issues": ["wrong"]}],
        },
        ["--max-replans", "0"],
        3,
        "rejected",
    ),
    "budget": ({"planner": [ONE_TASK]}, ["--max-llm-calls", "1"], 4, "budget_exhausted"),
    "paused": ({"planner": [ONE_TASK]}, ["--approve-plan"], 5, "paused"),
    # A guardrail's tripwire (issue 41): the answer holds an API key, secrets:trip blocks it.
    "blocked": (
        {"planner": [ONE_TASK], "reporter": [{"text": "sk-proj-Abcdefghijklmnopqrstuvwxyz0123"}]},
        ["--config", '{"guardrails": ["secrets:trip"]}'],
        10,
        "blocked",
    ),
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
    if case in ("failed", "rejected", "budget", "blocked"):
        assert out["reason"]


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run"])  # no goal
    assert info.value.code == 2
    assert main(["--checkpoints", "redis://x", "threads"]) == 2
    assert (
        main(
            [
                "--checkpoints",
                f"sqlite:///{tmp_path / 'cp.db'}",
                "run",
                "g",
                "--model",
                "nonsense:x",
            ]
        )
        == 2
    )
    assert "nonsense" in capsys.readouterr().err


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("run", "demo", "resume", "threads", "show", "history", "fork", "draw"):
        with pytest.raises(SystemExit) as info:
            main([command, "--help"])
        assert info.value.code == 0
        assert "usage: aimegraph" in capsys.readouterr().out


def test_a_missing_extra_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # As without pip install 'aimegraph[optimize]': the online optimiser in --config
    # reaches GEPA only when the graph is built, deep inside the run command.
    monkeypatch.setitem(sys.modules, "gepa", None)
    for module in (
        "aimegraph.optimizer.adapter",
        "aimegraph.optimizer.online",
        "aimegraph.nodes.online",
    ):
        monkeypatch.delitem(sys.modules, module, raising=False)
    argv = [
        "--checkpoints", f"sqlite:///{tmp_path / 'cp.db'}",
        "run", "a goal", "--model", "scripted:demo", "--workspace", str(tmp_path / "ws"),
        "--config", json.dumps({"optimize_online": True}),
    ]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
    assert "pip install 'aimegraph[optimize]'" in err[0]


@pytest.mark.parametrize(
    ("missing", "extra"),
    [
        ("celery.app", "distributed"),
        ("langgraph.checkpoint.postgres", "postgres"),
        ("gepa", "optimize"),
    ],
)
def test_a_missing_module_names_its_extra(missing: str, extra: str) -> None:
    exc = ModuleNotFoundError(f"No module named {missing!r}", name=missing)
    assert missing_extra_message(exc) == f"{exc} (pip install 'aimegraph[{extra}]')"
    # A module no extra provides is a bug or the user's own: not dressed up as one.
    assert missing_extra_message(ModuleNotFoundError("x", name="myapp.tools")) is None


def test_a_tripwire_is_shown_as_it_happens_and_exits_10(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario, flags, code, _ = SCENARIOS["blocked"]
    path = tmp_path / "blocked.yaml"
    path.write_text(yaml.safe_dump(scenario))
    argv = [
        "--checkpoints", f"sqlite:///{tmp_path / 'cp.db'}",
        "run", "a goal", "--model", f"scripted:{path}", "--workspace", str(tmp_path / "ws"),
        *flags,
    ]  # fmt: skip
    assert main(argv) == code
    out = capsys.readouterr().out
    assert "output: guardrail secrets tripped: found a secret (openai_key)" in out
    assert "sk-proj-" not in out


BAD_ALERT_RULES = {
    "missing": None,
    "not YAML": "rules: [unclosed",
    "unknown kind": "rules:\n  - {name: r, kind: tool_failures, limit: 0.2}\n",
    "bad webhook": "webhook: {url: 'ftp://hooks.example.com'}\n",
}


@pytest.mark.parametrize("command", ["dashboard", "worker"])
@pytest.mark.parametrize("fault", list(BAD_ALERT_RULES))
def test_a_bad_alert_rules_file_is_one_line_and_exit_2(
    command: str, fault: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--alerts FILE`` is read before the command serves anything (no port bound, no
    broker or database reached): a fault is one line naming the file."""
    rules = tmp_path / "alerts.yaml"
    text = BAD_ALERT_RULES[fault]
    if text is not None:
        rules.write_text(text)
    argv = ["--checkpoints", f"sqlite:///{tmp_path / 'cp.db'}", command, "--alerts", str(rules)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), captured.err
    assert str(rules) in err[0]
    assert "on http://" not in captured.out  # the dashboard never said it was serving
