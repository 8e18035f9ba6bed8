"""The scripted citation task (aimegraph.models.offline.teaching.citation_models) as the
optimiser's tests use it.

The planner plans to cite the data file only when its system prompt says ALWAYS
CITE THE FILE; the verifier passes an answer only when it names the file, and
otherwise says so in an issue that carries the instruction. A reflection model
that turns reviewer issues into rules (FeedbackReflectionModel) can thus learn
the instruction from the runs' traces, and nothing else can make runs pass.
"""

from __future__ import annotations

from pathlib import Path

from aimegraph import AimeConfig
from aimegraph.models.offline.teaching import (
    CITATION_GOALS,
    CITE_INSTRUCTION,
    CITED_SOURCE,
    citation_models,
)

INSTRUCTION = CITE_INSTRUCTION
SOURCE = CITED_SOURCE
GOALS = list(CITATION_GOALS)
task_models = citation_models


def config(workspace: Path) -> AimeConfig:
    # A rejected answer ends the run (no replan), so a metric call is one short run.
    return AimeConfig(workspace=workspace, max_replans=0, task_retries=0)


def examples(goals: list[str]) -> list[dict[str, str]]:
    return [{"goal": goal, "answer": "data/q3.csv"} for goal in goals]
