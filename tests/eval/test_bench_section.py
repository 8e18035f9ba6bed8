"""The eval benchmark section (``python -m bench --only eval``) in quick mode: it runs
both systems on the oracle replies and reports finite, positive ratios."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a top-level folder of the repo, not installed
    sys.path.insert(0, str(ROOT))

from bench.common import check_metrics  # noqa: E402

pytest.importorskip("langchain.agents", reason="create_agent needs the [eval] extra")


def test_quick_eval_section_compares_prompt_tokens() -> None:
    from bench.eval_tokens import run

    result = run(quick=True)
    assert check_metrics(result.metrics) == []
    assert result.metrics["eval.rollouts"] == 6
    for key in ("eval.one_step.ratio", "eval.5plus_steps.ratio", "eval.all.ratio"):
        assert key in result.metrics
    comparison = result.tables[0]
    assert [row[0] for row in comparison.rows] == [
        "one step: 1",
        "2-4 steps: 1",
        "5+ steps: 1",
        "all: 3",
    ]
    assert all(len(row) == len(t.columns) for t in result.tables for row in t.rows)
    assert comparison.columns[-1].startswith("LLM calls per solved task")
    variants = result.tables[1]
    assert [row[1] for row in variants.rows] == ["3/3"] * 4  # every variant solves them
    assert "eval.variant3.all.ratio" in result.metrics
    roles = {row[1] for row in result.tables[3].rows}
    assert {"planner", "actor", "reporter", "verifier", "ReAct loop"} <= roles
