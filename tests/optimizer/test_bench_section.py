"""Smoke test of ``python -m bench --only optimize`` (quick mode), in-process.

Checks the section runs, fills its tables and reports finite numbers; the optimiser
must reach a validation score of 1.0 on the citation task, and nothing on its harder
twin with a reflection model that only copies the feedback. No timings are asserted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("gepa")

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a top-level folder of the repo, not installed
    sys.path.insert(0, str(ROOT))

from bench import optimize  # noqa: E402
from bench.common import check_metrics  # noqa: E402


@pytest.mark.slow
def test_optimize_section_runs() -> None:
    result = optimize.run(quick=True)
    assert result.name == "optimize" and all(table.rows for table in result.tables)
    assert check_metrics(result.metrics) == []
    assert result.metrics["offline_planner_20_score_after"] == 1.0
    assert result.metrics["online_trigger_reflection_calls"] == 1
    # The harder twin: copying feedback that does not spell the fix learns nothing.
    assert result.metrics["harder_feedbackreflectionmodel_score_after"] == 0.0
    assert result.headlines
