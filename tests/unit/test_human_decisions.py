"""Resume values for approvals: only an explicit approval approves."""

from __future__ import annotations

import pytest

from aimegraph.models.offline.scripted import ScenarioError, load_scenario
from aimegraph.nodes.human import parse_decision


@pytest.mark.parametrize(
    ("answer", "action", "reason"),
    [
        (True, "approve", None),
        ("approve", "approve", None),
        ({"action": "approve"}, "approve", None),
        ({"action": "deny", "reason": "too risky"}, "reject", "too risky"),
        ({"action": "reject"}, "reject", "rejected"),
        ("not now", "reject", "not now"),
        (None, "reject", "rejected"),
        # No decision: never a silent approval (a plan is asked again, a tool call denied).
        ({"answer": "yes please"}, "unclear", None),
        ({"action": "edit"}, "unclear", None),  # an edit without a plan
        ({"action": "aprove"}, "unclear", "unrecognised answer {'action': 'aprove'}"),
        (42, "unclear", "unrecognised answer 42"),
    ],
)
def test_parse_decision(answer: object, action: str, reason: str | None) -> None:
    got_action, details = parse_decision(answer)
    assert got_action == action
    if reason is not None:
        assert details["reason"] == reason


def test_edit_keeps_the_plan() -> None:
    plan = {"rationale": "r", "tasks": []}
    assert parse_decision({"action": "edit", "plan": plan}) == (
        "edit",
        {"action": "edit", "plan": plan},
    )


def test_malformed_scenario_yaml_is_a_scenario_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.yaml"
    bad.write_text("planner: [unclosed")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(str(bad))
