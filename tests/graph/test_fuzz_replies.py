"""The demo under a seeded misbehaving model (issue 10, "Done when").

:class:`FuzzChatModel` reshapes the scripted demo's replies the way real models bend
them (fences, prose, ``<think>`` blocks, tool calls written as text, empty replies,
transient errors on first calls and re-asks, extra fields, restated plans). Every run
must still succeed with the same files as an undisturbed run, and nothing the model
thought may reach the answer.
"""

from __future__ import annotations

import shutil
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.models import ScriptedChatModel, load_scenario
from aimegraph.models.offline.fuzz import FuzzChatModel, FuzzRates

SEEDS = range(12)
OUTPUT_FILES = ("revenue.json", "trend.json", "growth.txt", "report.md")


pytestmark = pytest.mark.usefixtures("fast_retries")


def demo_scenario() -> dict[str, Any]:
    """The demo, whose later replans (``replan="every_step"``) change nothing: the fuzz
    model restates the earlier tasks in them, completed ones included."""
    scenario = load_scenario("demo").model_dump()
    scenario["planner"].append({"rationale": "On track; nothing to change.", "tasks": []})
    return scenario


def demo_workspace(path: Path) -> Path:
    path.mkdir()
    for item in (resources.files("aimegraph.demo") / "data").iterdir():
        if item.is_file():
            shutil.copyfile(str(item), path / item.name)
    return path


def run_demo(model: Any, workspace: Path, **config: Any) -> dict[str, Any]:
    graph = build_aime_graph(model, config=AimeConfig(workspace=workspace, **config))
    return graph.invoke({"goal": load_scenario("demo").goal})


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The files an undisturbed demo run writes."""
    workspace = demo_workspace(tmp_path_factory.mktemp("reference") / "workspace")
    out = run_demo(ScriptedChatModel.from_dict(demo_scenario()), workspace)
    assert out["status"] == "succeeded"
    return {name: (workspace / name).read_text() for name in OUTPUT_FILES}


@pytest.mark.parametrize("mode", ["native", "json"])
def test_fuzzed_demo_runs_all_succeed_with_the_right_files(
    tmp_path: Path, reference: dict[str, str], mode: str
) -> None:
    failures: list[str] = []
    applied: Counter[str] = Counter()
    for seed in SEEDS:
        replan = "every_step" if seed % 3 == 0 else "on_failure"
        workspace = demo_workspace(tmp_path / f"seed{seed}")
        model = FuzzChatModel(inner=ScriptedChatModel.from_dict(demo_scenario()), seed=seed)
        out = run_demo(model, workspace, tool_calling=mode, replan=replan)
        applied.update(model.applied)
        problems = []
        if out["status"] != "succeeded":
            problems.append(f"status {out['status']}: {out.get('reason')}")
        problems += [
            f"{name} differs"
            for name in OUTPUT_FILES
            if not (workspace / name).exists() or (workspace / name).read_text() != reference[name]
        ]
        answer = out.get("final_answer") or ""
        if "think" in answer or "draft" in answer or "report.md" not in answer:
            problems.append(f"final answer {answer[:200]!r}")
        if problems:
            failures.append(f"seed {seed} ({replan}, {dict(model.applied)}): {'; '.join(problems)}")
    assert not failures, "\n".join(failures)
    # Every reshaping happened (restated plans only come with every_step replans).
    assert set(applied) == set(FuzzRates.model_fields), applied
