"""The scripted prompt-optimisation task shared by the optimiser's tests.

Goal: report a figure from a data file. The planner plans to cite the file only
when its system prompt says ALWAYS CITE THE FILE (a PromptGatedChatModel over two
scripted planners); the verifier passes an answer only when it names the file,
and otherwise says so in an issue that carries the instruction. A reflection
model that turns reviewer issues into rules (FeedbackReflectionModel) can thus
learn the instruction from the runs' traces, and nothing else can make runs pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from aimegraph import AimeConfig
from aimegraph.models import ScriptedChatModel
from aimegraph.models.teaching import PromptGatedChatModel

INSTRUCTION = "ALWAYS CITE THE FILE"
SOURCE = "source: data/q3.csv"
ISSUE = f"The answer gives no source for its figure. {INSTRUCTION} the figures come from."


def _planner(task_id: str, description: str) -> dict[str, Any]:
    return {
        "planner": [
            {
                "rationale": "One lookup answers the goal.",
                "tasks": [
                    {
                        "id": task_id,
                        "title": "Find the Q3 revenue",
                        "description": description,
                        "completion_criteria": "The figure is stated.",
                        "tool_bundles": ["files"],
                    }
                ],
            }
        ]
    }


def _verifier(passed: bool) -> dict[str, Any]:
    verdict = {
        "passed": passed,
        "reasoning": "Checked the answer.",
        "issues": [] if passed else [ISSUE],
    }
    return {"verifier": [verdict]}


def task_models() -> tuple[BaseChatModel, dict[str, BaseChatModel]]:
    """``(model, models)`` for ``build_aime_graph`` / ``optimize``."""
    shared = ScriptedChatModel.from_dict(
        {
            "actors": {
                "t1": [
                    {
                        "tool": "submit_result",
                        "args": {"status": "completed", "summary": "Q3 revenue is 48213."},
                    }
                ],
                "cite1": [
                    {
                        "tool": "submit_result",
                        "args": {
                            "status": "completed",
                            "summary": f"Q3 revenue is 48213 ({SOURCE}).",
                        },
                    }
                ],
            },
            "reporter": [{"text": "Answer: {all_results}"}],
        }
    )
    planner = PromptGatedChatModel(
        phrase=INSTRUCTION,
        follows=ScriptedChatModel.from_dict(
            _planner("cite1", "Read the Q3 revenue from data/q3.csv and cite that file.")
        ),
        ignores=ScriptedChatModel.from_dict(_planner("t1", "Find the Q3 revenue.")),
    )
    verifier = PromptGatedChatModel(
        phrase=SOURCE,
        follows=ScriptedChatModel.from_dict(_verifier(True)),
        ignores=ScriptedChatModel.from_dict(_verifier(False)),
    )
    return shared, {"planner": planner, "verifier": verifier}


def config(workspace: Path) -> AimeConfig:
    # A rejected answer ends the run (no replan), so a metric call is one short run.
    return AimeConfig(workspace=workspace, max_replans=0, task_retries=0)


GOALS = [
    "What was the Q3 revenue?",
    "Report the Q3 revenue figure.",
    "How much revenue did we make in Q3?",
    "Give me Q3's revenue.",
    "Q3 revenue, please.",
]


def examples(goals: list[str]) -> list[dict[str, str]]:
    return [{"goal": goal, "answer": "data/q3.csv"} for goal in goals]
