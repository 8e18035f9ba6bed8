"""Tool approval policies and the decisions a human's answer is read as."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import ToolCall

from aimegraph import AimeConfig
from aimegraph.checkpoints import RunSettings
from aimegraph.nodes.tool_approval import parse_tool_decision
from aimegraph.policy import ToolRule, check_rules, decide


def read(path: str) -> ToolCall:
    return ToolCall(name="read_file", args={"path": path}, id="c1", type="tool_call")


RULES: list[str | ToolRule] = [
    ToolRule(tool="read_file", args={"path": "data/*"}, decision="allow"),
    ToolRule(tool="read_*", decision="ask", reason="outside data/"),
    "write_file",
]


@pytest.mark.parametrize(
    ("path", "decision"),
    [
        ("data/sales.csv", "allow"),
        ("data/2024/q1.csv", "allow"),  # '*' spans folders: anything under data/
        ("./data/sales.csv", "allow"),
        ("data/../secret.txt", "ask"),  # normalised: not under data/
        ("data\\..\\secret.txt", "ask"),
        ("/etc/passwd", "ask"),
        ("notes.txt", "ask"),
    ],
)
def test_the_first_matching_rule_decides(path: str, decision: str) -> None:
    assert decide(read(path), None, rules=RULES).decision == decision


def test_a_call_no_rule_matches_runs_and_reports_are_never_gated() -> None:
    calc = ToolCall(name="calculator", args={"expression": "1"}, id="c", type="tool_call")
    assert decide(calc, None, rules=RULES).decision == "allow"
    everything = [ToolRule(tool="*", decision="deny")]
    submit = ToolCall(name="submit_result", args={}, id="s", type="tool_call")
    assert decide(submit, None, rules=everything, exempt=["submit_result"]).decision == "allow"
    assert decide(calc, None, rules=everything).decision == "deny"


def test_a_policy_decides_before_the_rules_and_none_leaves_it_to_them() -> None:
    def only_notes(call: ToolCall, task: Any) -> str | None:
        return "deny" if call["args"].get("path") == "notes.txt" else None

    assert decide(read("notes.txt"), None, rules=RULES, policy=only_notes).decision == "deny"
    assert decide(read("data/a.csv"), None, rules=RULES, policy=only_notes).decision == "allow"
    with pytest.raises(ValueError, match="must return"):
        decide(read("x"), None, rules=(), policy=lambda call, task: "maybe")


def test_entries_that_match_no_tool_are_refused() -> None:
    check_rules(RULES, ["read_file", "write_file"])
    with pytest.raises(ValueError, match="'raed_file'"):
        check_rules(["raed_file"], ["read_file"])
    with pytest.raises(ValueError, match="'x_\\*'"):
        check_rules([ToolRule(tool="x_*")], ["read_file"])


def policy_for_settings(call: ToolCall, task: Any) -> str | None:
    return None


def test_rules_and_a_named_policy_survive_stored_run_settings() -> None:
    config = AimeConfig(
        approve_tools=RULES, tool_policy="tests.unit.test_tool_policy:policy_for_settings"
    )
    stored = RunSettings(model="scripted:demo", config=config).as_metadata()
    back = RunSettings.from_metadata(stored)
    assert back is not None and back.config.approve_tools == tuple(RULES)
    assert back.config.tool_policy == "tests.unit.test_tool_policy:policy_for_settings"
    # A module-level function given in Python is stored by its name.
    by_callable = AimeConfig(tool_policy=policy_for_settings).model_dump(mode="json")
    assert by_callable["tool_policy"] == f"{__name__}:policy_for_settings"
    assert json.loads(json.dumps(by_callable))["approve_tools"] == []


def test_a_policy_that_does_not_import_is_refused_when_configured() -> None:
    with pytest.raises(ValueError, match="cannot import tool_policy"):
        AimeConfig(tool_policy="no_such_module:policy")


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"decisions": [{"type": "approve"}]}, ("approve", None)),
        ({"type": "approve"}, ("approve", None)),
        ({"action": "approve"}, ("approve", None)),
        (True, ("approve", None)),
        ({"decisions": [{"type": "reject", "message": "no"}]}, ("reject", "no")),
        ({"type": "reject"}, ("reject", "no reason given")),
        ({"action": "deny", "reason": "no"}, ("reject", "no")),
        ("not now", ("reject", "not now")),
        (
            {"type": "edit", "edited_action": {"name": "read_file", "args": {"path": "a"}}},
            ("edit", {"path": "a"}),
        ),
        ({"action": "edit", "args": {"path": "a"}}, ("edit", {"path": "a"})),
    ],
)
def test_tool_decisions(answer: Any, expected: tuple[str, Any]) -> None:
    assert parse_tool_decision(answer, "read_file") == expected


@pytest.mark.parametrize(
    "answer",
    [
        {"decisions": [{"type": "approve"}, {"type": "approve"}]},  # one call, two decisions
        {"type": "respond", "message": "x"},
        {"type": "edit", "edited_action": {"name": "write_file", "args": {}}},
        {"action": "edit"},  # no arguments
        {"action": "edit", "plan": {}},  # a plan edit is for a plan approval
        {"answer": "yes"},
        42,
    ],
)
def test_answers_that_are_no_tool_decision(answer: Any) -> None:
    kind, why = parse_tool_decision(answer, "read_file")
    assert kind == "unclear" and why
