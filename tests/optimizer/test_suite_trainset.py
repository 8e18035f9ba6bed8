"""``aimegraph optimize`` takes the eval's task suites as trainset and valset: each
task runs in a workspace of its own with its files, and scores the share of its
checks that pass."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from aimegraph.cli import main
from aimegraph.eval import load_suite
from aimegraph.eval.trainset import CHECKS_KEY, suite_for_optimizer
from aimegraph.models.offline.scripted import ScriptedChatModel
from aimegraph.prompts import DEFAULT_PROMPTS

pytest.importorskip("gepa")

REFLECT = f"scripted:{Path(__file__).parent / 'data' / 'reflect.yaml'}"

# One task: read the task's file, write out.txt, answer with what the file says.
SCENARIO: dict[str, Any] = {
    "planner": [
        {
            "rationale": "One task.",
            "tasks": [{"id": "t1", "title": "Copy the figure", "tool_bundles": ["files"]}],
        }
    ],
    "actors": {
        "t1": [
            {"tool": "read_file", "args": {"path": "figure.txt"}},
            {"tool": "write_file", "args": {"path": "out.txt", "content": "{last_tool_output}"}},
            {
                "tool": "submit_result",
                "args": {"status": "completed", "summary": "The figure is 48213."},
            },
        ]
    },
    "reporter": [{"text": "Answer: {all_results}"}],
}


def _suite(folder: Path, wanted: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "figure.txt").write_text("48213")
    task = {
        "id": "copy",
        "goal": "Copy the figure in figure.txt to out.txt and tell me the figure.",
        "files": ["figure.txt"],
        "check": [{"file": "out.txt", "equals": "48213"}, {"contains": wanted}],
    }
    path = folder / "suite.yaml"
    path.write_text(yaml.safe_dump({"tasks": [task, {**task, "id": "again"}]}))
    return path


def test_a_suite_task_runs_in_its_own_workspace_and_is_scored_by_its_checks(
    tmp_path: Path,
) -> None:
    suite = load_suite(_suite(tmp_path / "s", wanted="99999"))
    inputs = suite_for_optimizer([suite], model=ScriptedChatModel.from_dict(SCENARIO))
    (train,) = inputs.examples
    assert [e["task"] for e in train] == ["copy", "again"]
    state = inputs.run_example(DEFAULT_PROMPTS, train[0])
    assert state["status"] == "succeeded"
    assert [c["passed"] for c in state[CHECKS_KEY]] == [True, False]
    score, feedback = inputs.metric(train[0], state)
    assert score == 0.5
    assert feedback == "Check failed: contains 99999: missing '99999' in " + repr(
        state["final_answer"].strip()
    )
    assert not (tmp_path / "out.txt").exists()  # written in the task's own workspace


def _optimize(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, *extra: str
) -> tuple[int, str, str]:
    scenario = tmp_path / "model.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    capsys.readouterr()
    code = main(
        [
            "--checkpoints",
            "memory",
            "optimize",
            "--model",
            f"scripted:{scenario}",
            "--reflection-model",
            REFLECT,
            "--prompts",
            str(tmp_path / "prompts.jsonl"),
            "--components",
            "planner",
            *extra,
        ]
    )
    out = capsys.readouterr()
    return code, out.out, out.err


def test_optimize_cli_takes_suites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    train = _suite(tmp_path / "train", wanted="48213")
    val = _suite(tmp_path / "val", wanted="99999")
    code, out, err = _optimize(
        capsys,
        tmp_path,
        "--trainset",
        str(train),
        "--valset",
        str(val),
        "--max-metric-calls",
        "2",
        "--json",
    )
    assert code == 0, err
    report = json.loads(out)
    # Validation: each task passes its file check, not its contains check.
    assert report["score_before"] == 0.5 and report["metric_calls"] == 2


def test_a_suite_brings_its_own_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    train = _suite(tmp_path / "train", wanted="48213")
    examples = tmp_path / "val.jsonl"
    examples.write_text(json.dumps({"goal": "g", "answer": "a"}) + "\n")
    for extra, message in (
        (["--metric", "contains"], "a suite is scored by its own checks"),
        (["--valset", str(examples)], "must both be suites or both example files"),
    ):
        code, _, err = _optimize(
            capsys, tmp_path, "--trainset", str(train), "--max-metric-calls", "4", *extra
        )
        assert code == 2 and message in err
