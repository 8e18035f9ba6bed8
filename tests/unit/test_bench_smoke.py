"""Smoke test of the benchmark harness: `python -m bench --quick`, run in-process.

It checks that every section runs and reports finite, positive numbers and a
Markdown table. It never asserts timings: performance is measured in bench/,
not asserted in tests.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a top-level folder of the repo, not installed
    sys.path.insert(0, str(ROOT))

from bench.__main__ import SECTIONS, Report, main, run_bench  # noqa: E402
from bench.common import LatencyChatModel, check_finite_positive, scenario, task  # noqa: E402


@pytest.fixture(scope="module")
def report() -> Report:
    return run_bench(quick=True)


def test_every_section_runs(report: Report) -> None:
    assert [s.name for s in report.sections] == list(SECTIONS)


@pytest.mark.parametrize("name", list(SECTIONS))
def test_section_numbers_are_finite_and_positive(report: Report, name: str) -> None:
    section = next(s for s in report.sections if s.name == name)
    assert section.metrics, f"{name} measured nothing"
    assert check_finite_positive(section.metrics) == []
    assert math.isfinite(section.seconds) and section.seconds > 0
    for table in section.tables:
        assert table.rows, f"{name}: empty table {table.title!r}"
        assert all(len(row) == len(table.columns) for row in table.rows)


def test_economy_policies_agree_on_the_final_answer(report: Report) -> None:
    economy = next(s for s in report.sections if s.name == "economy")
    same = [v for k, v in economy.metrics.items() if k.endswith(".same_answer")]
    assert same and all(v == 1.0 for v in same)


def test_markdown_report(report: Report) -> None:
    text = report.to_markdown()
    assert text.startswith("# aimegraph benchmarks")
    for key in ("CPU", "cores", "Python", "langgraph", "date"):
        assert f"| {key} |" in text
    assert text.count("\n### ") >= len(SECTIONS)


def test_latency_model_keeps_tools_and_structured_output() -> None:
    from aimegraph import PlanUpdate

    model = LatencyChatModel.from_dict(scenario([task("t1"), task("t2", "t1")]), latency_s=0.001)
    plan = model.with_structured_output(PlanUpdate).invoke("# Role: planner\nPlan it.")
    assert isinstance(plan, PlanUpdate)
    assert [t.id for t in plan.tasks] == ["t1", "t2"]
    assert model.calls == 1


def test_cli_rejects_unknown_sections(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--quick", "--only", "nonsense"])
    assert "unknown sections" in capsys.readouterr().err
