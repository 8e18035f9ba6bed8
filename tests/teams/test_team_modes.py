"""Each team mode on its own (``build_team_graph``) over the scripted model, in native
and JSON tool calling: the result, every member's turn kept on the task, usage of
every call, and a failure inside each mode ending as data."""

from __future__ import annotations

from pathlib import Path

import pytest

from aimegraph.models import ScriptedChatModel
from aimegraph.state import TeamSpec
from tests.scripted import submit
from tests.teams.helpers import boom, run_team, team_task

MODES = pytest.mark.parametrize("tool_calling", ["native", "json"])


def turns(out: dict) -> list[tuple[str, str, str]]:
    return [(t.member, t.role, t.status) for t in out["tasks"]["t1"].members]


def member_prompts(model: ScriptedChatModel, member: str) -> list[str]:
    return [p for p in model.prompts("actor") if f'<member name="{member}"' in p]


# --- sequential ---


@MODES
def test_sequential_hands_each_member_the_previous_result(
    workspace: Path, tool_calling: str
) -> None:
    scenario = {
        "actors": {
            "t1/writer": [submit("Draft: total is 48213.", total="48213")],
            "t1/reviewer": [submit("Checked: total 48213 is right.", checked="yes")],
        }
    }
    task = team_task("sequential", "writer", "reviewer")
    out, model = run_team(workspace, task, scenario, tool_calling=tool_calling)

    result = out["tasks"]["t1"].result
    assert result.status == "completed"
    assert result.summary == "Checked: total 48213 is right."
    assert result.artifacts == {"total": "48213", "checked": "yes"}
    assert turns(out) == [
        ("writer", "member", "completed"),
        ("reviewer", "member", "completed"),
    ]
    (reviewer,) = member_prompts(model, "reviewer")
    assert "Draft: total is 48213." in reviewer and "step 2 of 2" in reviewer
    assert "You are a sceptical reviewer." in reviewer  # the unit's persona
    # Two member turns of one call each: all counted.
    assert out["usage"].llm_calls == 2
    assert out["usage"].by_role["actor"].llm_calls == 2
    assert out["tasks"]["t1"].members[0].transcript.startswith("> submit_result(")


def test_sequential_failed_last_member_starts_another_round(workspace: Path) -> None:
    scenario = {
        "actors": {
            "t1/writer": {
                "turns": [[submit("Total is 48000.")], [submit("Total is 48213 (fixed).")]]
            },
            "t1/reviewer": {
                "turns": [
                    [submit("48000 is wrong: the ledger sums to 48213.", status="failed")],
                    [submit("Total 48213 verified.")],
                ]
            },
        }
    }
    out, model = run_team(workspace, team_task("sequential", "writer", "reviewer"), scenario)
    assert out["tasks"]["t1"].result.summary == "Total 48213 verified."
    assert [t[0] for t in turns(out)] == ["writer", "reviewer", "writer", "reviewer"]
    second_writer = member_prompts(model, "writer")[1]
    assert "round 2" in second_writer
    assert "the ledger sums to 48213" in second_writer  # the objection is handed over


def test_sequential_last_round_failure_fails_the_task_with_the_reason(workspace: Path) -> None:
    scenario = {"actors": {"t1/writer": [submit("Total is 48000.")], "t1/reviewer": [boom()]}}
    task = team_task("sequential", "writer", "reviewer", max_rounds=1)
    out, _ = run_team(workspace, task, scenario)
    result = out["tasks"]["t1"].result
    assert out["tasks"]["t1"].status == "failed"
    assert "reviewer" in result.summary and "model down" in result.summary
    assert turns(out) == [("writer", "member", "completed"), ("reviewer", "member", "failed")]


def test_sequential_failed_middle_member_is_an_observation_for_the_next(
    workspace: Path,
) -> None:
    scenario = {
        "actors": {
            "t1/writer": [submit("Draft with total 48213.")],
            "t1/reviewer": [boom("reviewer crashed")],
            "t1/analyst": [submit("Final: 48213, checked myself.")],
        }
    }
    task = team_task("sequential", "writer", "reviewer", "analyst")
    out, model = run_team(workspace, task, scenario)
    assert out["tasks"]["t1"].result.status == "completed"
    (analyst,) = member_prompts(model, "analyst")
    # The last good result and the failure after it.
    assert "Draft with total 48213." in analyst and "reviewer crashed" in analyst


# --- broadcast ---


@MODES
def test_broadcast_votes_and_reports_the_agreement(workspace: Path, tool_calling: str) -> None:
    scenario = {
        "actors": {
            "t1/analyst": {
                "turns": [[submit("It is 42.", answer="42")], [submit("I get 41.", answer="41")]]
            },
            "t1/writer": [submit("42, from the table.", answer=" 42 ")],
        }
    }
    task = team_task("broadcast", "analyst", "analyst", "writer")
    out, model = run_team(workspace, task, scenario, tool_calling=tool_calling)
    result = out["tasks"]["t1"].result
    assert result.status == "completed"
    assert result.artifacts["answer"] == "42"
    assert result.artifacts["agreement"] == "2/3"
    assert result.artifacts["aggregation"] == "vote"
    assert result.artifacts["agreeing"] == "analyst, writer"
    assert sorted(t.turn for t in out["tasks"]["t1"].members if t.member == "analyst") == [1, 2]
    assert out["usage"].llm_calls == 3
    assert all("Every member does this same task" in p for p in model.prompts("actor"))


def test_broadcast_without_majority_merges_with_the_model(workspace: Path) -> None:
    scenario = {
        "actors": {
            "t1/analyst": [submit("It is 42.", answer="42")],
            "t1/writer": [submit("It is 40.", answer="40")],
            "t1/reviewer": [boom()],
        },
        "team_merges": {
            "t1": [
                {
                    "summary": "42: the analyst's sum is exact.",
                    "answer": "42",
                    "agreeing": ["analyst"],
                }
            ]
        },
    }
    task = team_task("broadcast", "analyst", "writer", "reviewer")
    out, model = run_team(workspace, task, scenario)
    result = out["tasks"]["t1"].result
    assert result.status == "completed"
    assert result.artifacts == {
        "answer": "42",
        "agreement": "1/3",
        "aggregation": "merge",
        "agreeing": "analyst",
    }
    (merge,) = model.prompts("team_merge")
    assert "It is 40." in merge and "model down" in merge  # every result, the failure too
    # Two members' calls and the merge (a call that raised returned no usage).
    assert out["usage"].llm_calls == 3
    assert out["usage"].by_role["team"].llm_calls == 1


def test_broadcast_every_member_failing_fails_the_task(workspace: Path) -> None:
    scenario = {
        "actors": {"t1/analyst": [boom("analyst down")], "t1/writer": [boom("writer down")]}
    }
    out, _ = run_team(workspace, team_task("broadcast", "analyst", "writer"), scenario)
    result = out["tasks"]["t1"].result
    assert result.status == "failed"
    assert "analyst down" in result.summary and "writer down" in result.summary


# --- joint ---


@MODES
def test_joint_talks_until_a_proposal_stands(workspace: Path, tool_calling: str) -> None:
    scenario = {
        "actors": {
            "t1/writer": {
                "turns": [
                    [submit("Total 48000.", stance="propose")],
                    [submit("Total 48213, as the analyst says.", stance="propose", total="48213")],
                ]
            },
            "t1/analyst": {
                "turns": [
                    [submit("Wrong: the rows sum to 48213.", stance="object")],
                    [submit("Agreed.", stance="agree")],
                ]
            },
        }
    }
    task = team_task("joint", "writer", "analyst")
    out, model = run_team(workspace, task, scenario, tool_calling=tool_calling)
    result = out["tasks"]["t1"].result
    assert result.status == "completed"
    assert result.summary == "Total 48213, as the analyst says."
    assert result.artifacts == {"total": "48213", "agreement": "2/2"}
    assert [t[0] for t in turns(out)] == ["writer", "analyst", "writer", "analyst"]
    # The shared conversation: the writer's second turn sees the objection.
    assert 'stance="object"' in member_prompts(model, "writer")[1]
    assert "the rows sum to 48213" in member_prompts(model, "writer")[1]


def test_joint_standing_objection_after_max_rounds_fails_the_task(workspace: Path) -> None:
    scenario = {
        "actors": {
            "t1/writer": [submit("Total 48000.", stance="propose")],
            "t1/analyst": [submit("Still wrong: it is 48213.", stance="object")],
        }
    }
    out, _ = run_team(workspace, team_task("joint", "writer", "analyst", max_rounds=2), scenario)
    result = out["tasks"]["t1"].result
    assert result.status == "failed"
    assert "No agreement in 2 round(s)" in result.summary and "it is 48213" in result.summary
    assert len(out["tasks"]["t1"].members) == 4


def test_joint_failed_turn_is_an_observation_not_an_objection(workspace: Path) -> None:
    scenario = {
        "actors": {
            "t1/writer": [submit("Total 48213.", stance="propose")],
            "t1/analyst": [boom("analyst down")],
        }
    }
    out, _ = run_team(workspace, team_task("joint", "writer", "analyst"), scenario)
    result = out["tasks"]["t1"].result
    assert result.status == "completed" and result.artifacts["agreement"] == "1/2"
    assert turns(out) == [("writer", "member", "completed"), ("analyst", "member", "failed")]


@MODES
def test_joint_with_model_picked_speakers(workspace: Path, tool_calling: str) -> None:
    scenario = {
        "actors": {
            "t1/writer": [submit("Total 48213.", stance="propose")],
            "t1/analyst": [submit("Agreed, the rows sum to 48213.", stance="agree")],
            "t1/reviewer": [submit("Agreed.", stance="agree")],
        },
        # The moderator asks the analyst before the reviewer; then a name that is no
        # member falls back to the one who has not answered the proposal yet.
        "team_speakers": {"t1": [{"member": "analyst"}, {"member": "nobody"}]},
    }
    team = TeamSpec(mode="joint", members=("writer", "reviewer", "analyst"), speaker="model")
    task = team_task("joint", "writer").model_copy(update={"team": team})
    out, model = run_team(workspace, task, scenario, tool_calling=tool_calling)
    assert out["tasks"]["t1"].result.artifacts["agreement"] == "3/3"
    assert [t[0] for t in turns(out)] == ["writer", "analyst", "reviewer"]
    first, second = model.prompts("team_speaker")
    assert "In turn order, reviewer would speak next" in first
    assert "- analyst: Computes statistics" in first and "Total 48213." in first
    # One moderator call before every turn but the first, counted under "team".
    assert out["usage"].by_role["team"].llm_calls == 2


# --- hierarchical ---


@MODES
def test_hierarchical_lead_splits_members_work_lead_integrates(
    workspace: Path, tool_calling: str
) -> None:
    scenario = {
        "team_leads": {
            "t1": [
                {
                    "parts": [
                        {"member": "analyst", "instruction": "Sum the ledger."},
                        {"member": "reviewer", "instruction": "Check the ledger for duplicates."},
                        {"member": "nobody", "instruction": "Ignored: not a member."},
                    ]
                }
            ]
        },
        "actors": {
            "t1/analyst": [submit("Sum is 48213.", total="48213")],
            "t1/reviewer": [submit("No duplicates.")],
            "t1/writer": [submit("Report: total 48213, no duplicates.")],
        },
    }
    task = team_task("hierarchical", "writer", "analyst", "reviewer")
    out, model = run_team(workspace, task, scenario, tool_calling=tool_calling)
    result = out["tasks"]["t1"].result
    assert result.status == "completed"
    assert result.summary == "Report: total 48213, no duplicates."
    assert sorted(turns(out)) == [
        ("analyst", "part", "completed"),
        ("reviewer", "part", "completed"),
        ("writer", "lead", "completed"),
    ]
    (split,) = model.prompts("team_lead")
    assert "- analyst: Computes statistics" in split and "- writer" not in split
    assert "Sum the ledger." in member_prompts(model, "analyst")[0]
    (lead,) = member_prompts(model, "writer")
    assert "Sum is 48213." in lead and "No duplicates." in lead
    assert out["usage"].llm_calls == 4  # split, two parts, integration
    assert out["usage"].by_role["team"].llm_calls == 1


def test_hierarchical_failed_part_is_split_again_then_integrated(workspace: Path) -> None:
    scenario = {
        "team_leads": {
            "t1": [
                {"parts": [{"member": "analyst", "instruction": "Sum the ledger."}]},
                {"parts": [{"member": "reviewer", "instruction": "Sum the ledger by hand."}]},
            ]
        },
        "actors": {
            "t1/analyst": [boom("calculator down")],
            "t1/reviewer": [submit("Sum is 48213.")],
            "t1/writer": [submit("Total 48213.")],
        },
    }
    task = team_task("hierarchical", "writer", "analyst", "reviewer", max_rounds=2)
    out, model = run_team(workspace, task, scenario)
    assert out["tasks"]["t1"].result.summary == "Total 48213."
    assert turns(out) == [
        ("analyst", "part", "failed"),
        ("reviewer", "part", "completed"),
        ("writer", "lead", "completed"),
    ]
    assert "calculator down" in model.prompts("team_lead")[1]  # the lead sees the failure


def test_hierarchical_failed_lead_fails_the_task(workspace: Path) -> None:
    scenario = {
        "team_leads": {"t1": [{"parts": [{"member": "analyst", "instruction": "Sum it."}]}]},
        "actors": {"t1/analyst": [submit("Sum is 48213.")], "t1/writer": [boom("lead down")]},
    }
    out, _ = run_team(workspace, team_task("hierarchical", "writer", "analyst"), scenario)
    result = out["tasks"]["t1"].result
    assert result.status == "failed" and "lead down" in result.summary


def test_hierarchical_unusable_split_leaves_the_lead_to_work_alone(workspace: Path) -> None:
    scenario = {
        "team_leads": {"t1": [{"raw": "no idea"}]},
        "actors": {"t1/writer": [submit("Did it all: 48213.")]},
    }
    out, model = run_team(
        workspace, team_task("hierarchical", "writer", "analyst"), scenario, max_output_retries=0
    )
    assert out["tasks"]["t1"].result.summary == "Did it all: 48213."
    assert "could not split the task" in member_prompts(model, "writer")[0]


# --- budgets and unknown units ---


def test_team_stops_when_its_share_of_the_call_budget_is_used(workspace: Path) -> None:
    scenario = {"actors": {"t1/writer": [submit("a")], "t1/reviewer": [submit("b")]}}
    task = team_task("sequential", "writer", "reviewer", "writer")
    model = ScriptedChatModel.from_dict({"planner": [{"tasks": []}], **scenario})
    from aimegraph import AimeConfig
    from aimegraph.graphs import build_team_graph
    from tests.teams.helpers import UNITS

    graph = build_team_graph(
        "sequential", model, agents=UNITS, config=AimeConfig(workspace=workspace)
    )
    out = graph.invoke({"goal": "g", "task": task, "dependency_results": {}, "llm_call_budget": 2})
    assert out["usage"].llm_calls == 2
    assert [t.member for t in out["tasks"]["t1"].members] == ["writer", "reviewer"]


def test_unknown_unit_in_a_team_fails_the_task_with_the_names(workspace: Path) -> None:
    out, _ = run_team(workspace, team_task("broadcast", "writer", "ghost"), {})
    result = out["tasks"]["t1"].result
    assert result.status == "failed" and "ghost" in result.summary
    assert out["usage"].llm_calls == 0


def test_per_task_check_judges_the_team_result_and_keeps_the_turns(workspace: Path) -> None:
    scenario = {
        "actors": {"t1/writer": [submit("Total 48000.")], "t1/reviewer": [submit("Looks fine.")]},
        "task_checks": {
            "t1": [{"passed": False, "reasoning": "No total of 48213.", "issues": ["wrong sum"]}]
        },
    }
    task = team_task("sequential", "writer", "reviewer", completion_criteria="The sum is right.")
    out, model = run_team(workspace, task, scenario, verify="tasks")
    result = out["tasks"]["t1"]
    assert result.status == "failed" and "No total of 48213." in result.result.summary
    assert [m.member for m in result.members] == ["writer", "reviewer"]
    (check,) = model.prompts("verifier")
    assert "Looks fine." in check  # the team's result is what gets checked
    assert out["usage"].by_role["verifier"].llm_calls == 1
