"""``aimegraph optimize --from-feedback`` (issue 37, point 4): the runs users rated
with ``aimegraph feedback`` are GEPA's trainset: each goal, its rating as the score
(1 to 5 as 0 to 1) and its note as the feedback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aimegraph.eval.trainset import feedback_metric
from tests.conftest import Cli

pytest.importorskip("gepa")

DATA = Path(__file__).parent / "data"
MODEL = f"scripted:{DATA / 'uncited.yaml'}"
REFLECT = f"scripted:{DATA / 'reflect.yaml'}"
NOTE = "Say which file the figure comes from."


def _optimize(cli: Cli, tmp_path: Path, *extra: str) -> tuple[int, Any]:
    return cli.json(
        "optimize", "--from-feedback", "--model", MODEL, "--reflection-model", REFLECT,
        "--prompts", str(tmp_path / "prompts.jsonl"), "--components", "planner",
        "--config", json.dumps({"workspace": str(cli.workspace), "max_replans": 0}), *extra,
    )  # fmt: skip


def test_optimize_runs_on_the_rated_runs(cli: Cli, tmp_path: Path) -> None:
    code, text = cli("optimize", "--from-feedback", "--model", MODEL, "--reflection-model",
                     REFLECT, "--max-metric-calls", "5")  # fmt: skip
    assert code == 2 and "no rated runs in memory scope 'default'" in text
    config = json.dumps({"max_replans": 0})
    for thread, rating in (("low", "1"), ("fair", "4")):
        assert cli.run(thread, "--config", config, model=MODEL)[0] == 3  # rejected
        code, _ = cli.json("feedback", thread, "--rating", rating, "--note", NOTE)
        assert code == 0
    code, report = _optimize(cli, tmp_path, "--max-metric-calls", "8", "--minibatch-size", "2")
    assert code == 0, report
    # The runs give the rated answers again: each scores its user's rating, 0.0 and 0.75.
    assert report["score_before"] == pytest.approx(0.375)
    assert report["metric_calls"] <= 8 and report["history"]


def test_the_metric_reads_the_rating_and_the_note() -> None:
    example = {"goal": "g", "score": 0.25, "rating": 2, "feedback": NOTE, "rated_answer": "A"}
    assert feedback_metric(example, {"final_answer": "A"}) == (
        0.25,
        f"This is the answer the user rated. A user rated an answer to this goal 2/5: {NOTE}",
    )
    # Another answer is scored as any run (succeeded, passing verdict), with the note.
    score, said = feedback_metric(example, {"final_answer": "B", "status": "succeeded"})
    assert score == 1.0 and NOTE in said
    score, said = feedback_metric(example, {"final_answer": "B", "status": "failed"})
    assert score == 0.0 and NOTE in said
