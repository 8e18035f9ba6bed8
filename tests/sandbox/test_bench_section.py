"""Smoke test of ``python -m bench --only sandbox`` (quick mode), in-process: the section
runs, fills its table and reports finite, positive numbers. No timings are asserted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a top-level folder of the repo, not installed
    sys.path.insert(0, str(ROOT))

from bench import sandbox  # noqa: E402
from bench.common import check_metrics  # noqa: E402


@pytest.mark.usefixtures("bubblewrap")
def test_sandbox_section_runs() -> None:
    result = sandbox.run(quick=True)
    (table,) = result.tables
    assert result.name == "sandbox" and len(table.rows) == len(sandbox.CALLS)
    assert check_metrics(result.metrics) == []
